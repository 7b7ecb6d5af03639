"""What bloomery.so's commands declare to Redis, and Redis's ACL rules on
them: every command's flags and key specs as recorded below (RedisBloom's
flags; RO/RW with Redis's logical key flags), merges' sources declared as
keys (COMMAND GETKEYS), and users restricted by key pattern, by read/write
key permission or by command refused exactly where they should be, both by
ACL DRYRUN and by the commands really sent as that user.

$REDISBLOOM_SO, when set, names a RedisBloom build to compare flags with
live (skipped otherwise)."""
import os

import pytest
import redis

from conftest import REDIS_SERVER, Process

RO = "RO access"
INS = "RW insert"
UPD = "RW update"
ACC_UPD = "RW access update"
DEL = "RW delete"

# name: (Redis flags but "module", flags of argv[1]'s key spec).
EXPECTED = {
    "bf.reserve": ("write denyoom", INS),
    "bf.add": ("write denyoom", INS),
    "bf.madd": ("write denyoom", INS),
    "bf.insert": ("write denyoom", INS),
    "bf.exists": ("readonly fast", RO),
    "bf.mexists": ("readonly fast", RO),
    "bf.info": ("readonly fast", RO),
    "bf.card": ("readonly fast", RO),
    "bf.scandump": ("readonly fast", RO),
    "bf.loadchunk": ("write denyoom", UPD),
    "bf.debug": ("readonly fast", RO),
    "bf.del": ("write fast", DEL),
    "bf.merge": ("write denyoom", UPD),
    "bf.config": ("write", UPD),
    "cf.reserve": ("write denyoom", INS),
    "cf.add": ("write denyoom", INS),
    "cf.addnx": ("write denyoom", INS),
    "cf.insert": ("write denyoom", INS),
    "cf.insertnx": ("write denyoom", INS),
    "cf.exists": ("readonly fast", RO),
    "cf.mexists": ("readonly fast", RO),
    "cf.count": ("readonly fast", RO),
    "cf.del": ("write fast", DEL),
    "cf.info": ("readonly fast", RO),
    "cf.scandump": ("readonly fast", RO),
    "cf.debug": ("readonly fast", RO),
    "cf.loadchunk": ("write denyoom", UPD),
    "cms.initbydim": ("write denyoom", INS),
    "cms.initbyprob": ("write denyoom", INS),
    "cms.incrby": ("write denyoom", ACC_UPD),
    "cms.query": ("readonly", RO),
    "cms.merge": ("write denyoom movablekeys", UPD),
    "cms.info": ("readonly", RO),
    "topk.reserve": ("write denyoom", INS),
    "topk.add": ("write denyoom", ACC_UPD),
    "topk.incrby": ("write denyoom", ACC_UPD),
    "topk.query": ("readonly", RO),
    "topk.count": ("readonly", RO),
    "topk.list": ("readonly", RO),
    "topk.info": ("readonly", RO),
    "tdigest.create": ("write denyoom", INS),
    "tdigest.add": ("write denyoom", UPD),
    "tdigest.reset": ("write denyoom", UPD),
    "tdigest.merge": ("write denyoom movablekeys", UPD),
    "tdigest.min": ("readonly", RO),
    "tdigest.max": ("readonly", RO),
    "tdigest.quantile": ("readonly", RO),
    "tdigest.cdf": ("readonly", RO),
    "tdigest.rank": ("readonly", RO),
    "tdigest.revrank": ("readonly", RO),
    "tdigest.byrank": ("readonly", RO),
    "tdigest.byrevrank": ("readonly", RO),
    "tdigest.trimmed_mean": ("readonly", RO),
    "tdigest.info": ("readonly", RO),
    "bloomery.loadchunk": ("write denyoom", UPD),
    "bloomery.winrotate": ("write", UPD),
    "bloomery.winclock": ("write", None),
}

# The sources of merges: (flags, begin index, find type, find arguments).
SOURCES = {
    "bf.merge": (RO, 2, "range", (-1, 1, 0)),
    "cms.merge": (RO, 2, "keynum", (0, 1, 1)),
    "tdigest.merge": (RO, 2, "keynum", (0, 1, 1)),
}

# Where RedisBloom 2.4.23's flags are not ours: it registers TOPK.COUNT
# "write" though it only reads (replicas refuse it).
REDISBLOOM_DIFFERS = {"topk.count"}


