"""BF.* replies and error strings as RedisBloom gives them, plus our
extensions (LAYOUT, TTL, COUNTING + BF.DEL, BF.MERGE, BF.INFO ALL)."""
import pytest

from conftest import RawClient, RespError


def err(r, *args):
    """The exact error text (redis-py strips the "ERR " prefix)."""
    c = RawClient(r.connection_pool.connection_kwargs["port"])
    try:
        reply = c.cmd(*args)
    finally:
        c.close()
    assert isinstance(reply, RespError), reply
    return str(reply)


def raw_err(raw, *args):
    reply = raw.cmd(*args)
    assert isinstance(reply, RespError), reply
    return str(reply)


def test_add_exists_basic(r):
    assert r.execute_command("BF.ADD", "k", "a") == 1
    assert r.execute_command("BF.ADD", "k", "a") == 0
    assert r.execute_command("BF.EXISTS", "k", "a") == 1
    assert r.execute_command("BF.EXISTS", "k", "b") == 0
    assert r.execute_command("BF.MADD", "k", "a", "b", "c") == [0, 1, 1]
    assert r.execute_command("BF.MEXISTS", "k", "a", "b", "zzz") == [1, 1, 0]
    assert r.execute_command("BF.CARD", "k") == 3
    assert r.type("k") == b"MBbloom--"


def test_missing_and_wrongtype_exists_answer_zero(r):
    assert r.execute_command("BF.EXISTS", "nokey", "a") == 0
    assert r.execute_command("BF.MEXISTS", "nokey", "a", "b") == [0, 0]
    r.execute_command("PFADD", "hll", "x")
    assert r.execute_command("BF.EXISTS", "hll", "a") == 0
    assert r.execute_command("BF.MEXISTS", "hll", "a") == [0]
    assert r.execute_command("BF.CARD", "nokey") == 0


def test_wrongtype_errors(r):
    r.execute_command("PFADD", "hll", "x")
    wt = "WRONGTYPE Operation against a key holding the wrong kind of value"
    for args in [("BF.ADD", "hll", "a"), ("BF.MADD", "hll", "a"), ("BF.INFO", "hll"),
                 ("BF.CARD", "hll"), ("BF.INSERT", "hll", "ITEMS", "a"),
                 ("BF.RESERVE", "hll", "0.01", "100"), ("BF.SCANDUMP", "hll", "0"),
                 ("BF.LOADCHUNK", "hll", "1", "x")]:
        assert err(r, *args) == wt, args
    r.execute_command("BF.ADD", "bf", "a")
    assert err(r, "PFADD", "bf", "a") == wt
    assert err(r, "PFCOUNT", "bf") == wt


@pytest.mark.parametrize("args,message", [
    (["1", "100"], "ERR error rate must be in the range (0.000000, 1.000000)"),
    (["0", "100"], "ERR error rate must be in the range (0.000000, 1.000000)"),
    (["inf", "100"], "ERR error rate must be in the range (0.000000, 1.000000)"),
    (["abc", "100"], "ERR bad error rate"),
    (["nan", "100"], "ERR bad error rate"),
    (["1e-400", "100"], "ERR bad error rate"),
    (["0.01", "0"], "ERR capacity must be in the range [1, 1073741824]"),
    (["0.01", "-5"], "ERR capacity must be in the range [1, 1073741824]"),
    (["0.01", "007"], "ERR bad capacity"),
    (["0.01", "+5"], "ERR bad capacity"),
    (["0.01", "x"], "ERR bad capacity"),
    (["0.01", "100", "EXPANSION"], "ERR no expansion"),
    (["0.01", "100", "EXPANSION", "x"], "ERR bad expansion"),
    (["0.01", "100", "EXPANSION", "-1"], "ERR expansion must be in the range [0, 32768]"),
    (["0.01", "100", "EXPANSION", "32769"], "ERR expansion must be in the range [0, 32768]"),
    (["0.01", "100", "NONSCALING", "EXPANSION", "2"], "Nonscaling filters cannot expand"),
    (["0.01", "100", "EXPANSION", "2", "NONSCALING"], "Nonscaling filters cannot expand"),
    (["0.01", "100", "LAYOUT", "fancy"], "ERR LAYOUT must be BLOCKED, CLASSIC, PREFIX or GROWING"),
    (["0.01", "100", "TTL", "0"], "ERR TTL must be a positive number of seconds"),
])
def test_reserve_errors(raw, args, message):
    assert raw_err(raw, "BF.RESERVE", "bf", *args) == message
    assert raw.cmd("EXISTS", "bf") == 0


