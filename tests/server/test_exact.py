"""Exact filters (BF.RESERVE ... EXACT): answers without false positives,
through crashes, power cuts, window rotations, races, failover and faults.

Every exact key here has error rate 0.5: its in-memory filter alone would
be wrong about half the time at capacity, so each right answer to a new or
absent item is the store's (RocksDB under DIR/exact/) confirmation.

- a stream of distinct items with 10% duplicates interleaved (1e6 items, 1e5
  under a sanitizer or BLOOMERY_QUICK) sent as pipelined BF.MADD batches:
  every reply is the true one (1 for an item's first occurrence, 0 after),
  then BF.MEXISTS finds every added item and none of 1e5 others;
- the same stream with kill -9 in the middle (appendfsync always), with and
  without a BGSAVE before it, and with a power cut (powercut.py): every item
  acknowledged before the crash is there and none acknowledged as new is new
  again after the restart; the stream then goes on with exact answers;
- a window forgets an item exactly at s0 + (slices + 1) * period, the
  instant its slice dies, and keeps it one millisecond before;
- clients racing to add the same new items: exactly one is told 1;
- a replica, full sync and stream, answers exactly after its master is
  killed and it is promoted;
- bad input (BF.RESERVE's options, BF.INSERT ... AT where it cannot
  work): a clear error, nothing made or added;
- faults: a store that cannot be opened (DIR/exact a regular file, a
  corrupted CURRENT), a corrupted .sst, failed writes (EIO, a full disk) of
  the log and of the store: a clear error, the other keys served, nothing
  acknowledged lost. EXACT in bloomery.so is the module suite's.

The time a command runs at is pinned to the millisecond by sending it with
the CONFIG SET of debug-clock-offset-ms in one pipeline, retried until the
whole round trip fell within one millisecond of the wall clock.
"""
import functools
import glob
import os
import random
import select
import shutil
import socket
import subprocess
import threading
import time

import pytest

from conftest import (BLOOMERYD, MODULE, QUICK, RespError, snapshot_done, wait_for,
                      wait_log_durable)
from powercut import faults  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(bool(MODULE), reason="EXACT is bloomeryd's (not the module's)")

SANITIZED = any(lib in subprocess.run(["ldd", BLOOMERYD], capture_output=True, text=True).stdout
                for lib in ("libasan", "libtsan"))
SMALL = QUICK or SANITIZED
N = 100_000 if SMALL else 1_000_000     # distinct items of the big stream
BATCH = 100                             # items per BF.MADD
DEPTH = 32                              # BF.MADDs in flight on the stream's connection
ERR_EXACT = "ERR EXACT"
# The store's write buffer (exact-buffer-keys): a table file written out
# every 66,666 fingerprints, so that answers come from files and buffer, and
# the buffer holds some at the BGSAVE and at the kill of the crash tests.
BUFFER = N // 15
ALWAYS = ("--appendfsync", "always", "--exact-buffer-keys", BUFFER)


# ---- the stream ----

def item(i):
    return b"x:%d" % i


class Plan:
    """n distinct items (x:0 .. x:n-1, in order) with a duplicate of an
    earlier one after every tenth: a tenth of them the item just added
    (often in the same batch), four tenths a recent one, the rest any.
    Cut into BF.MADD batches; never-added items are x:n and up."""

    def __init__(self, n, seed=30):
        rng = random.Random(seed)
        seq = []
        for i in range(n):
            seq.append(i)
            if i % 10 == 9:
                r = rng.random()
                if r < 0.1:
                    seq.append(i)
                elif r < 0.5:
                    seq.append(i - rng.randrange(min(i + 1, 3 * BATCH)))
                else:
                    seq.append(rng.randrange(i + 1))
        self.n = n
        self.batches = [seq[k:k + BATCH] for k in range(0, len(seq), BATCH)]
        self.cmds = {}

    def madds(self, key, lo=0, hi=None):
        """The encoded BF.MADD of batches lo..hi-1 (made once per key)."""
        if key not in self.cmds:
            self.cmds[key] = [command(b"BF.MADD", key, [item(i) for i in b]) for b in self.batches]
        return self.cmds[key][lo:hi]

    def check(self, lo, replies, seen, maybe=None):
        """Compare the replies of batches lo, lo+1, ... with the truth and
        record what they added in seen (a bytearray over the items). maybe:
        items a crash left unknown (added or not), whose next add may answer
        either. Returns the wrong answers, as (batch, item, got, wanted)."""
        bad = []
        for j, rep in enumerate(replies, lo):
            batch = self.batches[j]
            if not isinstance(rep, list) or len(rep) != len(batch):
                bad.append((j, None, rep, "a reply per item"))
                for i in batch:
                    seen[i] = 1
                continue
            for i, got in zip(batch, rep):
                if maybe is not None and i in maybe:
                    maybe.discard(i)
                    if got not in (0, 1):
                        bad.append((j, i, got, "0 or 1"))
                else:
                    want = 0 if seen[i] else 1
                    if got != want:
                        bad.append((j, i, got, want))
                seen[i] = 1
        return bad


@functools.lru_cache(maxsize=None)
def plan(n):
    return Plan(n)


