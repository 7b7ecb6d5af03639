"""Power cut under appendfsync always: every acknowledged fact survives.

Concurrent clients write every value type while the server runs under the
sync shim (powercut.py); each records what the server acknowledged. Then
kill -9, the power cut (every file cut back to what was fsynced), a
restart, and every fact is checked:

- an item acknowledged by BF.ADD / BF.MADD / BF.INSERT (1 or 0: "may exist"
  is an acknowledgement too) is found, on blocked, classic, growing and
  windowed filters, and BF.CARD is at least the number of 1 replies;
- counting filters: acknowledged adds and deletes, through BF.CARD bounds
  and the items that must remain;
- cuckoo filters: CF.ADD, CF.ADDNX (1 or 0), CF.INSERT, CF.DEL through
  CF.COUNT lower bounds; CF.COUNT and CF.EXISTS answers are facts too;
- PFADD (1 or 0): the same PFADD after the restart answers 0;
- BF.MERGE destinations, keys restored with BF.LOADCHUNK / CF.LOADCHUNK,
  DEL, EXPIRE, PERSIST;
- several clients add the same items in lock step, and a reader asks for
  them meanwhile: a 0 ("already there") or an EXISTS answering 1 may only
  be sent once the add it reports is durable.

The kill comes right after one of the lock-step clients got its answers
(the reader, or in every other server life an adder): under a server that
answers before the add is durable, that add is then still on its way to the
disk, and the log's syncs are slowed by a few milliseconds (the shim's
delay) to keep that window open. A BGSAVE runs in every server life, so the
snapshot's files go through the power cut too. test_scenario_detects_a_log_without_fsync runs the same scenario
against a log whose syncs are skipped and requires lost facts to be found:
the check can fail.
"""
import threading
import time
from collections import defaultdict

import redis

from conftest import QUICK
from powercut import faults  # noqa: F401 (a fixture)

ROUNDS = 2 if QUICK else 3
STEPS = 60 if QUICK else 200      # lock-step rounds of the duplicate adders per server life
ADDERS = 3                        # clients adding the same items
PLAIN = ["bf:blocked", "bf:classic", "bf:scale", "win"]
SRC_ITEMS = ["src:%d" % i for i in range(200)]
# The log's syncs take a few milliseconds more, as on a disk slower than this
# machine's: a reply sent before its add is durable has a window to be caught.
SLOW_LOG = {"delay": 3, "match": "/log/"}


class Facts:
    """What the server acknowledged, to be checked after each restart."""

    def __init__(self):
        self.lock = threading.Lock()
        # key -> {item: how it was acknowledged}: items BF.EXISTS / CF.EXISTS
        # must find.
        self.bf = defaultdict(lambda: defaultdict(set))
        self.card = defaultdict(int)    # key -> BF.CARD at least
        self.cf = defaultdict(lambda: defaultdict(set))
        self.cf_count = {}              # (key, item) -> CF.COUNT at least
        self.pf = []                    # (key, elements, how): PFADD of them must answer 0
        self.absent = set()             # keys that must not exist
        self.ttl = {}                   # key -> "set" (0 < TTL) or -1
        # Counting filter "cnt": BF.CARD = base + acknowledged adds - deletes,
        # give or take the requests in flight at the kill.
        self.cnt_base = 0
        self.cnt_net = 0
        self.cnt_unsure_add = 0
        self.cnt_unsure_del = 0

    def bf_add(self, key, items, how, replies=None):
        """items acknowledged by `how`; replies: the command's answer for
        each item, when it has one."""
        with self.lock:
            for i, it in enumerate(items):
                self.bf[key][it].add(how if replies is None else "%s %s" % (how, replies[i]))
            self.card[key] += sum(1 for r in replies or [] if r == 1)

    def cf_add(self, key, items, how):
        with self.lock:
            for it in items:
                self.cf[key][it].add(how)

    def cf_min(self, key, item, n):
        with self.lock:
            self.cf_count[key, item] = max(self.cf_count.get((key, item), 0), n)


def pipe(c, *cmds):
    p = c.pipeline(transaction=False)
    for cmd in cmds:
        p.execute_command(*cmd)
    return p.execute()


def ask(c, *cmds):
    """pipe() for the checks: an error reply (a key a power cut left half
    restored, say) comes back as the exception, to be reported as a wrong
    answer."""
    p = c.pipeline(transaction=False)
    for cmd in cmds:
        p.execute_command(*cmd)
    return p.execute(raise_on_error=False)


