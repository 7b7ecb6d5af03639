"""ACL users as Redis 7.0 has them: rules, AUTH as a user, the permission
gate on every path (dispatch, the pipelined batch, MULTI/EXEC), ACL LOG,
DRYRUN, the aclfile, user lines in the config file, requirepass as the
default user's password, and a replica authenticating as a user.

Errors and ACL GETUSER are compared with Debian's redis-server where one is
installed."""
import hashlib
import os
import shutil
import subprocess

import pytest
import redis

from conftest import MODULE, RespError, free_port, listening, wait_for

pytestmark = pytest.mark.skipif(MODULE is not None, reason="bloomeryd's own ACL users")

REDIS_SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")
SYNTAX = "ERR Error in ACL SETUSER modifier '%s': Syntax error"
UNKNOWN = "ERR Error in ACL SETUSER modifier '%s': Unknown command or category name in ACL"
NOPERM_KEY = "NOPERM this user has no permissions to access one of the keys used as arguments"
NOPERM_CHANNEL = ("NOPERM this user has no permissions to access one of the channels used as "
                  "arguments")
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."


def noperm_cmd(name):
    return "NOPERM this user has no permissions to run the '%s' command" % name


@pytest.fixture
def acl(start_server):
    """A server of the test's own: users change what every client may do."""
    return start_server()


def err(raw, *args):
    e = raw.cmd(*args)
    assert isinstance(e, RespError), e
    return str(e)


def as_user(server, user, password):
    c = server.raw()
    assert c.cmd("AUTH", user, password) == "OK"
    return c


# ---- rules ----

def test_every_rule_shows_in_getuser_and_list(acl):
    c = acl.raw()
    assert c.cmd("ACL", "SETUSER", "u", "on", ">p1", ">p2", "<p2", "#" + "ab" * 32, "!" + "ab" * 32,
                 "~k*", "%R~r*", "%W~w*", "%RW~b*", "&ch*", "-@all", "+@read", "-bf.card",
                 "+config|get", "+bf.add") == "OK"
    u = c.cmd("ACL", "GETUSER", "u")
    assert u[0:2] == [b"flags", [b"on"]]
    assert u[2:4] == [b"passwords", [hashlib.sha256(b"p1").hexdigest().encode()]]
    assert u[4:6] == [b"commands", b"-@all +@read +bf.add -bf.card +config|get"]
    assert u[6:8] == [b"keys", b"~k* %R~r* %W~w* ~b*"]
    assert u[8:12] == [b"channels", b"&ch*", b"selectors", []]
    line = [l for l in c.cmd("ACL", "LIST") if l.startswith(b"user u ")][0].decode()
    assert line == ("user u on #%s ~k* %%R~r* %%W~w* ~b* resetchannels &ch* -@all +@read "
                    "+bf.add -bf.card +config|get" % hashlib.sha256(b"p1").hexdigest())
    # nopass, resetpass, allkeys, allchannels, allcommands, reset, off.
    assert c.cmd("ACL", "SETUSER", "u", "nopass", "allkeys", "allchannels", "allcommands") == "OK"
    assert c.cmd("ACL", "GETUSER", "u")[1] == [b"on", b"nopass"]
    assert c.cmd("ACL", "GETUSER", "u")[3] == []
    assert c.cmd("ACL", "GETUSER", "u")[5:10:2] == [b"+@all", b"~*", b"&*"]
    assert c.cmd("ACL", "SETUSER", "u", "resetpass", "resetkeys", "resetchannels",
                 "nocommands", "+@bloom", "off") == "OK"
    u = c.cmd("ACL", "GETUSER", "u")
    assert u[1] == [b"off"] and u[3] == [] and u[5] == b"-@all +@bloom" and u[7] == b""
    assert c.cmd("ACL", "SETUSER", "u", "reset") == "OK"
    assert [l for l in c.cmd("ACL", "LIST") if l.startswith(b"user u ")] == \
        [b"user u off sanitize-payload resetchannels -@all"]
    assert c.cmd("ACL", "USERS") == [b"default", b"u"]
    assert c.cmd("ACL", "DELUSER", "u", "nosuch") == 1
    assert c.cmd("ACL", "GETUSER", "u") is None


