"""The HTTP listener's users are the ACL users (docs/CONSOLE.md, "Users";
docs/SECURITY.md, "The HTTP listener"): HTTP Basic credentials checked as
AUTH checks them and failures in ACL LOG; each page allowed by the ACL
check of the command it stands for; the console's changes run as the
signed-in user; the API says which buttons the user may use."""
import os
import shutil
import tempfile

import pytest

from conftest import MODULE, free_port, wait_for
from test_console import filters, get_json, post
from test_metrics import EXPORTER, basic, get, http_server, parse, run_tool, stop_tool, value

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomeryd's own HTTP listener")

PASS = "s3cret"


def acl_server(start_server, *users):
    """A listener with requirepass, the users given (ACL SETUSER rules) and
    three filters: app:a, app:b (Bloom) and other (cuckoo)."""
    s = http_server(start_server, "--requirepass", PASS)
    c = s.client(password=PASS)
    for name, *rules in users:
        c.execute_command("ACL", "SETUSER", name, *rules)
    c.execute_command("BF.RESERVE", "app:a", 0.01, 1000)
    c.execute_command("BF.RESERVE", "app:b", 0.01, 1000)
    c.execute_command("CF.RESERVE", "other", 1000)
    c.execute_command("ACL", "LOG", "RESET")
    return s, c


def log_entries(c):
    return [{k.decode(): (v.decode() if isinstance(v, bytes) else v)
             for k, v in zip(e[::2], e[1::2])} for e in c.execute_command("ACL", "LOG")]


def metric_keys(s, headers):
    status, _, body = get(s.http + "/metrics", headers)
    assert status == 200, (status, body)
    m = parse(body.decode())
    return m, {dict(labels)["key"] for (name, labels) in m if name == "bloomery_filter_items"}


# ---- authentication ----

def test_basic_auth_as_acl_users(start_server):
    s, c = acl_server(start_server, ("alice", "on", ">apw", "~*", "+@all"))
    for headers, user in [(basic("apw", "alice"), "alice"), (basic(PASS), "default"),
                          (basic(PASS, ""), "default"),
                          ({"Authorization": "Bearer " + PASS}, "default")]:
        status, body = get_json(s, "/api/status", headers)
        assert status == 200 and body["user"] == user, (headers, body)
    # The default user's password does not open another user.
    assert get(s.http + "/api/status", basic(PASS, "alice"))[0] == 401
    # No credentials: the challenge, and no failed login.
    status, hdrs, _ = get(s.http + "/api/status")
    assert status == 401 and hdrs["WWW-Authenticate"].startswith("Basic")
    assert len(log_entries(c)) == 1  # the one above
    c.close()


def test_failed_logins_are_refused_and_logged(start_server):
    s, c = acl_server(start_server, ("alice", "on", ">apw", "~*", "+@all"),
                      ("bob", "off", ">bpw", "~*", "+@all"))
    assert get(s.http + "/metrics", basic("wrong", "alice"))[0] == 401
    assert get(s.http + "/metrics", basic("bpw", "bob"))[0] == 401  # off
    assert get(s.http + "/metrics", basic("x", "nobody"))[0] == 401
    assert get(s.http + "/metrics", {"Authorization": "Bearer wrong"})[0] == 401
    entries = log_entries(c)
    assert [e["username"] for e in entries] == ["default", "nobody", "bob", "alice"]
    for e in entries:
        assert e["reason"] == "auth" and e["context"] == "toplevel", e
        assert e["object"] == "AUTH", e
        assert " addr=127.0.0.1:" in e["client-info"], e
        assert "laddr=127.0.0.1:%d" % int(s.http.rsplit(":", 1)[1]) in e["client-info"], e
        assert "lib-name=http" in e["client-info"], e
    c.close()


def test_default_user_without_password_is_unchanged(start_server):
    """No password needed by the default user: pages answer without
    credentials, as the default user; credentials given are still checked."""
    s = http_server(start_server)
    c = s.client()
    c.execute_command("ACL", "SETUSER", "alice", "on", ">apw", "~*", "+@all")
    status, body = get_json(s, "/api/status")
    assert status == 200 and body["user"] == "default"
    assert get_json(s, "/api/status", basic("apw", "alice"))[1]["user"] == "alice"
    assert get(s.http + "/api/status", basic("wrong", "alice"))[0] == 401
    st, body = post(s, "/api/filters", {"name": "f", "capacity": 100, "error_rate": 0.01})
    assert st == 200, body
    assert c.exists("f") == 1
    c.close()


# ---- /metrics ----