class Worker(threading.Thread):
    """Runs step(client, i) until the server dies. A step records facts only
    once all its replies arrived."""

    def __init__(self, port, step, barrier=None):
        super().__init__(daemon=True)
        self.port, self.step, self.barrier = port, step, barrier
        self.steps = 0
        self.error = None

    def run(self):
        c = redis.Redis(port=self.port, socket_timeout=60)
        try:
            while True:
                if self.barrier is not None:
                    self.barrier.wait()
                self.step(c, self.steps)
                self.steps += 1
        except (redis.ConnectionError, ConnectionResetError, threading.BrokenBarrierError):
            pass                         # the kill, or another group member's end
        except Exception as e:           # a wrong reply or a stuck one: reported by the scenario
            self.error = e
        finally:
            if self.barrier is not None:
                self.barrier.abort()
            c.close()


class Scenario:
    def __init__(self, facts):
        self.f = facts
        self.restore_lock = threading.Lock()   # no BGSAVE capture in the middle of a restore
        self.dumps = {}
        self.kill_at = None                    # the lock-step round from which to kill
        self.kill_now = threading.Event()
        self.kill_on_reader = True

    def group_answered(self, n, reader):
        """A lock-step client has recorded its answers for round n. The
        first to be answered is told "already there" (or its EXISTS found
        the item) while the add that is new may still be on its way to the
        disk: that is when to kill. The reader is usually first; every other
        server life, only the adders count."""
        with self.f.lock:
            if self.kill_at is not None and n >= self.kill_at and \
                    (not reader or self.kill_on_reader):
                self.kill_now.set()

    # ---- setup, once ----

    def setup(self, c):
        f = self.f
        c.execute_command("BF.RESERVE", "bf:blocked", "0.001", "100000")
        c.execute_command("BF.RESERVE", "bf:classic", "0.001", "100000", "LAYOUT", "CLASSIC")
        c.execute_command("BF.RESERVE", "bf:scale", "0.01", "100", "EXPANSION", "2")
        c.execute_command("BF.RESERVE", "win", "0.01", "100000", "WINDOW", "3600", "SLICES", "4")
        c.execute_command("BF.RESERVE", "cnt", "0.001", "200000", "COUNTING")
        c.execute_command("CF.RESERVE", "cf:dup", "8192", "BUCKETSIZE", "4")
        c.execute_command("CF.RESERVE", "cf:own", "8192", "BUCKETSIZE", "4")
        for m in ("m1", "m2"):
            c.execute_command("BF.RESERVE", m, "0.01", "20000")
        # Sources of the restores: a dump of each kind.
        c.execute_command("BF.RESERVE", "src:bf", "0.01", "1000")
        c.execute_command("BF.RESERVE", "src:classic", "0.01", "1000", "LAYOUT", "CLASSIC")
        c.execute_command("CF.RESERVE", "src:cf", "1000")
        for key in ("src:bf", "src:classic"):
            c.execute_command("BF.MADD", key, *SRC_ITEMS)
            f.bf_add(key, SRC_ITEMS, "BF.MADD")
        c.execute_command("CF.INSERT", "src:cf", "ITEMS", *SRC_ITEMS)
        f.cf_add("src:cf", SRC_ITEMS, "CF.INSERT")
        for key, cmd in (("src:bf", "BF"), ("src:classic", "BF"), ("src:cf", "CF")):
            chunks, it = [], 0
            while True:
                it, data = c.execute_command(cmd + ".SCANDUMP", key, it)
                if it == 0:
                    break
                chunks.append((it, data))
            self.dumps[key] = (cmd, chunks)

    # ---- steps, one per worker kind ----

    def dup_adder(self, j, rnd):
        """Adder j of the lock-step group: the same item as the others, by
        BF.ADD, BF.MADD or BF.INSERT, CF.ADDNX and PFADD. A pipeline for the
        plain filters (whose adds log a record even for a duplicate), then
        one for the window, the cuckoo filter and the HLL (where a duplicate
        changes nothing): a client with nothing new to log must still wait
        for the add that made its "0" true."""
        def add(key, it):
            return (("BF.ADD", key, it), ("BF.MADD", key, it), ("BF.INSERT", key, "ITEMS", it))[j]

        def step(c, n):
            it = "d:%d:%d" % (rnd, n)
            for cmds in ([add(key, it) for key in PLAIN if key != "win"],
                         [add("win", it), ("CF.ADDNX", "cf:dup", it), ("PFADD", "hll", it)]):
                replies = pipe(c, *cmds)
                for cmd, rep in zip(cmds, replies):
                    if cmd[0].startswith("BF."):
                        self.f.bf_add(cmd[1], [it], cmd[0], rep if isinstance(rep, list) else [rep])
                    elif cmd[0] == "CF.ADDNX":
                        self.f.cf_add("cf:dup", [it], "CF.ADDNX %s" % rep)
                    else:
                        with self.f.lock:
                            self.f.pf.append(("hll", (it,), "PFADD %s" % rep))
            self.group_answered(n, False)
        return step

    def dup_reader(self, rnd):
        """Asks for the lock-step group's item while it is being added: a 1
        is a fact."""
        def step(c, n):
            it = "d:%d:%d" % (rnd, n)
            cmds = [("BF.EXISTS", key, it) for key in PLAIN]
            cmds += [("CF.EXISTS", "cf:dup", it), ("CF.COUNT", "cf:dup", it)]
            replies = pipe(c, *cmds)
            for key, rep in zip(PLAIN, replies):
                if rep == 1:
                    self.f.bf_add(key, [it], "BF.EXISTS 1")
            if replies[-2] == 1:
                self.f.cf_add("cf:dup", [it], "CF.EXISTS 1")
            if replies[-1] > 0:
                self.f.cf_min("cf:dup", it, replies[-1])
            self.group_answered(n, True)
        return step

    def unique_adder(self, key, rnd):
        def step(c, i):
            items = ["u:%s:%d:%d:%d" % (key, rnd, i, k) for k in range(5)]
            if i % 3 == 0:
                replies = pipe(c, *[("BF.ADD", key, it) for it in items])
            elif i % 3 == 1:
                replies = c.execute_command("BF.MADD", key, *items)
            else:
                replies = c.execute_command("BF.INSERT", key, "ITEMS", *items)
            self.f.bf_add(key, items, ("BF.ADD", "BF.MADD", "BF.INSERT")[i % 3], replies)
        return step

    def counting(self, rnd):
        """Adds twice and deletes once (the item stays), or adds and deletes
        (the item goes); BF.CARD follows every acknowledged call."""
        def step(c, i):
            it = "c:%d:%d" % (rnd, i)
            cmds = [("BF.ADD", "cnt", it)] * (2 if i % 2 == 0 else 1) + [("BF.DEL", "cnt", it)]
            adds, dels = len(cmds) - 1, 1
            f = self.f
            with f.lock:
                f.cnt_unsure_add += adds
                f.cnt_unsure_del += dels
            replies = pipe(c, *cmds)
            assert replies[-1] == 1, (it, replies)
            with f.lock:
                f.cnt_unsure_add -= adds
                f.cnt_unsure_del -= dels
                f.cnt_net += adds - dels
            if adds == 2:
                f.bf_add("cnt", [it], "BF.ADD twice, BF.DEL once")
        return step

    def cuckoo_own(self, rnd):
        """Items only this client touches: two copies of x, one deleted; y
        inserted once."""
        def step(c, i):
            x, y = "o:%d:%d:x" % (rnd, i), "o:%d:%d:y" % (rnd, i)
            replies = pipe(c, ("CF.ADD", "cf:own", x), ("CF.ADD", "cf:own", x),
                           ("CF.INSERT", "cf:own", "ITEMS", y), ("CF.DEL", "cf:own", x))
            assert replies == [1, 1, [1], 1], replies
            self.f.cf_min("cf:own", x, 1)
            self.f.cf_min("cf:own", y, 1)
            self.f.cf_add("cf:own", [x], "CF.ADD twice, CF.DEL once")
            self.f.cf_add("cf:own", [y], "CF.INSERT")
        return step

    def merger(self, rnd):
        def step(c, i):
            a, b = "ma:%d:%d" % (rnd, i), "mb:%d:%d" % (rnd, i)
            pipe(c, ("BF.ADD", "m1", a), ("BF.ADD", "m2", b))
            self.f.bf_add("m1", [a], "BF.ADD")
            self.f.bf_add("m2", [b], "BF.ADD")
            with self.f.lock:
                before = set(self.f.bf["m1"]) | set(self.f.bf["m2"])
            assert c.execute_command("BF.MERGE", "merged", "m1", "m2") == b"OK"
            self.f.bf_add("merged", before, "BF.MERGE")
        return step

    def restorer(self, rnd):
        def step(c, i):
            src = ("src:bf", "src:classic", "src:cf")[i % 3]
            cmd, chunks = self.dumps[src]
            dst = "rst:%s:%d:%d" % (src, rnd, i)
            with self.restore_lock:
                for it, data in chunks:
                    assert c.execute_command(cmd + ".LOADCHUNK", dst, it, data) == b"OK"
            if cmd == "BF":
                self.f.bf_add(dst, SRC_ITEMS, "BF.LOADCHUNK")
            else:
                self.f.cf_add(dst, SRC_ITEMS, "CF.LOADCHUNK")
        return step

    def keys(self, rnd):
        """DEL, EXPIRE, PERSIST and an expiry in the past, each on a new key."""
        def step(c, i):
            k = "k:%d:%d" % (rnd, i)
            how = i % 5
            if how == 0:
                assert pipe(c, ("BF.ADD", k, "x"), ("DEL", k)) == [1, 1]
                self.f.absent.add(k)
            elif how == 1:
                assert pipe(c, ("BF.ADD", k, "x"), ("EXPIRE", k, 100000)) == [1, 1]
                self.f.bf_add(k, ["x"], "BF.ADD, EXPIRE")
                self.f.ttl[k] = "set"
            elif how == 2:
                assert pipe(c, ("BF.ADD", k, "x"), ("EXPIRE", k, 100000),
                            ("PERSIST", k)) == [1, 1, 1]
                self.f.bf_add(k, ["x"], "BF.ADD, EXPIRE, PERSIST")
                self.f.ttl[k] = -1
            elif how == 3:
                assert pipe(c, ("CF.ADD", k, "x"), ("EXPIRE", k, -1)) == [1, 1]
                self.f.absent.add(k)
            else:
                assert pipe(c, ("PFADD", k, "x"), ("UNLINK", k)) == [1, 1]
                self.f.absent.add(k)
        return step

    # ---- after a restart ----

    def verify(self, c):
        f = self.f
        bad = []

        def chunked(items):
            items = sorted(items)
            for base in range(0, len(items), 1000):
                yield items[base:base + 1000]

        def lost(cmd, facts):
            found = []
            for key, items in sorted(facts.items()):
                miss = []
                for part in chunked(items):
                    got = ask(c, (cmd, key) + tuple(part))[0]
                    if isinstance(got, Exception):
                        got = [got] * len(part)
                    miss += [it for it, g in zip(part, got) if g != 1]
                if miss:
                    found.append("%s: %d of %d acknowledged items lost, e.g. %s" % (
                        key, len(miss), len(items),
                        ", ".join("%s (%s)" % (it, "; ".join(sorted(items[it])))
                                  for it in miss[:3]) +
                        (" (%s)" % got[0] if isinstance(got[0], Exception) else "")))
            bad.extend(found[:12])
            if len(found) > 12:
                bad.append("... and %d more keys with acknowledged items lost" % (len(found) - 12))

        lost("BF.MEXISTS", f.bf)
        for key, n in sorted(f.card.items()):
            card = ask(c, ("BF.CARD", key))[0]
            if isinstance(card, Exception) or card < n:
                bad.append("%s: BF.CARD %d, but %d adds were acknowledged as new" % (key, card, n))
        lost("CF.MEXISTS", f.cf)
        counts = sorted(f.cf_count.items())
        for base in range(0, len(counts), 1000):
            part = counts[base:base + 1000]
            got = ask(c, *[("CF.COUNT", key, it) for (key, it), _ in part])
            low = [(key, it, n, g) for ((key, it), n), g in zip(part, got)
                   if isinstance(g, Exception) or g < n]
            if low:
                bad.append("CF.COUNT below the acknowledged copies for %d items, e.g. %s"
                           % (len(low), low[:3]))
        for base in range(0, len(f.pf), 1000):
            part = f.pf[base:base + 1000]
            got = ask(c, *[("PFADD", key) + elems for key, elems, _ in part])
            new = [(elems, how) for (key, elems, how), g in zip(part, got) if g != 0]
            if new:
                bad.append("hll: %d acknowledged PFADDs lost, e.g. %s" % (len(new), new[:3]))
        if f.absent:
            absent = sorted(f.absent)
            got = ask(c, *[("EXISTS", k) for k in absent])
            back = [k for k, g in zip(absent, got) if g != 0]
            if back:
                bad.append("%d deleted keys are back, e.g. %s" % (len(back), back[:3]))
        if f.ttl:
            keys = sorted(f.ttl)
            got = ask(c, *[("TTL", k) for k in keys])
            wrong = [(k, f.ttl[k], g) for k, g in zip(keys, got)
                     if not ((f.ttl[k] == "set" and isinstance(g, int) and 0 < g <= 100000) or
                             g == f.ttl[k])]
            if wrong:
                bad.append("%d keys lost their expiry change, e.g. %s" % (len(wrong), wrong[:3]))
        card = ask(c, ("BF.CARD", "cnt"))[0]
        lo = f.cnt_base + f.cnt_net - f.cnt_unsure_del
        hi = f.cnt_base + f.cnt_net + f.cnt_unsure_add
        if isinstance(card, Exception) or not lo <= card <= hi:
            bad.append("cnt: BF.CARD %s, acknowledged adds and deletes give %d..%d" % (card, lo, hi))
            card = lo
        # What was in flight is settled now.
        f.cnt_base, f.cnt_net, f.cnt_unsure_add, f.cnt_unsure_del = card, 0, 0, 0
        return bad

    def workers(self, port, rnd):
        group = threading.Barrier(ADDERS + 1)
        ws = [Worker(port, self.dup_adder(j, rnd), group) for j in range(ADDERS)]
        ws.append(Worker(port, self.dup_reader(rnd), group))
        ws += [Worker(port, self.unique_adder(key, rnd)) for key in PLAIN]
        ws += [Worker(port, make(rnd)) for make in
               (self.counting, self.cuckoo_own, self.merger, self.restorer, self.keys)]
        return ws


