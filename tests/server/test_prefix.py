"""Bloom filters in the prefix layout (LAYOUT PREFIX): commands, dumps,
restarts and snapshots taken while they change.

A prefix link's bins shift fingerprints and give the largest to a spare
filter, so unlike blocked and classic chains (bits only go from 0 to 1) a
copy read while writers run is not a valid state: snapshots keep the bins
as they were at the snapshot's start (L0) by copy-on-write. With no log
(appendonly no) a restart must therefore come back exactly as at L0, and
with the log exactly as the server was.
"""
import os
import threading

import pytest
import redis

from conftest import MODULE, QUICK, Server, scandump
from test_bloom import err
from test_snapshot_cow import open_gate_if_waiting, wait_saved, cow_pages

# Restarts from bloomeryd's snapshots and log (Redis with the module has its
# own RDB and AOF, tests/module).
bloomeryd_only = pytest.mark.skipif(bool(MODULE), reason="bloomeryd's persistence")


def madd(c, key, items):
    got = []
    for base in range(0, len(items), 2000):
        got += c.execute_command("BF.MADD", key, *items[base:base + 2000])
    return got


def mexists(c, key, items):
    got = []
    for base in range(0, len(items), 2000):
        got += c.execute_command("BF.MEXISTS", key, *items[base:base + 2000])
    return got


def info(c, key):
    i = c.execute_command("BF.INFO", key, "ALL")
    return dict(zip(i[0::2], i[1::2]))


def test_reserve_insert_info(r):
    assert r.execute_command("BF.RESERVE", "p", "0.001", 100000, "LAYOUT", "PREFIX") == b"OK"
    items = ["i%d" % n for n in range(5000)]
    assert madd(r, "p", items) == [1] * len(items)
    assert madd(r, "p", items[:100]) == [0] * 100
    assert mexists(r, "p", items) == [1] * len(items)
    i = info(r, "p")
    assert i[b"Layout"] == b"prefix"
    assert i[b"Number of items inserted"] == 5000 and i[b"Capacity"] == 100000
    # Fewer bytes than the blocked layout for the same request.
    r.execute_command("BF.RESERVE", "b", "0.001", 100000, "LAYOUT", "BLOCKED")
    assert i[b"Bytes"] < info(r, "b")[b"Bytes"]
    assert r.execute_command("BF.INSERT", "q", "CAPACITY", 1000, "ERROR", "0.01",
                             "LAYOUT", "prefix", "ITEMS", "x", "y") == [1, 1]
    assert info(r, "q")[b"Layout"] == b"prefix"


def test_prefix_errors(r):
    assert err(r, "BF.RESERVE", "c", "0.01", "100", "LAYOUT", "PREFIX", "COUNTING") == \
        "ERR COUNTING filters use the blocked layout"
    assert err(r, "BF.RESERVE", "w", "0.01", "100", "WINDOW", "60", "LAYOUT", "PREFIX") == \
        "ERR WINDOW filters use the blocked layout"
    r.execute_command("BF.RESERVE", "a", "0.01", 1000, "LAYOUT", "PREFIX")
    r.execute_command("BF.RESERVE", "b", "0.01", 2000, "LAYOUT", "PREFIX")
    r.execute_command("BF.RESERVE", "c", "0.01", 1000, "LAYOUT", "BLOCKED")
    r.execute_command("BF.ADD", "b", "x")
    r.execute_command("BF.ADD", "c", "x")
    for other in ("b", "c"):
        assert err(r, "BF.MERGE", "a", other).startswith("ERR filters must have the same layout")
    assert r.execute_command("BF.EXISTS", "a", "x") == 0


def test_merge(r):
    """Grown chains merge link by link: every item of each source, counts
    summed; a missing destination starts as a copy of the first source."""
    a = ["a%d" % i for i in range(7000)]
    b = ["b%d" % i for i in range(7000)]
    for key, items in (("m1", a), ("m2", b), ("m3", a[:3000] + b[:4000])):
        r.execute_command("BF.RESERVE", key, "0.001", 1000, "LAYOUT", "PREFIX")
        madd(r, key, items)
        assert info(r, key)[b"Number of filters"] == 3
    count = sum(info(r, k)[b"Number of items inserted"] for k in ("m1", "m2", "m3"))
    assert r.execute_command("BF.MERGE", "m1", "m2", "m3") == b"OK"
    assert mexists(r, "m1", a + b) == [1] * (len(a) + len(b))
    assert info(r, "m1")[b"Number of items inserted"] == count
    assert r.execute_command("BF.MERGE", "new", "m2") == b"OK"
    assert info(r, "new") == info(r, "m2")
    assert mexists(r, "new", b) == [1] * len(b)


