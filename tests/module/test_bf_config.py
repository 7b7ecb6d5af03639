"""BF.CONFIG key READONLY [yes|no] inside Redis: the same handler as in
bloomeryd refuses every write of the Bloom and cuckoo families to a
read-only filter; Redis's RDB (DEBUG RELOAD, a restart, DUMP/RESTORE,
COPY, a replica's full sync), its replication stream and the AOF rewrite
keep the flag, and a filter that is not read-only saves exactly the bytes
it saved before the flag existed."""
import time

import pytest
import redis

from test_module import aof_commands, wait_rewrite

READONLY_ERR = "filter is read-only (BF.CONFIG key READONLY no allows writes)"

KEYS = {
    "added": [("BF.ADD", "added", "item0")],
    "prefix": [("BF.RESERVE", "prefix", 0.01, 1000)],
    "blocked": [("BF.RESERVE", "blocked", 0.01, 1000, "LAYOUT", "BLOCKED")],
    "classic": [("BF.RESERVE", "classic", 0.01, 1000, "LAYOUT", "CLASSIC")],
    "growing": [("BF.RESERVE", "growing", 0.01, 1000, "LAYOUT", "GROWING")],
    "counting": [("BF.RESERVE", "counting", 0.01, 1000, "COUNTING")],
    "window": [("BF.RESERVE", "window", 0.01, 1000, "WINDOW", 3600, "SLICES", 4)],
    "cuckoo": [("CF.RESERVE", "cuckoo", 1000)],
}


def make_keys(c):
    for key, cmds in KEYS.items():
        for cmd in cmds:
            c.execute_command(*cmd)
        add = "CF.ADD" if key == "cuckoo" else "BF.ADD"
        for i in range(20):
            c.execute_command(add, key, "item%d" % i)


def flag(c, key):
    return c.execute_command("BF.CONFIG", key, "READONLY")


def flags_of(c):
    return {k: flag(c, k) for k in KEYS}


def digests(c):
    return {k: c.execute_command("DEBUG", "DIGEST-VALUE", k) for k in KEYS}


def assert_refused(c, *cmd):
    with pytest.raises(redis.ResponseError) as e:
        c.execute_command(*cmd)
    assert str(e.value) == READONLY_ERR, cmd


def set_flags(c):
    """Every key read-only but "prefix", set and cleared again."""
    for key in KEYS:
        assert c.execute_command("BF.CONFIG", key, "READONLY", "yes") == b"OK"
    c.execute_command("BF.CONFIG", "prefix", "READONLY", "no")
    want = {k: b"no" if k == "prefix" else b"yes" for k in KEYS}
    assert flags_of(c) == want
    return want


def assert_kept(c, want, digest):
    assert flags_of(c) == want
    assert digests(c) == digest
    assert_refused(c, "BF.ADD", "classic", "new")
    assert_refused(c, "CF.ADD", "cuckoo", "new")
    assert c.execute_command("BF.ADD", "prefix", "new") == 1


def wait_for(cond, what, timeout=30):
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, what
        time.sleep(0.02)


def test_set_get_and_errors(m, module_server):
    m.execute_command("BF.ADD", "f", "x")
    assert flag(m, "f") == b"no"
    assert m.execute_command("BF.CONFIG", "f", "READONLY", "yes") == b"OK"
    assert flag(m, "f") == b"yes"
    for cmd, err in [
        (("BF.CONFIG", "f"), "wrong number of arguments for 'bf.config' command"),
        (("BF.CONFIG", "f", "READONLY", "yes", "x"),
         "wrong number of arguments for 'bf.config' command"),
        (("BF.CONFIG", "f", "LAYOUT"), "syntax error"),
        (("BF.CONFIG", "f", "READONLY", "maybe"), "READONLY must be 'yes' or 'no'"),
        (("BF.CONFIG", "missing", "READONLY", "yes"), "not found"),
        (("BF.CONFIG", "missing", "READONLY"), "not found"),
    ]:
        with pytest.raises(redis.ResponseError) as e:
            m.execute_command(*cmd)
        assert str(e.value) == err, cmd
    m.set("s", "v")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        m.execute_command("BF.CONFIG", "s", "READONLY", "yes")
    assert "<bloomery> BF.CONFIG: filter 'f' is now read-only" in module_server.output()


