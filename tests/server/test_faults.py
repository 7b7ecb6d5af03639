"""Storage faults injected under bloomeryd with the sync shim (powercut.py).

- appendfsync always, the log's write or fsync fails: the command is not
  acknowledged, the server logs "Can't persist the log" and exits non-zero
  (as Redis does under always); after the fault is gone and the power cut,
  every acknowledged item is there;
- appendfsync everysec, the same faults: writes are refused with Redis's
  "MISCONF Errors writing to the AOF file: ..." while reads answer, INFO
  shows aof_last_write_status:err, and once the disk is back writes are
  accepted again and nothing is lost;
- a slow fsync (held by the shim) with concurrent duplicates: a client told
  "already there" (BF.ADD 0 on a plain or windowed filter, CF.ADDNX 0, PFADD
  0) or an EXISTS that answered 1 gets no reply before the add it reports is
  durable; killed before, none of them was answered and the item is absent;
  released, all of them are answered;
- SIGTERM while the log's fsync hangs and then fails: the server stops;
- no memory for a command's log records (the shim's failing realloc): the
  command is refused with an OOM error having changed nothing, the server
  goes on, and what it acknowledged afterwards survives kill -9.

"Processed" is observed through INFO commandstats (INFO does not wait for
the log), never by sleeping.
"""
import os
import select
import signal
import subprocess
import time

import pytest
import redis

from conftest import BLOOMERYD, RawClient, snapshot_done, wait_for
from powercut import exited, faults  # noqa: F401 (a fixture)

MISCONF = "MISCONF Errors writing to the AOF file:"
EXIT_DEADLINE = 20      # seconds a server has to stop after a fault


def exact(s, *args):
    c = s.raw()
    try:
        return c.cmd(*args)
    finally:
        c.close()


def drain(raw, timeout=30):
    """Every byte the server sent on this connection until it ended."""
    raw.sock.settimeout(timeout)
    data = raw.buf
    try:
        while True:
            chunk = raw.sock.recv(1 << 16)
            if not chunk:
                return data
            data += chunk
    except ConnectionResetError:
        return data


def send(s, *args):
    """A new connection that sends one command and does not read."""
    c = s.raw()
    c.send(RawClient.encode(*args))
    return c


def calls(c):
    return {k[len("cmdstat_"):]: v["calls"] for k, v in c.info("commandstats").items()}


def wait_calls(c, base, more, timeout=30):
    """Wait until INFO commandstats shows `more` calls of each command
    beyond `base`: those commands ran (their replies may still be held)."""
    deadline = time.time() + timeout
    while True:
        now = calls(c)
        if all(now.get(cmd, 0) >= base.get(cmd, 0) + n for cmd, n in more.items()):
            return now
        assert time.time() < deadline, (base, more, now)
        time.sleep(0.005)


def wait_info(c, field, value, timeout=30):
    deadline = time.time() + timeout
    while str(c.info("persistence")[field]) != value:
        assert time.time() < deadline, "%s never became %s" % (field, value)
        time.sleep(0.01)


ITEMS = ["before:%d" % i for i in range(200)]


def fill(c):
    """Acknowledged writes of several types before the fault."""
    c.execute_command("BF.RESERVE", "k", "0.0001", "10000")
    c.execute_command("BF.MADD", "k", *ITEMS)
    c.execute_command("CF.ADD", "cf", "c1")
    c.execute_command("PFADD", "h", *ITEMS)


def check_filled(c):
    assert c.execute_command("BF.MEXISTS", "k", *ITEMS) == [1] * len(ITEMS)
    assert c.execute_command("CF.EXISTS", "cf", "c1") == 1
    assert c.execute_command("PFADD", "h", *ITEMS) == 0


# ---- the shim itself ----

def test_shim_journals_syncs_and_the_power_cut_keeps_them(faults, start_server):
    f = faults
    s = start_server("--appendfsync", "always", **f.server_kw())
    c = s.client()
    c.execute_command("BF.ADD", "k", "a")
    logs = [p for p in f.synced() if p.endswith(".wal")]
    assert len(logs) == 1, f.lines()
    log = logs[0]
    synced = f.synced()[log]
    assert synced == os.path.getsize(log) > 32
    # Skipped syncs: the file grows, the journal does not.
    f.set(fsync="skip", match="/log/")
    c.execute_command("BF.ADD", "k", "b")
    assert os.path.getsize(log) > synced == f.synced()[log]
    c.close()
    f.crash(s)
    assert os.path.getsize(log) == synced


