"""Bloom filters in the growing layout (LAYOUT GROWING, and what an add
creates under bf-default-layout auto): commands, dumps, restarts and
snapshots taken while they grow.

A growing filter is one table of fingerprints that doubles: buckets move
into the next table a few per add, a moved bucket is marked, and the old
table's pages are given back once all have moved. So, as with prefix
filters, a copy read while writers run is not a valid state: snapshots keep
the tables as they were at the snapshot's start (L0) by copy-on-write,
including a table given back meanwhile and a growth under way at L0.
"""
import pytest
import redis

from conftest import Server
from test_bloom import err
from test_prefix import bloomeryd_only, gated_server, info, madd, mexists
from test_snapshot_cow import open_gate_if_waiting, wait_saved, cow_pages


def debug(c, key):
    """The growing filter's BF.DEBUG line as a dict of numbers."""
    line = c.execute_command("BF.DEBUG", key)[1].decode()
    return {k: float(v) for k, v in (f.split(":") for f in line.split())}


def test_reserve_insert_info(r):
    assert r.execute_command("BF.RESERVE", "g", "0.001", 10000, "LAYOUT", "GROWING") == b"OK"
    items = ["i%d" % n for n in range(50000)]               # grows past 4x
    assert sum(madd(r, "g", items)) > 49900
    assert madd(r, "g", items[:100]) == [0] * 100
    assert mexists(r, "g", items) == [1] * len(items)
    i = info(r, "g")
    assert i[b"Layout"] == b"growing" and i[b"Number of filters"] == 1
    assert i[b"Capacity"] >= 50000 and i[b"Expansion rate"] == 2
    probes = ["p%d" % n for n in range(100000)]
    assert sum(mexists(r, "g", probes)) <= 0.001 * len(probes)
    assert r.execute_command("BF.INSERT", "q", "CAPACITY", 1000, "ERROR", "0.01",
                             "LAYOUT", "growing", "ITEMS", "x", "y") == [1, 1]
    assert info(r, "q")[b"Layout"] == b"growing"


def test_rates_it_cannot_reach(r):
    assert err(r, "BF.RESERVE", "t", "0.000001", 100, "LAYOUT", "GROWING") == \
        "ERR error rate too small for LAYOUT GROWING"
    assert err(r, "BF.INSERT", "t", "ERROR", "0.000001", "LAYOUT", "GROWING",
               "ITEMS", "x") == "ERR error rate too small for LAYOUT GROWING"
    assert r.exists("t") == 0
    # Creation options only apply to a key the call creates.
    r.execute_command("BF.RESERVE", "k", "0.01", 100, "LAYOUT", "GROWING")
    assert r.execute_command("BF.INSERT", "k", "ERROR", "0.000001", "LAYOUT", "GROWING",
                             "ITEMS", "x") == [1]
    assert err(r, "BF.RESERVE", "k", "0.000001", 100, "LAYOUT", "GROWING") == "ERR item exists"
    # Not named: a filter an add creates at that rate takes the blocked layout.
    assert r.execute_command("BF.INSERT", "t", "ERROR", "0.000001", "ITEMS", "x") == [1]
    assert info(r, "t")[b"Layout"] == b"blocked"


def test_added_filters_grow_in_one_table(r):
    # RedisBloom's defaults: capacity 100, expansion 2; a chain would hold
    # eleven links by now.
    items = ["a%d" % n for n in range(200000)]
    assert sum(madd(r, "auto", items)) > 199000
    i = info(r, "auto")
    assert i[b"Layout"] == b"growing" and i[b"Number of filters"] == 1
    # Memory counts the tables in use and those under a page, which stay
    # until the filter is freed (6 KB here), not those given back.
    assert i[b"Bytes"] <= r.execute_command("MEMORY", "USAGE", "auto") <= i[b"Bytes"] + 16384
    assert r.info("memory")["used_memory"] == r.execute_command("MEMORY", "USAGE", "auto")
    assert mexists(r, "auto", items) == [1] * len(items)
    probes = ["p%d" % n for n in range(200000)]
    assert sum(mexists(r, "auto", probes)) <= 0.01 * len(probes)


