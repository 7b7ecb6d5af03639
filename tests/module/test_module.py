"""bloomery.so inside Debian's redis-server: it loads and reports itself,
answers every BF.*, CF.*, CMS.*, TOPK.* and TDIGEST.* command byte for byte
as bloomeryd does (RESP2 and RESP3), answers WRONGTYPE for Redis's own
types, keeps its values bit for bit through DEBUG RELOAD, a restart on
dump.rdb, an AOF rewrite and replication."""
import os
import time

import pytest
import redis

from conftest import RawClient

# Every BF.* and CF.* command, their errors included. "h" holds another
# type (an HLL on both hosts), "nokey" is missing.
SCRIPT = [
    ("PFADD", "h", "x"),
    ("BF.RESERVE", "b1", "0.01", "1000"),
    ("BF.RESERVE", "b1", "0.01", "1000"),
    ("BF.RESERVE", "h", "0.01", "1000"),
    ("BF.RESERVE", "bad", "2", "100"),
    ("BF.RESERVE", "bad", "x", "100"),
    ("BF.RESERVE", "bad", "0.01", "0"),
    ("BF.RESERVE", "bad"),
    ("BF.RESERVE", "cl", "0.01", "100", "LAYOUT", "CLASSIC"),
    ("BF.RESERVE", "ns", "0.001", "4", "NONSCALING"),
    ("BF.RESERVE", "cnt", "0.01", "100", "COUNTING"),
    ("BF.RESERVE", "win", "0.01", "100", "WINDOW", "3600", "SLICES", "4"),
    ("BF.RESERVE", "win2", "0.01", "100", "WINDOW", "3600", "SLICES", "0"),
    ("BF.ADD", "b1", "a"),
    ("BF.ADD", "b1", "a"),
    ("BF.ADD", "auto", "a"),
    ("BF.ADD", "h", "a"),
    ("BF.ADD", "b1"),
    ("BF.MADD", "b1", "a", "b", "c"),
    ("BF.MADD", "ns", "1", "2", "3", "4", "5", "6"),
    ("BF.MADD", "cl", "a", "b"),
    ("BF.MADD", "cnt", "a", "a", "b"),
    ("BF.MADD", "win", "a", "b", "a"),
    ("BF.EXISTS", "b1", "a"),
    ("BF.EXISTS", "b1", "zz"),
    ("BF.EXISTS", "nokey", "a"),
    ("BF.EXISTS", "h", "a"),
    ("BF.EXISTS", "win", "b"),
    ("BF.MEXISTS", "b1", "a", "b", "zz"),
    ("BF.MEXISTS", "nokey", "a"),
    ("BF.MEXISTS", "cnt", "a", "zz"),
    ("BF.INSERT", "b3", "CAPACITY", "100", "ERROR", "0.01", "ITEMS", "x", "y"),
    ("BF.INSERT", "b4", "NOCREATE", "ITEMS", "x"),
    ("BF.INSERT", "b5", "ITEMS"),
    ("BF.INSERT", "b6", "CAPACITY", "x", "ITEMS", "a"),
    ("BF.INSERT", "b7", "EXPANSION", "4", "ITEMS", "a", "b"),
    ("BF.INFO", "b1"),
    ("BF.INFO", "b1", "CAPACITY"),
    ("BF.INFO", "b1", "ITEMS"),
    ("BF.INFO", "b1", "BOGUS"),
    ("BF.INFO", "nokey"),
    ("BF.INFO", "h"),
    ("BF.INFO", "cl"),
    ("BF.INFO", "ns"),
    ("BF.INFO", "cnt"),
    ("BF.INFO", "b7"),
    ("BF.CARD", "b1"),
    ("BF.CARD", "nokey"),
    ("BF.CARD", "h"),
    ("BF.DEBUG", "b1"),
    ("BF.DEBUG", "nokey"),
    ("BF.DEL", "cnt", "a"),
    ("BF.DEL", "cnt", "zz"),
    ("BF.DEL", "b1", "a"),
    ("BF.DEL", "nokey", "a"),
    ("BF.DEL", "cnt"),
    ("BF.MEXISTS", "cnt", "a", "b"),
    ("BF.RESERVE", "m1", "0.01", "1000"),
    ("BF.ADD", "m1", "q"),
    ("BF.MERGE", "m1", "b1"),
    ("BF.MERGE", "mnew", "b1"),
    ("BF.MEXISTS", "mnew", "a", "b", "c", "q"),
    ("BF.MERGE", "m1", "cl"),
    ("BF.MERGE", "m1", "nokey"),
    ("BF.MERGE", "m1", "h"),
    ("BF.MERGE", "m1"),
    ("BF.SCANDUMP", "nokey", "0"),
    ("BF.SCANDUMP", "b1", "x"),
    ("BF.LOADCHUNK", "b1", "1", "garbage"),
    ("BF.LOADCHUNK", "fresh", "2", "garbage"),
    ("CF.RESERVE", "c", "1000"),
    ("CF.RESERVE", "c", "1000"),
    ("CF.RESERVE", "cbad", "0"),
    ("CF.RESERVE", "cbad", "100", "BUCKETSIZE", "300"),
    ("CF.RESERVE", "h", "100"),
    ("CF.ADD", "c", "a"),
    ("CF.ADD", "c", "a"),
    ("CF.ADD", "cauto", "a"),
    ("CF.ADD", "h", "a"),
    ("CF.ADDNX", "c", "a"),
    ("CF.ADDNX", "c", "b"),
    ("CF.INSERT", "c", "ITEMS", "c", "d"),
    ("CF.INSERT", "c", "BOGUS", "ITEMS", "a"),
    ("CF.INSERT", "cnew", "CAPACITY", "100", "ITEMS", "a"),
    ("CF.INSERT", "cnone", "NOCREATE", "ITEMS", "a"),
    ("CF.INSERTNX", "c", "ITEMS", "a", "e"),
    ("CF.EXISTS", "c", "a"),
    ("CF.EXISTS", "c", "zz"),
    ("CF.EXISTS", "nokey", "a"),
    ("CF.EXISTS", "h", "a"),
    ("CF.MEXISTS", "c", "a", "zz", "e"),
    ("CF.COUNT", "c", "a"),
    ("CF.COUNT", "nokey", "a"),
    ("CF.DEL", "c", "a"),
    ("CF.DEL", "c", "zz"),
    ("CF.DEL", "nokey", "a"),
    ("CF.INFO", "c"),
    ("CF.INFO", "nokey"),
    ("CF.INFO", "h"),
    ("CF.SCANDUMP", "nokey", "0"),
    ("CF.LOADCHUNK", "c", "1", "garbage"),
    ("CF.ADD",),
]

