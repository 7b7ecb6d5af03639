"""CF.*: RedisBloom's replies and errors, no false negatives, measured FPR
against the formula for 8, 12 and 16-bit fingerprints, deletes, dumps and
durability."""

import pytest
import redis

from conftest import QUICK, Server, wait_log_durable


def info(c, key, *extra):
    i = c.execute_command("CF.INFO", key, *extra)
    return dict(zip([k.decode() for k in i[0::2]], i[1::2]))


@pytest.mark.parametrize("args,msg", [
    (["abc"], "Bad capacity"),
    (["3"], r"Capacity must be in the range \[2 \* BUCKETSIZE, 1073741824\]"),
    (["7", "BUCKETSIZE", "4"], r"Capacity must be in the range"),
    (["100", "BUCKETSIZE", "x"], "Couldn't parse BUCKETSIZE"),
    (["100", "BUCKETSIZE", "0"], r"BUCKETSIZE: value must be in the range \[1, 255\]"),
    (["100", "MAXITERATIONS", "0"], r"MAXITERATIONS: value must be in the range \[1, 65535\]"),
    (["100", "EXPANSION", "-1"], r"EXPANSION: value must be in the range \[0, 32768\]"),
    (["100", "BUCKETSIZE", "0", "MAXITERATIONS", "0"], "MAXITERATIONS: value"),
    (["100", "FINGERPRINT", "7"], r"FINGERPRINT: value must be in the range \[8, 32\]"),
    (["100", "FINGERPRINT", "33"], r"FINGERPRINT: value must be in the range \[8, 32\]"),
    (["100", "BUCKETSIZE"], "wrong number of arguments"),
])
def test_reserve_errors(r, args, msg):
    with pytest.raises(redis.ResponseError, match=msg):
        r.execute_command("CF.RESERVE", "cf", *args)
    assert not r.exists("cf")


