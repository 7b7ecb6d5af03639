"""CMS.*: through redis-py's r.cms(), RedisBloom's replies and errors (its
flow tests' answers, which depend on which items share counters), RESP3
shapes, refused overflows, weighted merges, memory limits, and the same
answers after a restart from the log or a snapshot, with check-data
accepting the directory."""
import os
import subprocess

import pytest
import redis

from conftest import BLOOMERYD, QUICK, Server, acl_categories
from test_snapshot_cow import cow_pages, open_gate_if_waiting, wait_saved

CLI = os.environ.get("BLOOMERY_CLI") or os.path.join(os.path.dirname(BLOOMERYD), "bloomery")
# Every record durable at its reply, no snapshot at stop: kill -9 loses nothing.
DURABLE = ("--save", "", "--appendfsync", "always")
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
BIG = 2 ** 31 - 1


def info(r, key):
    i = r.cms().info(key)
    return (i.width, i.depth, i.count)


def error(r, *args):
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


def test_create_and_info(server, r):
    cms = r.cms()
    assert cms.initbydim("dim", 20, 5)
    assert cms.initbyprob("prob", 0.001, 0.01)
    assert info(r, "dim") == (20, 5, 0)
    assert info(r, "prob") == (2000, 7, 0)
    assert r.type("dim") == b"CMSk-TYPE"
    raw = server.raw()
    assert raw.cmd("CMS.INFO", "dim") == ["width", 20, "depth", 5, "count", 0]
    raw.close()
    assert error(r, "CMS.INITBYDIM", "dim", 10, 10) == "CMS: key already exists"
    r.execute_command("BF.ADD", "str", "x")  # a key of another type
    # The key is checked before the arguments, whatever it holds.
    assert error(r, "CMS.INITBYDIM", "str", "x", "y") == "CMS: key already exists"


@pytest.mark.parametrize("cmd,args,msg", [
    ("CMS.INITBYDIM", ["0", "5"], "CMS: invalid width"),
    ("CMS.INITBYDIM", ["-3", "5"], "CMS: invalid width"),
    ("CMS.INITBYDIM", ["blah", "5"], "CMS: invalid width"),
    ("CMS.INITBYDIM", ["1.5", "5"], "CMS: invalid width"),
    ("CMS.INITBYDIM", ["10", "0"], "CMS: invalid depth"),
    ("CMS.INITBYDIM", ["10", "nan"], "CMS: invalid depth"),
    ("CMS.INITBYDIM", ["8589934592", "8589934592"], "CMS: invalid init arguments"),
    ("CMS.INITBYPROB", ["0", "0.5"], "CMS: invalid overestimation value"),
    ("CMS.INITBYPROB", ["1", "0.5"], "CMS: invalid overestimation value"),
    ("CMS.INITBYPROB", ["nan", "0.5"], "CMS: invalid overestimation value"),
    ("CMS.INITBYPROB", ["inf", "0.5"], "CMS: invalid overestimation value"),
    ("CMS.INITBYPROB", ["blah", "0.5"], "CMS: invalid overestimation value"),
    ("CMS.INITBYPROB", ["0.1", "0"], "CMS: invalid prob value"),
    ("CMS.INITBYPROB", ["0.1", "-inf"], "CMS: invalid prob value"),
    ("CMS.INITBYPROB", ["0.1", "x"], "CMS: invalid prob value"),
    ("CMS.INITBYPROB", ["0.9", "0.9999999999999999"], "CMS: invalid init arguments"),
    ("CMS.INITBYPROB", ["0.0000000000000000001", "0.9"], "CMS: invalid init arguments"),
    ("CMS.INITBYDIM", ["10"], "wrong number of arguments for 'cms.initbydim' command"),
    ("CMS.INITBYPROB", ["0.1", "0.1", "x"],
     "wrong number of arguments for 'cms.initbyprob' command"),
])
def test_create_errors(r, cmd, args, msg):
    assert error(r, cmd, "k", *args).endswith(msg)
    assert not r.exists("k")