@pytest.mark.parametrize("rule,error", [
    ("foo", SYNTAX % "foo"),
    ("+nosuch", UNKNOWN % "+nosuch"),
    ("+@nosuch", UNKNOWN % "+@nosuch"),
    ("+config|nosuch", UNKNOWN % "+config|nosuch"),
    ("+config|get|x", "ERR Error in ACL SETUSER modifier '+config|get|x': Allowing first-arg of "
                      "a subcommand is not supported"),
    ("%X~a", SYNTAX % "%X~a"),
    ("#abc", "ERR Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 "
             "characters and contain only lowercase hexadecimal characters"),
    ("<nopw", "ERR Error in ACL SETUSER modifier '<nopw': The password you are trying to remove "
              "from the user does not exist"),
    ("(on)", SYNTAX % "(on)"),
    ("(~x +nosuch)", UNKNOWN % "(~x +nosuch)"),
])
def test_a_bad_rule_is_refused_in_redis_words_and_changes_nothing(acl, rule, error):
    c = acl.raw()
    assert c.cmd("ACL", "SETUSER", "u", "on", "~a*") == "OK"
    before = c.cmd("ACL", "GETUSER", "u")
    assert err(c, "ACL", "SETUSER", "u", "off", "~b*", rule) == error
    assert c.cmd("ACL", "GETUSER", "u") == before


def test_patterns_after_all_are_refused(acl):
    c = acl.raw()
    assert err(c, "ACL", "SETUSER", "u", "(~x", "+del") == \
        "ERR Unmatched parenthesis in acl selector starting at '(~x'."
    assert err(c, "ACL", "SETUSER", "u", "allkeys", "~foo") == (
        "ERR Error in ACL SETUSER modifier '~foo': Adding a pattern after the * pattern (or the "
        "'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with "
        "an empty list of patterns")
    assert err(c, "ACL", "SETUSER", "u", "allchannels", "&foo") == (
        "ERR Error in ACL SETUSER modifier '&foo': Adding a pattern after the * pattern (or the "
        "'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to "
        "start with an empty list of channels")
    assert err(c, "ACL", "DELUSER", "default") == "ERR The 'default' user cannot be removed"


@pytest.fixture
def real_redis(tmp_path):
    if not os.path.exists(REDIS_SERVER):
        pytest.skip("no redis-server")
    port = free_port()
    p = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--save", "", "--appendonly", "no",
                          "--dir", str(tmp_path)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    wait_for(lambda: listening(p.pid, port), "redis-server to listen")
    c = redis.Redis(port=port)
    yield c
    c.close()
    p.terminate()
    p.wait()


RULE_SETS = [
    ["on", ">pw", "~k*", "%R~r*", "%W~w*", "&ch*", "-@all", "+@read"],
    ["on", "nopass", "allkeys", "allchannels", "+@all", "-@dangerous"],
    ["off", "#" + "0f" * 32, ">x", "resetchannels", "-@all", "+@connection", "+client|setname"],
    ["on", ">a", ">b", "<a", "~*", "+@all", "-@admin", "-config|get"],
    ["on", "-@all", "+@pubsub", "&news.*", "+@keyspace", "-del"],
    [],
    ["reset"],
    ["on", "nopass", "~a*", "+@read", "(~b* +del)", "(%R~c* &x +exists)"],
    ["on", "(~b*", "+del", "+type)", "clearselectors", "(&y", "+publish)"],
]


@pytest.mark.parametrize("rules", RULE_SETS)
def test_getuser_matches_redis_for_the_same_rules(acl, real_redis, rules):
    ours = acl.client()
    for c in (ours, real_redis):
        assert c.execute_command("ACL", "SETUSER", "u", *rules) == b"OK"
    a = ours.execute_command("ACL", "GETUSER", "u")
    b = real_redis.execute_command("ACL", "GETUSER", "u")
    assert a == b
    line = [l for l in ours.execute_command("ACL", "LIST") if l.startswith(b"user u ")]
    assert line == [l for l in real_redis.execute_command("ACL", "LIST")
                    if l.startswith(b"user u ")]


# ---- authentication ----