def command(name, key, args):
    key = key.encode() if isinstance(key, str) else key
    out = [b"*%d\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(args) + 2, len(name), name, len(key), key)]
    out += [b"$%d\r\n%s\r\n" % (len(a), a) for a in args]
    return b"".join(out)


class Replies:
    """RESP2 replies read off a socket: integers, arrays, errors (as
    RespError values), simple and bulk strings."""

    def __init__(self, sock):
        self.sock, self.buf, self.pos = sock, b"", 0

    def _line(self):
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                line, self.pos = self.buf[self.pos:end], end + 2
                return line
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("connection closed")
            self.buf, self.pos = self.buf[self.pos:] + data, 0

    def read(self):
        line = self._line()
        t = line[:1]
        if t == b":":
            return int(line[1:])
        if t == b"*":
            return [self.read() for _ in range(int(line[1:]))]
        if t == b"-":
            return RespError(line[1:].decode())
        if t == b"+":
            return line[1:].decode()
        if t == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) - self.pos < n + 2:
                data = self.sock.recv(1 << 20)
                if not data:
                    raise ConnectionError("connection closed")
                self.buf += data
            data, self.pos = self.buf[self.pos:self.pos + n], self.pos + n + 2
            return data
        raise AssertionError("unexpected reply %r" % line)


class Sent:
    """What stream() got: the replies read, in order, and how many commands
    went out (those past the replies were in flight when the connection
    ended)."""

    def __init__(self):
        self.replies, self.sent = [], 0


def stream(port, cmds, after=None, depth=DEPTH):
    """Send the encoded commands on a new connection, up to depth of them
    ahead of their replies. after(k, reply) runs once the k-th reply was
    read (it may kill the server: what the server answered before is still
    read, up to the end of the connection). Returns a Sent."""
    out = Sent()
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    rd = Replies(sock)
    stop = len(cmds)
    try:
        while len(out.replies) < stop:
            while out.sent < stop and out.sent - len(out.replies) < depth:
                try:
                    sock.sendall(cmds[out.sent])
                except OSError:
                    stop = out.sent      # the server is gone: read what it answered
                    break
                out.sent += 1
            if len(out.replies) >= stop:
                break
            out.replies.append(rd.read())
            if after is not None:
                after(len(out.replies) - 1, out.replies[-1])
    except (ConnectionError, BrokenPipeError, ConnectionResetError):
        pass
    finally:
        sock.close()
    return out


def exists_check(port, key, ids, want):
    """BF.MEXISTS of items ids, 1000 a call; returns the items whose answer
    is not want, as (item, got)."""
    ids = list(ids)
    parts = [ids[k:k + 1000] for k in range(0, len(ids), 1000)]
    got = stream(port, [command(b"BF.MEXISTS", key, [item(i) for i in p]) for p in parts])
    assert len(got.replies) == len(parts), "connection lost after %d replies" % len(got.replies)
    wrong = []
    for p, rep in zip(parts, got.replies):
        if not isinstance(rep, list):
            rep = [rep] * len(p)
        wrong += [(item(i), g) for i, g in zip(p, rep) if g != want]
    return wrong