def test_incrby_query(r):
    cms = r.cms()
    cms.initbydim("cms", 1000, 5)
    assert cms.incrby("cms", ["bar", "baz"], [5, 42]) == [5, 42]
    assert cms.query("cms", "foo", "bar", "baz") == [0, 5, 42]
    assert cms.incrby("cms", ["bar", "bar"], [1, 0]) == [6, 6]
    assert info(r, "cms")[2] == 48
    assert cms.query("cms", "bar") == [6]


def test_redisbloom_overflow(r):
    """RedisBloom's flow test: in a 5 x 2 sketch, b and c share counters.
    The third increment of a would pass 2^32 - 1: refused in its place, a
    unchanged, the others applied, the total without it."""
    cms = r.cms()
    cms.initbydim("cms", 5, 2)
    args = ["a", BIG, "b", 10, "c", 7, "d", 5]
    assert r.execute_command("CMS.INCRBY", "cms", *args) == [BIG, 10, 17, 5]
    assert cms.query("cms", "a", "b", "c", "d") == [BIG, 17, 17, 5]
    assert r.execute_command("CMS.INCRBY", "cms", *args) == [2 * BIG, 27, 34, 10]
    res = r.execute_command("CMS.INCRBY", "cms", *args)
    assert isinstance(res[0], redis.ResponseError)
    assert str(res[0]) == "CMS: INCRBY overflow"
    assert res[1:] == [44, 51, 15]
    assert cms.query("cms", "a", "b", "c", "d") == [2 * BIG, 51, 51, 15]
    assert info(r, "cms")[2] == 2 * (BIG + 22) + 22
    # Beyond any counter at once.
    res = r.execute_command("CMS.INCRBY", "cms", "x", 2 ** 32)
    assert str(res[0]) == "CMS: INCRBY overflow"
    assert cms.query("cms", "x") == [0]


def test_incrby_errors(r):
    r.cms().initbydim("cms", 100, 3)
    r.execute_command("BF.ADD", "str", "x")  # a key of another type
    assert error(r, "CMS.INCRBY", "missing", "a", "1") == "CMS: key does not exist"
    assert error(r, "CMS.INCRBY", "str", "a", "1") == WRONGTYPE
    for bad in ("x", "1.5", "", "nan", "99999999999999999999"):
        assert error(r, "CMS.INCRBY", "cms", "a", "1", "b", bad) == "CMS: Cannot parse number"
    assert error(r, "CMS.INCRBY", "cms", "a", "-1") == "CMS: Number cannot be negative"
    # Nothing of a refused command was applied.
    assert r.cms().query("cms", "a") == [0]
    for args in (["cms"], ["cms", "a"], ["cms", "a", "1", "b"]):
        assert "wrong number of arguments for 'cms.incrby'" in error(r, "CMS.INCRBY", *args)
    assert error(r, "CMS.QUERY", "missing", "a") == "CMS: key does not exist"
    assert error(r, "CMS.QUERY", "str", "a") == WRONGTYPE
    assert "wrong number of arguments for 'cms.query'" in error(r, "CMS.QUERY", "cms")
    assert error(r, "CMS.INFO", "missing") == "CMS: key does not exist"
    assert error(r, "CMS.INFO", "str") == WRONGTYPE
    assert "wrong number of arguments for 'cms.info'" in error(r, "CMS.INFO", "cms", "x")
    assert "wrong number of arguments for 'cms.info'" in error(r, "CMS.INFO")


def test_merge(r):
    cms = r.cms()
    for k in ("a", "b", "c", "d"):
        cms.initbydim(k, 1000, 5)
    for i in range(100):
        r.execute_command("CMS.INCRBY", "a", "foo%d" % i, 1, "bar%d" % i, 1)
        r.execute_command("CMS.INCRBY", "b", "bar%d" % i, 1)
    assert cms.merge("c", 2, ["a", "b"])
    assert cms.query("c", "foo1", "bar1") == [1, 2]
    assert info(r, "c")[2] == 300
    # Weighted: a - b leaves the foos, in c itself as a source.
    assert cms.merge("c", 2, ["c", "b"], [1, -2])
    assert cms.query("c", "foo1", "bar1") == [1, 0]
    assert info(r, "c")[2] == 100
    assert r.execute_command("CMS.MERGE", "d", 1, "a", "WEIGHTS", 3) is True
    assert cms.query("d", "foo7") == [3]
    # Removing b again would go below zero: refused, c unchanged.
    assert error(r, "CMS.MERGE", "c", 2, "c", "b", "weights", 1, -1) == "CMS: MERGE overflow"
    assert cms.query("c", "foo1", "bar1") == [1, 0]
    assert error(r, "CMS.MERGE", "c", 1, "a", "WEIGHTS", 2 ** 40) == "CMS: MERGE overflow"


