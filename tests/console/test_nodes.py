"""`bloomery console --node`: a bloomeryd master and its replica. The
topology (the replica found through the master's INFO), the filter table
(search, sort, paging), a filter's page, and the writes: each lands on the
master, never on the replica, and none is offered once the master is gone."""
import pytest

from consolehelp import QUICK, bloomeryd, wait_for

N = 30 if QUICK else 120


@pytest.fixture
def pair(procs):
    master = procs.start(bloomeryd(), "master")
    replica = procs.start(bloomeryd("--replicaof", "127.0.0.1 %d" % master.port), "replica")
    wait_for(lambda: replica.client().info("replication")["master_link_status"] == "up",
             "the replica's link")
    return master, replica


def test_nodes_and_overview(procs, pair):
    master, replica = pair
    c = procs.console(["--node", master.addr])
    nodes = wait_for(lambda: (lambda n: n if len(n) == 2 else None)(c.get("/api/nodes")),
                     "both nodes listed")
    by = {n["addr"]: n for n in nodes}
    assert by[master.addr]["role"] == "master"
    assert by[replica.addr]["role"] == "replica"
    assert by[replica.addr]["master"] == master.addr
    assert by[replica.addr]["link"] == "up"
    assert by[master.addr]["memory_used"] == master.client().info("memory")["used_memory"]
    assert by[replica.addr]["lag_bytes"] is not None
    ov = c.get("/api/overview")
    assert ov["mode"] == "nodes"
    assert [g["master"] for g in ov["groups"]] == [master.addr]
    assert ov["groups"][0]["replicas"] == [replica.addr]
    assert c.get("/api/me")["mode"] == "nodes"


