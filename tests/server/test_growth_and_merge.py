"""Filters that were not made by BF.RESERVE/BF.ADD: chains rebuilt by
BF.LOADCHUNK and BF.MERGE copies grow under maxmemory and count their bytes
like any other; counting filters merge; a dump header of a type that is not
a Bloom filter is refused at the header; merges and restored dumps replay
from the log to the same state."""
import os
import subprocess
import sys
import time

import pytest
import redis

from conftest import BLOOMERYD, MODULE, RawClient, RespError

OOM = "OOM command not allowed when used memory > 'maxmemory'."


def one(s, *args):
    c = s.raw()
    try:
        return c.cmd(*args)
    finally:
        c.close()


def info_all(c, key):
    i = c.execute_command("BF.INFO", key, "ALL")
    return dict(zip(i[::2], i[1::2]))


def dump(c, key):
    out, it = [], 0
    while True:
        it, data = c.execute_command("BF.SCANDUMP", key, it)
        if it == 0:
            return out
        out.append((it, data))


def load(c, key, chunks):
    for it, data in chunks:
        assert c.execute_command("BF.LOADCHUNK", key, it, data) == b"OK"


def copy_by_dump(c, src, dst):
    load(c, dst, dump(c, src))


def copy_by_merge(c, src, dst):
    assert c.execute_command("BF.MERGE", dst, src) == b"OK"


def first_absent(c, key):
    return next(x for x in ("n%d" % i for i in range(100000))
                if c.execute_command("BF.EXISTS", key, x) == 0)


@pytest.mark.parametrize("layout", ["BLOCKED", "CLASSIC"])
@pytest.mark.parametrize("copy", [copy_by_dump, copy_by_merge])
def test_rebuilt_chains_grow_under_maxmemory(start_server, layout, copy):
    s = start_server()
    c = s.client()
    # A full first link whose successor (expansion 1000) is far bigger.
    c.execute_command("BF.RESERVE", "src", "0.01", "100", "EXPANSION", "1000", "LAYOUT", layout)
    c.execute_command("BF.MADD", "src", *["i%d" % i for i in range(100)])
    assert c.execute_command("BF.INFO", "src", "FILTERS") == [1]
    copy(c, "src", "dst")
    assert c.memory_usage("dst") == c.memory_usage("src")
    used = c.info("memory")["used_memory"]
    before = c.execute_command("BF.INFO", "dst")
    c.config_set("maxmemory", used + 1000)
    new = first_absent(c, "dst")
    assert str(one(s, "BF.ADD", "dst", new)) == OOM
    assert c.execute_command("BF.INFO", "dst") == before
    assert c.info("memory")["used_memory"] == used
    # With room, the growth happens and is counted to the byte.
    c.config_set("maxmemory", 0)
    bytes_before = info_all(c, "dst")[b"Bytes"]
    usage_before = c.memory_usage("dst")
    assert c.execute_command("BF.ADD", "dst", new) == 1
    assert c.execute_command("BF.INFO", "dst", "FILTERS") == [2]
    grown = info_all(c, "dst")[b"Bytes"] - bytes_before
    assert grown > 100000
    assert c.memory_usage("dst") - usage_before == grown
    assert c.info("memory")["used_memory"] - used == grown
    c.delete("src", "dst")
    assert c.info("memory")["used_memory"] == 0 or c.dbsize() == 0
    c.close()


def test_loaded_image_counts_filter_bytes(r):
    r.execute_command("BF.RESERVE", "a", "0.001", "20000")
    r.execute_command("BF.MADD", "a", *["x%d" % i for i in range(500)])
    r.execute_command("BF.RESERVE", "cnt", "0.01", "5000", "COUNTING")
    r.execute_command("BF.MADD", "cnt", "p", "q")
    base = r.info("memory")["used_memory"]
    copy_by_dump(r, "a", "b")
    copy_by_dump(r, "cnt", "cn2")
    assert r.memory_usage("b") == r.memory_usage("a")
    assert r.memory_usage("cn2") == r.memory_usage("cnt")
    assert r.info("memory")["used_memory"] - base == \
        r.memory_usage("b") + r.memory_usage("cn2")


