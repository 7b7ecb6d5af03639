"""TOPK.*: through redis-py's r.topk(), RedisBloom's replies and errors,
RESP3 shapes, expelled items, the heavy hitters of a skewed stream, memory
limits, and the same state after a restart from the log or a snapshot
(the decay draws come from the value's own generator), with check-data
accepting the directory."""
import os
import random
import subprocess

import pytest
import redis

from conftest import BLOOMERYD, QUICK, Server, acl_categories
from test_snapshot_cow import cow_pages, open_gate_if_waiting, wait_saved

CLI = os.environ.get("BLOOMERY_CLI") or os.path.join(os.path.dirname(BLOOMERYD), "bloomery")
DURABLE = ("--save", "", "--appendfsync", "always")
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
BAD_INCREMENT = ("TopK: increment must be an integer greater or equal to 0" + " " * 28 +
                 "and smaller or equal to 100,000")


def error(r, *args):
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


def test_reserve_and_info(r):
    topk = r.topk()
    assert topk.reserve("t", 3, 50, 4, 0.8)
    assert r.execute_command("TOPK.RESERVE", "d", 5) is True
    i = topk.info("t")
    assert (i.k, i.width, i.depth, float(i.decay)) == (3, 50, 4, 0.8)
    i = topk.info("d")
    assert (i.k, i.width, i.depth, float(i.decay)) == (5, 8, 7, 0.9)
    assert r.type("t") == b"TopK-TYPE"
    assert error(r, "TOPK.RESERVE", "t", 3) == "TopK: key already exists"
    r.execute_command("BF.ADD", "str", "x")  # a key of another type
    assert error(r, "TOPK.RESERVE", "str", "x") == "TopK: key already exists"


@pytest.mark.parametrize("args,msg", [
    (["0"], "TopK: invalid k"),
    (["-1"], "TopK: invalid k"),
    (["x"], "TopK: invalid k"),
    (["4294967296"], "TopK: invalid k"),
    (["2", "0", "5", "0.9"], "TopK: invalid width"),
    (["2", "4294967296", "5", "0.9"], "TopK: invalid width"),
    (["2", "8", "0", "0.9"], "TopK: invalid depth"),
    (["2", "8", "y", "0.9"], "TopK: invalid depth"),
    (["2", "8", "5", "0"], "TopK: invalid decay value. must be '<= 1' & '> 0'"),
    (["2", "8", "5", "1.01"], "TopK: invalid decay value. must be '<= 1' & '> 0'"),
    (["2", "8", "5", "nan"], "TopK: invalid decay value. must be '<= 1' & '> 0'"),
    (["2", "8", "5", "inf"], "TopK: invalid decay value. must be '<= 1' & '> 0'"),
    (["2", "8", "5", "z"], "TopK: invalid decay value. must be '<= 1' & '> 0'"),
    (["2", "8"], "wrong number of arguments for 'topk.reserve' command"),
    (["2", "8", "5", "0.9", "x"], "wrong number of arguments for 'topk.reserve' command"),
])
def test_reserve_errors(r, args, msg):
    assert error(r, "TOPK.RESERVE", "t", *args).endswith(msg)
    assert not r.exists("t")


def test_add_expelled_list(server, r):
    topk = r.topk()
    topk.reserve("t", 2, 50, 3, 0.9)
    assert topk.add("t", "a", "b") == [None, None]
    assert topk.add("t", "a", "a", "b") == [None, None, None]
    # c reaches the minimum (b's 2) and takes its place: b is expelled.
    assert topk.incrby("t", ["c"], [2]) == ["b"]
    assert topk.query("t", "a", "b", "c") == [1, 0, 1]
    assert topk.count("t", "a", "b", "c") == [3, 2, 2]
    assert topk.list("t") == ["a", "c"]
    assert topk.list("t", withcount=True) == ["a", 3, "c", 2]
    # Items are simple strings, as RedisBloom sends them; binary ones come
    # back whole, as bulk strings (redis-py's parser would decode them).
    raw = server.raw()
    assert raw.cmd("TOPK.LIST", "t", "withc") == ["a", 3, "c", 2]
    assert raw.cmd("TOPK.INCRBY", "t", b"x\x00y", 10) == ["c"]
    assert raw.cmd("TOPK.LIST", "t") == [b"x\x00y", "a"]
    raw.close()
    # An increment of 0 enters the heap at count 0 when there is room.
    r.execute_command("TOPK.RESERVE", "z", 3)
    assert topk.incrby("z", ["q"], [0]) == [None]
    assert topk.query("z", "q") == [1]
    assert topk.list("z") == []