def final_check(port, key, p):
    """Every item of the plan found, none of a tenth as many others."""
    lost = exists_check(port, key, range(p.n), 1)
    assert not lost, "%d added items not found, e.g. %s" % (len(lost), lost[:5])
    false = exists_check(port, key, range(p.n, p.n + p.n // 10), 0)
    assert not false, "%d never-added items found, e.g. %s" % (len(false), false[:5])


def summary(bad):
    return "%d wrong answers, e.g. %s" % (len(bad), bad[:5])


# ---- info ----

def bf_info(c, key):
    i = c.execute_command("BF.INFO", key, "ALL")
    return dict(zip([k.decode() if isinstance(k, bytes) else k for k in i[0::2]], i[1::2]))


def exact_info(s):
    """INFO exact as text fields (redis-py would parse an error text with
    "=" and "," in it into a dict)."""
    text = raw_cmd(s, "INFO", "exact").decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def raw_cmd(s, *args):
    """One command on its own raw connection: errors come back whole, as
    RespError, "ERR " and all."""
    c = s.raw()
    try:
        return c.cmd(*[a if isinstance(a, (bytes, int)) else str(a) for a in args])
    finally:
        c.close()


def assert_exact_error(reply, what):
    assert isinstance(reply, RespError) and str(reply).startswith(ERR_EXACT), (what, reply)


# ---- bad input ----

@pytest.mark.parametrize("args,msg", [
    (["RETAIN", 10], "ERR RETAIN needs EXACT"),
    (["WINDOW", 10, "SLICES", 2, "EXACT", "RETAIN", 14], "ERR RETAIN must be at least the"),
    (["EXACT", "RETAIN", 0], "ERR RETAIN must be a positive number of seconds"),
    (["EXACT", "COUNTING"], "ERR WINDOW filters cannot be COUNTING"),
    (["EXACT", "EXPANSION", 2], "ERR WINDOW filters do not scale"),
    (["EXACT", "LAYOUT", "CLASSIC"], "ERR WINDOW filters use the blocked layout"),
])
def test_reserve_errors(server, r, args, msg):
    got = raw_cmd(server, "BF.RESERVE", "bad", 0.5, 100, *args)
    assert isinstance(got, RespError) and str(got).startswith(msg), got
    assert not r.exists("bad")


def test_at_errors_change_nothing(server, r):
    """BF.INSERT ... AT where it cannot work: a clear error, and no key made
    or item added by the refused command."""
    r.execute_command("BF.RESERVE", "e", 0.5, 100, "WINDOW", 10, "SLICES", 2, "EXACT",
                      "RETAIN", 60)
    r.execute_command("BF.ADD", "plain", "a")
    for cmd, msg in ((("e", "AT", 123, "ITEMS", "old"), "ERR AT is older than the filter's"),
                     (("e", "AT", "x", "ITEMS", "old"), "ERR AT must be a time in Unix milli"),
                     (("plain", "AT", 123, "ITEMS", "old"), "ERR AT applies to EXACT filters"),
                     (("missing", "AT", 123, "ITEMS", "old"), "ERR not found")):
        got = raw_cmd(server, "BF.INSERT", *cmd)
        assert isinstance(got, RespError) and str(got).startswith(msg), (cmd, got)
    assert r.execute_command("BF.MEXISTS", "e", "old") == [0]
    assert r.execute_command("BF.MEXISTS", "plain", "a", "old") == [1, 0]
    assert r.exists("missing") == 0


# ---- exactness ----

def test_stream_answers_exactly(start_server):
    p = plan(N)
    s = start_server("--exact-buffer-keys", BUFFER)
    c = s.client()
    assert c.execute_command("BF.RESERVE", "k", 0.5, p.n, "EXACT") == b"OK"
    assert bf_info(c, "k")["Exact"] == 1
    got = stream(s.port, p.madds("k"))
    assert len(got.replies) == len(p.batches)
    seen = bytearray(p.n)
    bad = p.check(0, got.replies, seen)
    assert not bad, summary(bad)
    before = bf_info(c, "k")["Store lookups"]
    final_check(s.port, "k", p)
    looked = bf_info(c, "k")["Store lookups"] - before
    # The filter alone said "maybe" for a good share of the never-added
    # items: the store answered them.
    print("store lookups for %d added and %d never-added items: %d" % (p.n, p.n // 10, looked))
    assert looked >= p.n + p.n // 10 * 0.1, looked
    c.close()


# ---- crashes ----

def crash_scenario(start, crash, snapshot, p):
    """The stream on an exact key under appendfsync always, crash() in the
    middle (after a finished BGSAVE when snapshot), a restart, and the
    checks. Returns what was found wrong after the restart (the answers
    before the crash must be exact)."""
    s = start()
    c = s.client()
    c.execute_command("BF.RESERVE", "k", 0.5, p.n, "EXACT")
    c.execute_command("BF.MADD", "plain", "a", "b")
    nb = len(p.batches)
    # The BGSAVE shortly before the kill: the store's buffer then holds
    # what only the snapshot's flush makes durable (the log below it goes).
    kill_at = nb // 2
    save_at = kill_at - min(100, kill_at // 2)
    seq = c.info("persistence")["bloomery_snapshot_seq"]

    def after(j, reply):
        if snapshot and j == save_at:
            assert c.execute_command("BGSAVE") is True
        if j == kill_at:
            if snapshot:
                wait_for(lambda: snapshot_done(c, seq), "the BGSAVE to finish")
                assert c.info("persistence")["rdb_last_bgsave_status"] == "ok"
                # The store recorded where it is complete: recovery starts
                # its part of the log there.
                assert int(exact_info(s)["exact_store_applied_lsn"]) > 0
            crash(s)

    got = stream(s.port, p.madds("k"), after)
    c.close()
    acked = len(got.replies)
    assert kill_at < acked < nb, (kill_at, acked, nb)
    seen = bytearray(p.n)
    bad = p.check(0, got.replies, seen)
    assert not bad, "before the crash: " + summary(bad)
    # Sent, not answered: added or not.
    maybe = {i for j in range(acked, got.sent) for i in p.batches[j] if not seen[i]}
    print("acknowledged %d batches, %d in flight (%d items unknown)" % (
        acked, got.sent - acked, len(maybe)))
    try:
        s = start()
    except RuntimeError as e:
        return ["the server did not start after the crash: %s" % e]
    c = s.client()
    found = []
    assert c.execute_command("BF.MEXISTS", "plain", "a", "b") == [1, 1]
    # Every acknowledged item is there, none of them new again.
    again = stream(s.port, p.madds("k", 0, acked))
    if len(again.replies) != acked:
        return ["the connection ended after %d replies" % len(again.replies)]
    wrong = [(j, i, g) for j, rep in enumerate(again.replies)
             for i, g in zip(p.batches[j], rep if isinstance(rep, list) else [rep] * BATCH)
             if g != 0]
    if wrong:
        found.append("%d acknowledged items lost or new again (batch, item, reply): %s" % (
            len(wrong), wrong[:5]))
    # The rest of the stream, with exact answers.
    rest = stream(s.port, p.madds("k", acked))
    if len(rest.replies) != nb - acked:
        return found + ["the connection ended after %d replies" % len(rest.replies)]
    bad = p.check(acked, rest.replies, seen, maybe)
    if bad:
        found.append("after the restart: " + summary(bad))
    if not found:
        # No false positive after the recovery either (every added item
        # was found by the re-sends above).
        false = exists_check(s.port, "k", range(p.n, p.n + p.n // 10), 0)
        if false:
            found.append("%d never-added items found, e.g. %s" % (len(false), false[:5]))
    c.close()
    return found


@pytest.mark.parametrize("snapshot", [False, True], ids=["log", "snapshot"])
def test_kill9_in_the_middle_of_the_stream(start_server, tmp_path, snapshot):
    datadir = str(tmp_path / "data")
    # The whole stream across the crash; with a snapshot just before it, a
    # quarter (what that adds is the store's mark and buffers, not size).
    bad = crash_scenario(lambda: start_server(*ALWAYS, datadir=datadir),
                         lambda s: s.kill(), snapshot, plan(N // 4 if snapshot else N))
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("snapshot", [False, True], ids=["log", "snapshot"])
def test_power_cut_in_the_middle_of_the_stream(faults, start_server, snapshot):
    bad = crash_scenario(lambda: start_server(*ALWAYS, **faults.server_kw()),
                         faults.crash, snapshot, plan(N // 4 if snapshot else N))
    assert not bad, "\n".join(bad)


def test_power_cut_check_finds_a_store_without_fsync(faults, start_server):
    """The same power cut, the store's syncs skipped (a store trusted
    without them): the checks must find something wrong."""
    faults.set(fsync="skip", match="/exact/")
    bad = crash_scenario(lambda: start_server(*ALWAYS, **faults.server_kw()),
                         faults.crash, True, plan(N // 10))
    print("\n".join(bad))
    assert bad


# ---- windows ----

def now_ms():
    return time.time_ns() // 1_000_000


def at(c, t, park, *cmds):
    """Run cmds with the window clock at t, to the millisecond: CONFIG SET
    of the offset, the commands and a CONFIG SET parking the clock at park
    in one pipeline, retried until the wall clock read the same millisecond
    before the send and after the replies (the server read its clock in
    between). Between tries the clock stays near park, where the server's
    cron has nothing to rotate; a try that ran late may still have let it
    past t for a moment (see window_boundary)."""
    for _ in range(5000):
        pipe = c.pipeline(transaction=False)
        before = now_ms()
        pipe.config_set("debug-clock-offset-ms", t - before)
        for cmd in cmds:
            pipe.execute_command(*cmd)
        pipe.config_set("debug-clock-offset-ms", park - before)
        got = pipe.execute()
        if now_ms() == before:
            return got[1:-1]
    raise AssertionError("no round trip within one millisecond in 5000 tries")


def at_least(c, t, *cmds):
    """Run cmds with the window clock at t or a little later."""
    pipe = c.pipeline(transaction=False)
    pipe.config_set("debug-clock-offset-ms", t - now_ms())
    for cmd in cmds:
        pipe.execute_command(*cmd)
    return pipe.execute()[1:]


def slice_start(reply):
    i = dict(zip([k.decode() for k in reply[0::2]], reply[1::2]))
    return i["Current slice start"]


@pytest.fixture
def clock(r):
    r.config_set("debug-clock-offset-ms", 0)
    yield r
    r.config_set("debug-clock-offset-ms", 0)


def window_boundary(c, key):
    """Old items in the first slice, the later ones overfull (exact windows
    never rotate early: their filters say "maybe" to nearly everything), and
    the checks 1 ms before and at the instant the first slice dies, then the
    second. Returns False when a try of at() that ran late let the cron
    rotate past a boundary before the check 1 ms ahead of it was made: the
    window's slice start, read in the check's own pipeline, tells."""
    window_s, slices = 8, 4
    period = window_s * 1000 // slices
    assert c.execute_command("BF.RESERVE", key, 0.5, 40, "WINDOW", window_s, "SLICES", slices,
                             "EXACT") == b"OK"
    s0 = bf_info(c, key)["Current slice start"]
    old = ["old:%d" % i for i in range(20)]
    never = ["never:%d" % i for i in range(20)]
    assert at_least(c, s0, ("BF.MADD", key, *old)) == [[1] * len(old)]
    young = []
    for k in range(1, slices + 1):
        items = ["young:%d:%d" % (k, i) for i in range(400)]
        assert at_least(c, s0 + k * period, ("BF.MADD", key, *items)) == [[1] * len(items)]
        young += items
    i = bf_info(c, key)
    assert i["Early rotations"] == 0 and i["Current slice start"] == s0 + slices * period, i
    end = s0 + (slices + 1) * period    # when old's slice dies
    got = at(c, end - 1, end - 100, ("BF.INFO", key, "ALL"), ("BF.MEXISTS", key, *old),
             ("BF.MEXISTS", key, *never))
    if slice_start(got[0]) != s0 + slices * period:
        return False
    assert got[1:] == [[1] * len(old), [0] * len(never)], ("1 ms before the slice's end", got)
    got = at(c, end, end, ("BF.MEXISTS", key, *old), ("BF.MEXISTS", key, *never))
    assert got == [[0] * len(old), [0] * len(never)], ("at the slice's end", got)
    # New again; the younger slices keep theirs.
    got = at_least(c, end, ("BF.MADD", key, *old), ("BF.MEXISTS", key, *young),
                   ("BF.MADD", key, *old))
    assert got == [[1] * len(old), [1] * len(young), [0] * len(old)], got
    # The next slice at its own end.
    first = young[:20]         # from the slice after old's
    nxt = end + period
    got = at(c, nxt - 1, nxt - 100, ("BF.INFO", key, "ALL"), ("BF.MEXISTS", key, *first))
    if slice_start(got[0]) != end:
        return False
    assert got[1:] == [[1] * len(first)], ("1 ms before the next slice's end", got)
    got = at(c, nxt, nxt, ("BF.MEXISTS", key, *first), ("BF.MEXISTS", key, *old))
    assert got == [[0] * len(first), [1] * len(old)], ("at the next slice's end", got)
    return True


def test_window_forgets_exactly_at_the_boundary(clock):
    for k in range(5):
        if window_boundary(clock, "w%d" % k):
            return
        print("try %d: the cron rotated during a late try of at(); again" % k)
    raise AssertionError("the window rotated before its time in every try")


# ---- races ----

def test_racing_adders_one_new_each(server, r):
    """Clients add the same new items at the same time, in lock step, by
    BF.ADD, BF.MADD and BF.INSERT: for each item exactly one is told 1."""
    r.execute_command("BF.RESERVE", "race", 0.5, 200, "EXACT")
    n, clients = (2000, 4) if SMALL else (10000, 4)
    items = ["r:%d" % i for i in range(n)]
    results = [None] * clients
    group = threading.Barrier(clients)
    errors = []

    def run(t):
        c = server.client()
        got = []
        try:
            for base in range(0, n, 50):
                part = items[base:base + 50]
                group.wait(timeout=60)
                if t % 3 == 0:
                    pipe = c.pipeline(transaction=False)
                    for it in part:
                        pipe.execute_command("BF.ADD", "race", it)
                    got += pipe.execute()
                elif t % 3 == 1:
                    got += c.execute_command("BF.MADD", "race", *part)
                else:
                    got += c.execute_command("BF.INSERT", "race", "ITEMS", *part)
            results[t] = got
        except Exception as e:     # reported below
            errors.append(e)
            group.abort()
        finally:
            c.close()

    ts = [threading.Thread(target=run, args=(t,)) for t in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    wrong = [(items[i], [res[i] for res in results]) for i in range(n)
             if sorted(res[i] for res in results) != [0] * (clients - 1) + [1]]
    assert not wrong, "%d items not new exactly once, e.g. %s" % (len(wrong), wrong[:5])
    assert r.execute_command("BF.MEXISTS", "race", *items) == [1] * n


def test_an_early_answer_is_asked_again_after_its_period_is_dropped(start_server, tmp_path,
                                                                    monkeypatch):
    """A check looks the filter's positives up in the store before it takes
    the filter's lock, and under the lock keeps what that lookup found
    unless something left the store meanwhile. Held between the two
    (BLOOMERYD_TEST_EXACT_GATE) while an add on another worker passes the
    old items' period end, which rotates the window and drops the period,
    the check must answer 0 for them, though the window (overfull, error
    rate 0.5) says "maybe"."""
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    monkeypatch.setenv("BLOOMERYD_TEST_EXACT_GATE", gate)
    s = start_server()
    c = s.client()
    window_s, slices = 400, 4
    period = window_s * 1000 // slices
    c.execute_command("BF.RESERVE", "k", 0.5, 40, "WINDOW", window_s, "SLICES", slices, "EXACT",
                      "RETAIN", window_s + window_s // slices)
    s0 = bf_info(c, "k")["Current slice start"]
    old = ["old:%d" % i for i in range(40)]
    assert at_least(c, s0, ("BF.MADD", "k", *old)) == [[1] * len(old)]
    for k in range(1, slices + 1):
        young = ["young:%d:%d" % (k, i) for i in range(400)]
        assert at_least(c, s0 + k * period, ("BF.MADD", "k", *young)) == [[1] * len(young)]
    end = s0 + (slices + 1) * period    # when old's period ends
    # Half a period before: nothing for the cron to rotate meanwhile.
    at_least(c, end - period // 2)
    held = s.client(single_connection_client=True)
    held.ping()
    lookups = bf_info(c, "k")["Store lookups"]
    got = []
    t = threading.Thread(target=lambda: got.append(held.execute_command("BF.MEXISTS", "k", *old)))
    t.start()
    with open(gate, "w") as g:          # returns once the check waits at the gate
        # Of two new connections, one is on the other worker: the one that
        # answers while the gate is shut.
        pair = [s.client(single_connection_client=True) for _ in range(2)]
        for p in pair:
            p.connection.send_command("PING")
        ready, _, _ = select.select([p.connection._sock for p in pair], [], [], 60)
        other = pair[[p.connection._sock for p in pair].index(ready[0])]
        assert other.connection.read_response() == b"PONG"
        # An add rotates the window past old's period and drops it from
        # the store (the cron would wait for the check's key lock).
        assert at_least(other, end + 1000, ("BF.ADD", "k", "new")) == [1]
        g.write("go")
    t.join()
    assert got == [[0] * len(old)]
    i = bf_info(c, "k")
    assert i["Current slice start"] == end and i["Store periods"] == slices + 1, i
    # The window said "maybe" to (nearly all of) them: the 0s are the
    # store's answers.
    assert bf_info(c, "k")["Store lookups"] - lookups >= len(old) // 2
    for p in pair:
        if p is not other:
            assert p.connection.read_response() == b"PONG"
        p.close()
    held.close()
    c.close()


# ---- replication ----

def caught_up(master, replica):
    mc, rc = master.client(), replica.client()

    def done():
        m, r = mc.info("replication"), rc.info("replication")
        return (r.get("master_link_status") == "up" and
                r["slave_repl_offset"] == m["master_repl_offset"])
    wait_for(done, "the replica to catch up")
    mc.close()
    rc.close()


def test_replica_answers_exactly_after_failover(start_server):
    p = plan(10_000 if SMALL else 50_000)
    nb = len(p.batches)
    master, replica = start_server(), start_server()
    m = master.client()
    m.execute_command("BF.RESERVE", "k", 0.5, p.n, "EXACT")
    seen = bytearray(p.n)
    # Half before the replica (the full sync carries it), half streamed.
    first = stream(master.port, p.madds("k", 0, nb // 2))
    rc = replica.client()
    assert rc.execute_command("REPLICAOF", "127.0.0.1", master.port) == b"OK"
    caught_up(master, replica)
    second = stream(master.port, p.madds("k", nb // 2))
    bad = p.check(0, first.replies + second.replies, seen)
    assert not bad, summary(bad)
    assert m.execute_command("WAIT", 1, 60000) == 1
    # Reads on the replica are exact already.
    final_check(replica.port, "k", p)
    master.kill()
    assert rc.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert rc.execute_command("ROLE")[0] == b"master"
    assert bf_info(rc, "k")["Exact"] == 1
    final_check(replica.port, "k", p)
    # Writes on the new master: old items known, new ones new once.
    again = stream(replica.port, p.madds("k", 0, nb))
    wrong = [j for j, rep in enumerate(again.replies) if rep != [0] * len(p.batches[j])]
    assert len(again.replies) == nb and not wrong, wrong[:5]
    new = [item(i) for i in range(p.n, p.n + 1000)]
    assert rc.execute_command("BF.MADD", "k", *new) == [1] * len(new)
    assert rc.execute_command("BF.MADD", "k", *new) == [0] * len(new)
    rc.close()
    m.close()


# ---- faults ----

def exact_items(tag, n):
    return ["%s:%d" % (tag, i) for i in range(n)]


def test_exact_is_refused_when_the_store_cannot_be_created(start_server, tmp_path):
    datadir = tmp_path / "data"
    datadir.mkdir(mode=0o700)
    (datadir / "exact").write_text("a file where the store's directory goes\n")
    s = start_server(datadir=str(datadir))
    c = s.client()
    assert c.execute_command("BF.ADD", "plain", "a") == 1
    assert c.execute_command("BF.EXISTS", "plain", "a") == 1
    got = raw_cmd(s, "BF.RESERVE", "k", 0.5, 100, "EXACT")
    assert isinstance(got, RespError) and str(got).startswith("ERR EXACT is not available: "), got
    got = raw_cmd(s, "BF.RESERVE", "kw", 0.5, 100, "WINDOW", 60, "EXACT")
    assert isinstance(got, RespError) and str(got).startswith("ERR EXACT is not available: "), got
    assert c.exists("k", "kw") == 0
    e = exact_info(s)
    assert e["exact_store_status"] == "unavailable" and e["exact_store_error"], e
    c.close()


def fill_exact(c, n=2000):
    """An exact key with items flushed into the store by a SAVE (a) and
    items only in the log and the store's memory (b), and a plain key."""
    a, b = exact_items("a", n), exact_items("b", n)
    c.execute_command("BF.RESERVE", "k", 0.5, 2 * n, "EXACT")
    assert c.execute_command("BF.MADD", "k", *a) == [1] * n
    c.execute_command("BF.MADD", "plain", "p1", "p2")
    assert c.execute_command("SAVE") is True
    assert c.execute_command("BF.MADD", "k", *b) == [1] * n
    return a + b


def check_exact(c, items):
    assert c.execute_command("BF.MEXISTS", "k", *items) == [1] * len(items)
    assert c.execute_command("BF.MADD", "k", *items) == [0] * len(items)


@pytest.mark.parametrize("damage", ["file", "current"])
def test_a_store_that_cannot_be_opened(start_server, tmp_path, damage):
    """The store's directory replaced by a file, or its CURRENT corrupted,
    after a life with acknowledged exact adds: the server starts and serves
    the other keys, the exact key answers an error, INFO says why, a
    snapshot meanwhile loses nothing, and with the store back every
    acknowledged item is there."""
    datadir = str(tmp_path / "data")
    store = os.path.join(datadir, "exact")
    s = start_server("--appendfsync", "always", datadir=datadir)
    c = s.client()
    items = fill_exact(c)
    c.close()
    s.kill()
    aside = str(tmp_path / "exact.aside")
    shutil.copytree(store, aside)
    if damage == "file":
        shutil.rmtree(store)
        with open(store, "w") as f:
            f.write("not a directory\n")
    else:
        with open(os.path.join(store, "CURRENT"), "w") as f:
            f.write("MANIFEST-999999\n")
    s = start_server("--appendfsync", "always", datadir=datadir)
    c = s.client()
    assert c.execute_command("BF.MEXISTS", "plain", "p1", "p2") == [1, 1]
    assert c.execute_command("BF.ADD", "plain", "p3") == 1
    e = exact_info(s)
    assert e["exact_store_status"] == "unavailable" and e["exact_store_error"], e
    for cmd in (("BF.EXISTS", "k", "a:1"), ("BF.ADD", "k", "refused"),
                ("BF.MADD", "k", "refused", "a:1"), ("BF.INSERT", "k", "ITEMS", "refused")):
        assert_exact_error(raw_cmd(s, *cmd), cmd)
    # BF.MEXISTS answers each item: an error for one the store must confirm.
    got = raw_cmd(s, "BF.MEXISTS", "k", "a:1", "b:1")
    assert isinstance(got, list) and len(got) == 2, got
    for g in got:
        assert_exact_error(g, "BF.MEXISTS")
    got = raw_cmd(s, "BF.RESERVE", "k2", 0.5, 100, "EXACT")
    assert isinstance(got, RespError) and str(got).startswith("ERR EXACT is not available: "), got
    # A snapshot while the store is away (done or refused) must keep the
    # log the store needs.
    print("SAVE without the store: %s" % raw_cmd(s, "SAVE"))
    c.close()
    s.stop()
    if damage == "file":
        os.unlink(store)
    else:
        shutil.rmtree(store)
    shutil.copytree(aside, store)
    s = start_server(datadir=datadir)
    c = s.client()
    assert exact_info(s)["exact_store_status"] == "ok"
    assert c.execute_command("BF.MEXISTS", "plain", "p1", "p2", "p3") == [1, 1, 1]
    assert c.execute_command("BF.EXISTS", "k", "refused") == 0
    check_exact(c, items)
    c.close()


def flip_bytes(path, every=256):
    """Corrupt a file's first 80%: one byte in every `every` inverted."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        for off in range(64, size * 8 // 10, every):
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ 0xff]))


@pytest.mark.parametrize("which", ["all", "largest"])
def test_a_corrupted_store_file(start_server, tmp_path, which):
    """Bytes flipped in the store's tables (all of them, or the data blocks
    of the largest, which the store reads only on a lookup): the server
    serves its other keys; an exact answer is either right or an error
    (never "absent" for an acknowledged item, never "present" for another);
    the corruption is reported, at start or on the key."""
    datadir = str(tmp_path / "data")
    s = start_server("--appendfsync", "always", datadir=datadir)
    c = s.client()
    items = fill_exact(c, 20000)
    c.close()
    s.kill()
    tables = glob.glob(os.path.join(datadir, "exact", "*.sst"))
    assert tables, os.listdir(os.path.join(datadir, "exact"))
    if which == "largest":
        tables = [max(tables, key=os.path.getsize)]
    for t in tables:
        flip_bytes(t)
    s = start_server(datadir=datadir)
    c = s.client()
    assert c.execute_command("BF.MEXISTS", "plain", "p1", "p2") == [1, 1]
    assert c.execute_command("BF.ADD", "plain", "p3") == 1
    errors = []
    if exact_info(s)["exact_store_status"] != "ok":
        errors.append(exact_info(s)["exact_store_error"])
    lost, false = [], []
    others = exact_items("never", 2000)
    for part in [items[k:k + 500] for k in range(0, len(items), 500)] + [others]:
        got = raw_cmd(s, "BF.MEXISTS", "k", *part)
        if isinstance(got, RespError):
            errors.append(str(got))
            continue
        for it, g in zip(part, got):
            if isinstance(g, RespError):
                errors.append(str(g))
            elif g != (0 if it.startswith("never") else 1):
                (false if it.startswith("never") else lost).append(it)
    assert not lost, "%d acknowledged items answered absent, e.g. %s" % (len(lost), lost[:5])
    assert not false, "%d never-added items answered present, e.g. %s" % (len(false), false[:5])
    assert errors, "the corruption went unnoticed"
    assert all(e.startswith(ERR_EXACT) or "orrupt" in e for e in errors), errors[:5]
    print("errors: %d, e.g. %s" % (len(errors), errors[:2]))
    c.close()


MISCONF = "MISCONF Errors writing to the AOF file:"


def everysec_with_items(f, start_server):
    """A server under the fault shim (appendfsync everysec, table files of
    100 keys) with exact key k holding 500 acknowledged items: (server,
    client, items)."""
    s = start_server("--appendfsync", "everysec", "--exact-buffer-keys", 100, **f.server_kw())
    c = s.client()
    c.execute_command("BF.RESERVE", "k", 0.5, 1000, "EXACT")
    items = exact_items("a", 500)
    assert c.execute_command("BF.MADD", "k", *items) == [1] * 500
    return s, c, items


@pytest.mark.parametrize("fault,match", [("enospc", ""), ("eio", "/log/")],
                         ids=["full-disk", "log-eio"])
def test_log_write_fault_refuses_exact_adds(faults, start_server, fault, match):
    """appendfsync everysec, a full disk (every file of the data directory,
    the store's too) or the log's writes failing: exact adds are refused
    with MISCONF, exact reads answer; once the disk is back the adds are
    accepted and a restart finds every acknowledged one."""
    f = faults
    s, c, before = everysec_with_items(f, start_server)
    c.execute_command("BF.ADD", "plain", "p")
    f.set(write=fault, match=match)
    first = raw_cmd(s, "BF.ADD", "k", "first")
    # Taken before the error is seen, or refused by the log's or the
    # store's error (the store's buffer full of what it could not write).
    assert first == 1 or str(first).startswith((MISCONF, ERR_EXACT)), first
    # A write to a plain key reaches the log whatever the exact one did
    # (refused by the store's buffer, it wrote nothing).
    wait_for(lambda: raw_cmd(s, "BF.ADD", "plain", "probe") is not None and
             c.info("persistence")["aof_last_write_status"] == "err", "the log's error")
    for cmd in (("BF.ADD", "k", "refused"), ("BF.MADD", "k", "refused", "a:1"),
                ("BF.INSERT", "k", "ITEMS", "refused"),
                ("BF.RESERVE", "k2", 0.5, 100, "EXACT")):
        got = raw_cmd(s, *cmd)
        assert str(got).startswith(MISCONF), (cmd, got)
    assert c.execute_command("BF.MEXISTS", "k", "a:1", "refused", "zz") == [1, 0, 0]
    # A snapshot meanwhile (the store flushed, on a full disk too): done or
    # refused, the server goes on and loses nothing.
    print("SAVE during the fault: %s" % raw_cmd(s, "SAVE"))
    assert c.execute_command("BF.EXISTS", "plain", "p") == 1
    f.set()
    wait_for(lambda: c.info("persistence")["aof_last_write_status"] == "ok", "the log back")
    wait_for(lambda: exact_info(s).get("exact_store_writing") == "ok", "the store writing again")
    after = exact_items("b", 500)
    assert c.execute_command("BF.MADD", "k", *after) == [1] * 500
    wait_log_durable(c)      # everysec: what a kill -9 may take is not the point
    c.close()
    s.kill()
    s = start_server(**f.server_kw())
    c = s.client()
    want = before + after + (["first"] if first == 1 else [])
    assert c.execute_command("BF.MEXISTS", "k", *want) == [1] * len(want)
    assert c.execute_command("BF.MEXISTS", "k", "refused") == [0]
    assert c.execute_command("BF.EXISTS", "plain", "p") == 1
    c.close()


def test_store_flush_fails_then_the_disk_is_back(faults, start_server):
    """Nothing buffered, so the only write a snapshot makes into the store
    is RocksDB's own flush, and it fails on a full disk: RocksDB then holds
    the database stopped. Adds right after the disk is back are taken or
    refused with an error, never written into the stopped database (that
    aborted the server); the store is opened again, and a restart finds
    every acknowledged item."""
    f = faults
    s, c, acked = everysec_with_items(f, start_server)
    assert c.execute_command("SAVE") is True
    f.set(write="enospc")
    print("SAVE during the fault: %s" % raw_cmd(s, "SAVE"))
    f.set()
    wait_for(lambda: c.info("persistence")["aof_last_write_status"] == "ok", "the log back")
    refused = 0
    for r in range(4):
        items = exact_items("b%d" % r, 500)
        got = raw_cmd(s, "BF.MADD", "k", *items)
        if isinstance(got, list):
            assert got == [1] * 500, got[:5]
            acked += items
        else:
            assert str(got).startswith(ERR_EXACT), got
            refused += 1
    wait_for(lambda: exact_info(s)["exact_store_writing"] == "ok", "the store opened again")
    items = exact_items("c", 500)
    assert c.execute_command("BF.MADD", "k", *items) == [1] * 500
    acked += items
    print("MADD refused right after the fault: %d of 4" % refused)
    wait_log_durable(c)
    c.close()
    s.kill()
    s = start_server(**f.server_kw())
    c = s.client()
    assert c.execute_command("BF.MEXISTS", "k", *acked) == [1] * len(acked)
    c.close()


def test_a_snapshot_while_the_store_cannot_write(faults, start_server):
    """The store's table files cannot be written during the only snapshot
    since the store was made: the snapshot is saved (the log is kept for
    the store), the store never recorded where it is complete; after the
    disk is back, a kill -9 and a restart, every acknowledged item is there
    (recovery writes into the store all the log holds)."""
    f = faults
    s = start_server("--appendfsync", "always", **f.server_kw())
    c = s.client()
    c.execute_command("BF.RESERVE", "k", 0.5, 1000, "EXACT")
    items = exact_items("a", 1000)
    assert c.execute_command("BF.MADD", "k", *items) == [1] * len(items)
    f.set(write="enospc", match="/exact-tmp/")
    print("SAVE during the fault: %s" % raw_cmd(s, "SAVE"))
    f.set()
    c.close()
    s.kill()
    s = start_server(**f.server_kw())
    c = s.client()
    assert c.execute_command("BF.MEXISTS", "k", *items) == [1] * len(items)
    assert c.execute_command("BF.MADD", "k", *items) == [0] * len(items)
    c.close()


@pytest.mark.parametrize("fault", ["enospc", "eio"])
def test_store_write_fault(faults, start_server, fault):
    """The store's files cannot be written (a full disk, an I/O error),
    the log's can: an add is acknowledged (the log holds it until the
    store is written) or refused with a clear error, and then changes
    nothing (not even for the filter's false positives); the other keys are
    served; once the disk is back the adds are accepted, and after kill -9
    every acknowledged item is there."""
    f = faults
    # A small write buffer: the store writes a table file every 500 items.
    s = start_server("--appendfsync", "always", "--exact-buffer-keys", 500, **f.server_kw())
    c = s.client()
    c.execute_command("BF.RESERVE", "k", 0.5, 1000, "EXACT")
    acked = exact_items("a", 2000)
    assert c.execute_command("BF.MADD", "k", *acked) == [1] * len(acked)
    f.set(write=fault, match="/exact")        # DIR/exact and its temporary files
    refused = []
    for k in range(10):
        part = exact_items("f%d" % k, 100)
        got = raw_cmd(s, "BF.MADD", "k", *part)
        if isinstance(got, RespError):
            assert str(got).startswith(ERR_EXACT), got
            refused += part
        else:
            assert got == [1] * len(part), got
            acked += part
        if k % 5 == 4:
            # Snapshots meanwhile (the store flushed): done or refused (the
            # log is kept for the store), the server goes on.
            print("SAVE during the fault: %s" % raw_cmd(s, "SAVE"))
    assert not refused or c.execute_command("BF.MEXISTS", "k", *refused) == [0] * len(refused)
    assert c.execute_command("BF.MEXISTS", "k", *acked) == [1] * len(acked)
    assert c.execute_command("BF.ADD", "plain", "p") == 1
    f.set()
    # RocksDB refuses writes after one failed until it is opened again,
    # which the server does once a probe file can be written and synced.
    wait_for(lambda: exact_info(s).get("exact_store_writing") == "ok", "the store writing again")
    later = exact_items("b", 1000)
    assert c.execute_command("BF.MADD", "k", *later) == [1] * len(later)
    acked += later
    got = raw_cmd(s, "SAVE")
    assert got == "OK", got
    assert not refused or c.execute_command("BF.MEXISTS", "k", *refused) == [0] * len(refused)
    print("refused during the fault: %d items" % len(refused))
    c.close()
    s.kill()
    s = start_server(**f.server_kw())
    c = s.client()
    assert c.execute_command("BF.MEXISTS", "k", *acked) == [1] * len(acked)
    assert c.execute_command("BF.MADD", "k", *acked) == [0] * len(acked)
    assert not refused or c.execute_command("BF.MEXISTS", "k", *refused) == [0] * len(refused)
    assert c.execute_command("BF.EXISTS", "plain", "p") == 1
    c.close()
