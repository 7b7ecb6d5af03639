"""BF.CONFIG key READONLY [yes|no] (docs/COMMANDS.md): a read-only filter
refuses every command that would change its content, of every Bloom layout,
counting filters, windows and cuckoo filters, and answers every read as
before; the key's own commands (DEL, EXPIRE, PERSIST, RENAME) go on. The
flag is logged, replicated and kept across restarts from the log alone and
from a snapshot alone."""
import os
import subprocess

import pytest
import redis

from conftest import BLOOMERYD, MODULE, scandump, wait_for, wait_log_durable

pytestmark = pytest.mark.skipif(bool(MODULE), reason="tests/module/test_bf_config.py")

READONLY_ERR = "filter is read-only (BF.CONFIG key READONLY no allows writes)"
CLI = os.environ.get("BLOOMERY_CLI") or os.path.join(os.path.dirname(BLOOMERYD), "bloomery")

# One key of every kind the flag applies to, and how to make it.
KEYS = {
    "added": [("BF.ADD", "added", "item0")],  # an add's default: the growing layout
    "prefix": [("BF.RESERVE", "prefix", 0.01, 1000)],
    "blocked": [("BF.RESERVE", "blocked", 0.01, 1000, "LAYOUT", "BLOCKED")],
    "classic": [("BF.RESERVE", "classic", 0.01, 1000, "LAYOUT", "CLASSIC")],
    "growing": [("BF.RESERVE", "growing", 0.01, 1000, "LAYOUT", "GROWING")],
    "fixed": [("BF.RESERVE", "fixed", 0.01, 1000, "NONSCALING")],
    "counting": [("BF.RESERVE", "counting", 0.01, 1000, "COUNTING")],
    "window": [("BF.RESERVE", "window", 0.01, 1000, "WINDOW", 3600, "SLICES", 4)],
    "cuckoo": [("CF.RESERVE", "cuckoo", 1000)],
}
BLOOM_KEYS = [k for k in KEYS if k != "cuckoo"]


def make_keys(c):
    for key, cmds in KEYS.items():
        for cmd in cmds:
            c.execute_command(*cmd)
        add = "CF.ADD" if key == "cuckoo" else "BF.ADD"
        for i in range(20):
            c.execute_command(add, key, "item%d" % i)


def contents(c, key):
    """What the commands show of key: its dump, its info and its checks."""
    if key == "cuckoo":
        return (scandump(c, "CF", key), c.execute_command("CF.INFO", key),
                c.execute_command("CF.MEXISTS", key, *("item%d" % i for i in range(25))))
    dump = None if key == "window" else scandump(c, "BF", key)
    return (dump, c.execute_command("BF.INFO", key),
            c.execute_command("BF.MEXISTS", key, *("item%d" % i for i in range(25))))


def assert_refused(c, *cmd):
    with pytest.raises(redis.ResponseError) as e:
        c.execute_command(*cmd)
    assert str(e.value) == READONLY_ERR, cmd


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def flag(c, key):
    return c.execute_command("BF.CONFIG", key, "READONLY")