@bloomeryd_only
def test_merge_replays_from_the_log(tmp_path):
    datadir = str(tmp_path / "data")
    s = Server("--appendfsync", "always", datadir=datadir)
    try:
        c = s.client()
        items = {k: ["%s%d" % (k, i) for i in range(6000)] for k in ("x", "y")}
        for k in items:
            c.execute_command("BF.RESERVE", k, "0.01", 2000, "LAYOUT", "PREFIX")
            madd(c, k, items[k])
        c.execute_command("BF.MERGE", "x", "y")
        probes = ["p%d" % i for i in range(20000)]
        before, fp = info(c, "x"), mexists(c, "x", probes)
        c.close()
        s.kill()
        s = Server(datadir=datadir)
        c = s.client()
        assert info(c, "x") == before
        assert mexists(c, "x", items["x"] + items["y"]) == [1] * 12000
        assert mexists(c, "x", probes) == fp
        c.close()
    finally:
        s.stop()


def test_nonscaling_full_and_growth(r):
    r.execute_command("BF.RESERVE", "n", "0.01", 1000, "NONSCALING", "LAYOUT", "PREFIX")
    items = ["n%d" % i for i in range(1200)]
    got = r.execute_command("BF.INSERT", "n", "NOCREATE", "ITEMS", *items)
    assert any(isinstance(g, redis.ResponseError) for g in got)
    r.execute_command("BF.RESERVE", "g", "0.01", 1000, "LAYOUT", "PREFIX")
    items = ["g%d" % i for i in range(20000)]
    madd(r, "g", items)
    assert info(r, "g")[b"Number of filters"] >= 4
    assert mexists(r, "g", items) == [1] * len(items)


def test_default_layout_config(r):
    # auto: prefix for a named capacity, growing for a filter an add creates.
    assert r.config_get("bf-default-layout") == {"bf-default-layout": "auto"}
    r.execute_command("BF.RESERVE", "r", "0.01", 1000)
    r.execute_command("BF.INSERT", "i", "CAPACITY", 1000, "ITEMS", "x")
    r.execute_command("BF.INSERT", "d", "ITEMS", "x")
    r.execute_command("BF.ADD", "a", "x")
    r.execute_command("BF.MADD", "m", "x")
    r.execute_command("BF.RESERVE", "c", "0.01", 1000, "COUNTING")
    got = {k: info(r, k)[b"Layout"] for k in ("r", "i", "d", "a", "m")}
    assert got == {"r": b"prefix", "i": b"prefix", "d": b"growing", "a": b"growing",
                   "m": b"growing"}
    assert r.execute_command("BF.INSERT", "c", "ITEMS", "y") == [1]
    r.config_set("bf-default-layout", "prefix")
    try:
        r.execute_command("BF.ADD", "auto", "x")
        assert info(r, "auto")[b"Layout"] == b"prefix"
        r.config_set("bf-default-layout", "blocked")
        r.execute_command("BF.RESERVE", "rb", "0.01", 1000)
        assert info(r, "rb")[b"Layout"] == b"blocked"
        with pytest.raises(redis.ResponseError):
            r.config_set("bf-default-layout", "other")
    finally:
        r.config_set("bf-default-layout", "auto")


def test_scandump_loadchunk(r):
    r.execute_command("BF.RESERVE", "src", "0.001", 20000, "LAYOUT", "PREFIX")
    items = ["s%d" % i for i in range(50000)]          # three links, full bins
    madd(r, "src", items)
    for it, data in scandump(r, "BF", "src"):
        assert r.execute_command("BF.LOADCHUNK", "dst", it, data) == b"OK"
    assert mexists(r, "dst", items) == [1] * len(items)
    assert info(r, "dst") == info(r, "src")
    probes = ["p%d" % i for i in range(20000)]
    assert mexists(r, "dst", probes) == mexists(r, "src", probes)


@bloomeryd_only
def test_restart_keeps_filter(tmp_path):
    datadir = str(tmp_path / "data")
    s = Server("--appendfsync", "always", datadir=datadir)
    try:
        c = s.client()
        c.execute_command("BF.RESERVE", "p", "0.0001", 30000, "LAYOUT", "PREFIX")
        first = ["a%d" % i for i in range(40000)]
        madd(c, "p", first)
        c.execute_command("SAVE")
        second = ["b%d" % i for i in range(20000)]    # in the log only
        madd(c, "p", second)
        # Created after the snapshot: the log's create record names the layout.
        c.execute_command("BF.RESERVE", "late", "0.001", 1000, "LAYOUT", "PREFIX")
        madd(c, "late", second[:5000])
        late = info(c, "late")
        before = info(c, "p")
        probes = ["p%d" % i for i in range(50000)]
        fp = mexists(c, "p", probes)
        assert mexists(c, "p", first + second) == [1] * (len(first) + len(second))
        c.close()
        s.kill()
        s = Server(datadir=datadir)
        c = s.client()
        assert mexists(c, "p", first + second) == [1] * (len(first) + len(second))
        after = info(c, "p")
        for k in (b"Layout", b"Capacity", b"Number of filters", b"Number of items inserted",
                  b"Bytes"):
            assert after[k] == before[k], k
        assert mexists(c, "p", probes) == fp
        assert info(c, "late") == late and late[b"Layout"] == b"prefix"
        assert mexists(c, "late", second[:5000]) == [1] * 5000
        c.close()
    finally:
        s.stop()


