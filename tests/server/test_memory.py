"""Memory hygiene: with maxmemory 0 reservations are held to the machine's
memory (physical memory, or a lower cgroup limit), client-query-buffer-limit
closes a client whose pending input passes it, proto-max-bulk-len as Redis.

Filters are allocated lazily, so the multi-gigabyte reservations below cost
address space, not memory; the servers run without persistence, except in
the last test, which checks that a snapshot reads such pages without making
the kernel allocate them.
"""
import os
import shutil
import socket
import subprocess
import time

import pytest

import conftest
from conftest import QUICK, RespError, wait_for

NOMEM = "ERR Insufficient memory to create filter"
OOM = "OOM command not allowed when used memory > 'maxmemory'."
MB = 1 << 20
NO_PERSIST = ("--save", "", "--appendonly", "no")
SERVER = os.path.abspath(conftest.BLOOMERYD)


def read_limit(path):
    try:
        with open(path) as f:
            v = f.read().strip()
    except OSError:
        return None
    return int(v) if v.isdigit() else None


def chain_limit(mount, rel, name):
    """Lowest limit from the group at rel up to the mount's root."""
    best = None
    parts = [p for p in rel.split("/") if p]
    for i in range(len(parts), -1, -1):
        v = read_limit(os.path.join(mount, *parts[:i], name))
        if v is not None and (best is None or v < best):
            best = v
    return best