def test_reserve_arity_and_exists(r):
    assert err(r, "BF.RESERVE", "bf", "0.01") == \
        "ERR wrong number of arguments for 'bf.reserve' command"
    assert err(r, "BF.RESERVE", "bf", "0.01", "2", "EXPANSION", "2", "EXPANSION", "3") == \
        "ERR wrong number of arguments for 'bf.reserve' command"
    assert r.execute_command("BF.RESERVE", "bf", "0.01", "100") == b"OK"
    assert err(r, "BF.RESERVE", "bf", "0.01", "100") == "ERR item exists"
    # Unknown extra tokens are ignored, as RedisBloom does.
    assert r.execute_command("BF.RESERVE", "bogus", "0.01", "2", "BOGUS") == b"OK"
    assert r.execute_command("BF.RESERVE", "zero", "0.01", "2", "EXPANSION", "0") == b"OK"
    assert r.execute_command("BF.INFO", "zero", "EXPANSION") == [None]


def test_info_worked_examples(r):
    r.execute_command("BF.ADD", "c", "x")
    r.execute_command("BF.RESERVE", "cl", "0.01", "100", "LAYOUT", "CLASSIC")
    assert r.execute_command("BF.INFO", "cl") == [
        b"Capacity", 100, b"Size", 240, b"Number of filters", 1,
        b"Number of items inserted", 0, b"Expansion rate", 2]
    assert r.execute_command("BF.INSERT", "ns", "CAPACITY", "3", "NONSCALING", "LAYOUT",
                             "CLASSIC", "ITEMS", "a", "b", "c") == [1, 1, 1]
    assert r.execute_command("BF.INFO", "ns") == [
        b"Capacity", 3, b"Size", 104, b"Number of filters", 1,
        b"Number of items inserted", 3, b"Expansion rate", None]
    for field, value in [("CAPACITY", 3), ("SIZE", 104), ("FILTERS", 1), ("ITEMS", 3),
                         ("EXPANSION", None), ("capacity", 3)]:
        assert r.execute_command("BF.INFO", "ns", field) == [value]
    assert err(r, "BF.INFO", "ns", "FOO") == "Invalid information value"
    assert err(r, "BF.INFO", "nokey") == "ERR not found"
    assert err(r, "BF.INFO") == "ERR wrong number of arguments for 'bf.info' command"


def test_info_all_extension(r):
    r.execute_command("BF.RESERVE", "x", "0.01", "1000", "TTL", "100")
    r.execute_command("BF.MADD", "x", *["i%d" % i for i in range(100)])
    info = r.execute_command("BF.INFO", "x", "ALL")
    d = dict(zip(info[::2], info[1::2]))
    assert info[:10:2] == [b"Capacity", b"Size", b"Number of filters",
                           b"Number of items inserted", b"Expansion rate"]
    assert d[b"Layout"] == b"prefix"  # bf-default-layout auto, a named capacity
    assert d[b"Bytes"] + 32 + 64 == d[b"Size"]
    assert 0 < float(d[b"Estimated FPR"]) < 0.01
    assert 95 <= d[b"TTL"] <= 100
    assert 95 <= r.ttl("x") <= 100