def test_power_cut_keeps_what_a_log_fsync_covered_during_a_long_syncfs(faults, start_server):
    """A snapshot's syncfs takes the sizes of every file when it is called;
    held there, the log's fsyncs come and go and adds are acknowledged. The
    syncfs's lines, written when it returns, name the log at its older size:
    the power cut must still keep what the log's own fsyncs covered."""
    f = faults
    s = start_server("--appendfsync", "always", **f.server_kw())
    c = s.client()
    c.execute_command("BF.RESERVE", "k", "0.01", "100000")
    # Enough set bits that the snapshot writes a chunk file (a filter that
    # compresses to a few KB goes into the index, with no syncfs).
    before = ["before:%d" % i for i in range(20000)]
    c.execute_command("BF.MADD", "k", *before)
    seq = c.info("persistence")["bloomery_snapshot_seq"]
    f.set(fsync="block", match="/chunks")
    n = f.blocked_count()
    assert c.execute_command("BGSAVE") is True
    f.wait_blocked(n)
    items = ["during:%d" % i for i in range(20)]
    for it in items:
        assert c.execute_command("BF.ADD", "k", it) == 1
    f.set()
    wait_for(lambda: snapshot_done(c, seq), "the BGSAVE to finish")
    c.close()
    f.crash(s)
    s = start_server("--appendfsync", "always", **f.server_kw())
    got = s.client().execute_command("BF.MEXISTS", "k", *before, *items)
    assert got == [1] * (len(before) + len(items))


# ---- appendfsync always ----

@pytest.mark.parametrize("fault", ["fsync", "write"])
def test_always_log_fault_stops_the_server(faults, start_server, fault):
    f = faults
    s = start_server("--appendfsync", "always", **f.server_kw())
    c = s.client()
    fill(c)
    f.set(match="/log/", **{fault: "eio"})
    w = send(s, "BF.ADD", "k", "unacknowledged")
    status = exited(s, EXIT_DEADLINE)
    out = s.output()
    assert status is not None, "still running %d s after the log's %s failed\n%s" % (
        EXIT_DEADLINE, fault, out)
    assert status != 0, out
    assert "Can't persist the log" in out, out
    assert drain(w) == b"", "a write whose log %s failed was acknowledged" % fault
    w.close()
    c.close()
    f.set()
    f.power_cut()
    s2 = start_server(**f.server_kw())
    c2 = s2.client()
    check_filled(c2)
    c2.close()


# ---- appendfsync everysec ----

@pytest.mark.parametrize("fault", ["fsync", "write"])
def test_everysec_log_fault_refuses_writes(faults, start_server, fault):
    f = faults
    s = start_server("--appendfsync", "everysec", **f.server_kw())
    c = s.client()
    fill(c)
    f.set(match="/log/", **{fault: "eio"})
    # Everysec answers before the log is written: the fault shows after.
    first = exact(s, "BF.ADD", "k", "first")
    assert first == 1 or str(first).startswith(MISCONF), first
    wait_info(c, "aof_last_write_status", "err")
    for cmd in (("BF.ADD", "k", "refused"), ("BF.MADD", "k", "refused", "refused2"),
                ("PFADD", "h", "refused"), ("CF.ADD", "cf", "refused"), ("DEL", "k")):
        reply = exact(s, *cmd)
        assert str(reply).startswith(MISCONF), (cmd, reply)
    # Reads answer; PING is refused with writes, as Redis does.
    assert c.execute_command("BF.EXISTS", "k", ITEMS[0]) == 1
    assert c.execute_command("CF.EXISTS", "cf", "c1") == 1
    assert c.pfcount("h") > 0
    assert str(exact(s, "PING")).startswith(MISCONF)
    f.set()
    wait_info(c, "aof_last_write_status", "ok")
    after = ["after:%d" % i for i in range(50)]
    assert c.execute_command("BF.MADD", "k", *after) == [1] * len(after)
    c.close()
    s.stop()
    s2 = start_server(**f.server_kw())
    c2 = s2.client()
    check_filled(c2)
    assert c2.execute_command("BF.MEXISTS", "k", *after) == [1] * len(after)
    if first == 1:
        assert c2.execute_command("BF.EXISTS", "k", "first") == 1
    assert c2.execute_command("BF.MEXISTS", "k", "refused", "refused2") == [0, 0]
    assert c2.execute_command("CF.EXISTS", "cf", "refused") == 0
    c2.close()