def test_counting_filters_merge(r):
    for k in ("c1", "c2", "c3"):
        r.execute_command("BF.RESERVE", k, "0.01", "1000", "COUNTING")
    r.execute_command("BF.MADD", "c1", "a", "b")
    r.execute_command("BF.MADD", "c2", "b", "c")
    r.execute_command("BF.ADD", "c3", "d")
    assert r.execute_command("BF.MERGE", "c1", "c2", "c3") == b"OK"
    assert r.execute_command("BF.MEXISTS", "c1", "a", "b", "c", "d", "zz") == [1, 1, 1, 1, 0]
    assert r.execute_command("BF.CARD", "c1") == 5
    # A multiset union: b was added twice and needs two deletes.
    assert r.execute_command("BF.DEL", "c1", "b") == 1
    assert r.execute_command("BF.EXISTS", "c1", "b") == 1
    assert r.execute_command("BF.DEL", "c1", "b") == 1
    assert r.execute_command("BF.EXISTS", "c1", "b") == 0
    # The sources are unchanged; a missing destination starts as a copy.
    assert r.execute_command("BF.CARD", "c2") == 2
    assert r.execute_command("BF.MERGE", "c4", "c2", "c3") == b"OK"
    assert r.execute_command("BF.MEXISTS", "c4", "b", "c", "d", "a") == [1, 1, 1, 0]
    assert r.execute_command("BF.CARD", "c4") == 3
    assert info_all(r, "c4")[b"Layout"] == b"counting"
    assert r.memory_usage("c4") == r.memory_usage("c2")
    # Merging a filter into itself changes nothing.
    assert r.execute_command("BF.MERGE", "c3", "c3") == b"OK"
    assert r.execute_command("BF.CARD", "c3") == 1
    assert r.execute_command("BF.DEL", "c3", "d") == 1
    assert r.execute_command("BF.EXISTS", "c3", "d") == 0


def test_merge_shape_checked_before_any_change(r):
    shape = "ERR filters must have the same layout, capacity, error rate, expansion and number of filters"
    r.execute_command("BF.RESERVE", "cnt", "0.01", "1000", "COUNTING")
    r.execute_command("BF.RESERVE", "cnt_big", "0.01", "100000", "COUNTING")
    r.execute_command("BF.RESERVE", "sbf", "0.01", "1000")
    r.execute_command("BF.RESERVE", "sbf2", "0.01", "1000")
    r.execute_command("BF.ADD", "sbf2", "x")
    r.execute_command("BF.ADD", "cnt", "y")
    c = RawClient(r.connection_pool.connection_kwargs["port"])
    try:
        assert str(c.cmd("BF.MERGE", "cnt", "cnt_big")) == shape
        assert str(c.cmd("BF.MERGE", "cnt", "sbf")) == shape
        assert str(c.cmd("BF.MERGE", "sbf", "cnt")) == shape
        # The first source matches, the second does not: nothing is merged.
        assert str(c.cmd("BF.MERGE", "sbf", "sbf2", "cnt")) == shape
        assert r.execute_command("BF.EXISTS", "sbf", "x") == 0
        assert str(c.cmd("BF.MERGE", "fresh", "sbf2", "cnt")) == shape
        assert r.exists("fresh") == 0
    finally:
        c.close()