def machine_memory():
    """What the server should find, computed here independently."""
    limits = [os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")]
    v2 = False
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        hid, ctrls, rel = line.split(":", 2)
        if hid == "0" and ctrls == "":
            v2 = True
            limits.append(chain_limit("/sys/fs/cgroup", rel, "memory.max"))
        elif "memory" in ctrls.split(","):
            limits.append(chain_limit("/sys/fs/cgroup/memory", rel, "memory.limit_in_bytes"))
    if not v2:
        limits.append(read_limit("/sys/fs/cgroup/memory.max"))
    return min(v for v in limits if v is not None)


def exact(s, *args):
    c = s.raw()
    try:
        return c.cmd(*args)
    finally:
        c.close()


def used(c):
    return c.info("memory")["used_memory"]


def reserve(s, *args):
    r = exact(s, *args)
    return str(r) if isinstance(r, RespError) else r


def fill_until_refused(s, c, limit, key, error, capacity):
    """Reserve equal filters until one is refused; each success must have
    fit under limit and the refusal must be one that would not have."""
    size = None
    for i in range(1000):
        before = used(c)
        reply = reserve(s, "BF.RESERVE", "%s%d" % (key, i), error, capacity)
        if reply != "OK":
            assert reply == NOMEM
            assert size is not None and before + size > limit
            assert used(c) == before
            assert c.exists("%s%d" % (key, i)) == 0
            return
        grew = used(c) - before
        size = size or grew
        assert grew == size and before + size <= limit
    raise AssertionError("never refused")


def shrink_gap(s, c, limit, target):
    """Reserve 0.01 filters until less than about target bytes are left."""
    probe_before = used(c)
    assert reserve(s, "BF.RESERVE", "probe", "0.01", 1 << 20) == "OK"
    per_item = (used(c) - probe_before) / (1 << 20)
    for i in range(1000):
        gap = limit - used(c)
        if gap < 2 * target:
            return gap
        cap = int(min(1 << 30, (gap - target) / per_item))
        assert reserve(s, "BF.RESERVE", "tune%d" % i, "0.01", cap) == "OK"
    raise AssertionError("gap did not shrink")


def test_reservations_held_to_machine_memory(start_server):
    limit = machine_memory()
    s = start_server(*NO_PERSIST)
    c = s.client()
    assert c.config_get("maxmemory") == {"maxmemory": "0"}
    # Logged just after the port opens: wait for the line, not the port.
    wait_for(lambda: "filters may reserve up to the machine's memory" in s.output(),
             "the start-up line on the memory limit")

    # Two of a few hundred MB, whose dumps' headers are loaded below.
    assert reserve(s, "BF.RESERVE", "bmid", "0.01", 1 << 28) == "OK"
    assert reserve(s, "CF.RESERVE", "cmid", 1 << 26, "BUCKETSIZE", 4, "FINGERPRINT", 32) == "OK"
    assert c.execute_command("CF.ADD", "cmid", "x") == 1   # an empty one dumps nothing
    # The largest filters BF.RESERVE makes (about 6 GB each), until the
    # machine is spoken for: refused with RedisBloom's text, nothing changes.
    fill_until_refused(s, c, limit, "big", "0.000000001", 1 << 30)

    # Less than 128 MB left: every kind of filter too large for it is
    # refused the same way.
    gap = shrink_gap(s, c, limit, 64 * MB)
    assert 0 < gap < 128 * MB
    before = used(c)
    assert reserve(s, "CF.RESERVE", "cf", 1 << 28) == NOMEM
    assert reserve(s, "BF.RESERVE", "w", "0.01", 1 << 28, "WINDOW", 60) == NOMEM
    assert reserve(s, "BF.RESERVE", "cnt", "0.01", 1 << 28, "COUNTING") == NOMEM
    assert reserve(s, "BF.ADD", "auto", "x") == 1        # bf-initial-size 100 fits
    c.config_set("bf-initial-size", 1 << 28)
    assert reserve(s, "BF.ADD", "auto2", "x") == NOMEM
    c.config_set("bf-initial-size", 100)
    # So is a dump's header announcing a filter larger than what is left.
    header = c.execute_command("BF.SCANDUMP", "bmid", 0)[1]
    assert str(exact(s, "BF.LOADCHUNK", "copy", 1, header)) == "ERR received bad data"
    header = c.execute_command("CF.SCANDUMP", "cmid", 0)[1]
    assert str(exact(s, "CF.LOADCHUNK", "ccopy", 1, header)) == "Couldn't create filter!"
    assert str(exact(s, "BF.MERGE", "merged", "bmid")) == NOMEM
    assert c.exists("cf", "w", "cnt", "auto2", "copy", "ccopy", "merged") == 0
    assert used(c) - before == c.memory_usage("auto")

    # Reservations that fit are still made.
    assert reserve(s, "BF.RESERVE", "fits", "0.01", 1000) == "OK"
    assert c.execute_command("BF.ADD", "fits", "x") == 1
    assert c.execute_command("CF.ADD", "cfits", "x") == 1

    # A scaling filter whose next link (about 400 MB) cannot fit: the add
    # that needs it fails as RedisBloom's failed allocation, nothing changes.
    assert c.execute_command("BF.RESERVE", "g", "0.01", 10000, "EXPANSION", 32768) == b"OK"
    i = 0
    while c.execute_command("BF.CARD", "g") < 10000:    # full: the next new item grows it
        n = 10000 - c.execute_command("BF.CARD", "g")
        c.execute_command("BF.MADD", "g", *["i%d" % j for j in range(i, i + n)])
        i += n
    assert c.execute_command("BF.INFO", "g", "FILTERS") == [1]
    info = c.execute_command("BF.INFO", "g")
    new = next(x for x in ("n%d" % i for i in range(100000))
               if c.execute_command("BF.EXISTS", "g", x) == 0)
    before = used(c)
    assert str(exact(s, "BF.ADD", "g", new)) == "ERR problem inserting into filter"
    assert c.execute_command("BF.INFO", "g") == info
    assert used(c) == before

    # A cuckoo filter's next sub-filter (about 300 MB) likewise.
    assert c.execute_command("CF.RESERVE", "cg", 10000, "EXPANSION", 32768) == b"OK"
    raw = s.raw()
    for i in range(40000):
        reply = raw.cmd("CF.ADD", "cg", "i%d" % i)
        if reply != 1:
            break
    raw.close()
    assert str(reply) == "ERR Insufficient memory"
    assert c.execute_command("CF.INFO", "cg")[5] == 1   # Number of filters

    # With maxmemory set its refusal stays Redis's OOM error.
    c.config_set("maxmemory", used(c) + 1000)
    assert reserve(s, "BF.RESERVE", "m", "0.01", 1 << 20) == OOM
    c.config_set("maxmemory", 0)
    c.flushall()
    assert used(c) == 0
    c.close()


def unshare_works():
    if shutil.which("unshare") is None:
        return False
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


def cgroup_wrapper(tmp_path, value):
    """A bloomeryd that sees value in /sys/fs/cgroup/memory.max: a private
    mount namespace with a tmpfs over /sys/fs/cgroup, nothing else changed
    (the process stays in its real cgroups)."""
    path = tmp_path / ("bloomeryd-cgroup-%s" % value)
    path.write_text(
        "#!/bin/sh\n"
        "exec unshare -m --propagation private sh -c '"
        "mount -t tmpfs none /sys/fs/cgroup && "
        "echo %s > /sys/fs/cgroup/memory.max && exec \"$0\" \"$@\"' %s \"$@\"\n"
        % (value, SERVER))
    path.chmod(0o755)
    return str(path)


@pytest.mark.skipif(not unshare_works(),
                    reason="needs unshare -m (root or CAP_SYS_ADMIN) to show the server a "
                           "cgroup memory.max")
def test_cgroup_memory_max_lowers_the_limit(start_server, tmp_path, monkeypatch):
    phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    cg = 3 << 30
    assert cg < phys
    monkeypatch.setattr(conftest, "BLOOMERYD", cgroup_wrapper(tmp_path, cg))
    s = start_server(*NO_PERSIST)
    c = s.client()
    wait_for(lambda: "filters may reserve up to the machine's memory, 3.00G" in s.output(),
             "the start-up line on the cgroup's limit")
    # About 1.5 GB each: two fit under 3 GiB, the third does not.
    fill_until_refused(s, c, cg, "f", "0.01", 1 << 30)
    assert c.dbsize() == 2
    c.close()

    # "max" is no limit: physical memory applies.
    monkeypatch.setattr(conftest, "BLOOMERYD", cgroup_wrapper(tmp_path, "max"))
    s = start_server(*NO_PERSIST)
    c = s.client()
    for i in range(3):
        assert c.execute_command("BF.RESERVE", "f%d" % i, "0.01", 1 << 30) == b"OK"
    c.close()


@pytest.mark.skipif(not unshare_works(),
                    reason="needs unshare -m (root or CAP_SYS_ADMIN) to show the server a "
                           "cgroup memory.max")
def test_replay_is_not_held_to_the_limit(start_server, tmp_path, monkeypatch):
    # Three 1.5 GB filters accepted under physical memory, in the log ...
    s = start_server("--save", "")
    c = s.client()
    for i in range(3):
        assert c.execute_command("BF.RESERVE", "f%d" % i, "0.01", 1 << 30) == b"OK"
    total = used(c)
    c.close()
    s.stop()
    # ... all come back under a 3 GiB cgroup limit: what was accepted once
    # is replayed. New reservations are held to the limit.
    monkeypatch.setattr(conftest, "BLOOMERYD", cgroup_wrapper(tmp_path, 3 << 30))
    s = start_server("--save", "", datadir=s.datadir)
    c = s.client()
    assert c.dbsize() == 3
    assert used(c) == total > 3 << 30
    assert reserve(s, "BF.RESERVE", "more", "0.01", 1000) == NOMEM
    c.close()


# ---- client-query-buffer-limit ----

def stream_request(sock, small, sizes, piece=4 * MB):
    """Send a request of the small arguments then one argument per size,
    streamed from one reused piece. Returns the argument bytes the kernel
    took before the server closed the connection (all of them if it did
    not), counted send by send: a piece cut short by the close counts for
    what went out of it."""
    head = [b"*%d\r\n" % (len(small) + len(sizes))]
    for a in small:
        head.append(b"$%d\r\n%s\r\n" % (len(a), a))
    chunk = memoryview(b"x" * piece)
    sent = 0
    try:
        sock.sendall(b"".join(head))
        for n in sizes:
            sock.sendall(b"$%d\r\n" % n)
            left = n
            while left:
                k = sock.send(chunk[:min(left, piece)])
                sent += k
                left -= k
            sock.sendall(b"\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    return sent


def reply_bytes(sock, timeout=60):
    """Everything the server sends until it closes the connection."""
    sock.settimeout(timeout)
    got = b""
    try:
        while True:
            data = sock.recv(1 << 16)
            if not data:
                return got
            got += data
    except ConnectionResetError:
        return got


def test_query_buffer_limit_closes_client(start_server):
    s = start_server("--client-query-buffer-limit", "16mb")
    c = s.client()
    assert c.config_get("client-query-buffer-limit") == {
        "client-query-buffer-limit": "16777216"}
    # Under the limit: answered.
    assert c.echo(b"y" * (10 * MB)) == b"y" * (10 * MB)

    # 3 x 10 MB in one request: closed without a reply once past 16 MB.
    sock = socket.create_connection(("127.0.0.1", s.port))
    sent = stream_request(sock, [b"BF.MADD", b"k"], [10 * MB] * 3)
    assert sent > 16 * MB - 64 * 1024
    assert reply_bytes(sock) == b""
    sock.close()
    assert "Closing client that reached max query buffer length: id=" in s.output()
    assert '(qbuf initial bytes: "*5\\r\\n$7\\r\\nBF.MADD\\r\\n$1\\r\\nk\\r\\n$10485760' in s.output()

    # The server goes on: nothing was added, the client is gone.
    assert c.ping()
    assert c.exists("k") == 0
    wait_for(lambda: c.info("clients")["connected_clients"] == 1)

    # Raised at runtime, the same request is taken.
    c.config_set("client-query-buffer-limit", "64mb")
    sock = socket.create_connection(("127.0.0.1", s.port))
    assert stream_request(sock, [b"BF.MADD", b"k"], [10 * MB] * 3) == 30 * MB
    sock.shutdown(socket.SHUT_WR)
    assert reply_bytes(sock) == b"*3\r\n:1\r\n:0\r\n:0\r\n"   # the same item thrice
    sock.close()

    # Redis's range: 1mb and up.
    with pytest.raises(Exception) as e:
        c.config_set("client-query-buffer-limit", "1000")
    assert str(e.value) == (
        "CONFIG SET failed (possibly related to argument 'client-query-buffer-limit') - "
        "argument must be between 1048576 and 9223372036854775807 inclusive")
    c.close()


def vm_size(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")


def test_announced_bulk_costs_no_more_than_the_limit(start_server):
    s = start_server("--client-query-buffer-limit", "16mb")
    c = s.client()
    # Every worker has served a client (their malloc arenas exist).
    warm = [s.raw() for _ in range(4)]
    for w in warm:
        assert w.cmd("ECHO", "x" * MB) == b"x" * MB
    before = vm_size(s.proc.pid)
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"*2\r\n$4\r\nECHO\r\n$500000000\r\n" + b"x" * MB)
    wait_for(lambda: any(int(x["qbuf"]) >= MB for x in c.client_list()))
    # The buffer for the announced 500 MB was sized to the limit.
    assert vm_size(s.proc.pid) - before < 200 * MB
    sock.close()
    for w in warm:
        w.close()
    c.close()


def test_query_buffer_limit_from_config_file(start_server):
    s = start_server(config="client-query-buffer-limit 2mb\nproto-max-bulk-len 1mb\n")
    c = s.client()
    assert c.config_get("client-query-buffer-limit") == {
        "client-query-buffer-limit": "2097152"}
    c.close()
    sock = socket.create_connection(("127.0.0.1", s.port))
    stream_request(sock, [b"BF.MADD", b"k"], [MB] * 3)
    assert reply_bytes(sock) == b""
    sock.close()


def test_proto_max_bulk_len(start_server):
    s = start_server()
    c = s.client()
    assert c.config_get("proto-max-bulk-len") == {"proto-max-bulk-len": "536870912"}
    with pytest.raises(Exception) as e:
        c.config_set("proto-max-bulk-len", "1000")
    assert str(e.value) == (
        "CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - "
        "argument must be between 1048576 and 9223372036854775807 inclusive")
    c.config_set("proto-max-bulk-len", "1mb")
    # Exactly the limit is taken, one byte more is a protocol error.
    assert c.echo(b"z" * MB) == b"z" * MB
    raw = s.raw()
    raw.send(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % (MB + 1))
    assert str(raw.read()) == "ERR Protocol error: invalid bulk length"
    assert raw.closed()
    raw.close()
    c.close()


@pytest.mark.skipif(QUICK, reason="streams 1.2 GB (BLOOMERY_QUICK)")
def test_default_limit_refuses_1200_mb_request(start_server):
    s = start_server()
    c = s.client()
    assert c.config_get("client-query-buffer-limit") == {
        "client-query-buffer-limit": "1073741824"}
    sock = socket.create_connection(("127.0.0.1", s.port))
    sent = stream_request(sock, [b"BF.MADD", b"k"], [400 * MB] * 3)
    assert sent > 1024 * MB - 64 * 1024
    assert reply_bytes(sock) == b""
    sock.close()
    assert "Closing client that reached max query buffer length" in s.output()
    assert c.exists("k") == 0
    # The gigabyte of query buffer is given back.
    wait_for(lambda: c.info("memory")["used_memory_rss"] < 256 * MB)
    assert c.ping()
    c.close()


def thp_in_use():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[never]" not in f.read()
    except OSError:
        return False


@pytest.mark.skipif(not thp_in_use(),
                    reason="without transparent huge pages a read of unwritten "
                           "memory maps the shared zero page and costs nothing")
@pytest.mark.parametrize("reserve", [
    # copy-on-write at a snapshot, and read live (docs/PERSISTENCE.md)
    ("BF.RESERVE", "k", "0.01", "1000000000"),
    ("BF.RESERVE", "k", "0.01", "1000000000", "WINDOW", "3600", "SLICES", "8"),
], ids=["bloom", "window"])
def test_snapshot_leaves_unwritten_memory_unallocated(start_server, reserve):
    """A snapshot reads every chunk of a value; the chunks of a reserved
    filter nobody wrote yet must come out as zeros without the kernel
    allocating them (with transparent huge pages a read of unwritten memory
    allocates and clears 2 MiB), or the first BGSAVE makes every reserved
    filter cost its full size."""
    s = start_server()
    c = s.client()
    c.execute_command(*reserve)
    size = int(dict(zip(*[iter(c.execute_command("BF.INFO", "k"))] * 2))[b"Size"])
    assert size > 1000 * MB
    c.execute_command("BF.ADD", "k", "one")
    before = c.info("memory")["used_memory_rss"]
    seq = c.info("persistence")["bloomery_snapshot_seq"]
    c.bgsave()
    wait_for(lambda: conftest.snapshot_done(c, seq), "the snapshot")
    after = c.info("memory")["used_memory_rss"]
    assert after - before < 64 * MB, (before, after, size)
    c.close()
    s.stop()
    s = start_server(datadir=s.datadir)
    c = s.client()
    assert c.execute_command("BF.EXISTS", "k", "one") == 1
    assert c.execute_command("BF.EXISTS", "k", "two") == 0
    # A load writes no zero page either (sanitizer builds start larger:
    # measured against the first server's start).
    assert c.info("memory")["used_memory_rss"] - before < 64 * MB
    c.close()