# Every CMS.*, TOPK.* and TDIGEST.* command, their errors included; "b"
# holds a Bloom filter, "nokey" is missing. The top-k's decay draws from
# its generator, so equal replies need equal seeds on both hosts.
SKETCH_SCRIPT = [
    ("BF.ADD", "b", "x"),
    ("CMS.INITBYDIM", "cm", "20", "5"),
    ("CMS.INITBYDIM", "cm", "20", "5"),
    ("CMS.INITBYDIM", "bad", "0", "5"),
    ("CMS.INITBYDIM", "b", "20", "5"),
    ("CMS.INITBYPROB", "cp", "0.001", "0.01"),
    ("CMS.INITBYPROB", "bad", "2", "0.01"),
    ("CMS.INCRBY", "cm", "a", "3", "b", "4", "a", "1"),
    ("CMS.INCRBY", "cm", "a", "x"),
    ("CMS.INCRBY", "cm", "a", "4294967295"),
    ("CMS.INCRBY", "nokey", "a", "1"),
    ("CMS.INCRBY", "b", "a", "1"),
    ("CMS.QUERY", "cm", "a", "b", "zz"),
    ("CMS.QUERY", "nokey", "a"),
    ("CMS.INFO", "cm"),
    ("CMS.INFO", "cp"),
    ("CMS.INFO", "b"),
    ("CMS.INITBYDIM", "cm2", "20", "5"),
    ("CMS.INCRBY", "cm2", "a", "7"),
    ("CMS.MERGE", "cm2", "2", "cm", "cm2", "WEIGHTS", "2", "3"),
    ("CMS.MERGE", "cm2", "1", "cp"),
    ("CMS.MERGE", "cm2", "1", "nokey"),
    ("CMS.QUERY", "cm2", "a", "b"),
    ("CMS.INFO",),
    ("TOPK.RESERVE", "tk", "3", "8", "4", "0.9"),
    ("TOPK.RESERVE", "tk", "3"),
    ("TOPK.RESERVE", "tbad", "0"),
    ("TOPK.RESERVE", "tbad", "3", "8", "4", "2"),
    ("TOPK.RESERVE", "tdef", "5"),
    ("TOPK.ADD", "tk", *("i%d" % (i % 17) for i in range(200))),
    ("TOPK.ADD", "tk", "a", "b", "a", "c", "a"),
    ("TOPK.ADD", "nokey", "a"),
    ("TOPK.ADD", "b", "a"),
    ("TOPK.INCRBY", "tk", "a", "5", "zz", "100"),
    ("TOPK.INCRBY", "tk", "a", "-1"),
    ("TOPK.QUERY", "tk", "a", "zz", "i3", "nope"),
    ("TOPK.COUNT", "tk", "a", "zz", "i3"),
    ("TOPK.LIST", "tk"),
    ("TOPK.LIST", "tk", "WITHCOUNT"),
    ("TOPK.LIST", "nokey"),
    ("TOPK.INFO", "tk"),
    ("TOPK.INFO", "tdef"),
    ("TOPK.INFO", "b"),
    ("TDIGEST.CREATE", "td"),
    ("TDIGEST.CREATE", "td"),
    ("TDIGEST.CREATE", "td2", "COMPRESSION", "50"),
    ("TDIGEST.CREATE", "tdb", "COMPRESSION", "0"),
    ("TDIGEST.ADD", "td", *(str(i * 0.5) for i in range(300))),
    ("TDIGEST.ADD", "td", "x"),
    ("TDIGEST.ADD", "nokey", "1"),
    ("TDIGEST.ADD", "td2", "1", "2", "3", "4", "5"),
    ("TDIGEST.MIN", "td"),
    ("TDIGEST.MAX", "td"),
    ("TDIGEST.MIN", "tdb"),
    ("TDIGEST.QUANTILE", "td", "0", "0.1", "0.5", "0.99", "1"),
    ("TDIGEST.QUANTILE", "td", "2"),
    ("TDIGEST.CDF", "td", "-1", "10", "149.5", "1000"),
    ("TDIGEST.RANK", "td", "10", "-5", "500"),
    ("TDIGEST.REVRANK", "td", "10", "-5", "500"),
    ("TDIGEST.BYRANK", "td", "0", "10", "299", "1000"),
    ("TDIGEST.BYREVRANK", "td", "0", "10", "299", "1000"),
    ("TDIGEST.TRIMMED_MEAN", "td", "0.1", "0.9"),
    ("TDIGEST.TRIMMED_MEAN", "td", "0.9", "0.1"),
    ("TDIGEST.INFO", "td"),
    ("TDIGEST.INFO", "b"),
    ("TDIGEST.MERGE", "tdm", "2", "td", "td2"),
    ("TDIGEST.MERGE", "tdm", "2", "td", "td2", "COMPRESSION", "200", "OVERRIDE"),
    ("TDIGEST.MERGE", "tdm", "2", "td", "nokey"),
    ("TDIGEST.MERGE", "tdm", "1", "b"),
    ("TDIGEST.INFO", "tdm"),
    ("TDIGEST.QUANTILE", "tdm", "0.5"),
    ("TDIGEST.RESET", "td2"),
    ("TDIGEST.RESET", "nokey"),
    ("TDIGEST.INFO", "td2"),
    ("TDIGEST.MIN",),
    # An item longer than the module's stack copy for a simple string.
    ("TOPK.RESERVE", "tl", "1"),
    ("TOPK.ADD", "tl", "L" * 300),
    ("TOPK.LIST", "tl"),
    ("TOPK.LIST", "tl", "WITHCOUNT"),
    ("TYPE", "cm"),
    ("TYPE", "tk"),
    ("TYPE", "td"),
]


