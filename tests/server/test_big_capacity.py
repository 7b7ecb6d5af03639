"""No capacity cap but memory (issue 14).

BF.RESERVE, BF.INSERT, CF.RESERVE, CF.INSERT and windowed filters accept any
capacity whose filter fits the memory limit (maxmemory, else the machine's
memory), checked before anything is allocated; a filter that does not fit
answers RedisBloom's failed allocation, "ERR Insufficient memory to create
filter" (Redis's OOM error under maxmemory).

The big filters here are reserved, never filled: their arrays are mapped
lazily, so the server's resident memory must stay small (checked). The
servers run without a save schedule (no snapshot on shutdown) and every
test deletes its keys. The 1e10-item filter (13.7 GiB) needs a machine of
20 GiB.
"""
import ctypes
import ctypes.util
import shutil
import struct

import pytest

from conftest import MODULE, RespError

NOMEM = "ERR Insufficient memory to create filter"
BIG = 10 ** 10
GIB = 1 << 30


def machine_memory():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


needs_memory = pytest.mark.skipif(machine_memory() < 20 * GIB,
                                  reason="a 1e10-item filter needs a 20 GiB machine")


def rss(s):
    with open("/proc/%d/status" % s.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def err(s, *args):
    """The error args answer, its text exactly as sent."""
    raw = s.raw()
    try:
        reply = raw.cmd(*args)
    finally:
        raw.close()
    assert isinstance(reply, RespError), (args, reply)
    return str(reply)


def info(c, *args):
    r = c.execute_command(*args)
    return dict(zip([k.decode() for k in r[0::2]], r[1::2]))


@pytest.fixture
def big(start_server):
    """A server of its own (no save schedule); its keys are deleted and its
    directory removed when the test ends."""
    s = start_server("--save", "")
    c = s.client()
    yield s, c
    c.flushall()
    assert rss(s) < GIB, "the big filters were touched: %d bytes resident" % rss(s)
    c.close()
    s.stop()
    shutil.rmtree(s.dir, ignore_errors=True)


class XXH128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


def xxh3_128():
    name = ctypes.util.find_library("xxhash") or "libxxhash.so.0"
    lib = ctypes.CDLL(name)
    f = lib.XXH3_128bits_withSeed
    f.restype = XXH128
    f.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
    return lambda item, seed=0: f(item, len(item), seed)


ODD = (0x8e3c1b95, 0x6b4f2a37, 0xd1a2b3c5, 0x3f9e8d7b,
       0xa5c3e1f9, 0x5e7d9cb1, 0xc4b2a09d, 0x27f1e3d5)


def placement(h, nblocks):
    """The blocked layout's block (b = 1) and the bit of each of its lanes."""
    block = (h.low64 * nblocks) >> 64
    seed = h.high64 & 0xffffffff
    return block, [((seed * o) & 0xffffffff) >> 26 for o in ODD]


@needs_memory
def test_reserve_1e10_info_and_bits_past_2_32(big):
    s, c = big
    assert c.execute_command("BF.RESERVE", "bf", "0.01", BIG, "LAYOUT", "BLOCKED") == b"OK"
    i = info(c, "BF.INFO", "bf")
    assert i["Capacity"] == BIG
    assert i["Number of filters"] == 1
    assert i["Number of items inserted"] == 0
    assert i["Expansion rate"] == 2
    assert c.execute_command("BF.INFO", "bf", "CAPACITY") == [BIG]
    # A scaling filter's first link is built at half the rate: blocked,
    # one block per key, about 11.7 bits per item.
    debug = [x.decode() for x in c.execute_command("BF.DEBUG", "bf")]
    link = dict(kv.split(":", 1) for kv in debug[1].split())
    nbytes = int(link["bytes"])
    assert nbytes % 64 == 0 and 10.0 < nbytes * 8 / BIG < 12.5
    assert nbytes > 1 << 33
    assert int(link["capacity"]) == BIG
    assert nbytes < i["Size"] < nbytes + 4096
    if not MODULE:
        full = info(c, "BF.INFO", "bf", "ALL")
        assert full["Bytes"] == nbytes
    nblocks = nbytes // 64

    # Items whose block lies past bit 2^32, half of them past byte 2^32
    # (of 2.3e8 blocks, 96% lie past bit 2^32, 70% past byte 2^32).
    h = xxh3_128()
    far, farther = [], []
    for n in range(2000):
        item = b"far:%d" % n
        block, bits = placement(h(item), nblocks)
        if block * 64 >= 1 << 32:
            if len(farther) < 16:
                farther.append((item, block, bits))
        elif block * 512 >= 1 << 32 and len(far) < 16:
            far.append((item, block, bits))
    items = far + farther
    assert len(items) == 32
    names = [x[0] for x in items]
    assert c.execute_command("BF.MEXISTS", "bf", *names) == [0] * 32
    assert c.execute_command("BF.MADD", "bf", *names) == [1] * 32
    assert c.execute_command("BF.MEXISTS", "bf", *names) == [1] * 32
    assert c.execute_command("BF.ADD", "bf", names[0]) == 0
    assert c.execute_command("BF.CARD", "bf") == 32
    assert c.execute_command("BF.MEXISTS", "bf", *[b"absent:%d" % n for n in range(100)]) \
        == [0] * 100

    # The bits are where the layout puts them: read the chunk holding each
    # item's block through BF.SCANDUMP (iterator 1 + chunk index).
    it, header = c.execute_command("BF.SCANDUMP", "bf", 0)
    assert it == 1 and header[:8] == b"BLMRYIMG"
    chunk = struct.unpack_from("<I", header, 12)[0]
    for item, block, bits in (far[0], far[-1], farther[0], farther[-1]):
        off = block * 64
        nxt, data = c.execute_command("BF.SCANDUMP", "bf", 1 + off // chunk)
        assert nxt == 2 + off // chunk and len(data) == chunk + 8
        lanes = struct.unpack_from("<8Q", data, off % chunk)
        for lane, bit in zip(lanes, bits):
            assert lane >> bit & 1, (item, block)
    assert rss(s) < GIB
    assert c.delete("bf") == 1


@needs_memory
def test_prefix_1e10_bins_past_2_32(big):
    """LAYOUT PREFIX: bins of 64 bytes, the bin from the hash's low word
    as a block is; items whose bins lie past byte 2^32 and 2^33."""
    s, c = big
    assert c.execute_command("BF.RESERVE", "pf", "0.01", BIG, "LAYOUT", "PREFIX") == b"OK"
    debug = [x.decode() for x in c.execute_command("BF.DEBUG", "pf")]
    link = dict(kv.split(":", 1) for kv in debug[1].split())
    nbins = int(link["bins"])
    # The first link at half the rate, under RedisBloom's 11.03 bits per item.
    assert 9.0 < int(link["bytes"]) * 8 / BIG < 11.03
    assert nbins * 64 > 1 << 33 and int(link["capacity"]) == BIG
    h = xxh3_128()
    far, farther = [], []
    for n in range(2000):
        item = b"pfar:%d" % n
        off = ((h(item).low64 * nbins) >> 64) * 64
        if off >= 1 << 33 and len(farther) < 16:
            farther.append(item)
        elif (1 << 32) <= off < 1 << 33 and len(far) < 16:
            far.append(item)
    names = far + farther
    assert len(names) == 32
    assert c.execute_command("BF.MEXISTS", "pf", *names) == [0] * 32
    assert c.execute_command("BF.MADD", "pf", *names) == [1] * 32
    assert c.execute_command("BF.MEXISTS", "pf", *names) == [1] * 32
    assert c.execute_command("BF.ADD", "pf", names[0]) == 0
    assert c.execute_command("BF.CARD", "pf") == 32
    assert c.execute_command("BF.MEXISTS", "pf", *[b"absent:%d" % n for n in range(100)]) \
        == [0] * 100
    assert rss(s) < GIB
    assert c.delete("pf") == 1


@needs_memory
def test_insert_and_windows_past_2_30(big):
    s, c = big
    r = c.execute_command("BF.INSERT", "ins", "CAPACITY", 6 * 10 ** 9, "ITEMS", "a", "b")
    assert r == [1, 1]
    assert c.execute_command("BF.INFO", "ins", "CAPACITY") == [6 * 10 ** 9]
    assert c.execute_command("BF.MEXISTS", "ins", "a", "b", "c") == [1, 1, 0]
    cap = (1 << 31) + 4
    assert c.execute_command("BF.RESERVE", "w", "0.01", cap, "WINDOW", 3600) == b"OK"
    i = info(c, "BF.INFO", "w", "ALL")
    assert i["Capacity"] == cap
    assert i["Slice capacity"] == cap // 4
    assert i["Number of filters"] == 5
    assert i["Size"] > 4 * GIB
    assert c.execute_command("BF.MADD", "w", "x", "y") == [1, 1]
    assert c.execute_command("BF.MEXISTS", "w", "x", "y", "z") == [1, 1, 0]
    assert c.execute_command("BF.RESERVE", "n", "0.01", cap, "NONSCALING") == b"OK"
    assert c.execute_command("BF.INFO", "n", "CAPACITY") == [cap]
    assert c.delete("ins", "w", "n") == 3


def test_cuckoo_past_2_30(big):
    s, c = big
    cap = 1 << 31
    assert c.execute_command("CF.RESERVE", "cf", cap) == b"OK"
    i = info(c, "CF.INFO", "cf")
    assert i["Number of buckets"] == cap // 2
    assert cap < i["Size"] < cap + 4096
    assert c.execute_command("CF.ADD", "cf", "a") == 1
    assert c.execute_command("CF.EXISTS", "cf", "a") == 1
    assert c.execute_command("CF.EXISTS", "cf", "b") == 0
    r = c.execute_command("CF.INSERT", "cf2", "CAPACITY", cap + 2, "ITEMS", "a")
    assert r == [1]
    assert info(c, "CF.INFO", "cf2")["Number of buckets"] == cap
    assert c.delete("cf", "cf2") == 2


def test_too_big_is_refused_before_allocating(big):
    s, c = big
    used = c.info("memory")["used_memory"]
    for args in (("BF.RESERVE", "k", "0.01", 10 ** 13),
                 ("BF.RESERVE", "k", "0.01", 10 ** 13, "NONSCALING"),
                 ("BF.RESERVE", "k", "0.01", 10 ** 13, "LAYOUT", "CLASSIC"),
                 ("BF.RESERVE", "k", "0.01", 10 ** 13, "COUNTING"),
                 ("BF.RESERVE", "k", "0.01", 2 ** 63 - 1),
                 ("BF.RESERVE", "k", "0.000001", 2 ** 62),
                 # sizes beyond 64 bits
                 ("BF.RESERVE", "k", "0.01", 2 ** 62, "LAYOUT", "CLASSIC"),
                 ("BF.RESERVE", "k", "0.01", 2 ** 62, "COUNTING"),
                 ("BF.INSERT", "k", "CAPACITY", 10 ** 13, "ITEMS", "a"),
                 ("BF.RESERVE", "k", "0.01", 10 ** 13, "WINDOW", 60),
                 ("BF.RESERVE", "k", "0.01", 2 ** 63 - 1, "WINDOW", 60),
                 ("CF.RESERVE", "k", 10 ** 13),
                 ("CF.RESERVE", "k", 2 ** 63 - 1),
                 ("CF.INSERT", "k", "CAPACITY", 10 ** 13, "ITEMS", "a")):
        assert err(s, *args) == NOMEM, args
        assert c.exists("k") == 0
    # Nothing was allocated (Redis's count also holds its own buffers).
    grown = c.info("memory")["used_memory"] - used
    assert grown == 0 if not MODULE else grown < 1 << 20
    # Below 1 (or 2 x BUCKETSIZE) is still RedisBloom's range error (BF.INSERT: its
    # refusal of any argument out of range).
    assert err(s, "BF.RESERVE", "k", "0.01", 0) == \
        "ERR capacity must be in the range [1, 1073741824]"
    assert err(s, "BF.INSERT", "k", "CAPACITY", 0, "ITEMS", "a") == "Bad argument received"
    assert err(s, "CF.RESERVE", "k", 3) == \
        "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"
    assert err(s, "BF.RESERVE", "k", "0.01", 2 ** 63) == "ERR bad capacity"


def test_maxmemory_refuses_what_the_machine_would_take(start_server):
    s = start_server("--save", "", "--maxmemory", "100mb")
    c = s.client()
    oom = "OOM command not allowed when used memory > 'maxmemory'."
    assert err(s, "BF.RESERVE", "k", "0.01", 1 << 31) == oom
    assert err(s, "CF.RESERVE", "k", 1 << 31) == oom
    assert err(s, "BF.RESERVE", "k", "0.01", 1 << 31, "WINDOW", 60) == oom
    assert err(s, "BF.RESERVE", "k", "0.01", 2 ** 63 - 1) == oom
    assert c.dbsize() == 0
    c.close()
    s.stop()
    shutil.rmtree(s.dir, ignore_errors=True)


def test_reload_leaves_untouched_pages_unallocated(start_server):
    """A big filter, nearly empty, goes through a snapshot and back (a
    restart; in Redis, DEBUG RELOAD through the RDB): its items answer, and
    the pages no item touched stay unallocated, as they were."""
    s = start_server("--save", "")
    dirs = [s.dir]
    try:
        c = s.client()
        cap = 2 * 10 ** 9
        assert c.execute_command("BF.RESERVE", "r", "0.01", cap, "NONSCALING") == b"OK"
        size = c.execute_command("BF.INFO", "r", "SIZE")[0]
        assert size > 2 * GIB
        items = [b"r:%d" % n for n in range(50)]
        assert c.execute_command("BF.MADD", "r", *items) == [1] * 50
        if MODULE:
            assert c.execute_command("DEBUG", "RELOAD") in (True, b"OK")
        else:
            assert c.execute_command("SAVE") in (True, b"OK")
            c.close()
            s.stop()
            s = start_server("--save", "", datadir=s.datadir)
            dirs.append(s.dir)
            c = s.client()
        assert c.execute_command("BF.INFO", "r", "CAPACITY") == [cap]
        assert c.execute_command("BF.MEXISTS", "r", *items) == [1] * 50
        assert c.execute_command("BF.CARD", "r") == 50
        if not MODULE:
            assert "Loaded snapshot" in s.output()
        assert rss(s) < size // 4, "loading touched the whole array: %d bytes" % rss(s)
        assert c.delete("r") == 1
        c.close()
    finally:
        s.stop()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