def test_nonscaling_fills_and_expansion_rounds_up(r):
    r.execute_command("BF.RESERVE", "n", "0.01", 1000, "NONSCALING", "LAYOUT", "GROWING")
    got = r.execute_command("BF.INSERT", "n", "NOCREATE", "ITEMS",
                            *["n%d" % i for i in range(1100)])
    assert [str(g) for g in got if isinstance(g, redis.ResponseError)] == \
        ["non scaling filter is full"]
    assert info(r, "n")[b"Number of items inserted"] == 1000
    r.execute_command("BF.RESERVE", "e", "0.01", 1000, "EXPANSION", 3, "LAYOUT", "GROWING")
    assert info(r, "e")[b"Capacity"] == 1000           # as asked, as RedisBloom
    d = debug(r, "e")
    madd(r, "e", ["e%d" % i for i in range(int(d["grows_at"]) + 1)])
    i = info(r, "e")
    assert i[b"Expansion rate"] == 3 and i[b"Capacity"] == 4000
    now = debug(r, "e")                                 # moving into, or moved
    assert 4 * d["buckets"] in (now["buckets"], now["buckets_next"])


def test_merge_refused_copy_allowed(r):
    r.execute_command("BF.RESERVE", "m1", "0.01", 1000, "LAYOUT", "GROWING")
    r.execute_command("BF.RESERVE", "m2", "0.01", 1000, "LAYOUT", "GROWING")
    madd(r, "m1", ["x%d" % i for i in range(3000)])
    assert err(r, "BF.MERGE", "m2", "m1").startswith("ERR")
    assert r.execute_command("BF.MERGE", "copy", "m1") == b"OK"
    assert info(r, "copy") == info(r, "m1")
    assert mexists(r, "copy", ["x%d" % i for i in range(3000)]) == [1] * 3000


def test_scandump_loadchunk(r):
    r.execute_command("BF.RESERVE", "src", "0.001", 20000, "LAYOUT", "GROWING")
    items = ["s%d" % i for i in range(60000)]
    madd(r, "src", items)
    from conftest import scandump
    for it, data in scandump(r, "BF", "src"):
        assert r.execute_command("BF.LOADCHUNK", "dst", it, data) == b"OK"
    assert mexists(r, "dst", items) == [1] * len(items)
    assert info(r, "dst") == info(r, "src")
    probes = ["p%d" % i for i in range(20000)]
    assert mexists(r, "dst", probes) == mexists(r, "src", probes)


def grow_until_moving(c, key, prefix):
    """Adds one item at a time until a growth is under way (both tables
    held: Bytes more than doubles); returns the items added."""
    start = info(c, key)[b"Bytes"]
    added = []
    while info(c, key)[b"Bytes"] <= 2 * start:
        batch = ["%s%d" % (prefix, len(added) + i) for i in range(50)]
        madd(c, key, batch)
        added += batch
        assert len(added) < 1000000
    return added


@bloomeryd_only
def test_restart_keeps_filter_mid_growth(tmp_path):
    """A snapshot taken while buckets move holds both tables; the log after
    it finishes the move on replay."""
    datadir = str(tmp_path / "data")
    s = Server("--appendfsync", "always", datadir=datadir)
    try:
        c = s.client()
        c.execute_command("BF.RESERVE", "g", "0.001", 30000, "LAYOUT", "GROWING")
        first = grow_until_moving(c, "g", "a")
        c.execute_command("SAVE")
        second = ["b%d" % i for i in range(40000)]    # in the log only
        madd(c, "g", second)
        c.execute_command("BF.ADD", "late", "x")      # created after the snapshot
        before = info(c, "g")
        probes = ["p%d" % i for i in range(50000)]
        fp = mexists(c, "g", probes)
        c.close()
        s.kill()
        s = Server(datadir=datadir)
        c = s.client()
        assert mexists(c, "g", first + second) == [1] * (len(first) + len(second))
        after = info(c, "g")
        for k in (b"Layout", b"Capacity", b"Number of filters", b"Number of items inserted",
                  b"Bytes"):
            assert after[k] == before[k], k
        assert mexists(c, "g", probes) == fp
        assert info(c, "late")[b"Layout"] == b"growing"
        c.close()
    finally:
        s.stop()