def run_script(raw, script):
    return [(cmd, raw.cmd(*cmd)) for cmd in script]


def dump_and_load(raw, family, src, dst):
    """SCANDUMP src chunk by chunk, LOADCHUNK each into dst: the replies."""
    out = []
    it = 0
    while True:
        reply = raw.cmd(family + ".SCANDUMP", src, it)
        out.append(reply)
        # *2 :<iter> $<n> <data>: the iterator and the chunk.
        head, rest = reply.split(b"\r\n", 1)
        assert head == b"*2", reply
        it_line, rest = rest.split(b"\r\n", 1)
        it = int(it_line[1:])
        if it == 0:
            return out
        n_line, rest = rest.split(b"\r\n", 1)
        data = rest[:int(n_line[1:])]
        out.append(raw.cmd(family + ".LOADCHUNK", dst, it, data))


def sketches_on(host, proto):
    raw = host.raw()
    assert raw.cmd("FLUSHALL") == b"+OK\r\n"
    if proto == 3:
        assert raw.cmd("HELLO", "3").startswith(b"%")
    replies = run_script(raw, SKETCH_SCRIPT)
    raw.close()
    return replies


@pytest.mark.parametrize("proto", [2, 3])
def test_sketch_replies_byte_identical_to_bloomeryd(module_server, bloomeryd, proto):
    mod, ours = sketches_on(module_server, proto), sketches_on(bloomeryd, proto)
    assert len(mod) == len(ours)
    # TYPE is the host's: the module type's name in Redis.
    types = {(cmd, got) for cmd, got in mod if cmd[0] == "TYPE"}
    assert types == {(("TYPE", "cm"), b"+bloomerCM\r\n"), (("TYPE", "tk"), b"+bloomerTK\r\n"),
                     (("TYPE", "td"), b"+bloomerTD\r\n")}
    for (cmd, got), (_, want) in zip(mod, ours):
        if cmd[0] != "TYPE":
            assert got == want, cmd


def both_hosts(module_server, bloomeryd, proto):
    """The same script on both hosts, each from an empty keyspace."""
    results = []
    for host in (module_server, bloomeryd):
        raw = host.raw()
        assert raw.cmd("FLUSHALL") == b"+OK\r\n"
        if proto == 3:
            assert raw.cmd("HELLO", "3").startswith(b"%")
        replies = run_script(raw, SCRIPT)
        replies.append((("dump", "b1"), dump_and_load(raw, "BF", "b1", "b1copy")))
        replies.append((("dump", "cl"), dump_and_load(raw, "BF", "cl", "clcopy")))
        replies.append((("dump", "c"), dump_and_load(raw, "CF", "c", "ccopy")))
        replies += run_script(raw, [("BF.MEXISTS", "b1copy", "a", "b", "c", "zz"),
                                    ("BF.INFO", "clcopy"), ("CF.MEXISTS", "ccopy", "a", "b", "e"),
                                    ("CF.INFO", "ccopy")])
        raw.close()
        results.append(replies)
    return results


@pytest.mark.parametrize("proto", [2, 3])
def test_replies_byte_identical_to_bloomeryd(module_server, bloomeryd, proto):
    mod, ours = both_hosts(module_server, bloomeryd, proto)
    assert len(mod) == len(ours)
    for (cmd, got), (_, want) in zip(mod, ours):
        assert got == want, cmd


def test_resp3_types_reach_the_client(module_server):
    raw = module_server.raw()
    raw.cmd("FLUSHALL")
    raw.cmd("HELLO", "3")
    raw.cmd("BF.ADD", "k", "a")
    assert raw.cmd("BF.INFO", "k").startswith(b"%5\r\n")
    assert raw.cmd("BF.MEXISTS", "k", "a", "b") == b"*2\r\n#t\r\n#f\r\n"
    raw.cmd("HELLO", "2")
    assert raw.cmd("BF.MEXISTS", "k", "a", "b") == b"*2\r\n:1\r\n:0\r\n"
    raw.close()


def test_module_list_and_info(m):
    mods = m.execute_command("MODULE", "LIST")
    names = [dict(zip(e[::2], e[1::2]))[b"name"] for e in mods]
    assert names == [b"bloomery"]
    assert "bloomery" in str(m.info("modules"))


