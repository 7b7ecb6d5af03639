"""Snapshots taken while values change (docs/PERSISTENCE.md, Snapshots).

Cuckoo and counting filters are kept as they were at the snapshot's start
(L0) by copy-on-write; windows and Bloom chains are read live and the log
replayed from L0 fixes them; HLLs are copied at the capture. Whatever the
writers did meanwhile, the snapshot plus the log from L0 must restart into
exactly the state the server had: every answer the same.

- gated: the server is started with BLOOMERYD_TEST_SNAPSHOT_GATE, so a
  BGSAVE stops after its capture until the test opens the gate. Between
  L0 and the reading of any chunk the test changes every value: cuckoo
  adds and deletes (kicks, 8 and 12-bit fingerprints, a compaction that
  frees sub-filters the snapshot holds, regrowth in their place), counting
  adds and deletes, window adds across rotations (debug-clock-offset-ms),
  HLL and Bloom adds; then it opens the gate while writer threads go on.
  Restart after kill -9 once the snapshot is published, and after a clean
  stop: the answers equal the old server's, the counting filters' counts
  equal the model's (deleting each item as often as it was added leaves
  nothing), and the server log shows pages saved for copy-on-write.
- free-running: writer threads on every value while BGSAVE runs three
  times without a gate, then kill -9 and the same comparison.
"""
import os
import random
import re
import threading
import time

import pytest
import redis

from conftest import QUICK, Server

PERIOD_MS = 25_000          # WINDOW 100 SLICES 4


def pipe_run(c, cmds, chunk=500):
    out = []
    for base in range(0, len(cmds), chunk):
        p = c.pipeline(transaction=False)
        for cmd in cmds[base:base + chunk]:
            p.execute_command(*cmd)
        out += p.execute(raise_on_error=False)
    return out