def test_filters_search_sort_paging(procs, pair):
    master, _ = pair
    r = master.client()
    for i in range(N):
        r.execute_command("BF.RESERVE", "f:%04d" % i, 0.01, 100 + i)
        if i % 3 == 0:
            r.execute_command("BF.ADD", "f:%04d" % i, "x")
    r.execute_command("CF.RESERVE", "cuckoo:1", 1000)
    r.execute_command("PFADD", "plain", "not a filter")
    c = procs.console(["--node", master.addr])
    wait_for(lambda: c.get("/api/filters")["total"] == N + 1, "the catalog")
    got = c.get("/api/filters", match="f:*", per_page=10, page=2)
    assert got["total"] == N and got["page"] == 2 and got["per_page"] == 10
    assert [f["name"] for f in got["filters"]] == ["f:%04d" % i for i in range(10, 20)]
    assert all(f["node"] == master.addr and f["type"] == "bloom" for f in got["filters"])
    # Sorted by capacity, largest first: the last created leads.
    top = c.get("/api/filters", match="f:*", sort="capacity", order="desc", per_page=3)
    assert [f["name"] for f in top["filters"]] == ["f:%04d" % i for i in (N - 1, N - 2, N - 3)]
    assert [f["capacity"] for f in top["filters"]] == [100 + N - 1, 100 + N - 2, 100 + N - 3]
    cu = c.get("/api/filters", type="cuckoo")
    assert [f["name"] for f in cu["filters"]] == ["cuckoo:1"]
    # Every page together is the whole table, once.
    names = []
    for page in range(1, N // 7 + 3):
        names += [f["name"] for f in c.get("/api/filters", per_page=7, page=page)["filters"]]
    assert sorted(names) == sorted(["f:%04d" % i for i in range(N)] + ["cuckoo:1"])
    assert len(names) == N + 1
    assert c.get("/api/filters", per_page=100000)["per_page"] == 500
    routing = c.get("/api/routing", match="f:000*")
    assert routing["total"] == 10
    assert all(row["master"] == master.addr and row["status"] == "ok"
               for row in routing["rows"])


def test_filter_page_and_writes_on_the_master(procs, pair):
    master, replica = pair
    c = procs.console(["--node", master.addr])
    wait_for(lambda: len(c.get("/api/nodes")) == 2, "both nodes")
    place = c.get("/api/placement", name="made")
    assert place["node"] == master.addr
    status, body = c.post("/api/filters", name="made", capacity="1e6", error_rate="0.01",
                          expiry="100")
    assert (status, body) == (200, {"reply": "OK", "node": master.addr})
    assert master.client().exists("made") == 1
    status, body = c.post("/api/filter/add", name="made", items="a\nb\r\nc\n")
    assert (status, body) == (200, {"results": [1, 1, 1]})
    status, body = c.post("/api/filter/check", name="made", items="a\nnot-there")
    assert (status, body) == (200, {"results": [1, 0]})
    page = c.get("/api/filter", name="made")
    assert page["master"] == master.addr and page["may_write"] is True
    assert page["items"] == 3 and page["capacity"] == 1000000
    assert 0 < page["ttl_ms"] <= 100000
    assert page["info"]["Number of items inserted"] == 3
    wait_for(lambda: replica.client().exists("made") == 1, "the copy on the replica")
    assert c.get("/api/filter", name="made")["replicas"] == [
        {"addr": replica.addr, "present": True}]
    assert len(page["history"]) >= 1
    assert c.post("/api/filter/persist", name="made") == (200, {"reply": 1})
    assert master.client().ttl("made") == -1
    assert c.post("/api/filter/expire", name="made", seconds="500") == (200, {"reply": 1})
    assert 0 < master.client().ttl("made") <= 500
    # Listed at once, not at the next pass.
    assert c.get("/api/filters", match="made")["total"] == 1
    assert c.post("/api/filter/delete", name="made") == (200, {"reply": 1})
    assert master.client().exists("made") == 0
    assert c.get("/api/filters", match="made")["total"] == 0
    # The servers' errors, verbatim.
    status, body = c.post("/api/filters", name="bad", capacity="0", error_rate="0.01")
    assert status == 400 and "error" in body


def test_read_only(procs, pair):
    master, _ = pair
    master.client().execute_command("BF.RESERVE", "ro", 0.01, 1000)
    c = procs.console(["--node", master.addr])
    wait_for(lambda: c.get("/api/filters", match="ro")["total"] == 1, "the filter listed")
    status, body = c.post("/api/filter/readonly", name="ro", readonly="maybe")
    assert status == 400
    status, body = c.post("/api/filter/readonly", name="ro", readonly="yes")
    try:
        master.client().execute_command("BF.CONFIG", "ro", "READONLY")
    except Exception as e:  # noqa: BLE001
        if "unknown command" in str(e):
            # The server's own error, passed on as it is.
            assert status == 400 and "unknown command" in body["error"]
            pytest.skip("this server has no BF.CONFIG")
    assert (status, body) == (200, {"reply": "OK"})
    assert c.get("/api/filter", name="ro")["read_only"] is True
    status, body = c.post("/api/filter/add", name="ro", items="x")
    assert status == 400
    assert c.post("/api/filter/check", name="ro", items="x") == (200, {"results": [0]})
    assert c.post("/api/filter/readonly", name="ro", readonly="no") == (200, {"reply": "OK"})
    assert c.get("/api/filter", name="ro")["read_only"] is False


def test_no_writes_without_the_master(procs, pair):
    master, replica = pair
    master.client().execute_command("BF.RESERVE", "kept", 0.01, 1000)
    wait_for(lambda: replica.client().exists("kept") == 1, "the copy on the replica")
    c = procs.console(["--node", master.addr, "--node", replica.addr])
    wait_for(lambda: c.get("/api/filters", match="kept")["total"] == 1, "the filter listed")
    master.kill()
    wait_for(lambda: c.get("/api/filter", name="kept")["may_write"] is False,
             "the page offering no writes")
    before = replica.client().execute_command("BF.CARD", "kept")
    status, body = c.post("/api/filter/add", name="kept", items="x")
    assert status == 503, body
    status, body = c.post("/api/filters", name="other", capacity="100", error_rate="0.01")
    assert status == 503, body
    assert replica.client().execute_command("BF.CARD", "kept") == before
    assert replica.client().exists("other") == 0
    ov = c.get("/api/overview")
    assert any(a["severity"] == "critical" and master.addr in a["text"] for a in ov["alerts"])