# Every row of value_commands.h: name, Redis flags (RedisBloom's, from
# src/module/declare.c; test_acl.py checks key specs), last key.
COMMANDS = {
    "bf.reserve": ({"write", "denyoom"}, 1), "bf.add": ({"write", "denyoom"}, 1),
    "bf.madd": ({"write", "denyoom"}, 1), "bf.exists": ({"readonly", "fast"}, 1),
    "bf.mexists": ({"readonly", "fast"}, 1), "bf.insert": ({"write", "denyoom"}, 1),
    "bf.info": ({"readonly", "fast"}, 1), "bf.card": ({"readonly", "fast"}, 1),
    "bf.scandump": ({"readonly", "fast"}, 1), "bf.loadchunk": ({"write", "denyoom"}, 1),
    "bf.debug": ({"readonly", "fast"}, 1), "bf.del": ({"write", "fast"}, 1),
    "bf.merge": ({"write", "denyoom"}, -1), "bf.config": ({"write"}, 1),
    "cf.reserve": ({"write", "denyoom"}, 1),
    "cf.add": ({"write", "denyoom"}, 1), "cf.addnx": ({"write", "denyoom"}, 1),
    "cf.insert": ({"write", "denyoom"}, 1), "cf.insertnx": ({"write", "denyoom"}, 1),
    "cf.exists": ({"readonly", "fast"}, 1), "cf.mexists": ({"readonly", "fast"}, 1),
    "cf.del": ({"write", "fast"}, 1), "cf.count": ({"readonly", "fast"}, 1),
    "cf.info": ({"readonly", "fast"}, 1), "cf.scandump": ({"readonly", "fast"}, 1),
    "cf.debug": ({"readonly", "fast"}, 1),
    "cf.loadchunk": ({"write", "denyoom"}, 1),
    "cms.initbydim": ({"write", "denyoom"}, 1), "cms.initbyprob": ({"write", "denyoom"}, 1),
    "cms.incrby": ({"write", "denyoom"}, 1), "cms.query": ({"readonly"}, 1),
    "cms.merge": ({"write", "denyoom", "movablekeys"}, 1), "cms.info": ({"readonly"}, 1),
    "topk.reserve": ({"write", "denyoom"}, 1), "topk.add": ({"write", "denyoom"}, 1),
    "topk.incrby": ({"write", "denyoom"}, 1), "topk.query": ({"readonly"}, 1),
    "topk.count": ({"readonly"}, 1), "topk.list": ({"readonly"}, 1),
    "topk.info": ({"readonly"}, 1),
    "tdigest.create": ({"write", "denyoom"}, 1), "tdigest.add": ({"write", "denyoom"}, 1),
    "tdigest.reset": ({"write", "denyoom"}, 1),
    "tdigest.merge": ({"write", "denyoom", "movablekeys"}, 1),
    "tdigest.min": ({"readonly"}, 1), "tdigest.max": ({"readonly"}, 1),
    "tdigest.quantile": ({"readonly"}, 1), "tdigest.cdf": ({"readonly"}, 1),
    "tdigest.rank": ({"readonly"}, 1), "tdigest.revrank": ({"readonly"}, 1),
    "tdigest.byrank": ({"readonly"}, 1), "tdigest.byrevrank": ({"readonly"}, 1),
    "tdigest.trimmed_mean": ({"readonly"}, 1), "tdigest.info": ({"readonly"}, 1),
    "bloomery.loadchunk": ({"write", "denyoom"}, 1),
}


def test_every_value_command_registered(m):
    info = m.execute_command("COMMAND", "INFO", *COMMANDS)
    assert sorted(info) == sorted(COMMANDS)
    for name, (flags, last) in COMMANDS.items():
        assert set(info[name]["flags"]) == flags | {"module"}, name
        assert (info[name]["first_key_pos"], info[name]["last_key_pos"]) == (1, last), name


@pytest.mark.parametrize("make", [
    ("SET", "k", "v"), ("RPUSH", "k", "v"), ("HSET", "k", "f", "v"), ("SADD", "k", "v"),
    ("ZADD", "k", "1", "v"), ("XADD", "k", "*", "f", "v")])
def test_redis_types_answer_as_another_type_does(module_server, bloomeryd, make):
    """A key of any Redis type gets the reply bloomeryd gives for a key of
    another type (an HLL there)."""
    cmds = [("BF.ADD", "k", "a"), ("BF.EXISTS", "k", "a"), ("BF.MADD", "k", "a"),
            ("BF.MEXISTS", "k", "a"), ("BF.INFO", "k"), ("BF.CARD", "k"),
            ("BF.RESERVE", "k", "0.01", "10"), ("BF.INSERT", "k", "ITEMS", "a"),
            ("BF.SCANDUMP", "k", "0"), ("BF.DEL", "k", "a"), ("BF.MERGE", "d", "k"),
            ("CF.ADD", "k", "a"), ("CF.EXISTS", "k", "a"), ("CF.COUNT", "k", "a"),
            ("CF.DEL", "k", "a"), ("CF.INFO", "k"), ("CF.RESERVE", "k", "10"),
            ("CF.SCANDUMP", "k", "0")]
    mod, ours = module_server.raw(), bloomeryd.raw()
    mod.cmd("FLUSHALL")
    ours.cmd("FLUSHALL")
    mod.cmd(*make)
    ours.cmd("PFADD", "k", "x")
    for cmd in cmds:
        assert mod.cmd(*cmd) == ours.cmd(*cmd), cmd
    assert mod.cmd("TYPE", "k") != b"+none\r\n"  # untouched
    mod.close()
    ours.close()