def test_metrics_needs_info(start_server):
    s, c = acl_server(start_server, ("prom", "on", ">ppw", "+info"),
                      ("promkeys", "on", ">kpw", "+info", "+scan", "+bf.info", "+cf.info",
                       "%R~*"),
                      ("noinfo", "on", ">npw", "~*", "+@read", "-info"))
    # INFO alone: the server's series, no key's.
    m, keys = metric_keys(s, basic("ppw", "prom"))
    assert value(m, "bloomery_keys") == 3
    assert keys == set()
    m, keys = metric_keys(s, basic("kpw", "promkeys"))
    assert keys == {"app:a", "app:b", "other"}
    status, _, body = get(s.http + "/metrics", basic("npw", "noinfo"))
    assert status == 403
    assert body == b"NOPERM this user has no permissions to run the 'info' command\n"
    e = log_entries(c)[0]
    assert (e["reason"], e["object"], e["username"]) == ("command", "info", "noinfo")
    # The console's node view stands for INFO too.
    assert get(s.http + "/api/status", basic("npw", "noinfo"))[0] == 403
    c.close()


# ---- the console ----

def test_viewer_sees_and_can_change_nothing(start_server):
    s, c = acl_server(start_server, ("viewer", "on", ">vpw", "~*", "+@read", "+info",
                                     "-@write"))
    h = basic("vpw", "viewer")
    st, body = get_json(s, "/api/filters", h)
    assert st == 200
    assert body["user"] == "viewer"
    assert body["can"] == {"create": False, "delete": False, "expire": False, "persist": False,
                           "add": False, "readonly": False}
    rows = {f["name"]: f for f in body["filters"]}
    assert set(rows) == {"app:a", "app:b", "other"}
    # Checks are reads: offered.
    assert all(f["can"] == {"delete": False, "expire": False, "persist": False, "check": True,
                            "add": False, "readonly": False} for f in rows.values())
    assert get_json(s, "/api/status", h)[0] == 200
    # The buttons are not shown; the requests are refused anyway.
    st, body = post(s, "/api/filters", {"name": "new", "capacity": 100, "error_rate": 0.01},
                    headers=h)
    assert st == 403 and body["error"].startswith("NOPERM"), body
    assert "bf.reserve" in body["error"]
    st, body = post(s, "/api/filters/delete", {"name": "app:a"}, headers=h)
    assert st == 403 and body["error"].startswith("NOPERM"), body
    st, body = post(s, "/api/filters/expire", {"name": "app:a", "seconds": 5}, headers=h)
    assert st == 403 and body["error"].startswith("NOPERM"), body
    c.expire("app:b", 100)
    st, body = post(s, "/api/filters/persist", {"name": "app:b"}, headers=h)
    assert st == 403 and body["error"] == \
        "NOPERM this user has no permissions to run the 'persist' command", body
    st, body = post(s, "/api/filters/add", {"name": "app:a", "items": "x"}, headers=h)
    assert st == 403 and "'bf.insert'" in body["error"], body
    st, body = post(s, "/api/filters/add", {"name": "other", "items": "x"}, headers=h)
    assert st == 403 and "'cf.insert'" in body["error"], body
    st, body = post(s, "/api/filters/readonly", {"name": "app:a", "readonly": "yes"}, headers=h)
    assert st == 403 and "'bf.config'" in body["error"], body
    assert log_entries(c)[0]["username"] == "viewer"
    # ... and checks answer, as the viewer.
    st, body = post(s, "/api/filters/check", {"name": "app:a", "items": "x\ny"}, headers=h)
    assert (st, body) == (200, {"reply": [0, 0]})
    assert c.exists("new") == 0 and c.exists("app:a") == 1 and c.ttl("app:a") == -1
    assert c.ttl("app:b") > 0 and c.execute_command("BF.EXISTS", "app:a", "x") == 0
    assert c.execute_command("BF.CONFIG", "app:a", "READONLY") == b"no"
    assert sorted(c.keys()) == [b"app:a", b"app:b", b"other"]
    c.close()


def test_admin_creates_and_deletes(start_server):
    s, c = acl_server(start_server, ("admin", "on", ">adpw", "~*", "+@all"))
    h = basic("adpw", "admin")
    st, body = get_json(s, "/api/filters", h)
    assert body["can"] == {"create": True, "delete": True, "expire": True, "persist": True,
                           "add": True, "readonly": True}
    assert all(f["can"] == {"delete": True, "expire": True, "persist": True, "check": True,
                            "add": True, "readonly": True} for f in body["filters"])
    st, body = post(s, "/api/filters", {"name": "new", "capacity": 100, "error_rate": 0.01},
                    headers=h)
    assert st == 200, body
    assert c.exists("new") == 1
    st, body = post(s, "/api/filters/delete", {"name": "new"}, headers=h)
    assert st == 200 and body == {"reply": 1}
    assert c.exists("new") == 0
    # The commands ran as admin: its client was admin's.
    c.execute_command("ACL", "SETUSER", "admin", "-del")
    st, body = post(s, "/api/filters/delete", {"name": "app:a"}, headers=h)
    assert st == 403, body
    assert body["error"] == "NOPERM this user has no permissions to run the 'del' command"
    assert log_entries(c)[0]["username"] == "admin"
    assert c.exists("app:a") == 1
    c.close()