# Made in a child process: a sanitizer build of the library cannot be loaded
# into Python (its runtime must come first) and aborts the process.
_HLL_HEADER = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
class Obj(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("any", ctypes.c_void_p)]
h = ctypes.c_void_p()
assert lib.hll_create(ctypes.byref(h), ctypes.c_size_t(0)) == 0
img = ctypes.c_void_p()
lib.bloomery_image_create.argtypes = [ctypes.POINTER(ctypes.c_void_p), Obj, ctypes.c_uint32]
assert lib.bloomery_image_create(ctypes.byref(img), Obj(4, h.value), 0) == 0
lib.bloomery_image_header.restype = ctypes.c_void_p
lib.bloomery_image_header.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
n = ctypes.c_size_t()
sys.stdout.write(ctypes.string_at(lib.bloomery_image_header(img, ctypes.byref(n)), n.value).hex())
"""


def hll_image_header():
    """The image header of an empty HLL, from libbloomery.so, or None."""
    here = os.path.dirname(os.path.abspath(BLOOMERYD))
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    for path in (os.path.join(root, "build", "libbloomery.so"), os.path.join(here, "libbloomery.so")):
        if not os.path.exists(path):
            continue
        out = subprocess.run([sys.executable, "-c", _HLL_HEADER, path], capture_output=True)
        if out.returncode == 0:
            return bytes.fromhex(out.stdout.decode())
    return None


def test_image_of_other_type_refused_at_header(r):
    header = hll_image_header()
    if header is None:
        pytest.skip("no loadable libbloomery.so")
    assert header.startswith(b"BLMRYIMG")
    c = RawClient(r.connection_pool.connection_kwargs["port"])
    try:
        assert str(c.cmd("BF.LOADCHUNK", "k", 1, header)) == "ERR received bad data"
    finally:
        c.close()
    assert r.exists("k") == 0


# ---- replay of merges and restores ----

PROBE = ["i%d" % i for i in range(400)] + ["j%d" % i for i in range(400)] + \
    ["k%d" % i for i in range(300)]


def cf_dump(c, key):
    out, it = [], 0
    while True:
        it, data = c.execute_command("CF.SCANDUMP", key, it)
        if it == 0:
            return out
        out.append((it, data))


def answer(c, *args):
    try:
        return c.execute_command(*args)
    except redis.ResponseError as e:
        return "error: %s" % e


def replay_state(c):
    out = {"keys": sorted(k.decode() for k in c.keys("*"))}
    for k in out["keys"]:
        t = c.type(k).decode()
        if t == "string":
            out[k] = (t, c.pfcount(k))
        elif t == "MBbloomCF":
            out[k] = (t, answer(c, "CF.INFO", k, "ALL"), answer(c, "CF.MEXISTS", k, *PROBE))
        else:
            out[k] = (t, answer(c, "BF.INFO", k, "ALL"), answer(c, "BF.DEBUG", k),
                      answer(c, "BF.MEXISTS", k, *PROBE))
        out[k + ":memory"] = c.memory_usage(k)
    out["used_memory"] = c.info("memory")["used_memory"]
    return out


@pytest.mark.parametrize("how", ["log", "snapshot+log"])
def test_merges_and_restores_replay(tmp_path, start_server, how):
    """Every kind of merge and dump restore, then a restart that replays
    them from the log (over a snapshot of their sources, or alone): the
    same keys, answers and memory, and no record skipped."""
    datadir = str(tmp_path / "data")
    s = start_server(datadir=datadir)
    c = s.client()
    i, j, k = PROBE[:400], PROBE[400:800], PROBE[800:]
    for key, layout in (("b1", "BLOCKED"), ("b2", "BLOCKED"), ("c1", "CLASSIC"), ("c2", "CLASSIC")):
        c.execute_command("BF.RESERVE", key, "0.01", "100", "EXPANSION", "2", "LAYOUT", layout)
    for key in ("b1", "c1"):
        c.execute_command("BF.MADD", key, *i[:250])      # three links each
    for key in ("b2", "c2"):
        c.execute_command("BF.MADD", key, *j[:250])
    for key in ("n1", "n2"):
        c.execute_command("BF.RESERVE", key, "0.01", "1000", "COUNTING")
    c.execute_command("BF.MADD", "n1", *i[:100])
    c.execute_command("BF.MADD", "n2", *i[50:150])
    c.execute_command("PFADD", "h1", *i)
    c.execute_command("PFADD", "h2", *j)
    c.execute_command("CF.RESERVE", "cf", "200", "BUCKETSIZE", "2")
    c.execute_command("CF.INSERT", "cf", "ITEMS", *i[:300])
    dumps = {key: dump(c, key) for key in ("c1", "b2", "n2")}
    dumps["cf"] = cf_dump(c, "cf")
    assert len(dumps["c1"]) > 1 and len(dumps["b2"]) > 1 and len(dumps["cf"]) > 1
    if how == "snapshot+log":
        c.execute_command("SAVE")

    # Merges: into a missing destination (a copy) and into an existing one.
    for dst, srcs in (("bm", ["b1", "b2"]), ("b1", ["b2"]), ("cm", ["c1", "c2"]), ("c2", ["c1"]),
                      ("nm", ["n1", "n2"]), ("n1", ["n2", "n1"])):
        assert c.execute_command("BF.MERGE", dst, *srcs) == b"OK"
    c.execute_command("BF.MADD", "cm", *k[:200])          # grows the copy
    c.execute_command("BF.DEL", "nm", i[60])
    assert c.execute_command("PFMERGE", "hm", "h1", "nosuch", "h2") is True
    assert c.execute_command("PFMERGE", "h1", "h2") is True
    c.execute_command("PFADD", "hm", *k)

    # Restores: both BF formats, a counting filter, a cuckoo filter; loads
    # left half way; a key restored, deleted and restored from another dump.
    load(c, "rc", dumps["c1"])
    load(c, "rb", dumps["b2"])
    load(c, "rn", dumps["n2"])
    for it, data in dumps["cf"]:
        assert c.execute_command("CF.LOADCHUNK", "rcf", it, data) == b"OK"
    load(c, "pb", dumps["b2"][:2])
    load(c, "pc", dumps["c1"][:2])
    assert c.execute_command("CF.LOADCHUNK", "pcf", *dumps["cf"][0]) == b"OK"
    c.execute_command("BF.MADD", "rb", *k)
    c.execute_command("CF.ADD", "rcf", "extra")
    load(c, "rr", dumps["c1"])
    c.delete("rr")
    load(c, "rr", dumps["b2"])
    # Keys that expired (no record: replay still sees them) and were then
    # created again by a merge or a restore.
    c.execute_command("BF.ADD", "eb", "x")
    c.execute_command("BF.ADD", "er", "x")
    c.execute_command("PFADD", "eh", *k)
    for key in ("eb", "er", "eh"):
        c.pexpire(key, 20)
    deadline = time.time() + 30
    while any(c.pttl(key) != -2 for key in ("eb", "er", "eh")):
        assert time.time() < deadline, "keys did not expire"
        time.sleep(0.01)
    assert c.execute_command("BF.MERGE", "eb", "b2", "b1") == b"OK"
    load(c, "er", dumps["c1"])
    assert c.execute_command("PFMERGE", "eh", "h2") is True

    before = replay_state(c)
    assert before["rb"][1] != before["b2"][1]
    try:
        c.execute_command("SHUTDOWN", "NOSAVE")   # the log only, no final snapshot
    except redis.ConnectionError:
        pass                                     # no reply: the connection closes
    s.proc.wait(timeout=30)
    s2 = start_server(datadir=datadir)
    c2 = s2.client()
    assert replay_state(c2) == before
    assert "skipped" not in s2.output()
    # The loads left half way finish as they would have.
    load(c2, "pb", dumps["b2"][2:])
    load(c2, "pc", dumps["c1"][2:])
    for it, data in dumps["cf"][1:]:
        assert c2.execute_command("CF.LOADCHUNK", "pcf", it, data) == b"OK"
    after = replay_state(c2)
    assert after["pb"][1:] == after["b2"][1:]
    assert after["pc"][1:] == after["c1"][1:]
    assert after["pcf"][1:] == after["cf"][1:]
    c2.close()


def link_rates(c, key):
    """Each link's error rate, as BF.DEBUG gives it."""
    lines = c.execute_command("BF.DEBUG", key)[1:]
    return [float(line.decode().rsplit("ratio:", 1)[1]) for line in lines]