def info(c, name):
    return c.execute_command("COMMAND", "INFO", name)[name]


def specs(i):
    out = []
    for s in i["key_specifications"]:
        d = dict(zip(s[::2], s[1::2]))
        bs, fk = d["begin_search"], d["find_keys"]
        out.append((" ".join(d["flags"]), bs[3][1], fk[1], tuple(fk[3][1::2])))
    return out


@pytest.fixture
def c(module_server):
    c = module_server.client(decode_responses=True)
    c.flushall()
    yield c
    for u in c.acl_users():
        if u != "default":
            c.acl_deluser(u)
    c.close()


def test_every_command_declares_flags_and_keys(c):
    names = set(c.execute_command("COMMAND LIST FILTERBY MODULE bloomery"))
    assert names == set(EXPECTED)
    for name, (flags, key) in EXPECTED.items():
        i = info(c, name)
        assert " ".join(f for f in i["flags"] if f != "module") == flags, name
        want = [] if key is None else [(key, 1, "range", (0, 1, 0))]
        if name in SOURCES:
            want.append(SOURCES[name])
        assert specs(i) == want, name


def test_getkeys_of_merges(c):
    def keys(*args):
        return c.execute_command("COMMAND GETKEYS", *args)

    assert keys("CMS.MERGE", "d", "2", "a", "b", "WEIGHTS", "1", "2") == ["d", "a", "b"]
    assert keys("TDIGEST.MERGE", "d", "3", "a", "b", "c", "COMPRESSION", "100",
                "OVERRIDE") == ["d", "a", "b", "c"]
    assert keys("BF.MERGE", "d", "a", "b") == ["d", "a", "b"]
    assert keys("BF.ADD", "k", "item") == ["k"]
    assert keys("CMS.INCRBY", "k", "a", "1", "b", "2") == ["k"]


def refused_key(c, user, *cmd):
    reply = c.execute_command("ACL DRYRUN", user, *cmd)
    return reply.startswith("This user has no permissions to access")


def as_user(server, user):
    return server.client(username=user, password="pw", decode_responses=True)


def test_key_pattern_user(c, module_server):
    c.acl_setuser("lim", enabled=True, passwords=["+pw"], keys=["allowed:*"],
                  commands=["+@all"])
    assert c.execute_command("ACL DRYRUN", "lim", "BF.ADD", "allowed:x", "a") == "OK"
    assert (c.execute_command("ACL DRYRUN", "lim", "BF.ADD", "other:x", "a") ==
            "This user has no permissions to access the 'other:x' key")
    # A source outside the pattern refuses the whole merge.
    for cmd in (("CMS.MERGE", "allowed:d", "2", "allowed:a", "other:b"),
                ("TDIGEST.MERGE", "allowed:d", "2", "allowed:a", "other:b"),
                ("BF.MERGE", "allowed:d", "allowed:a", "other:b")):
        assert (c.execute_command("ACL DRYRUN", "lim", *cmd) ==
                "This user has no permissions to access the 'other:b' key"), cmd
    assert c.execute_command("ACL DRYRUN", "lim", "CMS.MERGE", "allowed:d", "2",
                             "allowed:a", "allowed:b") == "OK"

    c.execute_command("CMS.INITBYDIM", "other:b", "10", "2")
    u = as_user(module_server, "lim")
    try:
        assert u.execute_command("BF.ADD", "allowed:x", "a") == 1
        with pytest.raises(redis.exceptions.NoPermissionError, match="keys used as arguments"):
            u.execute_command("BF.ADD", "other:x", "a")
        u.execute_command("CMS.INITBYDIM", "allowed:a", "10", "2")
        u.execute_command("CMS.INITBYDIM", "allowed:d", "10", "2")
        with pytest.raises(redis.exceptions.NoPermissionError, match="keys used as arguments"):
            u.execute_command("CMS.MERGE", "allowed:d", "2", "allowed:a", "other:b")
        assert u.execute_command("CMS.MERGE", "allowed:d", "1", "allowed:a") == "OK"
    finally:
        u.close()
    assert c.exists("other:x") == 0