def test_set_get_and_errors(r, raw):
    r.execute_command("BF.ADD", "f", "x")
    assert flag(r, "f") == b"no"
    assert r.execute_command("BF.CONFIG", "f", "readonly", "YES") == b"OK"
    assert flag(r, "f") == b"yes"
    assert r.execute_command("BF.CONFIG", "f", "READONLY", "yes") == b"OK"  # unchanged
    assert r.execute_command("BF.CONFIG", "f", "READONLY", "no") == b"OK"
    assert flag(r, "f") == b"no"
    for cmd, err in [
        (("BF.CONFIG", "f"), "wrong number of arguments for 'bf.config' command"),
        (("BF.CONFIG", "f", "READONLY", "yes", "x"),
         "wrong number of arguments for 'bf.config' command"),
        (("BF.CONFIG", "f", "LAYOUT"), "syntax error"),
        (("BF.CONFIG", "f", "LAYOUT", "yes"), "syntax error"),
        (("BF.CONFIG", "f", "READONLY", "maybe"), "READONLY must be 'yes' or 'no'"),
        (("BF.CONFIG", "f", "READONLY", "1"), "READONLY must be 'yes' or 'no'"),
        (("BF.CONFIG", "missing", "READONLY", "yes"), "not found"),
        (("BF.CONFIG", "missing", "READONLY"), "not found"),
    ]:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(*cmd)
        assert str(e.value) == err, cmd
    # BF.INFO's answer to a missing key, as RedisBloom's.
    with pytest.raises(redis.ResponseError, match="^not found$"):
        r.execute_command("BF.INFO", "missing")
    assert not r.exists("missing")
    r.execute_command("PFADD", "hll", "a")
    r.execute_command("CMS.INITBYDIM", "cms", 10, 2)
    for key in ("hll", "cms"):
        with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
            r.execute_command("BF.CONFIG", key, "READONLY", "yes")
    info = raw.cmd("COMMAND", "INFO", "bf.config")[0]
    assert info[1] == -3 and info[2] == ["write"] and info[3:6] == [1, 1, 1]
    assert sorted(info[6]) == ["@bloom", "@slow", "@write"]


def test_every_kind_refuses_adds_and_answers_reads(r, server):
    make_keys(r)
    before = {k: contents(r, k) for k in KEYS}
    for key in KEYS:
        assert r.execute_command("BF.CONFIG", key, "READONLY", "yes") == b"OK"
        assert flag(r, key) == b"yes"
    for key in BLOOM_KEYS:
        assert_refused(r, "BF.ADD", key, "new")
        assert_refused(r, "BF.MADD", key, "new", "item1")
        assert_refused(r, "BF.INSERT", key, "ITEMS", "new")
        assert_refused(r, "BF.INSERT", key, "NOCREATE", "ITEMS", "new")
    for cmd in ("CF.ADD", "CF.ADDNX", "CF.DEL"):
        assert_refused(r, cmd, "cuckoo", "item1")
    for cmd in ("CF.INSERT", "CF.INSERTNX"):
        assert_refused(r, cmd, "cuckoo", "ITEMS", "new")
    assert_refused(r, "BF.DEL", "counting", "item1")
    # Reads answer as before (BF.INFO unchanged: RedisBloom's clients parse it).
    assert {k: contents(r, k) for k in KEYS} == before
    for key in BLOOM_KEYS:
        assert r.execute_command("BF.EXISTS", key, "item3") == 1
        assert r.execute_command("BF.CARD", key) == 20
        r.execute_command("BF.DEBUG", key) if key != "window" else None
    assert r.execute_command("CF.COUNT", "cuckoo", "item3") == 1
    r.execute_command("CF.DEBUG", "cuckoo")
    # Writable again: the same adds go through.
    for key in KEYS:
        assert r.execute_command("BF.CONFIG", key, "READONLY", "no") == b"OK"
    for key in BLOOM_KEYS:
        assert r.execute_command("BF.ADD", key, "new") == 1
    assert r.execute_command("CF.ADD", "cuckoo", "new") == 1
    assert r.execute_command("BF.DEL", "counting", "new") == 1
    out = server.output()
    for key in KEYS:  # notice level: Redis's "*" mark
        assert " * BF.CONFIG: filter '%s' is now read-only\n" % key in out
        assert " * BF.CONFIG: filter '%s' is now writable\n" % key in out
    # A key that is not text is written escaped, on one line.
    r.execute_command("BF.ADD", b"bin\nkey\x00", "x")
    r.execute_command("BF.CONFIG", b"bin\nkey\x00", "READONLY", "yes")
    assert " * BF.CONFIG: filter 'bin\\x0akey\\x00' is now read-only\n" in server.output()