def test_schedules_added_and_reserved(start_server):
    """A filter an add creates (the defaults: capacity 100, 0.01) keeps
    RedisBloom's halves, p/2, p/4, ...: it is meant to grow. One reserved
    with a capacity gives its first link most of the budget. Both keep
    their schedule through a restart that replays the log."""
    if MODULE:
        pytest.skip("a restart on the same data directory")
    # Blocked chains: under auto an add creates a growing filter.
    s = start_server("--appendonly", "yes", "--save", "", "--bf-default-layout", "blocked")
    c = s.client()
    c.execute_command("BF.RESERVE", "reserved", 0.01, 100, "LAYOUT", "BLOCKED")
    c.execute_command("BF.INSERT", "inserted", "CAPACITY", 100, "LAYOUT", "BLOCKED", "ITEMS", "x")
    for i in range(0, 1500, 100):
        items = ["i%d" % j for j in range(i, i + 100)]
        c.execute_command("BF.MADD", "added", *items)
        c.execute_command("BF.MADD", "reserved", *items)
        c.execute_command("BF.MADD", "inserted", *items)
    added = link_rates(c, "added")
    assert len(added) >= 4
    assert added[0] == pytest.approx(0.005)
    for a, b in zip(added, added[1:]):
        assert b == pytest.approx(a / 2)
    for key in ("reserved", "inserted"):
        rates = link_rates(c, key)
        assert len(rates) >= 4 and rates[0] > 0.006 and sum(rates) < 0.01, (key, rates)
    before = {k: c.execute_command("BF.DEBUG", k) for k in ("added", "reserved", "inserted")}
    s.stop()
    again = start_server("--appendonly", "yes", "--save", "", "--bf-default-layout", "blocked",
                         datadir=s.datadir)
    c = again.client()
    assert {k: c.execute_command("BF.DEBUG", k) for k in before} == before
