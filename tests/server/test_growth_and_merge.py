"""Filters that were not made by BF.RESERVE/BF.ADD: chains rebuilt by
BF.LOADCHUNK and BF.MERGE copies grow under maxmemory and count their bytes
like any other; counting filters merge; a dump header of a type that is not
a Bloom filter is refused at the header."""
import os
import subprocess
import sys

import pytest

from conftest import BLOOMERYD, RawClient, RespError

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