def write_invocations(c):
    """For every write command of the Bloom and cuckoo families, a call that
    succeeds on a writable filter and would change a read-only one; keyed
    by the command's name. Creations (RESERVE) and BF.CONFIG itself are not
    writes to an existing filter's content."""
    c.execute_command("BF.RESERVE", "src", 0.01, 1000, "LAYOUT", "BLOCKED")
    c.execute_command("BF.RESERVE", "dst", 0.01, 1000, "LAYOUT", "BLOCKED")
    c.execute_command("BF.MADD", "src", "m1", "m2")
    c.execute_command("BF.RESERVE", "classic", 0.01, 1000, "LAYOUT", "CLASSIC")
    c.execute_command("BF.ADD", "classic", "c1")
    c.execute_command("BF.RESERVE", "counting", 0.01, 1000, "COUNTING")
    c.execute_command("BF.MADD", "counting", "d1", "d2")
    c.execute_command("CF.RESERVE", "cuckoo", 1000)
    c.execute_command("CF.ADD", "cuckoo", "e1")
    bchunk = scandump(c, "BF", "classic")[1]  # RedisBloom's: a chunk of bits at an offset
    return {
        "bf.add": ("classic", ("BF.ADD", "classic", "x")),
        "bf.madd": ("classic", ("BF.MADD", "classic", "x", "y")),
        "bf.insert": ("classic", ("BF.INSERT", "classic", "ITEMS", "x")),
        "bf.loadchunk": ("classic", ("BF.LOADCHUNK", "classic", bchunk[0], bchunk[1])),
        "bf.del": ("counting", ("BF.DEL", "counting", "d1")),
        "bf.merge": ("dst", ("BF.MERGE", "dst", "src")),
        "cf.add": ("cuckoo", ("CF.ADD", "cuckoo", "x")),
        "cf.addnx": ("cuckoo", ("CF.ADDNX", "cuckoo", "y")),
        "cf.insert": ("cuckoo", ("CF.INSERT", "cuckoo", "ITEMS", "z")),
        "cf.insertnx": ("cuckoo", ("CF.INSERTNX", "cuckoo", "ITEMS", "w")),
        "cf.del": ("cuckoo", ("CF.DEL", "cuckoo", "e1")),
        # RedisBloom's chunk format: bytes ending at iterator - 1 of the
        # tables, written in place into a filter of 8-bit fingerprints.
        "cf.loadchunk": ("cuckoo", ("CF.LOADCHUNK", "cuckoo", 17, b"\x07" * 16)),
    }


def test_every_write_command_of_the_family_is_refused(r, raw):
    """Every write command COMMAND lists for the Bloom and cuckoo families
    is covered, so a new one cannot slip past the flag."""
    calls = write_invocations(r)
    writes = set()
    for info in raw.cmd("COMMAND"):
        name, flags = text(info[0]), [text(f) for f in info[2]]
        if name.split(".")[0] in ("bf", "cf") and "write" in flags:
            writes.add(name)
    assert writes - {"bf.reserve", "cf.reserve", "bf.config"} == set(calls)
    passed = []
    for name, (key, cmd) in sorted(calls.items()):
        family = "CF" if key == "cuckoo" else "BF"
        before = scandump(r, family, key)
        r.execute_command("BF.CONFIG", key, "READONLY", "yes")
        try:
            r.execute_command(*cmd)
            passed.append(name)
        except redis.ResponseError as e:
            assert str(e) == READONLY_ERR, name
            assert scandump(r, family, key) == before, name
        r.execute_command("BF.CONFIG", key, "READONLY", "no")
        r.execute_command(*cmd)  # the call is good: only the flag refused it
    assert passed == [], "writes to a read-only filter accepted"