def test_auth_as_a_user_and_wrongpass_in_the_log(acl):
    c = acl.raw()
    assert c.cmd("ACL", "SETUSER", "alice", "on", ">s3cret", "+@all", "~*") == "OK"
    assert c.cmd("ACL", "SETUSER", "bob", "off", ">pw", "+@all", "~*") == "OK"
    a = acl.raw()
    assert err(a, "AUTH", "alice", "nope") == WRONGPASS
    assert err(a, "AUTH", "bob", "pw") == WRONGPASS  # off
    assert err(a, "AUTH", "nobody", "pw") == WRONGPASS
    assert a.cmd("AUTH", "alice", "s3cret") == "OK"
    assert a.cmd("ACL", "WHOAMI") == b"alice"
    lines = a.cmd("CLIENT", "LIST").decode().splitlines()
    assert any(" user=alice " in l for l in lines)
    log = c.cmd("ACL", "LOG")
    assert [dict(zip(e[::2], e[1::2]))[b"reason"] for e in log] == [b"auth"] * 3
    first = dict(zip(log[2][::2], log[2][1::2]))
    assert first[b"count"] == 1 and first[b"object"] == b"AUTH"
    assert first[b"username"] == b"alice" and first[b"context"] == b"toplevel"
    assert float(first[b"age-seconds"]) >= 0 and b"cmd=auth" in first[b"client-info"]
    assert c.cmd("ACL", "LOG", "1")[0][9] == b"nobody"
    # The same failure again within a minute counts in its entry.
    assert err(a, "AUTH", "nobody", "pw") == WRONGPASS
    assert c.cmd("ACL", "LOG", "1")[0][1] == 2
    assert c.cmd("ACL", "LOG", "RESET") == "OK"
    assert c.cmd("ACL", "LOG") == []


def test_hello_auth_as_a_user(acl):
    c = acl.raw()
    assert c.cmd("ACL", "SETUSER", "alice", "on", ">pw", "+@all", "~*") == "OK"
    h = acl.raw()
    assert err(h, "hello", "3", "AUTH", "alice", "bad") == WRONGPASS
    # Logged under the command as the client spelled it, as Redis does.
    assert c.cmd("ACL", "LOG", "1")[0][7] == b"hello"
    reply = h.cmd("HELLO", "3", "AUTH", "alice", "pw")
    assert reply[b"proto"] == 3
    assert h.cmd("ACL", "WHOAMI") == b"alice"
    # RESP3: a map, the flags a set (RawClient reads sets as lists).
    assert h.cmd("ACL", "GETUSER", "alice")[b"flags"] == [b"on"]
    h2 = acl.raw()
    assert h2.cmd("HELLO", "2", "AUTH", "alice", "pw")[5] == 2
    assert h2.cmd("ACL", "WHOAMI") == b"alice"


def test_requirepass_is_the_default_users_password(start_server):
    s = start_server("--requirepass", "foo")
    c = s.raw()
    assert str(c.cmd("PING")).startswith("NOAUTH")
    assert err(c, "AUTH", "bar") == WRONGPASS
    assert c.cmd("AUTH", "foo") == "OK"
    assert c.cmd("ACL", "LIST") == [
        ("user default on #%s ~* &* +@all" % hashlib.sha256(b"foo").hexdigest()).encode()]
    # ACL SETUSER changes the user, not the setting (as Redis).
    assert c.cmd("ACL", "SETUSER", "default", "resetpass", ">bar") == "OK"
    assert c.cmd("CONFIG", "GET", "requirepass") == [b"requirepass", b"foo"]
    assert s.raw().cmd("AUTH", "bar") == "OK"
    assert isinstance(s.raw().cmd("AUTH", "foo"), RespError)
    assert c.cmd("CONFIG", "SET", "requirepass", "baz") == "OK"
    assert s.raw().cmd("AUTH", "default", "baz") == "OK"
    assert c.cmd("CONFIG", "SET", "requirepass", "") == "OK"
    assert c.cmd("ACL", "LIST") == [b"user default on nopass ~* &* +@all"]
    fresh = s.raw()
    assert fresh.cmd("PING") == "PONG"
    assert err(fresh, "AUTH", "x") == (
        "ERR AUTH <password> called without any password configured for the default user. Are "
        "you sure your configuration is correct?")