def gated_server(tmp_path, monkeypatch, *args):
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    monkeypatch.setenv("BLOOMERYD_TEST_SNAPSHOT_GATE", gate)
    datadir = str(tmp_path / "data")
    s = Server("--save", "", *args, datadir=datadir)
    monkeypatch.delenv("BLOOMERYD_TEST_SNAPSHOT_GATE")
    return s, gate, datadir


@bloomeryd_only
def test_snapshot_is_the_state_at_its_start(tmp_path, monkeypatch):
    """No log: the snapshot alone is the state at L0, though the adds
    between L0 and the reading of the chunks shift every bin (read live,
    the copy would hold them)."""
    s, gate, datadir = gated_server(tmp_path, monkeypatch, "--appendonly", "no")
    try:
        c = s.client()
        c.execute_command("BF.RESERVE", "p", "0.01", 100000, "LAYOUT", "PREFIX")
        old = ["o%d" % i for i in range(90000)]
        madd(c, "p", old)
        at_l0 = info(c, "p")
        seq = c.info("persistence")["bloomery_snapshot_seq"]
        assert c.execute_command("BGSAVE") is True
        new = ["n%d" % i for i in range(60000)]         # fills the link and grows one
        assert sum(madd(c, "p", new)) > 55000
        assert info(c, "p")[b"Number of filters"] == 2
        with open(gate, "w") as g:
            g.write("go")
        wait_saved(c, seq)
        assert cow_pages(s.output())[-1] > 0, s.output()
        c.close()
        s.kill()
        s = Server("--appendonly", "no", datadir=datadir)
        c = s.client()
        assert mexists(c, "p", old) == [1] * len(old)
        after = info(c, "p")
        assert after[b"Number of items inserted"] == at_l0[b"Number of items inserted"]
        assert after[b"Number of filters"] == 1
        # The new items are gone but for false positives (1% at capacity).
        assert sum(mexists(c, "p", new)) < 0.02 * len(new)
        c.close()
    finally:
        open_gate_if_waiting(gate)
        s.stop()


@bloomeryd_only
def test_snapshot_with_writers_restarts_exactly(tmp_path, monkeypatch):
    """The log from L0 over the snapshot gives back every item added before,
    during and after the snapshot's reading, by two writer threads."""
    s, gate, datadir = gated_server(tmp_path, monkeypatch, "--appendfsync", "always")
    try:
        c = s.client()
        c.execute_command("BF.RESERVE", "p", "0.001", 50000, "LAYOUT", "PREFIX")
        added = ["o%d" % i for i in range(45000)]
        madd(c, "p", added)
        seq = c.info("persistence")["bloomery_snapshot_seq"]
        assert c.execute_command("BGSAVE") is True
        more = ["m%d" % i for i in range(20000)]
        madd(c, "p", more)
        added += more
        stop = threading.Event()
        done = [[], []]

        def writer(t):
            w = redis.Redis(port=s.port, socket_timeout=60)
            n = 0
            while not stop.is_set() and n < (20000 if QUICK else 100000):
                items = ["w%d:%d" % (t, n + i) for i in range(500)]
                w.execute_command("BF.MADD", "p", *items)
                done[t] += items
                n += 500
            w.close()

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(2)]
        for t in threads:
            t.start()
        with open(gate, "w") as g:
            g.write("go")
        wait_saved(c, seq)
        stop.set()
        for t in threads:
            t.join()
        added += done[0] + done[1]
        assert cow_pages(s.output())[-1] > 0
        before = info(c, "p")
        probes = ["p%d" % i for i in range(30000)]
        assert mexists(c, "p", added) == [1] * len(added)
        c.close()
        s.kill()
        s = Server(datadir=datadir)
        c = s.client()
        assert mexists(c, "p", added) == [1] * len(added)
        after = info(c, "p")
        for k in (b"Number of filters", b"Number of items inserted", b"Bytes"):
            assert after[k] == before[k], k
        assert sum(mexists(c, "p", probes)) < 0.003 * len(probes)
        c.close()
    finally:
        open_gate_if_waiting(gate)
        s.stop()
