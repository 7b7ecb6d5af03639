"""A dump.rdb written by RedisBloom 2.4.23 (tests/vectors/redisbloom-rdb,
see its README) loads into redis-server with bloomery.so: every key of the
manifest gets RedisBloom's answers (BF.INFO / CF.INFO, BF.MEXISTS /
CF.MEXISTS for every added item and 20000 never added, false positives
included, CF.COUNT, the Bloom filters' SCANDUMP chunks byte for byte, the
expiry), and the keys are ours from then on: TYPE answers our names, a
save and restart keeps every answer, and a RedisBloom file is no longer
needed. RedisBloom's DUMP payloads (cut from the same file) RESTORE, and
DUMP back byte for byte."""
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


# ---- RedisBloom's DUMP payloads, cut from its dump.rdb ----

def crc64(data):
    """Redis's CRC-64 (Jones, reflected, as DUMP's footer)."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x95AC9329AC4BC9B5 if crc & 1 else crc >> 1
    return crc


def rdb_len(data, at):
    """An RDB length at data[at]: (value or None for a special encoding,
    its low bits, the offset after it)."""
    b, kind = data[at], data[at] >> 6
    if kind == 0:
        return b & 0x3f, None, at + 1
    if kind == 1:
        return (b & 0x3f) << 8 | data[at + 1], None, at + 2
    if b == 0x80:
        return int.from_bytes(data[at + 1:at + 5], "big"), None, at + 5
    if b == 0x81:
        return int.from_bytes(data[at + 1:at + 9], "big"), None, at + 9
    return None, b & 0x3f, at + 1


def rdb_string_end(data, at):
    n, special, at = rdb_len(data, at)
    if n is not None:
        return at + n
    if special in (0, 1, 2):  # an integer of 1, 2 or 4 bytes
        return at + (1, 2, 4)[special]
    assert special == 3  # LZF: compressed length, length, bytes
    clen, _, at = rdb_len(data, at)
    _, _, at = rdb_len(data, at)
    return at + clen


def redisbloom_payload(key):
    """RedisBloom's DUMP of key: its module value as the RDB file holds it
    (type 7, module id, opcodes up to EOF), RDB version 10, CRC-64."""
    data = open(os.path.join(VECTORS, "dump.rdb"), "rb").read()
    name = key.encode()
    start = data.index(bytes([7, len(name)]) + name)
    at = start + 2 + len(name)
    value = at
    _, _, at = rdb_len(data, at)  # the module id (type name, encoding version)
    while True:
        op, _, at = rdb_len(data, at)
        if op == 0:  # EOF
            break
        if op == 2:  # unsigned
            _, _, at = rdb_len(data, at)
        elif op == 4:  # double
            at += 8
        elif op == 5:  # string
            at = rdb_string_end(data, at)
        else:
            raise AssertionError("unexpected module opcode %d" % op)
    body = bytes([7]) + data[value:at] + (10).to_bytes(2, "little")
    return body + crc64(body).to_bytes(8, "little")


@pytest.mark.parametrize("key", ["bf:scale", "bf:nonscale", "bf:ttl", "cf:basic", "cf:exp"])
def test_restore_of_a_redisbloom_dump(m, key):
    """RESTORE of RedisBloom's DUMP: the key keeps RedisBloom's type name
    (no load ends) and answers as RedisBloom did; its DUMP, written by our
    RedisBloom writer, is RedisBloom's byte for byte; a reload makes it ours
    with the same answers."""
    payload = redisbloom_payload(key)
    assert m.restore(key, 0, payload) == b"OK"
    family = "CF" if key.startswith("cf:") else "BF"
    want = MANIFEST[key]
    assert m.type(key) == (b"MBbloomCF" if family == "CF" else b"MBbloom--")
    assert m.dump(key) == payload
    absent = items(key, "out", 5000)
    assert info(m, key, family) == want["info"]
    assert flags(m.execute_command(family + ".MEXISTS", key, *absent)) == \
        want["absent_exists"][:5000]
    assert m.execute_command("DEBUG", "RELOAD") == b"OK"
    assert m.type(key) == (b"bloomerCF" if family == "CF" else b"bloomerBF")
    assert info(m, key, family) == want["info"]
    assert flags(m.execute_command(family + ".MEXISTS", key, *absent)) == \
        want["absent_exists"][:5000]
