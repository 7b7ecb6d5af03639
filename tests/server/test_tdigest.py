"""TDIGEST.*: RedisBloom 2.6's commands, replies (RESP2 and RESP3) and
errors, the examples of its documentation, its MERGE compression rules,
through redis-py (r.tdigest() where its wire form is RedisBloom 2.6's) and a
raw RESP client; durability across kill -9 (log replay and snapshot) and
check-data on a directory holding digests."""
import math
import os
import random
import subprocess

import pytest
import redis

from conftest import BLOOMERYD, QUICK, RespError, Server, acl_categories

CLI = os.environ.get("BLOOMERY_CLI") or os.path.join(os.path.dirname(BLOOMERYD), "bloomery")
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def arity(name):
    return "ERR wrong number of arguments for '%s' command" % name


def info(c, key):
    i = c.execute_command("TDIGEST.INFO", key)
    return dict(zip([k.decode() for k in i[0::2]], i[1::2]))


def floats(reply):
    return [float(x) for x in reply]


@pytest.fixture
def c(server, r):
    """A raw RESP2 client on a flushed server, for exact replies."""
    c = server.raw()
    yield c
    c.close()


def test_redis_py_tdigest(server, r):
    """redis-py 4.3's r.tdigest() speaks RedisBloom 2.2's t-digest: what is
    unchanged in 2.6 works, the rest gets RedisBloom 2.6's answers."""
    cl = server.client()
    td = cl.tdigest()
    # 2.2's positional compression is a wrong arity in 2.6.
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        td.create("t", 100)
    assert cl.execute_command("TDIGEST.CREATE", "t", "COMPRESSION", 100) is True
    # 2.2's (value, weight) pairs are all values in 2.6.
    assert td.add("t", [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == b"OK"
    assert td.min("t") == 1.0 and td.max("t") == 6.0
    i = td.info("t")
    assert (i.compression, i.capacity, i.mergedNodes, i.unmergedNodes) == (100, 610, 0, 6)
    assert (i.mergedWeight, i.unmergedWeight, i.totalCompressions) == (0, 6, 0)
    # 2.6 answers QUANTILE and CDF with arrays, which 2.2's parser refuses.
    with pytest.raises(TypeError):
        td.quantile("t", 0.5)
    with pytest.raises(TypeError):
        td.cdf("t", 3)
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        td.merge("u", "t")
    assert td.reset("t") == b"OK"
    assert td.info("t").unmergedNodes == 0
    assert math.isnan(td.min("t")) and math.isnan(td.max("t"))
    cl.close()


def test_documented_examples(r):
    """The examples of RedisBloom's command documentation."""
    x = r.execute_command
    assert x("TDIGEST.CREATE", "t", "COMPRESSION", "1000") == b"OK"
    assert x("TDIGEST.ADD", "t", *[1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5]) == b"OK"
    assert floats(x("TDIGEST.CDF", "t", 0, 1, 2, 3, 4, 5, 6)) == pytest.approx(
        [0, 1 / 30, 2 / 15, 0.3, 8 / 15, 12.5 / 15, 1])
    assert floats(x("TDIGEST.QUANTILE", "t", *[i / 10 for i in range(11)])) == \
        [1, 2, 3, 3, 4, 4, 4, 5, 5, 5, 5]
    x("TDIGEST.CREATE", "s")
    x("TDIGEST.ADD", "s", 10, 20, 30, 40, 50, 60)
    assert x("TDIGEST.RANK", "s", 0, 10, 20, 30, 40, 50, 60, 70) == [-1, 0, 1, 2, 3, 4, 5, 6]
    assert x("TDIGEST.REVRANK", "s", 0, 10, 20, 30, 40, 50, 60, 70) == [6, 5, 4, 3, 2, 1, 0, -1]
    assert x("TDIGEST.BYRANK", "s", *range(8)) == \
        [b"10", b"20", b"30", b"40", b"50", b"60", b"inf", b"inf"]
    assert x("TDIGEST.BYREVRANK", "s", *range(8)) == \
        [b"60", b"50", b"40", b"30", b"20", b"10", b"-inf", b"-inf"]
    x("TDIGEST.CREATE", "m")
    x("TDIGEST.ADD", "m", *range(1, 11))
    assert x("TDIGEST.TRIMMED_MEAN", "m", 0.1, 0.6) == b"4"
    assert x("TDIGEST.TRIMMED_MEAN", "m", 0.3, 0.9) == b"6.5"
    assert x("TDIGEST.TRIMMED_MEAN", "m", 0, 1) == b"5.5"
    assert x("TDIGEST.MIN", "m") == b"1" and x("TDIGEST.MAX", "m") == b"10"
    # An empty digest: nan, and -2 ranks.
    x("TDIGEST.CREATE", "e")
    assert x("TDIGEST.MIN", "e") == b"nan" and x("TDIGEST.MAX", "e") == b"nan"
    assert x("TDIGEST.QUANTILE", "e", 0.5) == [b"nan"]
    assert x("TDIGEST.CDF", "e", 1) == [b"nan"]
    assert x("TDIGEST.RANK", "e", 1) == [-2] and x("TDIGEST.REVRANK", "e", 1) == [-2]
    assert x("TDIGEST.BYRANK", "e", 0) == [b"nan"]
    assert x("TDIGEST.TRIMMED_MEAN", "e", 0.1, 0.9) == b"nan"
    assert r.type("t") == b"TDIS-TYPE"
    assert sorted(r.scan(0, count=1000, _type="TDIS-TYPE")[1]) == [b"e", b"m", b"s", b"t"]


def test_resp3_shapes(server, r):
    c = server.raw()
    assert isinstance(c.cmd("HELLO", "3"), dict)
    c.cmd("TDIGEST.CREATE", "t")
    c.cmd("TDIGEST.ADD", "t", "1", "2", "3", "4")
    c.cmd("TDIGEST.CREATE", "e")
    assert c.cmd("TDIGEST.MIN", "t") == 1.0
    assert math.isnan(c.cmd("TDIGEST.MIN", "e"))
    assert c.cmd("TDIGEST.QUANTILE", "t", "0", "1") == [1.0, 4.0]
    assert c.cmd("TDIGEST.CDF", "t", "0", "9") == [0.0, 1.0]
    assert c.cmd("TDIGEST.RANK", "t", "0", "9") == [-1, 4]
    assert c.cmd("TDIGEST.BYRANK", "t", "0", "9") == [1.0, math.inf]
    assert c.cmd("TDIGEST.BYREVRANK", "t", "9") == [-math.inf]
    assert c.cmd("TDIGEST.TRIMMED_MEAN", "t", "0", "1") == 2.5
    i = c.cmd("TDIGEST.INFO", "t")
    assert isinstance(i, dict) and i["Observations"] == 4 and i["Compression"] == 100
    assert list(i) == ["Compression", "Capacity", "Merged nodes", "Unmerged nodes",
                       "Merged weight", "Unmerged weight", "Observations",
                       "Total compressions", "Memory usage"]
    c.close()
    # RESP2: the same map as a flat array.
    i = r.execute_command("TDIGEST.INFO", "t")
    assert [k.decode() for k in i[0::2]][:2] == ["Compression", "Capacity"]


def test_command_table(c):
    """RedisBloom registers CREATE/ADD/RESET/MERGE as "write deny-oom", the
    readers as "readonly fast", one key at argv[1], ACL categories as Redis
    derives them, with @tdigest."""
    for name, ar in [("tdigest.create", -2), ("tdigest.add", -3), ("tdigest.reset", 2),
                     ("tdigest.merge", -4)]:
        i = c.cmd("COMMAND", "INFO", name)[0]
        assert i[1] == ar and sorted(i[2]) == ["denyoom", "write"], name
        assert i[3:6] == [1, 1, 1] and sorted(i[6]) == acl_categories(i[2], "@tdigest"), name
    for name, ar in [("tdigest.min", 2), ("tdigest.max", 2), ("tdigest.quantile", -3),
                     ("tdigest.cdf", -3), ("tdigest.rank", -3), ("tdigest.revrank", -3),
                     ("tdigest.byrank", -3), ("tdigest.byrevrank", -3),
                     ("tdigest.trimmed_mean", 4), ("tdigest.info", 2)]:
        i = c.cmd("COMMAND", "INFO", name)[0]
        assert i[1] == ar and sorted(i[2]) == ["fast", "readonly"], name
        assert i[3:6] == [1, 1, 1] and sorted(i[6]) == acl_categories(i[2], "@tdigest"), name


ERRORS = [
    (["TDIGEST.CREATE", "t"], "ERR T-Digest: key already exists"),
    (["TDIGEST.CREATE", "t", "COMPRESSION", "x"], "ERR T-Digest: key already exists"),
    (["TDIGEST.CREATE", "bf"], WRONGTYPE),
    (["TDIGEST.CREATE"], arity("tdigest.create")),
    (["TDIGEST.CREATE", "n", "COMPRESSION"], arity("tdigest.create")),
    (["TDIGEST.CREATE", "n", "100"], arity("tdigest.create")),
    (["TDIGEST.CREATE", "n", "COMPRESSION", "100", "5"], arity("tdigest.create")),
    (["TDIGEST.CREATE", "n", "COMPRESSION", "a"], "ERR T-Digest: error parsing compression parameter"),
    (["TDIGEST.CREATE", "n", "COMPRESSION", "1.5"], "ERR T-Digest: error parsing compression parameter"),
    (["TDIGEST.CREATE", "n", "COMPRESSION", "100000000000000000000"],
     "ERR T-Digest: error parsing compression parameter"),
    (["TDIGEST.CREATE", "n", "COMPRESSION", "0"],
     "ERR T-Digest: compression parameter needs to be a positive integer"),
    (["TDIGEST.CREATE", "n", "COMPRESSION", "-1"],
     "ERR T-Digest: compression parameter needs to be a positive integer"),
    (["TDIGEST.CREATE", "n", "COMPRESSION", "1000000000"], "ERR T-Digest: allocation failed"),
    (["TDIGEST.CREATE", "n", "string", "100"], "ERR T-Digest: wrong keyword"),
    (["TDIGEST.ADD", "t"], arity("tdigest.add")),
    (["TDIGEST.ADD", "missing", "1"], "ERR T-Digest: key does not exist"),
    (["TDIGEST.ADD", "bf", "1"], WRONGTYPE),
    (["TDIGEST.ADD", "t", "a", "5"], "ERR T-Digest: error parsing val parameter"),
    (["TDIGEST.ADD", "t", "5.0", "a"], "ERR T-Digest: error parsing val parameter"),
    (["TDIGEST.ADD", "t", "1", "nan"], "ERR T-Digest: error parsing val parameter"),
    (["TDIGEST.ADD", "t", "1e999"], "ERR T-Digest: error parsing val parameter"),
    (["TDIGEST.ADD", "t", "1", "inf"], "ERR T-Digest: val parameter needs to be a finite number"),
    (["TDIGEST.ADD", "t", "+inf"], "ERR T-Digest: val parameter needs to be a finite number"),
    (["TDIGEST.ADD", "t", "-inf"], "ERR T-Digest: val parameter needs to be a finite number"),
    (["TDIGEST.RESET"], arity("tdigest.reset")),
    (["TDIGEST.RESET", "t", "100"], arity("tdigest.reset")),
    (["TDIGEST.RESET", "missing"], "ERR T-Digest: key does not exist"),
    (["TDIGEST.RESET", "bf"], WRONGTYPE),
    (["TDIGEST.MERGE", "to", "1"], arity("tdigest.merge")),
    (["TDIGEST.MERGE", "to", "a", "t"], "ERR T-Digest: error parsing numkeys"),
    (["TDIGEST.MERGE", "to", "0", "t"], "ERR T-Digest: numkeys needs to be a positive integer"),
    (["TDIGEST.MERGE", "to", "-1", "t"], "ERR T-Digest: numkeys needs to be a positive integer"),
    (["TDIGEST.MERGE", "to", "2", "t"], arity("tdigest.merge")),
    (["TDIGEST.MERGE", "to", "1", "missing"], "ERR T-Digest: key does not exist"),
    (["TDIGEST.MERGE", "to", "2", "t", "missing"], "ERR T-Digest: key does not exist"),
    (["TDIGEST.MERGE", "to", "1", "to"], "ERR T-Digest: key does not exist"),
    (["TDIGEST.MERGE", "to", "1", "bf"], WRONGTYPE),
    (["TDIGEST.MERGE", "bf", "a", "t"], WRONGTYPE),
    (["TDIGEST.MERGE", "to", "1", "t", "COMPRESSION"], arity("tdigest.merge")),
    (["TDIGEST.MERGE", "to", "1", "t", "COMPRESSION", "a"],
     "ERR T-Digest: error parsing compression parameter"),
    (["TDIGEST.MERGE", "to", "1", "t", "COMPRESSION", "0"],
     "ERR T-Digest: compression parameter needs to be a positive integer"),
    (["TDIGEST.MERGE", "to", "1", "t", "COMPRESSION", "1000000000"],
     "ERR T-Digest: allocation of destination digest failed"),
    (["TDIGEST.MERGE", "to", "1", "t", "BOGUS"], "ERR T-Digest: wrong keyword"),
    (["TDIGEST.MIN"], arity("tdigest.min")),
    (["TDIGEST.MIN", "t", "1"], arity("tdigest.min")),
    (["TDIGEST.MAX", "missing"], "ERR T-Digest: key does not exist"),
    (["TDIGEST.MAX", "bf"], WRONGTYPE),
    (["TDIGEST.QUANTILE", "t"], arity("tdigest.quantile")),
    (["TDIGEST.QUANTILE", "missing", "0.5"], "ERR T-Digest: key does not exist"),
    (["TDIGEST.QUANTILE", "t", "a"], "ERR T-Digest: error parsing quantile"),
    (["TDIGEST.QUANTILE", "t", "nan"], "ERR T-Digest: error parsing quantile"),
    (["TDIGEST.QUANTILE", "t", "0.5", "1.5"], "ERR T-Digest: quantile should be in [0,1]"),
    (["TDIGEST.QUANTILE", "t", "-0.1"], "ERR T-Digest: quantile should be in [0,1]"),
    (["TDIGEST.CDF", "t", "a"], "ERR T-Digest: error parsing cdf"),
    (["TDIGEST.CDF", "bf", "1"], WRONGTYPE),
    (["TDIGEST.RANK", "t", "a"], "ERR T-Digest: error parsing value"),
    (["TDIGEST.REVRANK", "t", "nan"], "ERR T-Digest: error parsing value"),
    (["TDIGEST.BYRANK", "t", "a"], "ERR T-Digest: error parsing rank"),
    (["TDIGEST.BYRANK", "t", "1.5"], "ERR T-Digest: error parsing rank"),
    (["TDIGEST.BYRANK", "t", "-1"], "ERR T-Digest: rank needs to be non negative"),
    (["TDIGEST.BYREVRANK", "t", "1", "-1"], "ERR T-Digest: rank needs to be non negative"),
    (["TDIGEST.TRIMMED_MEAN", "t", "0.1"], arity("tdigest.trimmed_mean")),
    (["TDIGEST.TRIMMED_MEAN", "t", "a", "0.5"], "ERR T-Digest: error parsing low_cut_percentile"),
    (["TDIGEST.TRIMMED_MEAN", "t", "0.1", "a"], "ERR T-Digest: error parsing high_cut_percentile"),
    (["TDIGEST.TRIMMED_MEAN", "t", "0.1", "1.5"],
     "ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]"),
    (["TDIGEST.TRIMMED_MEAN", "t", "-0.1", "0.5"],
     "ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]"),
    (["TDIGEST.TRIMMED_MEAN", "t", "0.5", "0.5"],
     "ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile"),
    (["TDIGEST.INFO", "missing"], "ERR T-Digest: key does not exist"),
    (["TDIGEST.INFO", "t", "x"], arity("tdigest.info")),
]


@pytest.mark.parametrize("args,msg", ERRORS, ids=[" ".join(a) for a, _ in ERRORS])
def test_errors(c, args, msg):
    c.cmd("BF.ADD", "bf", "a")
    c.cmd("TDIGEST.CREATE", "t")
    c.cmd("TDIGEST.ADD", "t", "1", "2", "3")
    before = c.cmd("TDIGEST.INFO", "t")
    reply = c.cmd(*args)
    assert isinstance(reply, RespError) and str(reply) == msg, reply
    # A refused command changes nothing.
    assert c.cmd("TDIGEST.INFO", "t") == before
    assert c.cmd("EXISTS", "n") == 0 and c.cmd("EXISTS", "to") == 0


def test_merge_compression_rules(r):
    """RedisBloom's rules: an existing destination keeps its compression
    and its values, a new one takes the largest of the sources', COMPRESSION
    names it, OVERRIDE drops the old values (and the old compression)."""
    x = r.execute_command
    x("TDIGEST.CREATE", "to-1", "COMPRESSION", 55)
    x("TDIGEST.CREATE", "from-1", "COMPRESSION", 100)
    x("TDIGEST.CREATE", "from-2", "COMPRESSION", 200)
    x("TDIGEST.ADD", "from-1", 1.0)
    x("TDIGEST.ADD", "from-2", *[1.0] * 10)
    assert x("TDIGEST.MERGE", "to-new", 2, "from-1", "from-2") == b"OK"
    i = info(r, "to-new")
    assert i["Compression"] == 200 and i["Observations"] == 11
    x("TDIGEST.MERGE", "to-1", 2, "from-1", "from-2")
    assert info(r, "to-1")["Compression"] == 55
    x("TDIGEST.MERGE", "to-50", 2, "from-1", "from-2", "COMPRESSION", 50)
    assert info(r, "to-50")["Compression"] == 50
    x("TDIGEST.MERGE", "to-50", 2, "from-1", "from-2", "compression", 500)
    i = info(r, "to-50")
    assert i["Compression"] == 500 and i["Observations"] == 22   # the old values kept
    x("TDIGEST.MERGE", "to-50", 2, "from-1", "from-2", "OVERRIDE")
    i = info(r, "to-50")
    assert i["Compression"] == 200 and i["Observations"] == 11
    x("TDIGEST.MERGE", "to-50", 1, "from-1", "OVERRIDE", "COMPRESSION", 70)
    i = info(r, "to-50")
    assert i["Compression"] == 70 and i["Observations"] == 1
    # Merging a digest into itself doubles it.
    x("TDIGEST.CREATE", "self")
    x("TDIGEST.ADD", "self", *[1.0] * 100)
    for k in range(5):
        x("TDIGEST.MERGE", "self", 1, "self")
        assert info(r, "self")["Observations"] == 100 * 2 ** (k + 1)
    # The merged value replaces the key, its expiry with it.
    r.expire("to-1", 1000)
    x("TDIGEST.MERGE", "to-1", 1, "from-1")
    assert r.ttl("to-1") == -1 and r.type("to-1") == b"TDIS-TYPE"


def test_quantiles_and_merge_accuracy(r):
    """RedisBloom's flow test: 0.01 .. 99.99 at compression 500, merged."""
    x = r.execute_command
    x("TDIGEST.CREATE", "from-1", "COMPRESSION", 500)
    vals = [i * 0.01 for i in range(1, 10000)]
    for k in range(0, len(vals), 1000):
        x("TDIGEST.ADD", "from-1", *vals[k:k + 1000])
    x("TDIGEST.MERGE", "to", 1, "from-1", "COMPRESSION", 500)
    assert float(x("TDIGEST.MAX", "to")) == float(x("TDIGEST.QUANTILE", "to", 1)[0]) == vals[-1]
    assert float(x("TDIGEST.MIN", "to")) == float(x("TDIGEST.QUANTILE", "to", 0)[0]) == vals[0]
    got = floats(x("TDIGEST.QUANTILE", "to", 0.01, 0.5, 0.95, 0.99))
    assert got == pytest.approx([1, 50, 95, 99], rel=0.01)
    cdf = floats(x("TDIGEST.CDF", "to", 1, 50, 95, 99))
    assert cdf == pytest.approx([0.01, 0.5, 0.95, 0.99], abs=0.005)
    # Ranks agree with the CDF; byrank inverts rank.
    ranks = x("TDIGEST.RANK", "to", 25, 75)
    assert ranks == pytest.approx([2500, 7500], abs=50)
    assert floats(x("TDIGEST.BYRANK", "to", 2500, 7500)) == pytest.approx([25, 75], rel=0.01)
    assert x("TDIGEST.REVRANK", "to", 25)[0] == pytest.approx(7499, abs=50)


def test_add_refused_whole(r):
    x = r.execute_command
    x("TDIGEST.CREATE", "t")
    with pytest.raises(redis.ResponseError):
        x("TDIGEST.ADD", "t", 1, 2, "inf")
    assert info(r, "t")["Observations"] == 0


def test_maxmemory_refusals(start_server):
    s = start_server()
    c = s.client()
    c.execute_command("TDIGEST.CREATE", "small")
    used = c.info("memory")["used_memory"]
    c.config_set("maxmemory", used + 1000)
    with pytest.raises(redis.ResponseError, match="^OOM command not allowed"):
        c.execute_command("TDIGEST.CREATE", "big", "COMPRESSION", 10000)
    with pytest.raises(redis.ResponseError, match="^OOM command not allowed"):
        c.execute_command("TDIGEST.MERGE", "big", 1, "small", "COMPRESSION", 10000)
    assert c.exists("big") == 0
    c.config_set("maxmemory", 0)
    # Without maxmemory the machine's memory is the limit: 34 GB of nodes
    # exceed this machine, and RedisBloom's words answer.
    try:
        reply = c.execute_command("TDIGEST.CREATE", "huge", "COMPRESSION", 357913939)
        assert reply is True or reply == b"OK"
        c.delete("huge")
    except redis.ResponseError as e:
        assert str(e) == "T-Digest: allocation failed"
    # A digest's bytes are counted while it lives and returned when it goes.
    before = c.info("memory")["used_memory"]
    c.execute_command("TDIGEST.CREATE", "big", "COMPRESSION", 10000)
    assert c.info("memory")["used_memory"] - before >= 16 * 60010
    assert c.memory_usage("big") >= 16 * 60010
    c.delete("big")
    assert c.info("memory")["used_memory"] == before
    c.close()


def snapshot_answers(c, keys):
    out = {}
    for k in keys:
        out[k] = (info(c, k),
                  c.execute_command("TDIGEST.QUANTILE", k, 0, 0.001, 0.1, 0.5, 0.9, 0.999, 1),
                  c.execute_command("TDIGEST.CDF", k, -1, 0, 1, 5, 100),
                  c.execute_command("TDIGEST.RANK", k, 0.5, 3),
                  c.execute_command("TDIGEST.TRIMMED_MEAN", k, 0.1, 0.9))
    return out


def fill(c, rnd, keys, n):
    p = c.pipeline(transaction=False)
    for i in range(n):
        k = keys[i % len(keys)]
        p.execute_command("TDIGEST.ADD", k, *[rnd.lognormvariate(0, 1.5) for _ in range(100)])
    p.execute()


@pytest.mark.parametrize("how", ["log", "snapshot"])
def test_restart_same_answers(tmp_path, how):
    """kill -9 and restart: the snapshot and the log replayed give the very
    digests (INFO's node counts included) and the same answers."""
    datadir = str(tmp_path / "data")
    s = Server("--save", "", "--appendfsync", "always", datadir=datadir)
    c = s.client()
    rnd = random.Random(12)
    keys = ["a", "b", "c"]
    c.execute_command("TDIGEST.CREATE", "a")
    c.execute_command("TDIGEST.CREATE", "b", "COMPRESSION", 20)
    c.execute_command("TDIGEST.CREATE", "c", "COMPRESSION", 500)
    fill(c, rnd, keys, 30 if QUICK else 90)
    if how == "snapshot":
        c.execute_command("SAVE")
    fill(c, rnd, keys, 30)
    c.execute_command("TDIGEST.MERGE", "m", 2, "a", "b")
    c.execute_command("TDIGEST.MERGE", "a", 2, "b", "c", "COMPRESSION", 60)
    c.execute_command("TDIGEST.MERGE", "b", 1, "c", "OVERRIDE")
    c.execute_command("TDIGEST.RESET", "c")
    c.execute_command("TDIGEST.ADD", "c", 1, 2, 3)
    fill(c, rnd, ["a", "m"], 7)
    before = snapshot_answers(c, keys + ["m"])
    s.kill()
    s2 = Server(datadir=datadir)
    c2 = s2.client()
    assert snapshot_answers(c2, keys + ["m"]) == before
    assert c2.type("m") == b"TDIS-TYPE"
    c2.execute_command("SAVE")
    c2.close()
    s2.stop()
    s.stop()
    p = subprocess.run([CLI, "check-data", datadir], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and ": ok" in p.stdout, p.stdout + p.stderr