# ---- a slow fsync and duplicates ----

def held(s, f):
    """Block the log's fsync under a first add, then send, each on its own
    connection, first adds of other types and then duplicates and reads of
    all of them. Returns the connections with the replies each must get
    once the log is durable, after every command ran."""
    c = s.client()
    c.execute_command("BF.RESERVE", "k", "0.0001", "10000")
    c.execute_command("BF.RESERVE", "win", "0.01", "100000", "WINDOW", "3600", "SLICES", "4")
    c.execute_command("CF.RESERVE", "cf", "1000")
    c.execute_command("BF.ADD", "k", "old")
    base = calls(c)
    f.set(fsync="block", match="/log/")
    n = f.blocked_count()
    a = send(s, "BF.ADD", "k", "x")
    f.wait_blocked(n)
    # First adds of the other types: applied, their records queued behind
    # the held sync.
    firsts = [(send(s, "PFADD", "h", "e"), 1),
              (send(s, "BF.ADD", "win", "w"), 1),
              (send(s, "CF.ADDNX", "cf", "c"), 1)]
    base = wait_calls(c, base, {"bf.add": 2, "pfadd": 1, "cf.addnx": 1})
    # Duplicates and reads of what is not durable yet.
    later = [(send(s, "BF.ADD", "k", "x"), 0),
             (send(s, "BF.EXISTS", "k", "x"), 1),
             (send(s, "PFADD", "h", "e"), 0),
             (send(s, "BF.ADD", "win", "w"), 0),
             (send(s, "BF.EXISTS", "win", "w"), 1),
             (send(s, "CF.ADDNX", "cf", "c"), 0),
             (send(s, "CF.EXISTS", "cf", "c"), 1)]
    wait_calls(c, base, {"bf.add": 2, "bf.exists": 2, "pfadd": 1, "cf.addnx": 1,
                         "cf.exists": 1})
    c.close()
    return [(a, 1)] + firsts + later


NAMES = ["A: BF.ADD k x", "PFADD h e", "BF.ADD win w", "CF.ADDNX cf c",
         "B: BF.ADD k x (duplicate)", "C: BF.EXISTS k x", "D: PFADD h e (duplicate)",
         "BF.ADD win w (duplicate)", "BF.EXISTS win w", "CF.ADDNX cf c (duplicate)",
         "CF.EXISTS cf c"]


def test_slow_fsync_holds_duplicates_and_reads_then_crash(faults, start_server):
    f = faults
    s = start_server("--appendfsync", "always", **f.server_kw())
    conns = held(s, f)
    f.crash(s)
    answered = [(name, drain(conn)) for name, (conn, _) in zip(NAMES, conns)]
    for conn, _ in conns:
        conn.close()
    early = [(name, data) for name, data in answered if data]
    assert not early, "answered before the log was durable: %s" % early
    f.set()
    s2 = start_server(**f.server_kw())
    c = s2.client()
    # Never synced, never acknowledged: gone, for everyone.
    assert c.execute_command("BF.MEXISTS", "k", "old", "x") == [1, 0]
    assert c.execute_command("BF.EXISTS", "win", "w") == 0
    assert c.execute_command("CF.EXISTS", "cf", "c") == 0
    assert c.exists("h") == 0
    c.close()


def test_slow_fsync_released_answers_everyone(faults, start_server):
    f = faults
    s = start_server("--appendfsync", "always", **f.server_kw())
    conns = held(s, f)
    socks = [conn.sock for conn, _ in conns]
    ready, _, _ = select.select(socks, [], [], 0)
    early = [name for name, (conn, _) in zip(NAMES, conns) if conn.sock in ready]
    assert not early, "answered before the log was durable: %s" % early
    f.set()
    got = [(name, conn.read(), want) for name, (conn, want) in zip(NAMES, conns)]
    assert [(n, g) for n, g, _ in got] == [(n, w) for n, _, w in got]
    for conn, _ in conns:
        conn.close()
    # Acknowledged now: durable through a power cut.
    f.crash(s)
    s2 = start_server(**f.server_kw())
    c = s2.client()
    assert c.execute_command("BF.MEXISTS", "k", "old", "x") == [1, 1]
    assert c.execute_command("BF.EXISTS", "win", "w") == 1
    assert c.execute_command("CF.EXISTS", "cf", "c") == 1
    assert c.execute_command("PFADD", "h", "e") == 0
    c.close()