def test_redis_cli_user_and_pass(acl):
    if shutil.which("redis-cli") is None:
        pytest.skip("no redis-cli")
    acl.raw().cmd("ACL", "SETUSER", "cli", "on", ">pw", "-@all", "+acl|whoami", "+bf.add", "~k*")
    out = subprocess.run(["redis-cli", "-p", str(acl.port), "--user", "cli", "--pass", "pw",
                          "--no-auth-warning", "ACL", "WHOAMI"], capture_output=True, text=True)
    assert out.stdout.strip() == "cli"
    out = subprocess.run(["redis-cli", "-p", str(acl.port), "--user", "cli", "--pass", "pw",
                          "--no-auth-warning", "BF.ADD", "x", "1"], capture_output=True,
                         text=True)
    assert out.stdout.strip() == NOPERM_KEY


# ---- the gate ----

def test_noperm_for_commands_keys_and_channels(acl):
    c = acl.raw()
    assert c.cmd("ACL", "SETUSER", "u", "on", ">p", "-@all", "+@bloom", "+publish",
                 "+subscribe", "~k*", "%R~r*", "%W~w*", "&news.*") == "OK"
    u = as_user(acl, "u", "p")
    assert err(u, "DEL", "k1") == noperm_cmd("del")
    assert err(u, "CONFIG", "GET", "port") == noperm_cmd("config|get")
    assert u.cmd("BF.ADD", "k1", "a") == 1
    assert err(u, "BF.ADD", "x", "a") == NOPERM_KEY
    # %R~: read, not write; %W~: write, not read.
    assert u.cmd("BF.EXISTS", "r1", "a") == 0
    assert err(u, "BF.ADD", "r1", "a") == NOPERM_KEY
    assert u.cmd("BF.ADD", "w1", "a") == 1
    assert err(u, "BF.EXISTS", "w1", "a") == NOPERM_KEY
    assert u.cmd("PUBLISH", "news.1", "m") == 0
    assert err(u, "PUBLISH", "sport", "m") == NOPERM_CHANNEL
    assert err(u, "SUBSCRIBE", "news.1", "sport") == NOPERM_CHANNEL
    log = [dict(zip(e[::2], e[1::2])) for e in c.cmd("ACL", "LOG")]
    assert [(e[b"reason"], e[b"object"]) for e in log] == [
        (b"channel", b"sport"), (b"key", b"w1"), (b"key", b"r1"), (b"key", b"x"),
        (b"command", b"config|get"), (b"command", b"del")]
    assert log[0][b"count"] == 2 and all(e[b"username"] == b"u" for e in log)
    # Redis's own command: +config|get grants that subcommand alone.
    assert c.cmd("ACL", "SETUSER", "u", "+config|get") == "OK"
    assert u.cmd("CONFIG", "GET", "port")[0] == b"port"
    assert err(u, "CONFIG", "SET", "port", "1") == noperm_cmd("config|set")
    # The sources of a merge follow its count: read rights on each.
    assert c.cmd("ACL", "SETUSER", "u", "+@cms") == "OK"
    assert u.cmd("CMS.INITBYDIM", "w2", 10, 2) == "OK"
    assert err(u, "CMS.MERGE", "w2", 2, "r1", "x") == NOPERM_KEY


def test_a_pipelined_batch_on_a_forbidden_key_is_refused_request_by_request(acl):
    c = acl.raw()
    assert c.cmd("ACL", "SETUSER", "u", "on", ">p", "+@all", "~k*") == "OK"
    u = as_user(acl, "u", "p")
    n = 200
    u.send(b"".join(u.encode("BF.ADD", "x", i) for i in range(n)) +
           b"".join(u.encode("BF.ADD", "k", i) for i in range(n)) +
           b"".join(u.encode("BF.EXISTS", "x", i) for i in range(n)))
    replies = [u.read() for _ in range(3 * n)]
    assert [str(r) for r in replies[:n]] == [NOPERM_KEY] * n
    assert replies[n:2 * n] == [1] * n
    assert [str(r) for r in replies[2 * n:]] == [NOPERM_KEY] * n
    assert c.cmd("EXISTS", "x") == 0 and c.cmd("BF.CARD", "k") == n
    # The rules changed mid-connection: the next batch sees them.
    assert c.cmd("ACL", "SETUSER", "u", "resetkeys", "~x") == "OK"
    u.send(b"".join(u.encode("BF.ADD", "k", i) for i in range(n)))
    assert [str(u.read()) for _ in range(n)] == [NOPERM_KEY] * n


