"""PFADD / PFCOUNT / PFMERGE with Redis's replies and counts (vectors
recorded from Redis 7.0.15, tests/vectors/redis-hll.json)."""
import json
import os

import pytest

from conftest import QUICK, RawClient, RespError

with open(os.path.join(os.path.dirname(__file__), "..", "vectors", "redis-hll.json")) as f:
    HLL = json.load(f)


def counts():
    out = []
    for case in HLL["cases"]:
        if "elements" not in case or "pfcount" not in case:
            continue
        lo, hi = case["elements"].replace("e:", "").split("..")
        n = int(hi) + 1
        if QUICK and n > 100000:
            continue
        out.append((n, case["pfcount"]))
    return out


@pytest.mark.parametrize("n,expected", counts())
def test_pfcount_matches_redis(r, n, expected):
    p = r.pipeline(transaction=False)
    for base in range(0, n, 1000):
        p.execute_command("PFADD", "h", *["e:%d" % i for i in range(base, min(n, base + 1000))])
    p.execute()
    assert r.execute_command("PFCOUNT", "h") == expected


def test_pfadd_replies(r):
    assert r.execute_command("PFADD", "h") == 1          # created
    assert r.execute_command("PFADD", "h") == 0
    assert r.execute_command("PFADD", "h", "a") == 1
    assert r.execute_command("PFADD", "h", "a") == 0
    assert r.execute_command("PFCOUNT", "h") == 1
    assert r.execute_command("PFCOUNT", "missing") == 0
    assert r.type("h") == b"string"


def test_union_and_merge(r):
    r.execute_command("PFADD", "a", *["x%d" % i for i in range(100)])
    r.execute_command("PFADD", "b", *["x%d" % i for i in range(50, 150)])
    union = r.execute_command("PFCOUNT", "a", "b", "missing")
    assert 145 <= union <= 155
    assert r.execute_command("PFMERGE", "dst", "a", "b") is True
    assert r.execute_command("PFCOUNT", "dst") == union
    assert r.execute_command("PFMERGE", "dst") is True
    assert r.execute_command("PFMERGE", "empty") is True
    assert r.execute_command("PFCOUNT", "empty") == 0


def test_union_vector(r):
    u = HLL["union"]
    r.execute_command("PFADD", "h1", *["a%d" % i for i in range(0, 500)])
    r.execute_command("PFADD", "h2", *["a%d" % i for i in range(250, 5000)])
    assert r.execute_command("PFCOUNT", "h1", "h2") == u["pfcount_h1_h2"]
    r.execute_command("PFMERGE", "h3", "h1", "h2")
    assert r.execute_command("PFCOUNT", "h3") == u["pfcount_after_pfmerge_h3"]


def test_hll_errors(r):
    port = r.connection_pool.connection_kwargs["port"]
    c = RawClient(port)
    c.cmd("BF.ADD", "bf", "a")
    wt = "WRONGTYPE Operation against a key holding the wrong kind of value"
    assert str(c.cmd("PFADD", "bf", "x")) == wt
    assert str(c.cmd("PFCOUNT", "bf")) == wt
    assert str(c.cmd("PFCOUNT", "bf", "other")) == wt
    assert str(c.cmd("PFMERGE", "bf", "x")) == wt
    assert str(c.cmd("PFMERGE", "x", "bf")) == wt
    assert isinstance(c.cmd("PFADD"), RespError)
    assert str(c.cmd("PFCOUNT")) == "ERR wrong number of arguments for 'pfcount' command"
    c.close()


def test_sparse_limit_read_at_every_update(r):
    """hll-sparse-max-bytes applies to existing values at their next update,
    and 0 promotes to dense on any growth, as in Redis."""
    dense = 12304
    try:
        r.execute_command("PFADD", "old", "a")
        assert r.memory_usage("old") < 1000          # sparse
        r.config_set("hll-sparse-max-bytes", 0)
        r.execute_command("PFADD", "new", "a")
        assert r.memory_usage("new") > dense          # promoted at once
        r.execute_command("PFADD", "old", "a")          # no register changes
        assert r.memory_usage("old") < 1000
        r.execute_command("PFADD", "old", "b")
        assert r.memory_usage("old") > dense
        # A larger limit keeps new values sparse again.
        r.config_set("hll-sparse-max-bytes", 3000)
        r.execute_command("PFADD", "third", *["e%d" % i for i in range(100)])
        assert r.memory_usage("third") < 1000
        r.execute_command("PFADD", "src", "z")
        r.config_set("hll-sparse-max-bytes", 0)
        r.execute_command("PFMERGE", "third", "missing")   # nothing changes
        assert r.memory_usage("third") < 1000
        r.execute_command("PFMERGE", "third", "src")
        assert r.memory_usage("third") > dense
        assert r.execute_command("PFCOUNT", "third") == 101
    finally:
        r.config_set("hll-sparse-max-bytes", 3000)