# ---- shutdown ----

@pytest.mark.parametrize("then", ["eio", "ok"])
def test_sigterm_while_the_log_hangs(faults, start_server, then):
    """SIGTERM while the log's fsync is held; then the disk fails (the
    server must still stop, without acknowledging the add) or comes back
    (a clean stop: whatever was acknowledged survives a power cut)."""
    f = faults
    s = start_server("--appendfsync", "always", **f.server_kw())
    c = s.client()
    fill(c)
    c.close()
    f.set(fsync="block", match="/log/")
    n = f.blocked_count()
    a = send(s, "BF.ADD", "k", "x")
    f.wait_blocked(n)
    s.proc.send_signal(signal.SIGTERM)
    f.set(fsync=then, match="/log/")
    status = exited(s, EXIT_DEADLINE)
    out = s.output()
    assert status is not None, "still running %d s after SIGTERM\n%s" % (EXIT_DEADLINE, out)
    reply = drain(a)
    a.close()
    if then == "eio":
        assert status != 0, out
        assert reply == b"", "acknowledged although its fsync failed: %r" % reply
    else:
        assert status == 0, out
        assert reply in (b"", b":1\r\n"), reply
    f.set()
    f.power_cut()
    s2 = start_server(**f.server_kw())
    c2 = s2.client()
    check_filled(c2)
    if reply:
        assert c2.execute_command("BF.EXISTS", "k", "x") == 1
    c2.close()


# Out of memory while logging. The shim makes large reallocs fail; a
# sanitizer runtime answers realloc itself, so the release build runs this.
SANITIZED = any(lib in subprocess.run(["ldd", BLOOMERYD], capture_output=True, text=True).stdout
                for lib in ("libasan", "libtsan"))
REALLOC_OVER = 24 << 20
# A million short items: 7 MB of arguments (and of the parser's, the
# client's and the reply's arrays), whose log records a command must
# reserve more than REALLOC_OVER for.
ITEMS = ["i%d" % i for i in range(1_000_000)]
# command: (create the key, items prefix, what reads its state, the state
# after creation and after "after" was added)
OOM_CASES = {
    "BF.MADD": (["BF.RESERVE", "k", "0.01", "2000000"], [], ["BF.CARD", "k"], 0, 1),
    "PFADD": (["PFADD", "k", "first"], [], ["PFCOUNT", "k"], 1, 2),
    "CF.INSERT": (["CF.RESERVE", "k", "2000000"], ["ITEMS"], ["CF.COUNT", "k", "after"], 0, 1),
}


@pytest.mark.skipif(SANITIZED, reason="the sanitizer runtime answers realloc, not the shim")
@pytest.mark.parametrize("cmd", sorted(OOM_CASES))
def test_out_of_memory_while_logging_fails_the_command(faults, start_server, cmd):
    """A write whose log record cannot get memory is refused with an OOM
    error before it changes anything; the server goes on, and what it
    acknowledged afterwards survives a crash."""
    create, prefix, state, empty, after = OOM_CASES[cmd]
    f = faults
    env = {**f.env(), "SYNCSHIM_REALLOC_OVER": str(REALLOC_OVER)}
    s = start_server("--appendfsync", "always", "--save", "", datadir=f.datadir, env=env)
    c = s.client()
    c.execute_command(*create)
    assert c.execute_command(*state) == empty
    with pytest.raises(redis.exceptions.ResponseError, match="not enough memory to log it"):
        c.execute_command(cmd, "k", *prefix, *ITEMS)
    assert s.proc.poll() is None, s.output()
    assert c.execute_command(*state) == empty
    # PFCOUNT above says no item of the refused PFADD went in.
    probe = None if cmd == "PFADD" else [cmd.split(".")[0] + ".EXISTS", "k", ITEMS[7]]
    assert probe is None or c.execute_command(*probe) == 0
    c.execute_command(cmd, "k", *prefix, "after")
    assert c.execute_command(*state) == after
    s.kill()
    s2 = start_server("--appendfsync", "always", "--save", "", datadir=f.datadir)
    c2 = s2.client()
    assert c2.execute_command(*state) == after
    assert probe is None or c2.execute_command(*probe) == 0