def test_errors(r):
    r.execute_command("TOPK.RESERVE", "t", 2)
    r.execute_command("BF.ADD", "str", "x")  # a key of another type
    for cmd, extra in (("TOPK.ADD", ["a"]), ("TOPK.INCRBY", ["a", "1"]), ("TOPK.QUERY", ["a"]),
                       ("TOPK.COUNT", ["a"]), ("TOPK.LIST", []), ("TOPK.INFO", [])):
        assert error(r, cmd, "missing", *extra) == "TopK: key does not exist", cmd
        assert error(r, cmd, "str", *extra) == WRONGTYPE, cmd
    # As RedisBloom: the pairs before a bad increment are added, the bad
    # one is answered with an error as the array's last element.
    for bad in ("-1", "100001", "x", "1.5", "nan"):
        got = r.execute_command("TOPK.INCRBY", "t", "a", "1", "b", bad, "c", "1")
        assert got[0] is None and len(got) == 2 and str(got[1]) == BAD_INCREMENT, bad
    assert r.topk().list("t", withcount=True) == ["a", 5]
    assert r.execute_command("TOPK.INCRBY", "t", "a", 100000) == [None]
    assert error(r, "TOPK.LIST", "t", "WITHCOUNTS") == "WITHCOUNT keyword expected"
    assert error(r, "TOPK.LIST", "t", "x") == "WITHCOUNT keyword expected"
    for cmd, args in (("TOPK.ADD", ["t"]), ("TOPK.INCRBY", ["t", "a"]),
                      ("TOPK.INCRBY", ["t", "a", "1", "b"]), ("TOPK.QUERY", ["t"]),
                      ("TOPK.COUNT", ["t"]), ("TOPK.LIST", ["t", "WITHCOUNT", "x"]),
                      ("TOPK.INFO", ["t", "x"]), ("TOPK.RESERVE", ["t"])):
        assert "wrong number of arguments for '%s'" % cmd.lower() in error(r, cmd, *args), cmd


def test_resp3(server, r):
    r.topk().reserve("t", 2, 20, 3, 0.5)
    c = server.raw()
    assert c.cmd("HELLO", "3")[b"proto"] == 3
    assert c.cmd("TOPK.ADD", "t", "a", "b", "c") == [None, None, "a"]
    assert c.cmd("TOPK.QUERY", "t", "b", "nope") == [True, False]
    assert c.cmd("TOPK.INFO", "t") == {"k": 2, "width": 20, "depth": 3, "decay": 0.5}
    assert isinstance(c.cmd("TOPK.COUNT", "t", "b")[0], int)
    c.close()


def test_command_info(server):
    c = server.raw()
    for name, flags in (("topk.reserve", ["denyoom", "write"]), ("topk.add", ["denyoom", "write"]),
                        ("topk.incrby", ["denyoom", "write"]), ("topk.query", ["readonly"]),
                        ("topk.count", ["readonly"]), ("topk.list", ["readonly"]),
                        ("topk.info", ["readonly"])):
        info = c.cmd("COMMAND", "INFO", name)[0]
        assert sorted(info[2]) == flags, name
        assert info[3:6] == [1, 1, 1] and sorted(info[6]) == acl_categories(info[2], "@topk"), name
    c.close()