def test_every_kind_and_every_write_command_refused(m):
    make_keys(m)
    m.execute_command("BF.RESERVE", "dst", 0.01, 1000, "LAYOUT", "BLOCKED")
    m.execute_command("BF.RESERVE", "src", 0.01, 1000, "LAYOUT", "BLOCKED")
    m.execute_command("BF.ADD", "src", "s")
    before = digests(m)
    info = {k: m.execute_command("BF.INFO" if k != "cuckoo" else "CF.INFO", k) for k in KEYS}
    for key in list(KEYS) + ["dst"]:
        m.execute_command("BF.CONFIG", key, "READONLY", "yes")
    chunks, it = [], 0
    while True:
        it, data = m.execute_command("BF.SCANDUMP", "classic", it)
        if it == 0:
            break
        chunks.append((it, data))
    chunk = chunks[1]  # RedisBloom's format: bits at an offset, written in place
    calls = {
        "bf.add": ("BF.ADD", "added", "x"),
        "bf.madd": ("BF.MADD", "growing", "x", "y"),
        "bf.insert": ("BF.INSERT", "window", "ITEMS", "x"),
        "bf.loadchunk": ("BF.LOADCHUNK", "classic", chunk[0], chunk[1]),
        "bf.del": ("BF.DEL", "counting", "item1"),
        "bf.merge": ("BF.MERGE", "dst", "src"),
        "cf.add": ("CF.ADD", "cuckoo", "x"),
        "cf.addnx": ("CF.ADDNX", "cuckoo", "x"),
        "cf.insert": ("CF.INSERT", "cuckoo", "ITEMS", "x"),
        "cf.insertnx": ("CF.INSERTNX", "cuckoo", "ITEMS", "x"),
        "cf.del": ("CF.DEL", "cuckoo", "item1"),
        "cf.loadchunk": ("CF.LOADCHUNK", "cuckoo", 17, b"\x07" * 16),
    }
    writes = set()
    names = [n for n in m.execute_command("COMMAND LIST FILTERBY MODULE bloomery")
             if n.split(b".")[0] in (b"bf", b"cf")]
    for name, desc in m.execute_command("COMMAND", "INFO", *names).items():
        if "write" in desc["flags"]:
            writes.add(name)
    assert writes - {"bf.reserve", "cf.reserve", "bf.config"} == set(calls)
    accepted = []
    for name, cmd in sorted(calls.items()):
        try:
            m.execute_command(*cmd)
            accepted.append(name)
        except redis.ResponseError as e:
            assert str(e) == READONLY_ERR, name
    assert accepted == [], "writes to a read-only filter accepted"
    assert digests(m) == before
    assert {k: m.execute_command("BF.INFO" if k != "cuckoo" else "CF.INFO", k)
            for k in KEYS} == info
    assert m.execute_command("BF.EXISTS", "classic", "item1") == 1
    assert m.execute_command("CF.EXISTS", "cuckoo", "item1") == 1
    # Writable again, the same calls go through.
    for key in list(KEYS) + ["dst"]:
        m.execute_command("BF.CONFIG", key, "READONLY", "no")
    for name, cmd in sorted(calls.items()):
        m.execute_command(*cmd)


def test_key_commands_copy_and_dump_restore(m):
    m.execute_command("BF.ADD", "f", "x")
    m.execute_command("BF.CONFIG", "f", "READONLY", "yes")
    assert m.expire("f", 1000) and m.persist("f")
    assert m.copy("f", "copied")
    assert flag(m, "copied") == b"yes"
    dump = m.dump("f")
    assert m.rename("f", "g")
    assert flag(m, "g") == b"yes"
    m.restore("restored", 0, dump)
    assert flag(m, "restored") == b"yes"
    assert_refused(m, "BF.ADD", "restored", "y")
    assert m.delete("g", "copied", "restored") == 3


def test_a_filter_not_read_only_saves_the_bytes_it_saved_before(m):
    """The flag is saved only by read-only values: a filter made writable
    again dumps exactly as one never marked."""
    for key, cmds in KEYS.items():
        for cmd in cmds:
            m.execute_command(*cmd)
        plain = m.dump(key)
        m.execute_command("BF.CONFIG", key, "READONLY", "yes")
        marked = m.dump(key)
        m.execute_command("BF.CONFIG", key, "READONLY", "no")
        assert m.dump(key) == plain, key
        assert marked != plain, key