class Model:
    """Items per key, with the exact counts for cuckoo and counting filters
    (every item's count is changed by one thread only)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.cf = {k: {} for k in ("cf8", "cf12", "cfgrow")}
        self.cnt = {}
        self.win, self.bf, self.hll = set(), set(), set()

    def bump(self, d, item, by):
        with self.lock:
            d[item] = d.get(item, 0) + by


def create(c):
    c.execute_command("CF.RESERVE", "cf8", 16_000_000)                   # 16 MiB, 8 chunks
    c.execute_command("CF.RESERVE", "cf12", 8_000_000, "FINGERPRINT", 12)  # 12 MiB
    c.execute_command("CF.RESERVE", "cfgrow", 20_000, "EXPANSION", 2)     # grows, compacts
    c.execute_command("BF.RESERVE", "cnt", "0.001", 2_000_000, "COUNTING")
    c.execute_command("BF.RESERVE", "win", "0.01", 1_000_000, "WINDOW", 100, "SLICES", 4)
    c.execute_command("BF.RESERVE", "bf", "0.01", 1_000_000)


def cf_add(c, m, key, items):
    for base in range(0, len(items), 1000):
        part = items[base:base + 1000]
        got = c.execute_command("CF.INSERT", key, "ITEMS", *part)
        assert got == [1] * len(part), (key, got[:5])
        for it in part:
            m.bump(m.cf[key], it, 1)


def cf_del(c, m, key, items):
    got = pipe_run(c, [("CF.DEL", key, it) for it in items])
    assert got == [1] * len(items), key
    for it in items:
        m.bump(m.cf[key], it, -1)


def cnt_add(c, m, items):
    for base in range(0, len(items), 1000):
        part = items[base:base + 1000]
        c.execute_command("BF.MADD", "cnt", *part)
        for it in part:
            m.bump(m.cnt, it, 1)


def cnt_del(c, m, items):
    got = pipe_run(c, [("BF.DEL", "cnt", it) for it in items])
    assert got == [1] * len(items)
    for it in items:
        m.bump(m.cnt, it, -1)


def add_plain(c, m, key, items):
    for base in range(0, len(items), 1000):
        part = items[base:base + 1000]
        if key == "hll":
            c.execute_command("PFADD", "hll", *part)
        else:
            c.execute_command("BF.MADD", key, *part)
    with m.lock:
        {"win": m.win, "bf": m.bf, "hll": m.hll}[key].update(items)


def advance_clock(c, ms):
    cur = int(c.config_get("debug-clock-offset-ms")["debug-clock-offset-ms"])
    c.config_set("debug-clock-offset-ms", cur + ms)


def fill(c, m):
    """Before L0."""
    cf_add(c, m, "cf8", ["a8:%d" % i for i in range(30000)])
    cf_add(c, m, "cf12", ["a12:%d" % i for i in range(30000)])
    cf_add(c, m, "cfgrow", ["ag:%d" % i for i in range(60000)])
    cnt_add(c, m, ["ac:%d" % i for i in range(20000)])
    add_plain(c, m, "win", ["aw:%d" % i for i in range(20000)])
    add_plain(c, m, "bf", ["ab:%d" % i for i in range(20000)])
    add_plain(c, m, "hll", ["ah:%d" % i for i in range(5000)])


def nfilters(c, key):
    i = c.execute_command("CF.INFO", key)
    return dict(zip(i[0::2], i[1::2]))[b"Number of filters"]


def change_everything(c, m):
    """Between L0 and the first chunk read: every value changes."""
    cf_add(c, m, "cf8", ["b8:%d" % i for i in range(5000)])
    cf_del(c, m, "cf8", ["a8:%d" % i for i in range(0, 30000, 6)])
    cf_add(c, m, "cf12", ["b12:%d" % i for i in range(5000)])
    cf_del(c, m, "cf12", ["a12:%d" % i for i in range(0, 30000, 6)])
    # Deleting most of cfgrow compacts it: emptied newest sub-filters, which
    # the snapshot holds, are freed; adds grow new ones in their place.
    before = nfilters(c, "cfgrow")
    cf_del(c, m, "cfgrow", ["ag:%d" % i for i in range(60000) if i % 50])
    least = nfilters(c, "cfgrow")
    cf_add(c, m, "cfgrow", ["bg:%d" % i for i in range(30000)])
    assert least < before, (before, least)
    cnt_add(c, m, ["ac:%d" % i for i in range(0, 20000, 3)])      # counts of 2
    cnt_add(c, m, ["bc:%d" % i for i in range(5000)])
    cnt_del(c, m, ["ac:%d" % i for i in range(1, 20000, 4)])
    # Adds to the slice current at L0, whose copy will hold them, then to
    # slices two rotations clear after L0.
    add_plain(c, m, "win", ["bw:%d" % i for i in range(5000)])
    for r in range(2):
        advance_clock(c, PERIOD_MS)
        add_plain(c, m, "win", ["bw%d:%d" % (r, i) for i in range(5000)])
    add_plain(c, m, "bf", ["bb:%d" % i for i in range(5000)])
    add_plain(c, m, "hll", ["bh:%d" % i for i in range(3000)])


class Writer(threading.Thread):
    """Random changes to every value until stopped; item names are the
    thread's own, so the model's counts do not depend on interleaving."""

    def __init__(self, port, m, tag, rotate):
        super().__init__(daemon=True)
        self.c = redis.Redis(port=port, socket_timeout=60)
        self.m, self.tag, self.rotate = m, tag, rotate
        self.stop = threading.Event()
        self.rounds = 0
        self.error = None

    def run(self):
        rnd = random.Random(self.tag)
        n = 0
        try:
            while not self.stop.is_set():
                items = ["%s:%d" % (self.tag, n + i) for i in range(200)]
                n += 200
                key = rnd.choice(["cf8", "cf12", "cfgrow"])
                cf_add(self.c, self.m, key, items)
                cf_del(self.c, self.m, key, items[::3])
                cnt_add(self.c, self.m, items)
                cnt_del(self.c, self.m, items[::2])
                add_plain(self.c, self.m, "win", items)
                add_plain(self.c, self.m, "bf", items[:50])
                add_plain(self.c, self.m, "hll", items[:50])
                if self.rotate and self.rounds % 5 == 4:
                    advance_clock(self.c, PERIOD_MS)
                self.rounds += 1
        except Exception as e:          # reported by the test
            self.error = e


def answers(c, m):
    """Everything the server says about every item ever used."""
    out = {}
    with m.lock:
        cf = {k: sorted(v) for k, v in m.cf.items()}
        cnt = sorted(m.cnt)
        win, bf, hll = sorted(m.win), sorted(m.bf), sorted(m.hll)
    for key, items in cf.items():
        out[key] = pipe_run(c, [("CF.COUNT", key, it) for it in items], chunk=2000)
        out[key + ":info"] = c.execute_command("CF.INFO", key)
    for key, items in (("cnt", cnt), ("win", win), ("bf", bf)):
        got = []
        for base in range(0, len(items), 2000):
            got += c.execute_command("BF.MEXISTS", key, *items[base:base + 2000])
        out[key] = got
        out[key + ":info"] = c.execute_command("BF.INFO", key, "ALL") if key != "cnt" else \
            c.execute_command("BF.INFO", key)
        out[key + ":card"] = c.execute_command("BF.CARD", key)
    out["hll"] = c.pfcount("hll")
    out["hll:exists"] = len(hll)
    out["keys"] = sorted(c.keys("*"))
    return out


def check_model(c, m, ans):
    """The live server against the model: cuckoo counts at least the
    model's (other items may share a fingerprint), no false negatives."""
    with m.lock:
        for key, d in m.cf.items():
            items = sorted(d)
            low = [it for it, n in zip(items, ans[key]) if n < d[it]]
            assert not low, (key, low[:3])
        cnt = sorted(m.cnt)
        missing = [it for it, e in zip(cnt, ans["cnt"]) if m.cnt[it] > 0 and not e]
        assert not missing, missing[:3]
        missing = [it for it, e in zip(sorted(m.bf), ans["bf"]) if not e]
        assert not missing, missing[:3]