def test_replies(r):
    assert r.execute_command("CF.RESERVE", "cf", "1000") == b"OK"
    with pytest.raises(redis.ResponseError, match="item exists"):
        r.execute_command("CF.RESERVE", "cf", "1000")
    assert r.type("cf") == b"MBbloomCF"
    assert r.execute_command("CF.ADD", "cf", "a") == 1
    assert r.execute_command("CF.ADD", "cf", "a") == 1       # duplicates are stored
    assert r.execute_command("CF.ADDNX", "cf", "a") == 0
    assert r.execute_command("CF.ADDNX", "cf", "b") == 1
    assert r.execute_command("CF.COUNT", "cf", "a") == 2
    assert r.execute_command("CF.INSERT", "cf", "ITEMS", "c", "d") == [1, 1]
    assert r.execute_command("CF.INSERTNX", "cf", "ITEMS", "c", "e") == [0, 1]
    assert r.execute_command("CF.EXISTS", "cf", "a") == 1
    assert r.execute_command("CF.MEXISTS", "cf", "a", "nope") == [1, 0]
    assert r.execute_command("CF.EXISTS", "missing", "a") == 0
    assert r.execute_command("CF.COUNT", "missing", "a") == 0
    i = info(r, "cf")
    assert list(i) == ["Size", "Number of buckets", "Number of filters",
                       "Number of items inserted", "Number of items deleted", "Bucket size",
                       "Expansion rate", "Max iterations"]
    # RedisBloom's values for capacity 1000: 512 buckets of 2 one-byte slots.
    assert i["Number of buckets"] == 512 and i["Bucket size"] == 2
    assert i["Number of items inserted"] == 6 and i["Size"] == 40 + 16 + 1024
    assert i["Expansion rate"] == 1 and i["Max iterations"] == 20
    assert info(r, "cf", "ALL")["Fingerprint bits"] == 8
    with pytest.raises(redis.ResponseError, match="not found"):
        r.execute_command("CF.INFO", "missing")
    with pytest.raises(redis.ResponseError, match="not found"):
        r.execute_command("CF.INSERT", "missing", "NOCREATE", "ITEMS", "a")
    with pytest.raises(redis.ResponseError, match="Unknown argument"):
        r.execute_command("CF.INSERT", "cf", "BOGUS", "ITEMS", "a")
    r.execute_command("PFADD", "hll", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.execute_command("CF.ADD", "hll", "x")
    # Auto-creation with RedisBloom's defaults.
    assert r.execute_command("CF.ADD", "auto", "x") == 1
    assert info(r, "auto")["Number of buckets"] == 512


def test_delete_semantics(r):
    r.execute_command("CF.RESERVE", "cf", "1000")
    with pytest.raises(redis.ResponseError, match="Not found"):
        r.execute_command("CF.DEL", "missing", "a")
    r.execute_command("CF.ADD", "cf", "a")
    r.execute_command("CF.ADD", "cf", "a")
    assert r.execute_command("CF.DEL", "cf", "a") == 1
    assert r.execute_command("CF.EXISTS", "cf", "a") == 1     # one copy left
    assert r.execute_command("CF.DEL", "cf", "a") == 1
    assert r.execute_command("CF.EXISTS", "cf", "a") == 0
    assert r.execute_command("CF.DEL", "cf", "a") == 0
    i = info(r, "cf")
    assert i["Number of items inserted"] == 0 and i["Number of items deleted"] == 2


def test_full_and_max_expansions(r):
    r.execute_command("CF.RESERVE", "fixed", "4", "BUCKETSIZE", "1", "EXPANSION", "0")
    res = [r.execute_command("CF.INSERT", "fixed", "ITEMS", "x%d" % i)[0] for i in range(40)]
    assert -1 in res
    with pytest.raises(redis.ResponseError, match="^Filter is full$"):
        for i in range(40):
            r.execute_command("CF.ADD", "fixed", "y%d" % i)
    r.config_set("cf-max-expansions", 2)
    try:
        r.execute_command("CF.RESERVE", "grow", "4", "BUCKETSIZE", "1")
        with pytest.raises(redis.ResponseError, match="^Maximum expansions reached$"):
            for i in range(100):
                r.execute_command("CF.ADD", "grow", "z%d" % i)
        assert info(r, "grow")["Number of filters"] == 2
        # Checked once per command: a multi-item insert at the limit fails whole.
        with pytest.raises(redis.ResponseError, match="^Maximum expansions reached$"):
            r.execute_command("CF.INSERT", "grow", "ITEMS", "q")
    finally:
        r.config_set("cf-max-expansions", 32)


def test_no_false_negatives_and_fpr(r):
    """FPR of one sub-filter at load a with b slots per bucket and f-bit
    fingerprints: 1 - (1 - 1/(2^f - 1))^(2ba)."""
    n = 20000 if QUICK else 60000
    probes = 100000 if QUICK else 400000
    for f in (8, 12, 16):
        key = "fp%d" % f
        r.execute_command("CF.RESERVE", key, n * 2, "BUCKETSIZE", "4", "MAXITERATIONS", "500",
                          "FINGERPRINT", f)
        items = ["in:%d" % i for i in range(n)]
        for base in range(0, n, 2000):
            r.execute_command("CF.INSERT", key, "ITEMS", *items[base:base + 2000])
        for base in range(0, n, 5000):
            assert all(r.execute_command("CF.MEXISTS", key, *items[base:base + 5000]))
        i = info(r, key, "ALL")
        assert i["Number of filters"] == 1
        slots = i["Number of buckets"] * 4
        a = n / slots
        expect = 1 - (1 - 1 / (2 ** f - 1)) ** (2 * 4 * a)
        fp = 0
        for base in range(0, probes, 5000):
            fp += sum(r.execute_command("CF.MEXISTS", key,
                                        *["out:%d" % j for j in range(base, base + 5000)]))
        # Within 4 sigma of the binomial, plus one count for tiny rates.
        sigma = (probes * expect * (1 - expect)) ** 0.5
        assert abs(fp - probes * expect) <= 4 * sigma + 1, (f, fp, probes * expect)
        assert i["Bytes"] == slots * f // 8


def test_scandump_loadchunk(r):
    r.execute_command("CF.RESERVE", "src", "5000", "FINGERPRINT", "12", "BUCKETSIZE", "4")
    items = ["i%d" % i for i in range(3000)]
    r.execute_command("CF.INSERT", "src", "ITEMS", *items)
    chunks, it = [], 0
    while True:
        it, data = r.execute_command("CF.SCANDUMP", "src", it)
        if it == 0:
            assert data is None
            break
        chunks.append((it, data))
    for it, data in chunks:
        assert r.execute_command("CF.LOADCHUNK", "dst", it, data) == b"OK"
    assert info(r, "dst", "ALL") == info(r, "src", "ALL")
    assert all(r.execute_command("CF.MEXISTS", "dst", *items))
    with pytest.raises(redis.ResponseError, match="^Invalid position$"):
        r.execute_command("CF.LOADCHUNK", "x", "abc", "data")
    with pytest.raises(redis.ResponseError, match="^Invalid header$"):
        r.execute_command("CF.LOADCHUNK", "x", 1, "garbage")
    with pytest.raises(redis.ResponseError, match="^Couldn't load chunk!$"):
        r.execute_command("CF.LOADCHUNK", "dst", 2, chunks[1][1])
    # An empty filter dumps as the end, as in RedisBloom.
    r.execute_command("CF.RESERVE", "empty", "100")
    assert r.execute_command("CF.SCANDUMP", "empty", 0) == [0, None]


@pytest.mark.parametrize("how", ["log", "snapshot"])
def test_restart(tmp_path, how):
    datadir = str(tmp_path / "data")
    s = Server(datadir=datadir)
    c = s.client()
    c.execute_command("CF.RESERVE", "cf", "64", "BUCKETSIZE", "2", "FINGERPRINT", "16")
    items = ["i%d" % i for i in range(500)]       # grows several sub-filters
    c.execute_command("CF.INSERT", "cf", "ITEMS", *items[:300])
    if how == "snapshot":
        c.execute_command("SAVE")
    for it in items[300:]:
        c.execute_command("CF.ADD", "cf", it)
    for it in items[:120]:
        c.execute_command("CF.DEL", "cf", it)        # compacts on the way
    c.execute_command("CF.ADDNX", "cf", "i499")
    before = info(c, "cf", "ALL")
    probe = items + ["x%d" % i for i in range(3000)]
    answers = c.execute_command("CF.MEXISTS", "cf", *probe)
    wait_log_durable(c)
    s.kill()
    s2 = Server(datadir=datadir)
    c2 = s2.client()
    assert info(c2, "cf", "ALL") == before
    assert c2.execute_command("CF.MEXISTS", "cf", *probe) == answers
    c2.close()
    s2.stop()
    s.stop()