def test_multi_checks_at_queue_time_and_again_at_exec(acl):
    c = acl.raw()
    assert c.cmd("ACL", "SETUSER", "u", "on", ">p", "+@all", "-del", "~k*") == "OK"
    u = as_user(acl, "u", "p")
    assert u.cmd("MULTI") == "OK"
    assert err(u, "DEL", "k") == noperm_cmd("del")
    assert u.cmd("BF.ADD", "k", "a") == "QUEUED"
    assert err(u, "EXEC") == "EXECABORT Transaction discarded because of previous errors."
    log = dict(zip(*[iter(c.cmd("ACL", "LOG", "1")[0])] * 2))
    assert log[b"context"] == b"multi" and log[b"object"] == b"del"
    assert u.cmd("MULTI") == "OK"
    assert u.cmd("BF.ADD", "k", "a") == "QUEUED"
    assert u.cmd("BF.ADD", "k2", "b") == "QUEUED"
    assert c.cmd("ACL", "SETUSER", "u", "-bf.add") == "OK"
    res = u.cmd("EXEC")
    assert [str(r) for r in res] == [
        "NOPERM ACLs rules changed between the moment the transaction was accumulated and the "
        "EXEC call. This command is no longer allowed for the following reason: no permission "
        "to execute the command or subcommand"] * 2
    assert c.cmd("EXISTS", "k", "k2") == 0


def test_selectors_allow_what_the_user_alone_does_not(acl):
    c = acl.raw()
    assert c.cmd("ACL", "SETUSER", "u", "on", ">p", "~a*", "+@read", "(~b*", "+bf.add)",
                 "(&news +publish)") == "OK"
    line = [l for l in c.cmd("ACL", "LIST") if l.startswith(b"user u ")][0]
    assert line.endswith(b" ~a* resetchannels -@all +@read (~b* resetchannels -@all +bf.add) "
                         b"(resetchannels &news -@all +publish)")
    sels = c.cmd("ACL", "GETUSER", "u")[11]
    assert sels == [[b"commands", b"-@all +bf.add", b"keys", b"~b*", b"channels", b""],
                    [b"commands", b"-@all +publish", b"keys", b"", b"channels", b"&news"]]
    u = as_user(acl, "u", "p")
    assert u.cmd("BF.EXISTS", "a1", "x") == 0
    assert u.cmd("BF.ADD", "b1", "x") == 1
    assert err(u, "BF.ADD", "a1", "x") == NOPERM_KEY
    assert u.cmd("PUBLISH", "news", "m") == 0
    assert err(u, "PUBLISH", "sport", "m") == NOPERM_CHANNEL
    assert err(u, "DEL", "a1") == noperm_cmd("del")
    # A pipelined batch the user's own rules refuse and a selector allows.
    u.send(b"".join(u.encode("BF.ADD", "b2", i) for i in range(100)))
    assert [u.read() for _ in range(100)] == [1] * 100
    assert c.cmd("ACL", "SETUSER", "u", "clearselectors") == "OK"
    assert err(u, "BF.ADD", "b1", "y") == noperm_cmd("bf.add")


def test_dryrun(acl):
    c = acl.raw()
    assert c.cmd("ACL", "SETUSER", "u", "on", "+bf.add", "+publish", "~k*", "&c") == "OK"
    assert c.cmd("ACL", "DRYRUN", "u", "BF.ADD", "k", "a") == "OK"
    assert c.cmd("ACL", "DRYRUN", "u", "BF.ADD", "x", "a") == \
        b"This user has no permissions to access the 'x' key"
    assert c.cmd("ACL", "DRYRUN", "u", "DEL", "k") == \
        b"This user has no permissions to run the 'del' command"
    assert c.cmd("ACL", "DRYRUN", "u", "PUBLISH", "d", "m") == \
        b"This user has no permissions to access the 'd' channel"
    assert err(c, "ACL", "DRYRUN", "nosuch", "DEL", "k") == "ERR User 'nosuch' not found"
    assert err(c, "ACL", "DRYRUN", "u", "nosuch") == "ERR Command 'nosuch' not found"
    assert err(c, "ACL", "DRYRUN", "u", "TYPE") == \
        "ERR wrong number of arguments for 'type' command"