def run_scenario(faults, start_server, rounds, fault):
    """Rounds of concurrent writes, kill -9 and power cut; returns the facts
    found broken after the restarts (an empty list when none)."""
    faults.set(**fault)
    facts = Facts()
    sc = Scenario(facts)
    bad = []
    for rnd in range(rounds + 1):
        try:
            s = start_server("--appendfsync", "always", **faults.server_kw())
        except RuntimeError as e:
            return bad + ["round %d: the server did not start after the power cut: %s" % (rnd, e)]
        c = s.client()
        if rnd == 0:
            sc.setup(c)
        else:
            found = sc.verify(c)
            bad += ["round %d: %s" % (rnd, b) for b in found]
        if rnd == rounds:
            if not bad:
                # The scenario did what it says: the small filter grew.
                assert c.execute_command("BF.INFO", "bf:scale", "FILTERS")[0] >= 3
            c.close()
            break
        ws = sc.workers(s.port, rnd)
        sc.kill_at = None
        sc.kill_now.clear()
        sc.kill_on_reader = rnd % 2 == 0
        for w in ws:
            w.start()
        deadline = time.time() + 120
        # Half the steps and some of every worker, then a snapshot.
        while min(w.steps for w in ws[:ADDERS + 1]) < STEPS // 2 or min(w.steps for w in ws) < 3:
            errors = [w.error for w in ws if w.error]
            assert not errors, errors
            assert time.time() < deadline and all(w.is_alive() for w in ws), \
                [(w.steps, w.is_alive()) for w in ws]
            time.sleep(0.005)
        with sc.restore_lock:
            assert c.execute_command("BGSAVE") is True   # redis-py: "Background saving started"
        # The kill comes as soon as a lock-step client has its answers, in
        # a later round.
        sc.kill_at = ws[ADDERS].steps + STEPS // 2
        assert sc.kill_now.wait(timeout=120), [(w.steps, w.error) for w in ws]
        faults.crash(s)
        print("round %d: steps %s" % (rnd, [w.steps for w in ws]))
        for w in ws:
            w.join(timeout=60)
            assert not w.is_alive()
        errors = [w.error for w in ws if w.error]
        assert not errors, errors
        c.close()
    return bad


def test_acknowledged_facts_survive_power_cuts(faults, start_server):
    bad = run_scenario(faults, start_server, ROUNDS, SLOW_LOG)
    print("\n".join(bad))
    assert not bad, "\n".join(bad)


def test_scenario_detects_a_log_without_fsync(faults, start_server):
    """The same scenario with the log's syncs skipped (a build without
    them) must find lost acknowledged facts."""
    bad = run_scenario(faults, start_server, 1, dict(SLOW_LOG, fsync="skip"))
    print("\n".join(bad))
    assert any("acknowledged items lost" in b for b in bad), bad