def test_arguments_and_configs_are_settings(start_module):
    """Module arguments (ours and RedisBloom's names), configs given at
    start and CONFIG SET all reach the handlers; a bad value is refused
    with bloomeryd's reason."""
    s = start_module("args", "--bloomery.bf-expansion-factor", "4",
                     module_args=("bf-initial-size", "1234", "ERROR_RATE", "0.001"))
    c = s.client()
    c.execute_command("BF.ADD", "k", "a")
    info = c.execute_command("BF.INFO", "k")
    assert dict(zip(info[::2], info[1::2]))[b"Capacity"] == 1234
    assert dict(zip(info[::2], info[1::2]))[b"Expansion rate"] == 4
    assert c.config_get("bloomery.bf-error-rate") == {"bloomery.bf-error-rate": "0.001"}
    c.config_set("bloomery.bf-initial-size", 77)
    c.execute_command("BF.ADD", "k2", "a")
    assert c.execute_command("BF.INFO", "k2", "CAPACITY") == [77]
    with pytest.raises(redis.ResponseError, match="between 1 and"):
        c.config_set("bloomery.bf-initial-size", 0)
    assert c.config_get("bloomery.bf-initial-size") == {"bloomery.bf-initial-size": "77"}
    c.close()


# ---- persistence ----

def build_values(c):
    """One value of every kind, a large one among them (several chunks)."""
    c.execute_command("BF.RESERVE", "blocked", "0.01", "1000")
    c.execute_command("BF.RESERVE", "classic", "0.01", "100", "LAYOUT", "CLASSIC")
    c.execute_command("BF.RESERVE", "prefix", "0.01", "100", "LAYOUT", "PREFIX")
    c.execute_command("BF.RESERVE", "counting", "0.01", "100", "COUNTING")
    # Room for the items in its current slice: a full slice is rotated by
    # the module's timer, which would change the value under the tests.
    c.execute_command("BF.RESERVE", "window", "0.01", "2000", "WINDOW", "3600")
    c.execute_command("BF.RESERVE", "large", "0.0001", "3000000")
    c.execute_command("CF.RESERVE", "cuckoo", "100")
    items = ["item%d" % i for i in range(300)]
    for k in ("blocked", "classic", "prefix", "counting", "window", "large"):
        c.execute_command("BF.MADD", k, *items)
    c.execute_command("BF.DEL", "counting", "item1")
    for it in items:
        c.execute_command("CF.ADD", "cuckoo", it)
    c.execute_command("CF.DEL", "cuckoo", "item2")
    c.expire("blocked", 3600)
    build_sketches(c)


def build_sketches(c):
    """A count-min sketch, a top-k that has decayed (its generator drawn
    from), a t-digest with merged and unmerged centroids, and a large
    count-min sketch (several chunks)."""
    c.execute_command("CMS.INITBYDIM", "cms", "1000", "5")
    c.execute_command("CMS.INITBYDIM", "cmsbig", "2000000", "2")
    c.execute_command("TOPK.RESERVE", "topk", "5", "16", "4", "0.9")
    c.execute_command("TDIGEST.CREATE", "tdigest", "COMPRESSION", "50")
    for i in range(0, 2000, 100):
        batch = ["s%d" % (j % 37) for j in range(i, i + 100)]
        c.execute_command("CMS.INCRBY", "cms", *(x for it in batch for x in (it, "3")))
        c.execute_command("CMS.INCRBY", "cmsbig", *(x for it in batch for x in (it, "1")))
        c.execute_command("TOPK.ADD", "topk", *batch)
        c.execute_command("TDIGEST.ADD", "tdigest", *(str((j * 7919) % 1000 / 3) for j in
                                                      range(i, i + 100)))
    c.expire("topk", 3600)


SKETCH_KEYS = ("cms", "cmsbig", "topk", "tdigest")


def sketch_answers(c):
    probe = ["s%d" % i for i in range(0, 50, 3)]
    return {
        "cms": (c.execute_command("CMS.INFO", "cms"), c.execute_command("CMS.QUERY", "cms", *probe),
                c.execute_command("CMS.QUERY", "cmsbig", *probe)),
        "topk": (c.execute_command("TOPK.LIST", "topk", "WITHCOUNT"),
                 c.execute_command("TOPK.INFO", "topk"),
                 c.execute_command("TOPK.COUNT", "topk", *probe)),
        "tdigest": (c.execute_command("TDIGEST.INFO", "tdigest"),
                    c.execute_command("TDIGEST.QUANTILE", "tdigest", "0.1", "0.5", "0.9"),
                    c.execute_command("TDIGEST.CDF", "tdigest", "10", "100", "300")),
        "digests": [c.execute_command("DEBUG", "DIGEST-VALUE", k) for k in SKETCH_KEYS],
        "dumps": [c.dump(k) for k in ("cms", "topk", "tdigest")],
        "topk_ttl": c.ttl("topk") > 3000,
    }


BLOOM_KEYS = ("blocked", "classic", "prefix", "counting", "window", "large")


def answers(c, bloom_keys=BLOOM_KEYS):
    probe = ["item%d" % i for i in range(0, 600, 7)]
    out = {}
    for k in bloom_keys:
        out[k] = (c.execute_command("BF.INFO", k), c.execute_command("BF.MEXISTS", k, *probe),
                  c.execute_command("DEBUG", "DIGEST-VALUE", k))
    out["cuckoo"] = (c.execute_command("CF.INFO", "cuckoo"),
                     c.execute_command("CF.MEXISTS", "cuckoo", *probe),
                     [c.execute_command("CF.COUNT", "cuckoo", p) for p in probe],
                     c.execute_command("DEBUG", "DIGEST-VALUE", "cuckoo"))
    out["types"] = sorted(c.execute_command("TYPE", k) for k in c.keys())
    out["ttl"] = c.ttl("blocked") > 3000
    out["sketches"] = sketch_answers(c)
    return out


def test_debug_reload_keeps_every_value(m):
    build_values(m)
    before = answers(m)
    assert m.execute_command("DEBUG", "RELOAD") == b"OK"
    assert answers(m) == before