def test_merge_errors(r):
    cms = r.cms()
    cms.initbydim("foo", 2000, 10)
    cms.initbydim("bar", 2000, 10)
    cms.initbydim("small", 20, 5)
    r.execute_command("BF.ADD", "str", "x")  # a key of another type
    cases = [
        (["missing", 1, "foo"], "CMS: key does not exist"),
        (["str", 1, "foo"], WRONGTYPE),
        (["foo", "B", "foo"], "CMS: invalid numkeys"),
        (["foo", 0, "foo"], "CMS: Number of keys must be positive"),
        (["foo", -1, "foo", "bar"], "CMS: Number of keys must be positive"),
        (["foo", 2, "foo"], "CMS: wrong number of keys"),
        (["foo", 1, "bar", "baz"], "CMS: wrong number of keys"),
        (["foo", 3, "foo", "weights", "B"], "CMS: wrong number of keys/weights"),
        (["foo", 1, "bar", "weights"], "CMS: wrong number of keys/weights"),
        (["foo", 1, "bar", "weights", 1, 2], "CMS: wrong number of keys/weights"),
        (["foo", 1, "bar", "weights", "B"], "CMS: invalid weight value"),
        (["foo", 1, "bar", "weights", "1.5"], "CMS: invalid weight value"),
        (["foo", 2, "bar", "nope"], "CMS: key does not exist"),
        (["foo", 2, "bar", "str"], WRONGTYPE),
        (["foo", 2, "bar", "small"], "CMS: width/depth is not equal"),
        (["foo", 1, "bar", "extra"], "CMS: wrong number of keys"),
    ]
    for args, msg in cases:
        assert error(r, "CMS.MERGE", *args) == msg, args
    assert "wrong number of arguments for 'cms.merge'" in error(r, "CMS.MERGE", "foo", 1)


def test_resp3(server, r):
    r.cms().initbydim("cms", 10, 2)
    r.cms().incrby("cms", ["a"], [3])
    c = server.raw()
    assert c.cmd("HELLO", "3")[b"proto"] == 3
    assert c.cmd("CMS.INFO", "cms") == {"width": 10, "depth": 2, "count": 3}
    assert c.cmd("CMS.QUERY", "cms", "a", "b") == [3, 0]
    assert c.cmd("CMS.INCRBY", "cms", "a", 1) == [4]
    c.close()


def test_command_and_memory(server, r):
    """Flags as RedisBloom registers the commands, one key at argv[1], ACL
    categories as Redis derives them, with @cms."""
    c = server.raw()
    for name, flags in (("cms.initbydim", ["denyoom", "write"]),
                        ("cms.initbyprob", ["denyoom", "write"]),
                        ("cms.incrby", ["denyoom", "write"]), ("cms.query", ["readonly"]),
                        ("cms.merge", ["denyoom", "write"]), ("cms.info", ["readonly"])):
        info = c.cmd("COMMAND", "INFO", name)[0]
        assert sorted(info[2]) == flags, name
        assert info[3:6] == [1, 1, 1] and sorted(info[6]) == acl_categories(info[2], "@cms"), name
    c.close()
    r.cms().initbydim("cms", 1000, 10)
    assert r.memory_usage("cms") >= 40000


def test_beyond_the_machine(r):
    """4 TB of counters: refused by the machine's memory, nothing made."""
    assert (error(r, "CMS.INITBYDIM", "k", 100000000000, 10) ==
            "CMS: Insufficient memory to create the key")
    assert not r.exists("k")


def test_maxmemory(start_server):
    s = start_server("--maxmemory", "10mb")
    c = s.client()
    assert error(c, "CMS.INITBYDIM", "big", 10000000, 10).startswith("OOM ")
    assert not c.exists("big")
    assert c.cms().initbydim("ok", 1000, 10)
    c.close()