def fill_to_limit(c, key, prefix):
    """Adds items until the table is a few short of growing; returns them."""
    added = []
    while True:
        d = debug(c, key)
        left = int(d["grows_at"] - d["size"]) - 20
        if left <= 0:
            return added
        batch = ["%s%d" % (prefix, len(added) + n) for n in range(left)]
        madd(c, key, batch)
        added += batch


@bloomeryd_only
@pytest.mark.parametrize("at_l0", ["settled", "moving"])
def test_snapshot_is_the_state_at_its_start(tmp_path, monkeypatch, at_l0):
    """No log: the snapshot alone is the state at L0, though between L0 and
    the reading of the chunks the filter grows twice, moving every bucket
    and giving back the tables the snapshot reads (their pools included,
    which the moves only read)."""
    s, gate, datadir = gated_server(tmp_path, monkeypatch, "--appendonly", "no")
    try:
        c = s.client()
        c.execute_command("BF.RESERVE", "g", "0.01", 300000, "LAYOUT", "GROWING")
        # Settled: the growth starts with the first adds after L0, so
        # buckets are marked moved before other adds change their pages.
        old = fill_to_limit(c, "g", "o")
        if at_l0 == "moving":
            old += grow_until_moving(c, "g", "m")
        l0 = info(c, "g")
        new = ["n%d" % i for i in range(3 * len(old))]
        # What the filter at L0 answers for them: exactly what it must
        # answer after the restart (a lookup changes nothing).
        new_at_l0 = mexists(c, "g", new)
        seq = c.info("persistence")["bloomery_snapshot_seq"]
        assert c.execute_command("BGSAVE") is True
        assert sum(madd(c, "g", new)) > 0.99 * len(new)
        # Two growths (while moving, Capacity is already the next table's).
        grown = 4 if at_l0 == "settled" else 2
        assert info(c, "g")[b"Capacity"] >= grown * l0[b"Capacity"]
        with open(gate, "w") as g:
            g.write("go")
        wait_saved(c, seq)
        assert cow_pages(s.output())[-1] > 0, s.output()
        c.close()
        s.kill()
        s = Server("--appendonly", "no", datadir=datadir)
        c = s.client()
        assert mexists(c, "g", old) == [1] * len(old)
        after = info(c, "g")
        for k in (b"Capacity", b"Number of items inserted", b"Bytes"):
            assert after[k] == l0[k], k
        # The new items are gone but for the filter's false positives.
        assert mexists(c, "g", new) == new_at_l0
        # The move under way at L0 goes on from where it was.
        madd(c, "g", ["z%d" % i for i in range(len(old))])
        assert mexists(c, "g", old) == [1] * len(old)
        c.close()
    finally:
        open_gate_if_waiting(gate)
        s.stop()


@bloomeryd_only
def test_deleted_while_a_snapshot_holds_it(tmp_path, monkeypatch):
    """A table retired while a snapshot reads it is given back when the
    snapshot ends, by which time its key may be gone: memory is counted
    out once."""
    s, gate, datadir = gated_server(tmp_path, monkeypatch, "--appendonly", "no")
    try:
        c = s.client()
        base = c.info("memory")["used_memory"]
        c.execute_command("BF.RESERVE", "g", "0.01", 300000, "LAYOUT", "GROWING")
        fill_to_limit(c, "g", "o")
        seq = c.info("persistence")["bloomery_snapshot_seq"]
        assert c.execute_command("BGSAVE") is True
        madd(c, "g", ["n%d" % i for i in range(100000)])    # the table it reads retires
        assert c.delete("g") == 1
        with open(gate, "w") as g:
            g.write("go")
        wait_saved(c, seq)
        assert c.info("memory")["used_memory"] == base
    finally:
        open_gate_if_waiting(gate)
        s.stop()