def test_debug_reload_and_a_restart_keep_it(start_module):
    s = start_module("bfconfig-rdb")
    c = s.client()
    make_keys(c)
    want = set_flags(c)
    digest = digests(c)
    assert c.execute_command("DEBUG", "RELOAD") == b"OK"
    assert_kept(c, want, digest)
    c.execute_command("SAVE")
    digest = digests(c)
    c.close()
    s.stop()
    c = start_module("bfconfig-rdb").client()
    assert flags_of(c) == want and digests(c) == digest


def test_aof_rewrite_keeps_it(start_module):
    args = ("--appendonly", "yes", "--aof-use-rdb-preamble", "no")
    s = start_module("bfconfig-aof", *args)
    c = s.client()
    make_keys(c)
    want = set_flags(c)
    digest = digests(c)
    c.bgrewriteaof()
    assert wait_rewrite(c) == "ok"
    configs = [cmd for cmd in aof_commands(s.dir) if cmd[0].upper() == b"BF.CONFIG"]
    assert sorted(cmd[1] for cmd in configs) == sorted(
        k.encode() for k, v in want.items() if v == b"yes")
    c.close()
    s.stop()
    c = start_module("bfconfig-aof", *args).client()
    assert_kept(c, want, digest)


def test_a_replica_gets_it(start_module):
    """Set before the replica's full sync (the RDB file) and after (the
    replication stream); promoted, the replica refuses the adds."""
    master = start_module("bfconfig-master", "--repl-diskless-sync-delay", "0")
    c = master.client()
    make_keys(c)
    c.execute_command("BF.CONFIG", "classic", "READONLY", "yes")
    c.execute_command("BF.CONFIG", "cuckoo", "READONLY", "yes")
    replica = start_module("bfconfig-replica", "--replicaof", "127.0.0.1", str(master.port))
    rc = replica.client()
    wait_for(lambda: rc.info("replication")["master_link_status"] == "up", "the sync")
    c.execute_command("BF.CONFIG", "window", "READONLY", "yes")
    c.execute_command("BF.CONFIG", "cuckoo", "READONLY", "no")
    assert c.execute_command("WAIT", 1, 10000) == 1
    assert digests(rc) == digests(c)
    rc.execute_command("REPLICAOF", "NO", "ONE")
    want = {k: b"yes" if k in ("classic", "window") else b"no" for k in KEYS}
    assert flags_of(rc) == want == flags_of(c)
    assert_refused(rc, "BF.ADD", "classic", "new")
    assert_refused(rc, "BF.ADD", "window", "new")
    assert rc.execute_command("CF.ADD", "cuckoo", "new") == 1


def test_a_user_without_write_cannot_set_it(m, module_server):
    """Its key spec is RW: a user allowed to read keys only cannot run it.
    Redis 7.0 files module commands under no category but @all, so
    -@write takes it away only from 7.2 on (as RedisBloom's writes)."""
    version = tuple(int(x) for x in m.info("server")["redis_version"].split(".")[:2])
    m.execute_command("BF.ADD", "f", "x")
    m.execute_command("ACL", "SETUSER", "keyreader", "on", "nopass", "%R~*", "+@all")
    m.execute_command("ACL", "SETUSER", "nowrite", "on", "nopass", "~*", "+@all", "-@write")
    try:
        u = module_server.client(username="keyreader", password="x")
        for cmd in (("BF.CONFIG", "f", "READONLY", "yes"), ("BF.CONFIG", "f", "READONLY")):
            with pytest.raises(redis.exceptions.NoPermissionError,
                               match="no permissions to access one of the keys"):
                u.execute_command(*cmd)
        assert u.execute_command("BF.EXISTS", "f", "x") == 1
        if version >= (7, 2):
            u = module_server.client(username="nowrite", password="x")
            with pytest.raises(redis.exceptions.NoPermissionError,
                               match="no permissions to run the 'bf.config' command"):
                u.execute_command("BF.CONFIG", "f", "READONLY", "yes")
        assert flag(m, "f") == b"no"
    finally:
        m.execute_command("ACL", "DELUSER", "keyreader", "nowrite")