def test_pipelined_adds_and_transactions_are_refused(r):
    r.execute_command("BF.ADD", "f", "x")
    r.execute_command("BF.CONFIG", "f", "READONLY", "yes")
    p = r.pipeline(transaction=False)
    for i in range(50):
        p.execute_command("BF.ADD", "f", "p%d" % i)
    out = p.execute(raise_on_error=False)
    assert all(isinstance(e, redis.ResponseError) and str(e) == READONLY_ERR for e in out)
    p = r.pipeline(transaction=True)
    p.execute_command("BF.ADD", "f", "t")
    p.execute_command("BF.EXISTS", "f", "x")
    out = p.execute(raise_on_error=False)
    assert str(out[0]) == READONLY_ERR and out[1] == 1
    assert r.execute_command("BF.MEXISTS", "f", "t", *("p%d" % i for i in range(50))) == [0] * 51


def test_key_commands_still_work(r):
    r.execute_command("BF.ADD", "f", "x")
    r.execute_command("BF.CONFIG", "f", "READONLY", "yes")
    assert r.expire("f", 1000)
    assert r.ttl("f") > 0
    assert r.persist("f")
    assert r.rename("f", "g")
    assert flag(r, "g") == b"yes"  # a property of the filter: it moves with it
    assert_refused(r, "BF.ADD", "g", "y")
    assert r.delete("g") == 1
    # A new filter under the old name is writable.
    assert r.execute_command("BF.ADD", "g", "y") == 1
    assert flag(r, "g") == b"no"


def test_a_dump_restores_a_writable_filter(r):
    """SCANDUMP carries the filter's bits, in RedisBloom's format or ours,
    not the flag: LOADCHUNK makes a filter that is writable."""
    for layout in ("CLASSIC", "BLOCKED"):
        r.execute_command("BF.RESERVE", "f", 0.01, 1000, "LAYOUT", layout)
        r.execute_command("BF.MADD", "f", "a", "b")
        r.execute_command("BF.CONFIG", "f", "READONLY", "yes")
        for it, data in scandump(r, "BF", "f"):
            r.execute_command("BF.LOADCHUNK", "copy", it, data)
        assert scandump(r, "BF", "copy") == scandump(r, "BF", "f")
        assert flag(r, "copy") == b"no"
        assert r.execute_command("BF.ADD", "copy", "c") == 1
        r.delete("f", "copy")


