"""Durability: snapshots and the write-ahead log (docs/PERSISTENCE.md).

- kill -9 and a power cut (powercut.py: files cut back to what was synced)
  while clients add with appendfsync always: every acknowledged item is
  there after the restart, and every filter keeps its parameters; the same
  rounds against a log whose syncs are skipped must lose items;
- everysec: what two of the log's syncs covered survives a kill -9 and a
  power cut (the test prints what was lost after that);
- damaged files (byte flips, truncations of the index, a chunk file, the
  log) stop the start with file, offset and reason, or lose only a torn
  last record; the server never crashes on them;
- a restart (log replay, snapshot, both) answers exactly as before for a
  dataset of every type.
"""
import os
import random
import shutil
import subprocess
import threading
import time

import pytest
import redis

from conftest import BLOOMERYD, QUICK, Server
from powercut import faults  # noqa: F401 (a fixture)

ROUNDS = 4 if QUICK else 20
ROUND_ACKS = 30 if QUICK else 100     # acknowledged calls per adder per server life


def info(c, field):
    return str(c.info("persistence")[field])


def wait_until(cond, what, timeout=30):
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, "timed out waiting for " + what
        time.sleep(0.01)


def log_barrier(c):
    """Return once every record logged so far is durable: under appendfsync
    always a logged write is answered only when the log is synced up to it,
    and the log is synced in order."""
    policy = c.config_get("appendfsync")["appendfsync"]
    c.config_set("appendfsync", "always")
    c.execute_command("BF.ADD", "__barrier__", "x")
    assert c.delete("__barrier__") == 1
    c.config_set("appendfsync", policy)


def bf_params(c, key):
    """The filter's parameters: its first link's shape (BF.DEBUG without the
    item and spare counts), expansion and layout."""
    first = c.execute_command("BF.DEBUG", key)[1].decode().split()
    i = c.execute_command("BF.INFO", key, "ALL")
    d = dict(zip(i[0::2], i[1::2]))
    return ([f for f in first if not f.startswith(("size:", "spared:"))], d[b"Expansion rate"],
            d[b"Layout"])


def exists_all(c, key, items):
    missing = []
    for base in range(0, len(items), 1000):
        part = items[base:base + 1000]
        got = c.execute_command("BF.MEXISTS", key, *part)
        missing += [it for it, g in zip(part, got) if not g]
    return missing


class Adder(threading.Thread):
    """Adds unique items to one key with BF.ADD or BF.MADD until the server
    dies; remembers what was acknowledged, and when."""

    def __init__(self, port, key, tag, madd):
        super().__init__(daemon=True)
        self.port, self.key, self.tag, self.madd = port, key, tag, madd
        self.acked = []       # (time, items)

    def run(self):
        c = redis.Redis(port=self.port, socket_timeout=10)
        n = 0
        try:
            while True:
                if self.madd:
                    items = ["%s:%d" % (self.tag, n + i) for i in range(20)]
                    c.execute_command("BF.MADD", self.key, *items)
                else:
                    items = ["%s:%d" % (self.tag, n)]
                    c.execute_command("BF.ADD", self.key, items[0])
                self.acked.append((time.time(), items))
                n += len(items)
        except (redis.ConnectionError, redis.TimeoutError, ConnectionResetError):
            pass

    def items(self, upto=None):
        return [it for _, batch in self.acked[:upto] for it in batch]


SPECS = [
    ("blocked", ["BF.RESERVE", "blocked", "0.01", "2000", "EXPANSION", "2", "LAYOUT", "BLOCKED"]),
    ("prefix", ["BF.RESERVE", "prefix", "0.01", "2000", "EXPANSION", "2"]),  # the default
    ("classic", ["BF.RESERVE", "classic", "0.001", "1500", "LAYOUT", "CLASSIC", "EXPANSION", "3"]),
    ("fixed", ["BF.RESERVE", "fixed", "0.01", "10000000", "NONSCALING"]),
]


