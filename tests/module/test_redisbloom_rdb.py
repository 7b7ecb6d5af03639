"""A dump.rdb written by RedisBloom 2.4.23 (tests/vectors/redisbloom-rdb,
see its README) loads into redis-server with bloomery.so: every key of the
manifest gets RedisBloom's answers (BF.INFO / CF.INFO, BF.MEXISTS /
CF.MEXISTS for every added item and 20000 never added, false positives
included, CF.COUNT, the Bloom filters' SCANDUMP chunks byte for byte, the
expiry), and the keys are ours from then on: TYPE answers our names, a
save and restart keeps every answer, and a RedisBloom file is no longer
needed."""
import base64
import json
import os
import shutil

import pytest

VECTORS = os.path.join(os.path.dirname(__file__), "..", "vectors", "redisbloom-rdb")
MANIFEST = json.load(open(os.path.join(VECTORS, "manifest.json")))["keys"]


def items(key, kind, n):
    return ["%s:%s:%d" % (key, kind, i) for i in range(n)]


def flags(replies):
    return "".join("1" if r else "0" for r in replies)


def info(c, key, family):
    i = c.execute_command(family + ".INFO", key)
    return {k.decode(): v for k, v in zip(i[::2], i[1::2])}


def scandump(c, key):
    out, it = [], 0
    while True:
        it, data = c.execute_command("BF.SCANDUMP", key, it)
        if it == 0:
            return out
        out.append([it, base64.b64encode(data).decode()])


def check_every_key(c):
    """Every key of the manifest answers as RedisBloom did."""
    assert sorted(k.decode() for k in c.keys()) == sorted(MANIFEST)
    for key, want in MANIFEST.items():
        family = "CF" if key.startswith("cf:") else "BF"
        assert c.type(key) == (b"bloomerCF" if family == "CF" else b"bloomerBF"), key
        got = info(c, key, family)
        assert got == {k: v for k, v in want["info"].items()}, key
        present = items(key, "in", want["n_added"])
        assert flags(c.execute_command(family + ".MEXISTS", key, *present)) == \
            want["present_exists"], key
        absent = items(key, "out", 20000)
        for lo in range(0, 20000, 5000):
            assert flags(c.execute_command(family + ".MEXISTS", key, *absent[lo:lo + 5000])) == \
                want["absent_exists"][lo:lo + 5000], key
        for item, count in want.get("count_probe", {}).items():
            assert c.execute_command("CF.COUNT", key, item) == count, (key, item)
        if family == "BF" and isinstance(want.get("scandump"), list):  # bf:big: omitted
            assert scandump(c, key) == want["scandump"], key
        if "expire_seconds_set" in want:
            assert c.ttl(key) > 0, key
        else:
            assert c.ttl(key) == -1, key


@pytest.fixture
def redisbloom_dir(workdir, request):
    d = os.path.join(workdir, "redisbloom-" + request.node.name)
    os.makedirs(d)
    shutil.copy(os.path.join(VECTORS, "dump.rdb"), os.path.join(d, "dump.rdb"))
    os.chmod(os.path.join(d, "dump.rdb"), 0o644)
    return os.path.basename(d)


def test_redisbloom_rdb_loads_with_its_answers(start_module, redisbloom_dir):
    s = start_module(redisbloom_dir)
    c = s.client()
    assert "9 RedisBloom filters loaded" in s.output()
    check_every_key(c)
    # Ours from now on: saved as our types, a reload and a restart answer
    # the same, with nothing left to convert.
    assert c.execute_command("DEBUG", "RELOAD") == b"OK"
    check_every_key(c)
    c.save()
    c.close()
    s.stop()
    s2 = start_module(redisbloom_dir)
    c2 = s2.client()
    check_every_key(c2)
    assert s2.output().count("RedisBloom filters loaded") == 0
    c2.close()


def test_redisbloom_values_keep_working(start_module, redisbloom_dir):
    """Loaded filters grow, delete and merge as ours do."""
    s = start_module(redisbloom_dir)
    c = s.client()
    before = info(c, "bf:auto", "BF")
    c.execute_command("BF.MADD", "bf:auto", *items("bf:auto", "more", 2000))
    after = info(c, "bf:auto", "BF")
    assert after["Number of filters"] > before["Number of filters"]
    assert all(c.execute_command("BF.MEXISTS", "bf:auto", *items("bf:auto", "more", 2000)))
    assert c.execute_command("CF.DEL", "cf:basic", "cf:basic:in:0") == 1
    assert c.execute_command("CF.COUNT", "cf:basic", "cf:basic:in:0") == 1
    assert c.execute_command("CF.ADD", "cf:auto", "new") == 1
    assert c.execute_command("CF.EXISTS", "cf:auto", "new") == 1
    c.close()


def test_damaged_redisbloom_values_are_refused(start_module, workdir):
    """A RedisBloom value whose fields disagree fails the load with a
    reason, not a crash: here the first Bloom filter's item count."""
    data = bytearray(open(os.path.join(VECTORS, "dump.rdb"), "rb").read())
    # The items total of bf:nonscale (1500, saved as a 16-bit RDB length
    # after the unsigned opcode 2) sits right after the key's name.
    at = data.index(b"bf:nonscale") + len(b"bf:nonscale")
    total = data.index(bytes([2, 0x45, 0xdc]), at)  # opcode 2, 14-bit length 1500
    data[total + 2] ^= 1
    d = os.path.join(workdir, "redisbloom-damaged")
    os.makedirs(d)
    open(os.path.join(d, "dump.rdb"), "wb").write(bytes(data))
    with pytest.raises(RuntimeError) as e:
        start_module("redisbloom-damaged", "--rdbchecksum", "no")
    assert "is refused" in str(e.value)
