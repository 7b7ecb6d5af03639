"""Keyspace commands and expiry, with Redis 7's replies."""
import time

from conftest import RawClient


def exact(r, *args):
    c = RawClient(r.connection_pool.connection_kwargs["port"])
    try:
        return c.cmd(*args)
    finally:
        c.close()


def fill(r, n, prefix="k"):
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("BF.ADD", "%s%d" % (prefix, i), "x")
    p.execute()


def test_del_exists_type_dbsize(r):
    fill(r, 5)
    r.execute_command("PFADD", "h", "a")
    assert r.dbsize() == 6
    assert r.exists("k0", "k1", "k1", "nope") == 3
    assert r.delete("k0", "k1", "nope") == 2
    assert r.execute_command("UNLINK", "k2") == 1
    assert r.dbsize() == 3
    assert r.type("h") == b"string"
    assert r.type("k3") == b"MBbloom--"
    assert r.type("nope") == b"none"


def test_keys_and_scan(r):
    fill(r, 300, "user:")
    fill(r, 20, "other:")
    r.execute_command("PFADD", "hll:1", "a")
    assert len(r.keys("*")) == 321
    assert sorted(r.keys("other:*")) == sorted(b"other:%d" % i for i in range(20))
    assert r.keys("user:1?") == [] or all(len(k) == 7 for k in r.keys("user:1?"))
    assert sorted(r.keys("user:1[0-1]")) == [b"user:10", b"user:11"]
    seen, cursor = set(), 0
    while True:
        cursor, keys = r.scan(cursor, count=25)
        seen.update(keys)
        if cursor == 0:
            break
    assert len(seen) == 321
    assert set(r.scan_iter(match="other:*")) == {b"other:%d" % i for i in range(20)}
    assert set(r.scan_iter(_type="string")) == {b"hll:1"}
    assert len(set(r.scan_iter(_type="MBbloom--"))) == 320
    assert str(exact(r, "SCAN", "abc")) == "ERR invalid cursor"
    assert str(exact(r, "SCAN", "0", "COUNT", "0")) == "ERR syntax error"
    assert str(exact(r, "SCAN", "0", "FOO", "1")) == "ERR syntax error"
    assert str(exact(r, "SCAN", "0", "COUNT", "x")) == "ERR value is not an integer or out of range"


def test_scan_survives_growth(r):
    """Keys present for the whole scan are returned even while the table grows."""
    fill(r, 200, "stay:")
    seen, cursor, n = set(), 0, 0
    while True:
        cursor, keys = r.scan(cursor, count=20)
        seen.update(keys)
        fill(r, 50, "grow%d:" % n)
        n += 1
        if cursor == 0:
            break
    assert {b"stay:%d" % i for i in range(200)} <= seen


def test_rename(r):
    r.execute_command("BF.ADD", "a", "x")
    r.expire("a", 100)
    assert r.rename("a", "b")
    assert r.exists("a") == 0
    assert r.execute_command("BF.EXISTS", "b", "x") == 1
    assert 90 <= r.ttl("b") <= 100
    assert str(exact(r, "RENAME", "nope", "c")) == "ERR no such key"
    r.execute_command("PFADD", "h", "a")
    assert r.rename("b", "h")
    assert r.type("h") == b"MBbloom--"
    assert r.renamenx("h", "h") is False
    r.execute_command("BF.ADD", "z", "x")
    assert r.renamenx("h", "z") is False
    assert r.renamenx("h", "w") is True
    assert r.rename("w", "w")
    assert r.dbsize() == 2


def test_expire_family(r):
    r.execute_command("BF.ADD", "k", "a")
    assert r.ttl("k") == -1 and r.pttl("k") == -1
    assert r.ttl("nope") == -2 and r.pttl("nope") == -2
    assert r.expire("k", 100) is True
    assert 99 <= r.ttl("k") <= 100
    assert 99000 <= r.pttl("k") <= 100000
    assert r.expire("k", 50, nx=True) is False
    assert r.expire("k", 50, xx=True) is True
    assert r.expire("k", 10, gt=True) is False
    assert r.expire("k", 200, gt=True) is True
    assert r.expire("k", 300, lt=True) is False
    assert r.expire("k", 20, lt=True) is True
    assert r.persist("k") is True
    assert r.persist("k") is False
    assert r.expire("k", 10, gt=True) is False      # no expiry counts as infinite
    assert r.expire("k", 10, lt=True) is True
    assert r.pexpire("k", 100000) is True
    now = int(time.time())
    assert r.expireat("k", now + 1000) is True
    assert abs(r.execute_command("EXPIRETIME", "k") - (now + 1000)) <= 1
    assert r.pexpireat("k", (now + 2000) * 1000) is True
    assert r.execute_command("PEXPIRETIME", "k") == (now + 2000) * 1000
    assert r.expire("nope", 10) is False
    assert str(exact(r, "EXPIRE", "k", "x")) == "ERR value is not an integer or out of range"
    assert str(exact(r, "EXPIRE", "k", "10", "NX", "XX")) == \
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    assert str(exact(r, "EXPIRE", "k", "10", "GT", "LT")) == \
        "ERR GT and LT options at the same time are not compatible"
    assert str(exact(r, "EXPIRE", "k", "10", "FOO")) == "ERR Unsupported option FOO"
    assert str(exact(r, "EXPIRE", "k", "9223372036854775807")) == \
        "ERR invalid expire time in 'expire' command"
    # A time in the past deletes the key.
    assert r.expire("k", -1) is True
    assert r.exists("k") == 0


def test_lazy_and_active_expiry(r):
    fill(r, 50, "short:")
    p = r.pipeline(transaction=False)
    for i in range(50):
        p.pexpire("short:%d" % i, 30)
    p.execute()
    r.execute_command("BF.ADD", "keep", "x")
    time.sleep(0.1)
    # Lazy: an expired key is gone for every command.
    assert r.exists("short:0") == 0
    assert r.execute_command("BF.EXISTS", "short:1", "x") == 0
    # Active: the cron removes the rest without anyone touching them.
    deadline = time.time() + 10
    while time.time() < deadline and r.dbsize() > 1:
        time.sleep(0.05)
    assert r.dbsize() == 1
    info = r.info("stats")
    assert info["expired_keys"] >= 49


def test_flush(r):
    fill(r, 10)
    assert r.flushdb() is True
    assert r.dbsize() == 0
    fill(r, 10)
    assert r.execute_command("FLUSHALL", "ASYNC") is True
    assert r.dbsize() == 0
    assert str(exact(r, "FLUSHALL", "FOO")) == "ERR syntax error"


def test_randomkey(r):
    assert r.randomkey() is None
    fill(r, 3)
    assert r.randomkey() in {b"k0", b"k1", b"k2"}