def kill9_rounds(faults, start_server, rounds):
    """Server lives under appendfsync always, each ended by kill -9 and a
    power cut once every adder had ROUND_ACKS calls acknowledged (a BGSAVE
    in every third, racing the adders and the kill). Returns the
    acknowledged items found missing, as (round, key, count, examples)."""
    acked = {k: [] for k, _ in SPECS}
    acked["auto"] = []
    params = {}
    lost = []
    for rnd in range(rounds + 1):
        s = start_server("--appendfsync", "always", **faults.server_kw())
        c = s.client()
        if rnd == 0:
            for key, spec in SPECS:
                c.execute_command(*spec)
            for key, _ in SPECS:
                params[key] = bf_params(c, key)
        else:
            # Everything acknowledged in earlier rounds is there.
            for key, items in acked.items():
                missing = exists_all(c, key, items)
                if missing:
                    lost.append((rnd, key, len(missing), missing[:3]))
            if not lost:
                for key, _ in SPECS:
                    assert bf_params(c, key) == params[key], (rnd, key)
        if rnd == rounds:
            c.close()
            break
        adders = [Adder(s.port, key, "r%d-%s-%d" % (rnd, key, j), j % 2 == 0)
                  for key in list(acked) for j in range(2)]
        for a in adders:
            a.start()

        def acks(n):
            return lambda: all(len(a.acked) >= n or not a.is_alive() for a in adders)
        if rnd % 3 == 1:
            wait_until(acks(ROUND_ACKS // 2), "half the round's acknowledgements")
            assert c.execute_command("BGSAVE") is True    # "Background saving started"
        wait_until(acks(ROUND_ACKS), "the round's acknowledgements")
        assert all(a.is_alive() for a in adders), s.output()
        faults.crash(s)
        for a in adders:
            a.join(timeout=30)
            acked[a.key] += a.items()
        c.close()
    return lost


def test_kill9_always_loses_nothing_acknowledged(faults, start_server):
    lost = kill9_rounds(faults, start_server, ROUNDS)
    assert not lost, lost
    print("%d rounds, none lost" % ROUNDS)


def test_kill9_check_finds_a_log_without_fsync(faults, start_server):
    """The same rounds with the log's syncs skipped (a build without them):
    the power cut must take acknowledged items."""
    faults.set(fsync="skip", match="/log/")
    assert kill9_rounds(faults, start_server, 2)


def test_everysec_keeps_what_was_synced(faults, start_server):
    """Under everysec the log is synced about once a second: once two syncs
    happened after a point, everything acknowledged before it survives a
    kill -9 and a power cut. (Against --appendonly no, or a log never
    synced, the syncs never come or the items are lost.)"""
    s = start_server("--appendfsync", "everysec", **faults.server_kw())
    c = s.client()
    adders = [Adder(s.port, "k", "e%d" % j, j % 2 == 0) for j in range(4)]
    for a in adders:
        a.start()
    wait_until(lambda: all(len(a.acked) >= 20 for a in adders), "acknowledgements")
    mark = [len(a.acked) for a in adders]
    marked_at = time.time()
    synced = int(info(c, "bloomery_wal_fsyncs"))
    # The first sync may have been under way with a batch from before the
    # mark; the second starts after everything acknowledged was written.
    wait_until(lambda: int(info(c, "bloomery_wal_fsyncs")) >= synced + 2, "two log syncs")
    faults.crash(s)
    for a in adders:
        a.join(timeout=30)
    c.close()
    s2 = start_server(**faults.server_kw())
    c2 = s2.client()
    must = [it for a, n in zip(adders, mark) for it in a.items(n)]
    missing = exists_all(c2, "k", must)
    assert not missing, "%d of %d items acknowledged before two syncs lost, e.g. %s" % (
        len(missing), len(must), missing[:3])
    later = [(t, it) for a, n in zip(adders, mark) for t, batch in a.acked[n:] for it in batch]
    gone = set(exists_all(c2, "k", [it for _, it in later]))
    print("everysec, kill -9 and power cut: all %d items acknowledged before the mark kept; "
          "of the %d acknowledged in the %.3f s after it, %d lost"
          % (len(must), len(later), max([t for t, _ in later], default=marked_at) - marked_at,
             sum(1 for _, it in later if it in gone)))
    c2.close()


def make_mixed(c):
    """A dataset of every type; returns the items that were added."""
    c.execute_command("BF.RESERVE", "blocked", "0.01", "1000", "EXPANSION", "2", "LAYOUT", "BLOCKED")
    c.execute_command("BF.RESERVE", "prefix", "0.001", "700")  # the default layout
    c.execute_command("BF.RESERVE", "classic", "0.001", "500", "LAYOUT", "CLASSIC")
    c.execute_command("BF.RESERVE", "fixed", "0.01", "300", "NONSCALING")
    c.execute_command("BF.RESERVE", "counting", "0.01", "5000", "COUNTING")
    c.execute_command("BF.RESERVE", "withttl", "0.01", "100", "TTL", "3600")
    c.execute_command("BF.RESERVE", "big", "0.01", "200000")
    items = ["item:%d" % i for i in range(3000)]
    for key in ("blocked", "prefix", "classic"):
        for base in range(0, 3000, 500):       # several links each
            c.execute_command("BF.MADD", key, *items[base:base + 500])
    c.execute_command("BF.MADD", "fixed", *items[:200])
    c.execute_command("BF.MADD", "big", *["big:%d" % i for i in range(30000)])
    c.execute_command("BF.MADD", "counting", *items[:1000])
    for it in items[:300]:
        c.execute_command("BF.DEL", "counting", it)
    c.execute_command("BF.MADD", "withttl", *items[:50])
    c.execute_command("BF.ADD", "auto", "x")            # created with the defaults
    c.execute_command("BF.MADD", "gone", "a", "b")
    c.execute_command("DEL", "gone")
    c.execute_command("BF.MADD", "old", "a", "b")
    c.execute_command("RENAME", "old", "new")
    c.execute_command("BF.RESERVE", "m1", "0.01", "100")
    c.execute_command("BF.RESERVE", "m2", "0.01", "100")
    c.execute_command("BF.MADD", "m1", "p", "q")
    c.execute_command("BF.MADD", "m2", "r", "s")
    c.execute_command("BF.MERGE", "merged", "m1", "m2")
    c.execute_command("PFADD", "hll", *items)
    c.execute_command("PFADD", "hll2", *items[:10])
    c.execute_command("PFMERGE", "hllm", "hll2", "nosuch")
    c.execute_command("BF.ADD", "exp", "x")
    c.execute_command("EXPIREAT", "exp", int(time.time()) + 7200)
    c.execute_command("BF.ADD", "persisted", "x")
    c.execute_command("EXPIRE", "persisted", 100)
    c.execute_command("PERSIST", "persisted")
    c.execute_command("BF.ADD", "short", "x")
    c.execute_command("PEXPIRE", "short", 300)
    return items


def state(c):
    out = {}
    keys = sorted(k.decode() for k in c.keys("*"))
    out["keys"] = keys
    items = ["item:%d" % i for i in range(3000)] + ["big:%d" % i for i in range(0, 30000, 7)] + \
        ["other:%d" % i for i in range(2000)] + ["a", "b", "p", "q", "r", "s", "x"]
    for k in keys:
        t = c.type(k).decode()
        if t == "string":
            out[k] = ("hll", c.pfcount(k))
        else:
            out[k] = (c.execute_command("BF.INFO", k),
                      tuple(c.execute_command("BF.MEXISTS", k, *items)))
        # Absolute: the same before and after a restart, however long it took.
        out[k + ":expiretime"] = c.execute_command("PEXPIRETIME", k)
    out["pfcount-union"] = c.pfcount("hll", "hllm")
    return out


@pytest.mark.parametrize("how", ["log", "snapshot", "snapshot+log", "shutdown"])
def test_restart_answers_identically(tmp_path, how):
    datadir = str(tmp_path / "data")
    s = Server(datadir=datadir)
    c = s.client()
    if how == "snapshot+log":
        c.execute_command("BF.RESERVE", "early", "0.01", "100")
        c.execute_command("SAVE")
    make_mixed(c)
    if how == "snapshot":
        c.execute_command("SAVE")
    wait_until(lambda: c.pttl("short") == -2, '"short" expiring')
    before = state(c)
    assert "short" not in before["keys"] and "gone" not in before["keys"]
    if how == "shutdown":
        try:
            c.execute_command("SHUTDOWN")
        except redis.ConnectionError:
            pass                       # no reply: the connection closes
        s.proc.wait(timeout=30)
    else:
        log_barrier(c)
        s.kill()
    s2 = Server(datadir=datadir)
    c2 = s2.client()
    after = state(c2)
    assert after == before
    c2.close()
    s2.stop()
    s.stop()


def test_snapshot_is_incremental(tmp_path):
    s = Server(datadir=str(tmp_path / "data"))
    c = s.client()
    for k in range(4):
        c.execute_command("BF.RESERVE", "f%d" % k, "0.01", "2000000")
        c.execute_command("BF.MADD", "f%d" % k, *["%d:%d" % (k, i) for i in range(20000)])
    c.execute_command("SAVE")
    first = int(info(c, "bloomery_snapshot_chunks_written"))
    assert first > 0
    c.execute_command("BF.ADD", "f0", "one more")
    c.execute_command("SAVE")
    assert int(info(c, "bloomery_snapshot_chunks_written")) == 1
    assert int(info(c, "bloomery_snapshot_chunks_reused")) == first - 1
    assert info(c, "rdb_last_bgsave_status") == "ok"
    raw = s.raw()
    assert raw.cmd("BGSAVE") == "Background saving started"
    raw.close()
    c.close()
    s.stop()


# ---- damage ----

def damaged_start(datadir):
    """Start a server on datadir; return (started, output). A refusal must be
    a clean exit 1 with a message, never a crash."""
    try:
        srv = Server(datadir=datadir)
    except RuntimeError as e:
        out = str(e)
        assert "can't start" in out, out
        assert "AddressSanitizer" not in out and "runtime error" not in out, out
        return False, out
    out = srv.output()
    srv.stop()
    return True, out


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A data directory with a snapshot (index, chunk files) and a log after it."""
    d = str(tmp_path_factory.mktemp("pristine") / "data")
    s = Server(datadir=d)
    c = s.client()
    c.execute_command("BF.RESERVE", "big", "0.01", "100000")
    c.execute_command("BF.MADD", "big", *["i%d" % i for i in range(20000)])
    c.execute_command("PFADD", "h", *["h%d" % i for i in range(500)])
    c.execute_command("SAVE")
    for i in range(20):
        c.execute_command("BF.MADD", "after", *["a%d:%d" % (i, j) for j in range(10)])
    # Answered only once the log is synced up to it, and so all before it.
    c.config_set("appendfsync", "always")
    c.execute_command("EXPIRE", "after", 10000)
    s.kill()
    c.close()
    return d


def files_of(d):
    """Snapshot indexes, chunk files and log files (not LAST) of d, sorted."""
    out = {}
    for sub in ("snapshots", "chunks", "log"):
        for name in sorted(os.listdir(os.path.join(d, sub))):
            path = os.path.join(d, sub, name)
            if sub == "log" and not name.endswith(".wal"):
                continue
            if os.path.getsize(path) > 0:
                out.setdefault(sub, []).append(path)
    return out


def test_pristine_directory_loads(pristine, tmp_path):
    d = str(tmp_path / "copy")
    shutil.copytree(pristine, d)
    started, out = damaged_start(d)
    assert started, out
    assert files_of(d)["chunks"], "the test needs a chunk file"


@pytest.mark.parametrize("kind", ["snapshots", "chunks", "log"])
def test_damage_is_detected(pristine, tmp_path, kind):
    rng = random.Random(kind)
    path0 = files_of(pristine)[kind][-1]
    rel = os.path.relpath(path0, pristine)
    size = os.path.getsize(path0)
    positions = sorted(set([0, 8, 16, 24, 40, size - 1, size - 8] +
                           [rng.randrange(size) for _ in range(4 if QUICK else 16)]))
    cuts = sorted(set([0, 1, 31, 47, size // 2, size - 1] +
                      [rng.randrange(size) for _ in range(2 if QUICK else 6)]))
    log_text = open(path0, "rb").read()
    for what, arg in [("flip", p) for p in positions] + [("cut", n) for n in cuts]:
        d = str(tmp_path / ("%s-%d" % (what, arg)))
        shutil.copytree(pristine, d)
        path = os.path.join(d, rel)
        data = bytearray(log_text)
        if what == "flip":
            data[arg] ^= 0x5A
        else:
            data = data[:arg]
        open(path, "wb").write(bytes(data))
        started, out = damaged_start(d)
        if started:
            # Only a log cut short may lose its torn last record (kept aside,
            # with a warning); a flipped byte is damage even in the last one.
            assert kind == "log" and what == "cut" and "torn tail" in out, (what, arg, out)
            # The cut record's bytes went aside, from its start to the cut.
            kept = [n for n in os.listdir(os.path.dirname(path))
                    if n.startswith(os.path.basename(path) + ".torn-")]
            assert len(kept) == (arg > 0), (what, arg, kept, out)
            for name in kept:
                o = int(name.rsplit("-", 1)[1])
                assert open(os.path.join(os.path.dirname(path), name), "rb").read() == \
                    log_text[o:arg], (what, arg, name)
        else:
            assert os.path.basename(path) in out and "offset" in out, (what, arg, out)


def test_check_data_reports_and_fixes(pristine, tmp_path):
    cli = os.path.join(os.path.dirname(BLOOMERYD), "bloomery")
    d = str(tmp_path / "data")
    shutil.copytree(pristine, d)
    ok = subprocess.run([cli, "check-data", d], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    log = files_of(d)["log"][-1]
    size = os.path.getsize(log)
    with open(log, "r+b") as f:
        f.truncate(size - 5)
    torn = subprocess.run([cli, "check-data", d], capture_output=True, text=True)
    assert torn.returncode == 1 and "torn" in torn.stdout + torn.stderr
    fixed = subprocess.run([cli, "check-data", "--fix", d], capture_output=True, text=True)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert subprocess.run([cli, "check-data", d]).returncode == 0
    chunk = files_of(d)["chunks"][0]
    data = bytearray(open(chunk, "rb").read())
    data[len(data) // 2] ^= 1
    open(chunk, "wb").write(bytes(data))
    bad = subprocess.run([cli, "check-data", d], capture_output=True, text=True)
    assert bad.returncode == 1
    assert os.path.basename(chunk) in bad.stdout + bad.stderr