def test_nonscaling_full_truncates(r):
    assert r.execute_command("BF.INSERT", "f", "CAPACITY", "3", "NONSCALING",
                             "ITEMS", "a", "b", "c") == [1, 1, 1]
    c = RawClient(r.connection_pool.connection_kwargs["port"])
    reply = c.cmd("BF.INSERT", "f", "ITEMS", "a", "b", "c", "d", "d")
    c.close()
    assert reply[:3] == [0, 0, 0]
    assert len(reply) == 4
    assert isinstance(reply[3], RespError)
    assert str(reply[3]) == "ERR non scaling filter is full"
    assert err(r, "BF.ADD", "f", "zzz") == "ERR non scaling filter is full"
    assert r.execute_command("BF.ADD", "f", "a") == 0
    assert r.execute_command("BF.CARD", "f") == 3


def test_madd_stops_at_full(raw):
    raw.cmd("BF.RESERVE", "m", "0.01", "2", "NONSCALING")
    reply = raw.cmd("BF.MADD", "m", "a", "b", "c", "d")
    assert reply[:2] == [1, 1]
    assert len(reply) == 3 and str(reply[2]) == "ERR non scaling filter is full"


def test_scaling_grows(r):
    r.execute_command("BF.RESERVE", "g", "0.01", "100", "EXPANSION", "2")
    r.execute_command("BF.MADD", "g", *["item%d" % i for i in range(350)])
    info = r.execute_command("BF.INFO", "g")
    assert info[5] == 3           # filters: 100 + 200 + 400
    assert info[1] == 700
    assert r.execute_command("BF.MEXISTS", "g", *["item%d" % i for i in range(350)]) == [1] * 350


@pytest.mark.parametrize("args,message", [
    (["CAPACITY", "x", "ITEMS", "a"], "Bad capacity"),
    (["CAPACITY", "0", "ITEMS", "a"], "Bad argument received"),
    (["ERROR", "x", "ITEMS", "a"], "Bad error rate"),
    (["ERROR", "2", "ITEMS", "a"], "Bad argument received"),
    (["EXPANSION", "x", "ITEMS", "a"], "Bad expansion"),
    (["FOO", "ITEMS", "a"], "Unknown argument received"),
    (["NOCREATE", "ITEMS", "a"], "ERR not found"),
    (["CAPACITY"], "ERR wrong number of arguments for 'bf.insert' command"),
    (["CAPACITY", "10", "ITEMS"], "ERR wrong number of arguments for 'bf.insert' command"),
    (["CAPACITY", "10"], "ERR wrong number of arguments for 'bf.insert' command"),
])
def test_insert_errors(raw, args, message):
    assert raw_err(raw, "BF.INSERT", "ins", *args) == message


def test_insert_quirks(r):
    # Options by first letters; creation options ignored for an existing key.
    assert r.execute_command("BF.INSERT", "q", "cap", "10", "err", "0.001", "exp", "4",
                             "i", "a", "b") == [1, 1]
    assert r.execute_command("BF.INFO", "q", "CAPACITY") == [10]
    assert r.execute_command("BF.INFO", "q", "EXPANSION") == [4]
    assert r.execute_command("BF.INSERT", "q", "CAPACITY", "99", "ITEMS", "c") == [1]
    assert r.execute_command("BF.INFO", "q", "CAPACITY") == [10]
    # NONSCALING with EXPANSION is accepted by BF.INSERT.
    assert r.execute_command("BF.INSERT", "q2", "EXPANSION", "3", "NONSCALING", "ITEMS",
                             "a") == [1]
    assert r.execute_command("BF.INFO", "q2", "EXPANSION") == [None]
    assert r.execute_command("BF.INSERT", "q", "NOCREATE", "ITEMS", "zz") == [1]
    # TTL on creation.
    assert r.execute_command("BF.INSERT", "q3", "TTL", "50", "ITEMS", "a") == [1]
    assert 45 <= r.ttl("q3") <= 50