def test_pipelined_adds(tmp_path, start_server):
    """Pipelined "TOPK.ADD key item" requests (run as one batch) answer and
    end as one TOPK.ADD of every item on another server, one array per
    request; a missing or wrong-type key answers each request; the batch's
    log record restores the same state after kill -9."""
    d = str(tmp_path / "data")
    a = start_server(*DURABLE, datadir=d)
    b = start_server(*DURABLE)
    ca, cb = a.client(), b.client()
    for c in (ca, cb):
        c.topk().reserve("t", 4, 8, 3, 0.9)
    rng = random.Random(9)
    words = ["w%d" % (int(rng.paretovariate(1.0)) % 50) for _ in range(3000)]
    p = ca.pipeline(transaction=False)
    for w in words:
        p.execute_command("TOPK.ADD", "t", w)
    got = [r[0] for r in p.execute()]
    assert got == cb.topk().add("t", *words)
    assert any(got)
    probe = ["w%d" % i for i in range(50)]
    want = (cb.topk().list("t", withcount=True), cb.topk().count("t", *probe))
    assert (ca.topk().list("t", withcount=True), ca.topk().count("t", *probe)) == want
    ca.execute_command("BF.ADD", "bf", "x")
    for key, msg in (("missing", "TopK: key does not exist"), ("bf", WRONGTYPE)):
        p = ca.pipeline(transaction=False)
        for w in words[:5]:
            p.execute_command("TOPK.ADD", key, w)
        res = p.execute(raise_on_error=False)
        assert [str(e) for e in res] == [msg] * 5
    a.kill()
    a2 = start_server(*DURABLE, datadir=d)
    c2 = a2.client()
    assert (c2.topk().list("t", withcount=True), c2.topk().count("t", *probe)) == want
    for c in (ca, cb, c2):
        c.close()


def test_heavy_hitters(r):
    """A Zipf stream through pipelined TOPK.ADD: the listed items are the
    true heaviest."""
    topk = r.topk()
    topk.reserve("t", 10, 400, 5, 0.9)
    rng = random.Random(7)
    weights = [1.0 / (i + 1) ** 1.2 for i in range(2000)]
    n = 20000 if QUICK else 100000
    stream = rng.choices(range(2000), weights=weights, k=n)
    for i in range(0, n, 500):
        topk.add("t", *["item%d" % x for x in stream[i:i + 500]])
    listed = topk.list("t")
    assert len(listed) == 10
    assert {"item%d" % i for i in range(5)} <= set(listed)
    assert len({"item%d" % i for i in range(10)} & set(listed)) >= 8


def test_beyond_the_machine(server, r):
    """137 GB of heap slots: refused by the machine's memory, nothing made
    (raw, as redis-py drops the ERR prefix)."""
    c = server.raw()
    e = c.cmd("TOPK.RESERVE", "t", 4294967295)
    assert str(e) == "ERR Insufficient memory to create topk data structure"
    c.close()
    assert not r.exists("t")


def test_maxmemory(start_server):
    s = start_server("--maxmemory", "10mb")
    c = s.client()
    assert error(c, "TOPK.RESERVE", "big", 10, 10000000, 10, 0.9).startswith("OOM ")
    assert not c.exists("big")
    assert c.topk().reserve("ok", 10, 100, 5, 0.9)
    c.close()


def state(c):
    topk = c.topk()
    out = {}
    for k in ("a", "b"):
        out[k] = (topk.list(k, withcount=True),
                  topk.count(k, *["w%d" % i for i in range(300)]))
    return out