def test_read_and_write_key_permissions(c, module_server):
    # %R~: reads only; %W~: writes that return nothing of the value.
    c.acl_setuser("reader", enabled=True, passwords=["+pw"], keys=["%R~*"], commands=["+@all"])
    c.acl_setuser("writer", enabled=True, passwords=["+pw"], keys=["%W~*"], commands=["+@all"])
    for cmd in (("BF.EXISTS", "k", "a"), ("CF.COUNT", "k", "a"), ("CMS.QUERY", "k", "a"),
                ("TOPK.LIST", "k"), ("TDIGEST.MIN", "k"), ("BF.SCANDUMP", "k", "0")):
        assert c.execute_command("ACL DRYRUN", "reader", *cmd) == "OK", cmd
        assert refused_key(c, "writer", *cmd), cmd
    for cmd in (("BF.ADD", "k", "a"), ("BF.RESERVE", "k", "0.01", "10"), ("CF.DEL", "k", "a"),
                ("TDIGEST.ADD", "k", "1")):
        assert refused_key(c, "reader", *cmd), cmd
        assert c.execute_command("ACL DRYRUN", "writer", *cmd) == "OK", cmd
    # Their replies show the value: both permissions.
    for cmd in (("CMS.INCRBY", "k", "a", "1"), ("TOPK.ADD", "k", "a")):
        assert refused_key(c, "reader", *cmd), cmd
        assert refused_key(c, "writer", *cmd), cmd
    # A merge writes its destination and reads its sources.
    c.acl_setuser("merger", enabled=True, passwords=["+pw"], keys=["%W~d", "%R~s*"],
                  commands=["+@all"])
    assert c.execute_command("ACL DRYRUN", "merger", "CMS.MERGE", "d", "2", "s1", "s2") == "OK"
    assert refused_key(c, "merger", "CMS.MERGE", "s1", "1", "d")

    c.execute_command("BF.ADD", "k", "a")
    r = as_user(module_server, "reader")
    try:
        assert r.execute_command("BF.EXISTS", "k", "a") == 1
        with pytest.raises(redis.exceptions.NoPermissionError, match="keys used as arguments"):
            r.execute_command("BF.ADD", "k", "b")
    finally:
        r.close()


def test_command_permissions(c, module_server):
    # Redis 7.0 files module commands under no category but @all (so
    # +@read grants none of them, RedisBloom's included); 7.2 and later
    # file them as they declare.
    version = tuple(int(x) for x in c.info("server")["redis_version"].split(".")[:2])
    c.acl_setuser("ro", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@read"])
    reply = c.execute_command("ACL DRYRUN", "ro", "BF.EXISTS", "k", "a")
    if version >= (7, 2):
        assert reply == "OK"
    else:
        assert reply == "This user has no permissions to run the 'bf.exists' command"
    assert (c.execute_command("ACL DRYRUN", "ro", "BF.ADD", "k", "a") ==
            "This user has no permissions to run the 'bf.add' command")
    # Granted by name on every Redis.
    c.acl_setuser("named", enabled=True, passwords=["+pw"], keys=["*"],
                  commands=["+bf.exists", "+bf.mexists"])
    c.execute_command("BF.ADD", "k", "a")
    u = as_user(module_server, "named")
    try:
        assert u.execute_command("BF.EXISTS", "k", "a") == 1
        with pytest.raises(redis.exceptions.NoPermissionError,
                           match="no permissions to run the 'bf.add' command"):
            u.execute_command("BF.ADD", "k", "b")
    finally:
        u.close()


@pytest.mark.skipif(not os.environ.get("REDISBLOOM_SO"), reason="REDISBLOOM_SO not set")
def test_flags_as_redisbloom(c, workdir):
    d = os.path.join(workdir, "redisbloom")
    os.makedirs(d, exist_ok=True)
    rb = Process(lambda port: [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--loadmodule", os.environ["REDISBLOOM_SO"]], d)
    try:
        r = rb.client(decode_responses=True)
        theirs = set(r.execute_command("COMMAND LIST FILTERBY MODULE bf"))
        compared = 0
        for name in sorted(theirs & set(EXPECTED) - REDISBLOOM_DIFFERS):
            ours = [f for f in info(c, name)["flags"] if f != "movablekeys"]
            assert ours == info(r, name)["flags"], name
            compared += 1
        assert compared >= 45
        r.close()
    finally:
        rb.stop()