def check_counts(c, m):
    """Deleting each counting item as often as the model counted it must
    succeed every time and leave an empty filter: no count too low or too
    high (a change applied twice or lost)."""
    cmds = [("BF.DEL", "cnt", it) for it, n in sorted(m.cnt.items()) for _ in range(n)]
    got = pipe_run(c, cmds, chunk=2000)
    failed = [cmd[2] for cmd, g in zip(cmds, got) if g != 1]
    assert not failed, "%d deletes failed, e.g. %s" % (len(failed), failed[:3])
    items = sorted(m.cnt)
    left = []
    for base in range(0, len(items), 2000):
        part = items[base:base + 2000]
        left += [it for it, e in zip(part, c.execute_command("BF.MEXISTS", "cnt", *part)) if e]
    assert not left, "%d items still present, e.g. %s" % (len(left), left[:3])
    assert c.execute_command("BF.CARD", "cnt") == 0


def wait_saved(c, seq_before):
    """Until the background snapshot is over; it must have succeeded."""
    deadline = time.time() + 300
    while True:
        inf = c.info("persistence")
        if not inf["rdb_bgsave_in_progress"] and inf["bloomery_snapshot_seq"] > seq_before:
            break
        assert inf["rdb_last_bgsave_status"] == "ok" or inf["rdb_bgsave_in_progress"], inf
        assert time.time() < deadline, "snapshot did not finish"
        time.sleep(0.02)
    assert inf["rdb_last_bgsave_status"] == "ok", inf
    return inf


def cow_pages(log):
    return [int(n) for n in re.findall(r"copy-on-write: (\d+) pages saved", log)]


def restart_and_compare(s, datadir, m, before, how):
    if how == "kill":
        s.kill()
    else:
        s.stop()
    s2 = Server(datadir=datadir)
    try:
        c2 = s2.client()
        after = answers(c2, m)
        for k in before:
            assert after[k] == before[k], "%s differs after %s\n%s" % (k, how, s2.output())
        check_counts(c2, m)
        c2.close()
    finally:
        s2.stop()


def open_gate_if_waiting(gate):
    """After a failure: a snapshot still waiting at the gate would keep the
    server from stopping."""
    try:
        fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return                          # nobody waits
    os.close(fd)


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_gated_snapshot_restarts_exactly(tmp_path, monkeypatch, how):
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    monkeypatch.setenv("BLOOMERYD_TEST_SNAPSHOT_GATE", gate)
    datadir = str(tmp_path / "data")
    s = Server("--appendfsync", "always", "--save", "", datadir=datadir)
    monkeypatch.delenv("BLOOMERYD_TEST_SNAPSHOT_GATE")
    try:
        c = s.client()
        m = Model()
        create(c)
        fill(c, m)
        seq = c.info("persistence")["bloomery_snapshot_seq"]
        assert c.execute_command("BGSAVE") is True   # "Background saving started"
        # L0 is taken; no chunk is read until the gate opens.
        change_everything(c, m)
        assert c.info("persistence")["rdb_bgsave_in_progress"] == 1
        writers = [Writer(s.port, m, "w%d" % i, rotate=i == 0) for i in range(2)]
        for w in writers:
            w.start()
        with open(gate, "w") as g:
            g.write("go")
        wait_saved(c, seq)
        for w in writers:
            w.stop.set()
        for w in writers:
            w.join(timeout=120)
            assert w.error is None, w.error
        saved = cow_pages(s.output())
        assert saved and saved[-1] > 0, s.output()
        before = answers(c, m)
        check_model(c, m, before)
        c.close()
        restart_and_compare(s, datadir, m, before, how)
    finally:
        open_gate_if_waiting(gate)
        s.stop()


def test_free_running_snapshots_restart_exactly(tmp_path):
    # everysec: the writers go faster. Once they stopped, appendfsync
    # always and a read make the log durable up to the last record (the
    # read's reply waits for it), so the kill loses nothing.
    datadir = str(tmp_path / "data")
    s = Server("--appendfsync", "everysec", "--save", "", datadir=datadir)
    try:
        c = s.client()
        m = Model()
        create(c)
        fill(c, m)
        writers = [Writer(s.port, m, "f%d" % i, rotate=i == 0) for i in range(2)]
        for w in writers:
            w.start()
        # Until the snapshot the restart will use saw writers change pages
        # it had not read yet (it always does within a few).
        for n in range(20):
            seq = c.info("persistence")["bloomery_snapshot_seq"]
            c.execute_command("BGSAVE")
            wait_saved(c, seq)
            if n + 1 >= (2 if QUICK else 3) and cow_pages(s.output())[-1] > 0:
                break
        for w in writers:
            w.stop.set()
        for w in writers:
            w.join(timeout=120)
            assert w.error is None, w.error
            assert w.rounds > 0
        assert cow_pages(s.output())[-1] > 0, s.output()
        c.config_set("appendfsync", "always")
        c.execute_command("BF.CARD", "bf")
        before = answers(c, m)
        check_model(c, m, before)
        c.close()
        restart_and_compare(s, datadir, m, before, "kill")
    finally:
        s.stop()