def test_user_limited_to_a_key_pattern(start_server):
    s, c = acl_server(start_server, ("app", "on", ">appw", "~app:*", "+@all"))
    h = basic("appw", "app")
    st, body = get_json(s, "/api/filters", h)
    assert body["can"] == {"create": True, "delete": True, "expire": True, "persist": True,
                           "add": True, "readonly": True}
    assert [f["name"] for f in body["filters"]] == ["app:a", "app:b"]
    assert body["total"] == 2
    # A match does not reach past the user's keys.
    assert get_json(s, "/api/filters?match=oth*", h)[1]["total"] == 0
    st, body = post(s, "/api/filters/check", {"name": "other", "items": "x"}, headers=h)
    assert st == 403 and "keys" in body["error"], body
    _, keys = metric_keys(s, h)
    assert keys == {"app:a", "app:b"}
    assert get(s.http + "/api/history?name=other", h)[0] == 403
    assert get(s.http + "/api/history?name=app:a", h)[0] == 200
    st, body = post(s, "/api/filters", {"name": "elsewhere", "capacity": 100,
                                        "error_rate": 0.01}, headers=h)
    assert st == 403, body
    assert body["error"] == ("NOPERM this user has no permissions to access one of the keys "
                             "used as arguments")
    assert c.exists("elsewhere") == 0
    st, body = post(s, "/api/filters/delete", {"name": "other"}, headers=h)
    assert st == 403 and c.exists("other") == 1
    st, body = post(s, "/api/filters", {"name": "app:new", "capacity": 100,
                                        "error_rate": 0.01}, headers=h)
    assert st == 200 and c.exists("app:new") == 1
    # Keys it may read but not write: listed, read-only.
    c.execute_command("ACL", "SETUSER", "app", "resetkeys", "%W~app:a", "%R~*")
    rows = filters(s, h)
    assert set(rows) == {"app:a", "app:b", "app:new", "other"}
    assert rows["app:a"]["can"] == {"delete": True, "expire": True, "persist": True,
                                    "check": True, "add": True, "readonly": True}
    assert rows["other"]["can"] == {"delete": False, "expire": False, "persist": False,
                                    "check": True, "add": False, "readonly": False}
    for path, fields in (("/api/filters/add", {"name": "other", "items": "x"}),
                         ("/api/filters/persist", {"name": "other"}),
                         ("/api/filters/readonly", {"name": "other", "readonly": "yes"})):
        st, body = post(s, path, fields, headers=h)
        assert st == 403 and body["error"] == ("NOPERM this user has no permissions to access "
                                               "one of the keys used as arguments"), (path, body)
    assert post(s, "/api/filters/check", {"name": "other", "items": "x"}, headers=h) == \
        (200, {"reply": [0]})
    assert post(s, "/api/filters/add", {"name": "app:a", "items": "x"}, headers=h) == \
        (200, {"reply": [1]})
    c.close()


# ---- prometheus-redis-exporter on the RESP port ----

# docs/SECURITY.md's monitoring user, rule for rule.
EXPORTER_RULES = ["-@all", "+ping", "+info", "+config|get", "+client|setname", "+slowlog|get",
                  "+slowlog|len", "+latency|latest"]


@pytest.mark.skipif(EXPORTER is None, reason="prometheus-redis-exporter is not installed")
def test_redis_exporter_with_its_minimal_user(start_server):
    """The user docs/SECURITY.md gives prometheus-redis-exporter: every
    command the exporter runs is allowed (no ACL LOG entry) and it reports
    the server up."""
    s = start_server("--requirepass", PASS)
    c = s.client(password=PASS)
    c.execute_command("ACL", "SETUSER", "exporter", "on", ">epw", *EXPORTER_RULES)
    c.execute_command("BF.ADD", "k", "a")
    c.execute_command("ACL", "LOG", "RESET")
    port = free_port()
    work = tempfile.mkdtemp(prefix="bloomery-exporter-")
    log = open(os.path.join(work, "log"), "w+")
    p = run_tool([EXPORTER, "--redis.addr", "redis://127.0.0.1:%d" % s.port, "--redis.user",
                  "exporter", "--redis.password", "epw", "--include-system-metrics",
                  "--web.listen-address", "127.0.0.1:%d" % port], log)
    try:
        def scraped():
            try:
                st, _, body = get("http://127.0.0.1:%d/metrics" % port, timeout=10)
            except OSError:
                return None
            return st == 200 and body.decode()
        text = wait_for(scraped, "the exporter's metrics")
        m = parse("\n".join(x for x in text.splitlines() if x.startswith("redis_")))
        assert value(m, "redis_up") == 1
        assert value(m, "redis_exporter_last_scrape_error", err="") == 0
        assert value(m, "redis_db_keys", db="db0") == 1
        assert log_entries(c) == []
    finally:
        stop_tool(p)
        log.close()
        shutil.rmtree(work, ignore_errors=True)
        c.close()