def test_arity_errors(r):
    assert err(r, "BF.CARD", "k", "x") == "ERR wrong number of arguments for 'bf.card' command"
    for cmd in ["BF.ADD", "BF.EXISTS", "BF.MADD", "BF.MEXISTS", "BF.SCANDUMP", "BF.LOADCHUNK"]:
        assert err(r, cmd, "k") == "ERR wrong number of arguments for '%s' command" % cmd.lower()
    assert err(r, "BF.ADD", "k", "a", "b") == "ERR wrong number of arguments for 'bf.add' command"
    assert err(r, "BF.EXISTS", "k", "a", "b") == \
        "ERR wrong number of arguments for 'bf.exists' command"


def test_scandump_loadchunk_roundtrip_blocked(r):
    r.execute_command("BF.RESERVE", "src", "0.001", "50000")
    items = ["s%d" % i for i in range(3000)]
    r.execute_command("BF.MADD", "src", *items)
    chunks = []
    it = 0
    while True:
        it, data = r.execute_command("BF.SCANDUMP", "src", it)
        if it == 0:
            assert data == b""
            break
        chunks.append((it, data))
    assert chunks[0][0] == 1
    # Nothing answers before the last chunk arrives, then everything does.
    for i, (it, data) in enumerate(chunks):
        assert r.execute_command("BF.LOADCHUNK", "dst", it, data) == b"OK"
    assert r.execute_command("BF.MEXISTS", "dst", *items) == [1] * len(items)
    assert r.execute_command("BF.INFO", "dst") == r.execute_command("BF.INFO", "src")
    probes = ["p%d" % i for i in range(2000)]
    assert r.execute_command("BF.MEXISTS", "dst", *probes) == \
        r.execute_command("BF.MEXISTS", "src", *probes)


def test_scandump_errors(r):
    assert err(r, "BF.SCANDUMP", "nokey", "0") == "ERR not found"
    r.execute_command("BF.ADD", "k", "a")
    assert err(r, "BF.SCANDUMP", "k", "x") == "Second argument must be numeric"
    assert err(r, "BF.LOADCHUNK", "k2", "x", "data") == "ERR Second argument must be numeric"
    assert err(r, "BF.LOADCHUNK", "k2", "5", "data") == "ERR not found"
    assert err(r, "BF.LOADCHUNK", "k2", "1", "garbage") == "ERR received bad data"
    assert r.exists("k2") == 0
    # A corrupted chunk of a blocked dump is refused.
    hdr = r.execute_command("BF.SCANDUMP", "k", 0)
    it, data = r.execute_command("BF.SCANDUMP", "k", hdr[0])
    assert r.execute_command("BF.LOADCHUNK", "k3", 1, hdr[1]) == b"OK"
    bad = bytes([data[0] ^ 1]) + data[1:]
    assert err(r, "BF.LOADCHUNK", "k3", it, bad).startswith("ERR received bad data")
    assert r.execute_command("BF.EXISTS", "k3", "a") == 0
    assert r.execute_command("BF.LOADCHUNK", "k3", it, data) == b"OK"
    assert r.execute_command("BF.EXISTS", "k3", "a") == 1


def test_classic_roundtrip_scaling(r):
    r.execute_command("BF.RESERVE", "c", "0.01", "50", "LAYOUT", "CLASSIC")
    items = ["c%d" % i for i in range(400)]
    r.execute_command("BF.MADD", "c", *items)
    it = 0
    while True:
        it, data = r.execute_command("BF.SCANDUMP", "c", it)
        if it == 0:
            break
        assert r.execute_command("BF.LOADCHUNK", "c2", it, data) == b"OK"
    assert r.execute_command("BF.INFO", "c2") == r.execute_command("BF.INFO", "c")
    assert r.execute_command("BF.MEXISTS", "c2", *items) == [1] * 400