def test_deluser_disconnects_its_clients_and_client_kill_by_user(acl):
    c = acl.raw()
    assert c.cmd("ACL", "SETUSER", "u", "on", ">p", "+@all", "~*") == "OK"
    assert c.cmd("ACL", "SETUSER", "v", "on", ">p", "+@all", "~*") == "OK"
    u, v = as_user(acl, "u", "p"), as_user(acl, "v", "p")
    assert c.cmd("CLIENT", "KILL", "USER", "v") == 1
    assert v.closed()
    assert err(c, "CLIENT", "KILL", "USER", "nosuch") == "ERR No such user 'nosuch'"
    assert c.cmd("ACL", "DELUSER", "u") == 1
    assert u.closed()


def test_cat_genpass_help_and_command_info(acl):
    c = acl.raw()
    cats = c.cmd("ACL", "CAT")
    assert cats[:4] == [b"keyspace", b"read", b"write", b"set"] and b"bloom" in cats
    assert b"bf.add" in c.cmd("ACL", "CAT", "bloom")
    assert b"config|get" in c.cmd("ACL", "CAT", "admin")
    assert b"keys" in c.cmd("ACL", "CAT", "dangerous")
    assert err(c, "ACL", "CAT", "nosuch") == "ERR Unknown category 'nosuch'"
    assert len(c.cmd("ACL", "GENPASS")) == 64 and len(c.cmd("ACL", "GENPASS", "5")) == 2
    assert err(c, "ACL", "GENPASS", "0").startswith("ERR ACL GENPASS argument must be")
    assert err(c, "ACL", "FOO") == "ERR unknown subcommand 'FOO'. Try ACL HELP."
    assert err(c, "ACL", "SETUSER") == "ERR wrong number of arguments for 'acl|setuser' command"
    info = c.cmd("COMMAND", "INFO", "del", "bf.exists")
    assert sorted(info[0][6]) == ["@keyspace", "@slow", "@write"]
    assert sorted(info[1][6]) == ["@bloom", "@fast", "@read"]


def test_acllog_max_len_caps_the_log(acl):
    c = acl.raw()
    assert c.cmd("CONFIG", "SET", "acllog-max-len", "3") == "OK"
    for i in range(5):
        err(c, "AUTH", "user%d" % i, "x")
    log = c.cmd("ACL", "LOG", "100")
    assert [e[9] for e in log] == [b"user4", b"user3", b"user2"]


# ---- files ----

def test_acl_save_and_load_round_trip(start_server, tmp_path):
    path = tmp_path / "users.acl"
    path.write_text("user alice on >pw ~k* +@all\n")
    s = start_server("--aclfile", str(path))
    c = s.raw()
    assert c.cmd("ACL", "USERS") == [b"alice", b"default"]
    assert c.cmd("ACL", "SETUSER", "bob", "on", ">b", "%R~r*", "&ch", "-@all", "+@read",
                 "(~s* +del)") == "OK"
    listed = c.cmd("ACL", "LIST")
    assert c.cmd("ACL", "SAVE") == "OK"
    saved = path.read_text()
    assert "user bob on #" in saved
    assert "%R~r* resetchannels &ch -@all +@read (~s* resetchannels -@all +del)\n" in saved
    assert c.cmd("ACL", "DELUSER", "bob") == 1
    assert c.cmd("ACL", "LOAD") == "OK"
    assert c.cmd("ACL", "LIST") == listed
    assert as_user(s, "bob", "b").cmd("BF.EXISTS", "r1", "a") == 0
    # A bad line: nothing changes.
    path.write_text("user carol on >c +@all\nuser dave on foo\n")
    assert err(c, "ACL", "LOAD") == (
        "ERR %s:2: Syntax error. WARNING: ACL errors detected, no change to the previously "
        "active ACL rules was performed" % path)
    assert c.cmd("ACL", "USERS") == [b"alice", b"bob", b"default"]
    # Restarting reads the saved file.
    path.write_text(saved)
    s.stop()
    again = start_server("--aclfile", str(path))
    assert again.raw().cmd("ACL", "USERS") == [b"alice", b"bob", b"default"]