def check_data(d):
    p = subprocess.run([CLI, "check-data", d], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def flags_of(c):
    return {k: flag(c, k) for k in KEYS}


def set_flags(c):
    """Every key read-only but "prefix", set and cleared again."""
    for key in KEYS:
        c.execute_command("BF.CONFIG", key, "READONLY", "yes")
    c.execute_command("BF.CONFIG", "prefix", "READONLY", "no")
    want = {k: b"no" if k == "prefix" else b"yes" for k in KEYS}
    assert flags_of(c) == want
    return want


def assert_after_restart(c, want, before):
    assert flags_of(c) == want
    assert {k: contents(c, k) for k in KEYS} == before
    assert_refused(c, "BF.ADD", "classic", "new")
    assert_refused(c, "CF.ADD", "cuckoo", "new")
    assert c.execute_command("BF.ADD", "prefix", "new") == 1


def test_restart_from_the_log_alone(start_server):
    s = start_server()
    c = s.client()
    make_keys(c)
    want = set_flags(c)
    before = {k: contents(c, k) for k in KEYS}
    wait_log_durable(c)
    assert os.listdir(os.path.join(s.datadir, "snapshots")) == []
    s.kill()
    check_data(s.datadir)
    s2 = start_server(datadir=s.datadir)
    assert_after_restart(s2.client(), want, before)


@pytest.mark.parametrize("save", ["SAVE", "BGSAVE"])
def test_restart_from_a_snapshot_alone(start_server, save):
    s = start_server("--appendonly", "no")
    c = s.client()
    make_keys(c)
    want = set_flags(c)
    before = {k: contents(c, k) for k in KEYS}
    c.execute_command(save)
    wait_for(lambda: c.info("persistence")["rdb_bgsave_in_progress"] == 0 and
             c.info("persistence")["rdb_changes_since_last_save"] == 0, "the snapshot")
    assert c.info("persistence")["rdb_last_bgsave_status"] == "ok"
    logdir = os.path.join(s.datadir, "log")
    assert not os.path.isdir(logdir) or not any(f.endswith(".wal") for f in os.listdir(logdir))
    s.kill()
    check_data(s.datadir)
    s2 = start_server("--appendonly", "no", datadir=s.datadir)
    assert_after_restart(s2.client(), want, before)


def test_snapshot_then_log(start_server):
    """Flags in the snapshot, changes after it in the log: the log wins."""
    s = start_server()
    c = s.client()
    make_keys(c)
    set_flags(c)
    c.execute_command("SAVE")
    c.execute_command("BF.CONFIG", "classic", "READONLY", "no")
    c.execute_command("BF.CONFIG", "prefix", "READONLY", "yes")
    want = flags_of(c)
    assert want["classic"] == b"no" and want["prefix"] == b"yes"
    wait_log_durable(c)
    s.kill()
    s2 = start_server(datadir=s.datadir)
    assert flags_of(s2.client()) == want


def caught_up(master, replica):
    mc, rc = master.client(), replica.client()

    def done():
        m, r = mc.info("replication"), rc.info("replication")
        return (r.get("master_link_status") == "up" and
                r["slave_repl_offset"] == m["master_repl_offset"])
    wait_for(done, "the replica to catch up")


def test_a_replica_gets_the_flag(start_server):
    """Set before the replica attaches (the full resync's snapshot) and
    after (the streamed record); promoted, the replica refuses the adds."""
    master, replica = start_server(), start_server()
    m = master.client()
    make_keys(m)
    m.execute_command("BF.CONFIG", "classic", "READONLY", "yes")
    m.execute_command("BF.CONFIG", "cuckoo", "READONLY", "yes")
    rc = replica.client()
    rc.execute_command("REPLICAOF", "127.0.0.1", master.port)
    caught_up(master, replica)
    m.execute_command("BF.CONFIG", "window", "READONLY", "yes")
    m.execute_command("BF.CONFIG", "cuckoo", "READONLY", "no")
    caught_up(master, replica)
    assert rc.execute_command("BF.EXISTS", "classic", "item1") == 1
    rc.execute_command("REPLICAOF", "NO", "ONE")
    want = {k: b"yes" if k in ("classic", "window") else b"no" for k in KEYS}
    assert flags_of(rc) == want == flags_of(m)
    assert_refused(rc, "BF.ADD", "classic", "new")
    assert_refused(rc, "BF.ADD", "window", "new")
    assert rc.execute_command("CF.ADD", "cuckoo", "new") == 1


def test_a_user_without_write_cannot_set_it(r, server):
    r.execute_command("BF.ADD", "f", "x")
    r.execute_command("ACL", "SETUSER", "reader", "on", "nopass", "~*", "+@all", "-@write")
    r.execute_command("ACL", "SETUSER", "bloomw", "on", "nopass", "~*", "+@bloom")
    try:
        u = server.client(username="reader", password="x")
        for cmd in (("BF.CONFIG", "f", "READONLY", "yes"), ("BF.CONFIG", "f", "READONLY")):
            with pytest.raises(redis.exceptions.NoPermissionError,
                               match="has no permissions to run the 'bf.config' command"):
                u.execute_command(*cmd)
        assert u.execute_command("BF.EXISTS", "f", "x") == 1
        w = server.client(username="bloomw", password="x")
        assert w.execute_command("BF.CONFIG", "f", "READONLY", "yes") == b"OK"
        assert flag(r, "f") == b"yes"
    finally:
        r.execute_command("ACL", "DELUSER", "reader", "bloomw")