def test_restart_on_dump_rdb(start_module):
    s = start_module("restart", "--rdbcompression", "no")
    c = s.client()
    build_values(c)
    before = answers(c)
    c.save()
    c.close()
    s.stop()
    # The large filter is there, in several chunks (2 MiB each).
    assert os.path.getsize(os.path.join(s.dir, "dump.rdb")) > 5 << 20
    s2 = start_module("restart", "--rdbcompression", "no")  # DUMP compares alike
    c2 = s2.client()
    assert answers(c2) == before
    c2.close()


def test_damaged_rdb_refused(start_module):
    s = start_module("damaged", "--rdbcompression", "no")
    c = s.client()
    c.execute_command("BF.RESERVE", "k", "0.01", "100000")
    c.execute_command("BF.ADD", "k", "a")
    c.save()
    c.close()
    s.stop()
    path = os.path.join(s.dir, "dump.rdb")
    data = bytearray(open(path, "rb").read())
    # A byte inside the filter's bits (uncompressed, they are nearly the
    # whole file), not the RDB's own framing, whose checksum is switched
    # off: our chunk checksum refuses it.
    data[len(data) // 2] ^= 0x40
    open(path, "wb").write(bytes(data))
    with pytest.raises(RuntimeError):
        start_module("damaged", "--rdbchecksum", "no")


def test_memory_usage_counts_the_value(m):
    m.execute_command("BF.RESERVE", "k", "0.001", "1000000")
    assert m.memory_usage("k") > 1_000_000
    m.execute_command("CMS.INITBYDIM", "cms", "1000000", "4")  # 32-bit counters
    assert 4_000_000 * 4 < m.memory_usage("cms") < 4_000_000 * 4 + 4096
    m.execute_command("TOPK.RESERVE", "topk", "10", "100000", "4", "0.9")
    assert m.memory_usage("topk") > 100_000 * 4 * 8
    m.execute_command("TDIGEST.CREATE", "td", "COMPRESSION", "1000")
    small = m.memory_usage("td")
    m.execute_command("TDIGEST.CREATE", "td2", "COMPRESSION", "100")
    assert small > m.memory_usage("td2") > 1000


def test_replica_gets_the_commands(start_module):
    master = start_module("master", "--repl-diskless-sync-delay", "0")
    replica = start_module("replica", "--replicaof", "127.0.0.1", str(master.port))
    c, rc = master.client(), replica.client()
    # Once the first sync is done, only the replication stream carries
    # what follows.
    deadline = time.time() + 30
    while rc.info("replication")["master_link_status"] != "up":
        assert time.time() < deadline, "the replica did not sync"
        time.sleep(0.05)
    c.execute_command("BF.MADD", "k", "a", "b")
    c.execute_command("CF.ADD", "c", "x")
    assert c.execute_command("WAIT", 1, 10000) == 1
    assert rc.execute_command("BF.MEXISTS", "k", "a", "b", "z") == [1, 1, 0]
    assert rc.execute_command("CF.EXISTS", "c", "x") == 1
    assert rc.execute_command("DEBUG", "DIGEST-VALUE", "k") == \
        c.execute_command("DEBUG", "DIGEST-VALUE", "k")
    c.close()
    rc.close()


def test_replica_ends_identical(start_module):
    """Values carried by the full sync and by the verbatim commands after
    it end bit for bit alike on the replica: the top-k's decay draws the
    same numbers there (its generator's seed comes from the command, its
    state from the RDB file), merges and t-digest compressions repeat."""
    master = start_module("master2", "--repl-diskless-sync-delay", "0")
    c = master.client()
    build_sketches(c)  # before the sync: carried by the RDB file
    replica = start_module("replica2", "--replicaof", "127.0.0.1", str(master.port))
    rc = replica.client()
    deadline = time.time() + 30
    while rc.info("replication")["master_link_status"] != "up":
        assert time.time() < deadline, "the replica did not sync"
        time.sleep(0.05)
    # After the sync: only the replication stream carries these.
    c.execute_command("TOPK.RESERVE", "topk2", "4", "8", "3", "0.8")
    c.execute_command("CMS.INITBYDIM", "cms2", "1000", "5")
    c.execute_command("TDIGEST.CREATE", "td2", "COMPRESSION", "30")
    for i in range(30):
        items = ["r%d" % ((i * 31 + j) % 23) for j in range(50)]
        c.execute_command("TOPK.ADD", "topk", *items)
        c.execute_command("TOPK.ADD", "topk2", *items)
        c.execute_command("TOPK.INCRBY", "topk2", items[0], 7)
        c.execute_command("CMS.INCRBY", "cms2", *(x for it in items for x in (it, "2")))
        c.execute_command("TDIGEST.ADD", "td2", *(str(i * 50 + j) for j in range(50)))
    c.execute_command("CMS.MERGE", "cms", "2", "cms", "cms2", "WEIGHTS", "1", "3")
    c.execute_command("TDIGEST.MERGE", "tdm", "2", "tdigest", "td2")
    c.execute_command("TDIGEST.RESET", "tdigest")
    assert c.execute_command("WAIT", 1, 10000) == 1
    keys = sorted(c.keys())
    assert sorted(rc.keys()) == keys
    assert len(keys) == 8
    assert rc.execute_command("DEBUG", "DIGEST-VALUE", *keys) == \
        c.execute_command("DEBUG", "DIGEST-VALUE", *keys)
    for k in keys:
        assert rc.dump(k) == c.dump(k), k
    assert rc.execute_command("TOPK.LIST", "topk2", "WITHCOUNT") == \
        c.execute_command("TOPK.LIST", "topk2", "WITHCOUNT")
    c.close()
    rc.close()


def test_dump_restore_and_rename_carry_the_value(m):
    m.execute_command("BF.MADD", "k", "a", "b")
    m.restore("copy", 0, m.dump("k"))
    assert m.execute_command("BF.MEXISTS", "copy", "a", "b", "c") == [1, 1, 0]
    assert m.execute_command("DEBUG", "DIGEST-VALUE", "copy") == \
        m.execute_command("DEBUG", "DIGEST-VALUE", "k")
    m.rename("copy", "moved")
    assert m.execute_command("BF.INFO", "moved") == m.execute_command("BF.INFO", "k")


def test_restore_in_progress_is_lost_by_a_reload(m):
    """A LOADCHUNK restore cut by a save and load leaves a key that every
    command refuses and DEL removes (docs/MODULE.md)."""
    m.execute_command("CF.RESERVE", "c", "1000")
    m.execute_command("CF.ADD", "c", "x")
    chunks, it = [], 0
    while True:
        it, data = m.execute_command("CF.SCANDUMP", "c", it)
        if it == 0:
            break
        chunks.append((it, data))
    assert len(chunks) > 1
    assert m.execute_command("CF.LOADCHUNK", "half", *chunks[0]) == b"OK"
    m.execute_command("DEBUG", "RELOAD")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        m.execute_command("CF.LOADCHUNK", "half", *chunks[1])
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        m.execute_command("CF.EXISTS", "half", "x")
    assert m.delete("half") == 1
    assert m.execute_command("CF.EXISTS", "c", "x") == 1


def test_maxmemory_set_later_holds_new_filters(m, bloomeryd):
    """CONFIG SET maxmemory reaches the filters' own reservations: a filter
    larger than the limit is refused with bloomeryd's answer, though Redis's
    own used memory is far below it."""
    ours = bloomeryd.client()
    try:
        for c in (m, ours):
            c.flushall()
            c.config_set("maxmemory", 50 << 20)
        big = ("BF.RESERVE", "big", "0.001", "100000000")
        with pytest.raises(redis.ResponseError) as want:
            ours.execute_command(*big)
        with pytest.raises(redis.ResponseError) as got:
            m.execute_command(*big)
        assert str(got.value) == str(want.value)
        assert str(got.value).startswith("OOM")
        m.config_set("maxmemory", 0)
        assert m.execute_command(*big) == b"OK"
    finally:
        for c in (m, ours):
            c.flushall()
            c.config_set("maxmemory", 0)
        ours.close()


@pytest.mark.parametrize("make", [
    ("BF.RESERVE", "src", "0.01", "1000"),
    ("BF.RESERVE", "src", "0.01", "100", "LAYOUT", "CLASSIC"),
    ("BF.RESERVE", "src", "0.01", "100", "COUNTING"),
    ("BF.RESERVE", "src", "0.01", "100", "WINDOW", "3600"),
    ("CF.RESERVE", "src", "100")])
def test_copy_is_an_independent_value(m, make):
    m.execute_command(*make)
    family = make[0][:2]
    m.execute_command(family + ".ADD", "src", "a")
    assert m.copy("src", "dst") is True
    digest = m.execute_command("DEBUG", "DIGEST-VALUE", "src")
    assert m.execute_command("DEBUG", "DIGEST-VALUE", "dst") == digest
    assert m.execute_command(family + ".EXISTS", "dst", "a") == 1
    m.execute_command(family + ".ADD", "dst", "b")
    assert m.execute_command(family + ".EXISTS", "src", "b") == 0
    assert m.execute_command("DEBUG", "DIGEST-VALUE", "src") == digest
    assert m.memory_usage("dst") >= m.memory_usage("src")


def wait_rewrite(c):
    """The status of the AOF rewrite once it has finished."""
    deadline = time.time() + 60
    while True:
        info = c.info("persistence")
        if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
            return info["aof_last_bgrewrite_status"]
        assert time.time() < deadline, "the AOF rewrite did not finish"
        time.sleep(0.05)


def aof_commands(d):
    """The commands of the AOF files under d (RESP, no preamble), each as
    a list of bytes arguments."""
    cmds = []
    for root, _, files in os.walk(d):
        for f in sorted(files):
            if ".aof" not in f or f.endswith(".manifest"):
                continue
            data, at = open(os.path.join(root, f), "rb").read(), 0
            while at < len(data):
                end = data.index(b"\r\n", at)
                n, at, cmd = int(data[at + 1:end]), end + 2, []
                for _ in range(n):
                    end = data.index(b"\r\n", at)
                    size = int(data[at + 1:end])
                    cmd.append(data[end + 2:end + 2 + size])
                    at = end + 4 + size
                cmds.append(cmd)
    return cmds


def test_aof_rewrite_as_commands(start_module):
    """Without the RDB preamble, a rewrite writes LOADCHUNK commands that
    rebuild every value bit for bit on a restart: BF.LOADCHUNK and
    CF.LOADCHUNK for the filters RedisBloom has them for, BLOOMERY.LOADCHUNK
    for windows, count-min sketches, top-k and t-digests. A dump still
    being restored, which has no such form, fails the rewrite instead of
    crashing it or losing the key."""
    args = ("--appendonly", "yes", "--aof-use-rdb-preamble", "no")
    s = start_module("aof", *args)
    c = s.client()
    build_values(c)
    before = answers(c)
    c.bgrewriteaof()
    assert wait_rewrite(c) == "ok"
    names = {cmd[0].upper() for cmd in aof_commands(s.dir)}
    assert {b"BF.LOADCHUNK", b"CF.LOADCHUNK", b"BLOOMERY.LOADCHUNK"} <= names, names
    assert not names & {b"CMS.INCRBY", b"TOPK.ADD", b"TDIGEST.ADD", b"BF.MADD"}, names
    c.execute_command("CF.ADD", "src", "x")
    it, data = c.execute_command("CF.SCANDUMP", "src", 0)
    assert c.execute_command("CF.LOADCHUNK", "half", it, data) == b"OK"
    c.bgrewriteaof()
    assert wait_rewrite(c) == "err"
    assert "cannot be written as commands" in s.output()
    c.delete("half", "src")
    c.close()
    s.stop()
    c2 = start_module("aof", *args).client()
    assert answers(c2) == before
    c2.close()


def test_bloomery_loadchunk_restores_any_value(start_module):
    """BLOOMERY.LOADCHUNK, as an AOF rewrite writes it, in pieces: the
    header only onto a new key, chunks of at most 2 MiB with their checksum
    (a damaged one refused, a missing key or another type's refused), the
    key unusable until its last chunk arrives, then bit for bit the value
    it was made from."""
    s = start_module("loadchunk", "--appendonly", "yes", "--aof-use-rdb-preamble", "no")
    c = s.client()
    build_sketches(c)
    c.execute_command("BF.RESERVE", "win", "0.01", "100", "WINDOW", "3600")
    c.execute_command("BF.MADD", "win", "a", "b")
    keys = SKETCH_KEYS + ("win",)
    c.persist("topk")  # the digest counts an expiry; only the value is restored here
    digests = {k: c.execute_command("DEBUG", "DIGEST-VALUE", k) for k in keys}
    c.bgrewriteaof()
    assert wait_rewrite(c) == "ok"
    cmds = [cmd for cmd in aof_commands(s.dir) if cmd[0].upper() == b"BLOOMERY.LOADCHUNK"]
    assert {cmd[1].decode() for cmd in cmds} == set(keys)
    assert max(len(cmd[3]) for cmd in cmds) <= (2 << 20) + 8
    assert len([cmd for cmd in cmds if cmd[1] == b"cmsbig"]) > 3
    c.flushall()
    for key in keys:
        mine = [cmd[1:] for cmd in cmds if cmd[1] == key.encode()]
        assert mine[0][1] == b"1"
        with pytest.raises(redis.ResponseError, match="send the header"):
            c.execute_command("BLOOMERY.LOADCHUNK", key, *mine[1][1:])
        with pytest.raises(redis.ResponseError, match="invalid header"):
            c.execute_command("BLOOMERY.LOADCHUNK", key, 1, mine[0][2][:-1])
        assert c.execute_command("BLOOMERY.LOADCHUNK", key, *mine[0][1:]) == b"OK"
        with pytest.raises(redis.ResponseError, match="the key exists"):
            c.execute_command("BLOOMERY.LOADCHUNK", key, *mine[0][1:])
        bad = bytearray(mine[1][2])
        bad[0] ^= 1
        with pytest.raises(redis.ResponseError, match="invalid chunk"):
            c.execute_command("BLOOMERY.LOADCHUNK", key, mine[1][1], bytes(bad))
        # The chunks in reverse order: any order rebuilds the value.
        for it, data in [m[1:] for m in mine[1:]][::-1]:
            if it == mine[1][1]:  # the last one: still a dump being restored
                family = {"cm": "CMS", "to": "TOPK", "td": "TDIGEST", "wi": "BF"}[key[:2]]
                with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
                    c.execute_command(family + ".INFO", key)
            assert c.execute_command("BLOOMERY.LOADCHUNK", key, it, data) == b"OK"
        assert c.execute_command("DEBUG", "DIGEST-VALUE", key) == digests[key], key
    c.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        c.execute_command("BLOOMERY.LOADCHUNK", "str", 2, b"x" * 16)
    c.close()



@pytest.mark.parametrize("cmd", [("BF.ADD", "k", "new"), ("BF.ADD", "k", "a"),
                                 ("CF.ADD", "c", "new"), ("CF.DEL", "c", "a")])
def test_a_write_touches_watched_keys(module_server, cmd):
    """A write to an existing value aborts a transaction that WATCHes it."""
    c, other = module_server.client(), module_server.client()
    c.flushall()
    c.execute_command("BF.ADD", "k", "a")
    c.execute_command("CF.ADD", "c", "a")
    with c.pipeline() as p:
        p.watch(cmd[1])
        other.execute_command(*cmd)
        p.multi()
        p.execute_command("BF.EXISTS", "k", "a")
        with pytest.raises(redis.WatchError):
            p.execute()
    c.close()
    other.close()


def test_writes_count_for_the_save_points(m):
    """A change counts toward Redis's save points (it is replicated, which
    counts it); a read does not."""
    m.save()

    def changes():
        return m.info("persistence")["rdb_changes_since_last_save"]

    m.execute_command("BF.ADD", "k", "a")
    m.execute_command("CF.ADD", "c", "a")
    assert changes() == 2
    m.execute_command("BF.EXISTS", "k", "a")
    m.execute_command("CF.COUNT", "c", "a")
    assert changes() == 2


def test_exact_filters_are_refused_with_the_reason(m):
    """bloomery.so keeps no exact store (docs/EXACT.md): BF.RESERVE ...
    EXACT answers why and creates nothing; windows without EXACT work."""
    for args in (["EXACT"], ["WINDOW", 60, "EXACT"], ["EXACT", "RETAIN", 3600]):
        with pytest.raises(redis.ResponseError) as e:
            m.execute_command("BF.RESERVE", "ex", 0.01, 1000, *args)
        assert str(e.value).startswith("EXACT is not available: bloomery.so keeps no exact store")
        assert m.exists("ex") == 0
    assert m.execute_command("BF.RESERVE", "w", 0.01, 1000, "WINDOW", 60) in (b"OK", "OK", True)
    with pytest.raises(redis.ResponseError, match="AT applies to EXACT filters only"):
        m.execute_command("BF.INSERT", "w", "AT", 1000, "ITEMS", "a")