def test_check_data_and_restart(tmp_path):
    """Contended buckets (many decays) before and after a snapshot: kill -9
    and restart give the same lists and counts, and the same answers to
    the same adds afterwards, since the generator's state came back too."""
    d = str(tmp_path / "data")
    s = Server(*DURABLE, datadir=d)
    c = s.client()
    topk = c.topk()
    topk.reserve("a", 5, 8, 3, 0.9)
    rng = random.Random(3)
    n = 2000 if QUICK else 10000
    words = ["w%d" % (int(rng.paretovariate(1.0)) % 300) for _ in range(n)]
    for i in range(0, n // 2, 100):
        topk.add("a", *words[i:i + 100])
    c.execute_command("SAVE")
    c.execute_command("TOPK.RESERVE", "b", 3)
    for i in range(n // 2, n, 100):
        topk.add("a", *words[i:i + 100])
        topk.incrby("b", words[i:i + 10], [3] * 10)
    before = state(c)
    s.kill()
    rc = subprocess.run([CLI, "check-data", d], capture_output=True, text=True, timeout=120)
    assert rc.returncode == 0, rc.stdout + rc.stderr
    s2 = Server(*DURABLE, datadir=d)
    c2 = s2.client()
    assert state(c2) == before
    # The same adds on the old state (kept in a fresh server fed the same
    # commands) and on the restored one answer alike.
    more = words[:300]
    got = c2.topk().add("a", *more)
    c2.execute_command("SAVE")
    c2.close()
    s2.stop()
    s3 = Server(*DURABLE, datadir=d)
    c3 = s3.client()
    after = state(c3)
    c3.close()
    s3.stop()
    s.stop()
    # A fresh server fed the whole history gives the same state.
    s4 = Server(*DURABLE)
    c4 = s4.client()
    t4 = c4.topk()
    t4.reserve("a", 5, 8, 3, 0.9)
    for i in range(0, n // 2, 100):
        t4.add("a", *words[i:i + 100])
    c4.execute_command("TOPK.RESERVE", "b", 3)
    for i in range(n // 2, n, 100):
        t4.add("a", *words[i:i + 100])
        t4.incrby("b", words[i:i + 10], [3] * 10)
    assert t4.add("a", *more) == got
    assert state(c4) == after
    c4.close()
    s4.stop()


def test_snapshot_held_while_changing(tmp_path, monkeypatch):
    """A snapshot held after its capture (the test gate) while adds decay
    buckets and reorder the heap: it keeps the value as at its start (buckets
    by copy-on-write, the heap and the generator as captured), and a restart
    from it and the log after kill -9 holds the live state."""
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    monkeypatch.setenv("BLOOMERYD_TEST_SNAPSHOT_GATE", gate)
    d = str(tmp_path / "data")
    s = Server(*DURABLE, datadir=d)
    monkeypatch.delenv("BLOOMERYD_TEST_SNAPSHOT_GATE")
    try:
        c = s.client()
        topk = c.topk()
        topk.reserve("a", 5, 2000, 4, 0.9)     # 64 KB of buckets: many pages
        rng = random.Random(5)
        words = ["w%d" % (int(rng.paretovariate(0.7)) % 5000) for _ in range(4000)]
        for i in range(0, 2000, 200):
            topk.add("a", *words[i:i + 200])
        c.execute_command("TOPK.RESERVE", "b", 3)
        topk.add("b", *words[:300])
        seq = c.info("persistence")["bloomery_snapshot_seq"]
        assert c.execute_command("BGSAVE") is True
        for i in range(2000, 4000, 200):
            topk.add("a", *words[i:i + 200])
            topk.incrby("b", words[i:i + 20], [7] * 20)
        with open(gate, "w") as g:
            g.write("go")
        # Changes go on while the snapshot reads its chunks.
        while c.info("persistence")["rdb_bgsave_in_progress"]:
            topk.add("a", *words[:100])
        wait_saved(c, seq)
        assert cow_pages(s.output())[-1] > 0, s.output()
        before = state(c)
        probe = ["w%d" % i for i in range(5000)]
        counts = topk.count("a", *probe)
        c.close()
        s.kill()
        s2 = Server(*DURABLE, datadir=d)
        c2 = s2.client()
        assert state(c2) == before
        assert c2.topk().count("a", *probe) == counts
        c2.close()
        s2.stop()
    finally:
        open_gate_if_waiting(gate)
        s.stop()