def test_acl_save_without_an_aclfile(acl):
    assert err(acl.raw(), "ACL", "SAVE").startswith(
        "ERR This Redis instance is not configured to use an ACL file.")


def test_an_aclfile_with_a_bad_line_stops_the_start(tmp_path):
    from conftest import Server
    path = tmp_path / "users.acl"
    path.write_text("user alice on >pw +@all\n\nuser bob on +nosuch\n")
    with pytest.raises(RuntimeError) as e:
        Server("--aclfile", str(path))
    assert ("Aborting Redis startup because of ACL errors: %s:3: Unknown command or category "
            "name in ACL." % path) in str(e.value)
    path.write_text("user alice on >pw +@all\nfoo bob\n")
    with pytest.raises(RuntimeError) as e:
        Server("--aclfile", str(path))
    assert "%s:2 should start with user keyword followed by the username." % path in str(e.value)


def test_user_lines_in_the_config_file_and_config_rewrite(start_server):
    s = start_server(config="# users\nuser alice on >pw ~k* +@all\nuser bob off\n")
    c = s.raw()
    assert c.cmd("ACL", "USERS") == [b"alice", b"bob", b"default"]
    assert as_user(s, "alice", "pw").cmd("ACL", "WHOAMI") == b"alice"
    assert c.cmd("ACL", "SETUSER", "carol", "on", "nopass", "+@read", "~c*") == "OK"
    assert c.cmd("ACL", "DELUSER", "bob") == 1
    assert c.cmd("CONFIG", "REWRITE") == "OK"
    text = open(s.conf_path).read()
    assert "# users\n" in text
    assert "user carol on nopass ~c* resetchannels -@all +@read\n" in text
    assert "user bob" not in text and text.count("user alice on #") == 1
    s.stop()
    again = start_server(conf_path=s.conf_path)
    assert again.raw().cmd("ACL", "USERS") == [b"alice", b"carol", b"default"]


def test_bad_user_lines_and_aclfile_with_user_lines_stop_the_start(tmp_path):
    from conftest import Server
    with pytest.raises(RuntimeError) as e:
        Server(config="port 1\nuser u1 on foo\n")
    assert ("Reading the configuration file, at line 2\n>>> 'user u1 on foo'\nError in user "
            "declaration 'u1': Syntax error") in str(e.value)
    with pytest.raises(RuntimeError) as e:
        Server(config="user u1 on\nuser u1 off\n")
    assert "Duplicate user found. A user can only be defined once in config files" in str(e.value)
    path = tmp_path / "users.acl"
    path.write_text("user alice on\n")
    with pytest.raises(RuntimeError) as e:
        Server("--aclfile", str(path), config="user u1 on\n")
    assert ("Configuring Redis with users defined in redis.conf and at the same setting an ACL "
            "file path is invalid.") in str(e.value)


# ---- replication ----

def test_a_replica_authenticates_as_a_replication_user(start_server):
    master = start_server("--requirepass", "adminpw")
    m = master.raw()
    assert m.cmd("AUTH", "adminpw") == "OK"
    assert m.cmd("ACL", "SETUSER", "repl", "on", ">rpw", "-@all", "+psync", "+replconf",
                 "+ping") == "OK"
    assert m.cmd("BF.ADD", "k", "a") == 1
    replica = start_server("--masteruser", "repl", "--masterauth", "wrong")
    r = replica.client()
    r.execute_command("REPLICAOF", "127.0.0.1", master.port)
    wait_for(lambda: "WRONGPASS" in replica.output(), "the refused AUTH in the replica's log")
    assert r.info("replication")["master_link_status"] == "down"
    log = dict(zip(*[iter(m.cmd("ACL", "LOG", "1")[0])] * 2))
    assert log[b"reason"] == b"auth" and log[b"username"] == b"repl"
    r.config_set("masterauth", "rpw")
    wait_for(lambda: r.info("replication")["master_link_status"] == "up", "the link as repl")
    assert r.execute_command("BF.EXISTS", "k", "a") == 1
    assert m.cmd("BF.ADD", "k", "b") == 1
    wait_for(lambda: r.execute_command("BF.EXISTS", "k", "b") == 1, "the write streamed")