def test_check_data_and_restart(tmp_path):
    """A sketch in the snapshot and one only in the log, changed after the
    snapshot by increments, a refused increment and merges: kill -9, then
    the same answers, and check-data accepts the directory."""
    d = str(tmp_path / "data")
    s = Server(*DURABLE, datadir=d)
    c = s.client()
    cms = c.cms()
    cms.initbydim("a", 50, 4)
    cms.initbyprob("b", 0.02, 0.01)
    n = 300 if QUICK else 3000
    for i in range(0, n, 50):
        c.execute_command("CMS.INCRBY", "a", *sum((["i%d" % j, j % 7] for j in range(i, i + 50)),
                                                   []))
    c.execute_command("SAVE")
    cms.initbydim("c", 50, 4)
    for i in range(0, n, 50):
        c.execute_command("CMS.INCRBY", "c", *sum((["i%d" % j, 1] for j in range(i, i + 50)), []))
    c.execute_command("CMS.INCRBY", "a", "i1", 2 ** 32 - 1)    # refused
    c.execute_command("CMS.INCRBY", "b", "x", 5, "y", 7)
    cms.merge("a", 2, ["a", "c"], [2, 1])
    probe = ["i%d" % j for j in range(n)] + ["x", "y", "z"]
    before = {k: (info(c, k), cms.query(k, *probe)) for k in ("a", "b", "c")}
    s.kill()
    rc = subprocess.run([CLI, "check-data", d], capture_output=True, text=True, timeout=120)
    assert rc.returncode == 0, rc.stdout + rc.stderr
    s2 = Server(*DURABLE, datadir=d)
    c2 = s2.client()
    after = {k: (info(c2, k), c2.cms().query(k, *probe)) for k in ("a", "b", "c")}
    assert after == before
    # And again from a snapshot of the replayed state.
    c2.execute_command("SAVE")
    c2.close()
    s2.stop()
    s3 = Server(*DURABLE, datadir=d)
    c3 = s3.client()
    assert {k: (info(c3, k), c3.cms().query(k, *probe)) for k in ("a", "b", "c")} == before
    c3.close()
    s3.stop()
    s.stop()


def test_snapshot_held_while_changing(tmp_path, monkeypatch):
    """A snapshot held after its capture (the test gate) while sketches take
    increments and a merge: it keeps them as they were at its start by
    copy-on-write, and a restart from it and the log after kill -9 answers
    as the live server did (an increment copied and replayed again would
    count twice)."""
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    monkeypatch.setenv("BLOOMERYD_TEST_SNAPSHOT_GATE", gate)
    d = str(tmp_path / "data")
    s = Server(*DURABLE, datadir=d)
    monkeypatch.delenv("BLOOMERYD_TEST_SNAPSHOT_GATE")
    try:
        c = s.client()
        cms = c.cms()
        cms.initbydim("a", 4000, 5)          # 80 KB: many pages
        cms.initbydim("b", 4000, 5)
        items = ["i%d" % i for i in range(500 if QUICK else 3000)]

        def incr(key, part, by):
            c.execute_command("CMS.INCRBY", key, *sum(([it, by] for it in part), []))

        for base in range(0, len(items), 250):
            incr("a", items[base:base + 250], 2)
            incr("b", items[base:base + 250], 1)
        seq = c.info("persistence")["bloomery_snapshot_seq"]
        assert c.execute_command("BGSAVE") is True
        # L0 is taken; no chunk is read until the gate opens.
        for base in range(0, len(items), 250):
            incr("a", items[base:base + 250], 3)
        cms.merge("b", 2, ["a", "b"], [1, 1])
        with open(gate, "w") as g:
            g.write("go")
        # Changes go on while the snapshot reads its chunks.
        while c.info("persistence")["rdb_bgsave_in_progress"]:
            incr("a", items[:250], 1)
        wait_saved(c, seq)
        assert cow_pages(s.output())[-1] > 0, s.output()
        before = {k: (info(c, k), cms.query(k, *items)) for k in ("a", "b")}
        c.close()
        s.kill()
        s2 = Server(*DURABLE, datadir=d)
        c2 = s2.client()
        assert {k: (info(c2, k), c2.cms().query(k, *items)) for k in ("a", "b")} == before
        c2.close()
        s2.stop()
    finally:
        open_gate_if_waiting(gate)
        s.stop()