def test_counting_and_del(r):
    assert r.execute_command("BF.RESERVE", "cnt", "0.01", "1000", "COUNTING") == b"OK"
    assert r.execute_command("BF.ADD", "cnt", "a") == 1
    assert r.execute_command("BF.ADD", "cnt", "b") == 1
    assert r.execute_command("BF.EXISTS", "cnt", "a") == 1
    assert r.execute_command("BF.DEL", "cnt", "a") == 1
    assert r.execute_command("BF.EXISTS", "cnt", "a") == 0
    assert r.execute_command("BF.EXISTS", "cnt", "b") == 1
    assert r.execute_command("BF.DEL", "cnt", "zzz") == 0
    info = r.execute_command("BF.INFO", "cnt", "ALL")
    assert info[9] is None and info[11] == b"counting"
    r.execute_command("BF.ADD", "plain", "a")
    assert err(r, "BF.DEL", "plain", "a").startswith("ERR BF.DEL needs a counting filter")
    assert err(r, "BF.DEL", "nokey", "a") == "ERR not found"
    assert err(r, "BF.RESERVE", "cx", "0.01", "10", "COUNTING", "LAYOUT", "CLASSIC") == \
        "ERR COUNTING filters use the blocked layout"
    # Counting filters do not scale.
    r.execute_command("BF.RESERVE", "small", "0.01", "2", "COUNTING")
    assert r.execute_command("BF.MADD", "small", "a", "b")[:2] == [1, 1]
    assert err(r, "BF.ADD", "small", "c") == "ERR non scaling filter is full"
    # Dump and load keep the counters.
    it = 0
    while True:
        it, data = r.execute_command("BF.SCANDUMP", "cnt", it)
        if it == 0:
            break
        r.execute_command("BF.LOADCHUNK", "cnt2", it, data)
    assert r.execute_command("BF.DEL", "cnt2", "b") == 1
    assert r.execute_command("BF.EXISTS", "cnt2", "b") == 0


def test_merge(r):
    r.execute_command("BF.RESERVE", "m1", "0.01", "1000")
    r.execute_command("BF.RESERVE", "m2", "0.01", "1000")
    r.execute_command("BF.MADD", "m1", *["a%d" % i for i in range(100)])
    r.execute_command("BF.MADD", "m2", *["b%d" % i for i in range(100)])
    assert r.execute_command("BF.MERGE", "m1", "m2") == b"OK"
    assert r.execute_command("BF.MEXISTS", "m1", *["b%d" % i for i in range(100)]) == [1] * 100
    assert r.execute_command("BF.MERGE", "new", "m2") == b"OK"
    assert r.execute_command("BF.MEXISTS", "new", *["b%d" % i for i in range(100)]) == [1] * 100
    r.execute_command("BF.RESERVE", "other", "0.01", "5000")
    assert err(r, "BF.MERGE", "m1", "other").startswith("ERR filters must have the same")
    assert err(r, "BF.MERGE", "m1", "nokey") == "ERR not found"
    r.execute_command("PFADD", "h", "a")
    assert err(r, "BF.MERGE", "m1", "h").startswith("WRONGTYPE")


def test_reserve_ttl_expires(r):
    r.execute_command("BF.RESERVE", "t", "0.01", "100", "TTL", "1")
    assert r.execute_command("BF.EXISTS", "t", "x") == 0
    assert r.pttl("t") > 0
    r.pexpire("t", 1)
    import time
    time.sleep(0.05)
    assert r.exists("t") == 0
    assert r.execute_command("BF.EXISTS", "t", "x") == 0


def test_default_config_used_for_autocreate(r):
    try:
        r.config_set("bf-initial-size", 500)
        r.config_set("bf-error-rate", 0.001)
        r.config_set("bf-default-layout", "classic")
        r.execute_command("BF.ADD", "auto", "a")
        assert r.execute_command("BF.INFO", "auto", "CAPACITY") == [500]
        assert r.execute_command("BF.INFO", "auto", "ALL")[11] == b"classic"
    finally:
        r.config_set("bf-initial-size", 100)
        r.config_set("bf-error-rate", 0.01)
        r.config_set("bf-default-layout", "auto")
