"""Time-windowed Bloom filters: BF.RESERVE key error capacity WINDOW seconds
[SLICES s] and the BF.* commands on them.

The clock is moved with CONFIG SET debug-clock-offset-ms (a test-only
setting added to the clock windows rotate by), so a 2-second window with 2
slices is exercised without sleeping: items inside the window are always
found, items past window + window/slices are forgotten.
"""
import threading
import time

import pytest
import redis

from conftest import QUICK, Server, wait_log_durable

ERR_SCALE = "WINDOW filters do not scale"


def advance(c, ms):
    cur = int(c.config_get("debug-clock-offset-ms")["debug-clock-offset-ms"])
    c.config_set("debug-clock-offset-ms", cur + ms)


def info(c, key):
    i = c.execute_command("BF.INFO", key, "ALL")
    return dict(zip([k.decode() for k in i[0::2]], i[1::2]))


@pytest.fixture
def w(r):
    r.config_set("debug-clock-offset-ms", 0)
    yield r
    r.config_set("debug-clock-offset-ms", 0)


def test_reserve_and_info(w):
    assert w.execute_command("BF.RESERVE", "win", "0.001", "10000", "WINDOW", "60") == b"OK"
    assert w.type("win") == b"MBbloom--"
    i = info(w, "win")
    assert i["Capacity"] == 10000 and i["Number of filters"] == 5
    assert i["Expansion rate"] is None and i["Number of items inserted"] == 0
    assert i["Window"] == 60 and i["Slices"] == 4 and i["Layout"] == b"blocked"
    assert i["Slice items"] == [0] * 5 and i["Early rotations"] == 0
    assert i["Size"] == i["Bytes"]
    assert w.execute_command("BF.INFO", "win", "CAPACITY") == [10000]
    assert w.execute_command("BF.INFO", "win", "EXPANSION") == [None]
    with pytest.raises(redis.ResponseError, match="item exists"):
        w.execute_command("BF.RESERVE", "win", "0.01", "10", "WINDOW", "5")


@pytest.mark.parametrize("args,msg", [
    (["WINDOW", "10", "EXPANSION", "2"], ERR_SCALE),
    (["WINDOW", "10", "NONSCALING"], ERR_SCALE),
    (["WINDOW", "10", "LAYOUT", "CLASSIC"], "blocked layout"),
    (["WINDOW", "10", "COUNTING"], "cannot be COUNTING"),
    (["WINDOW", "0"], "positive number of seconds"),
    (["WINDOW", "x"], "positive number of seconds"),
    (["WINDOW", "10", "SLICES", "0"], r"SLICES must be in the range \[1, 64\]"),
    (["WINDOW", "10", "SLICES", "65"], r"SLICES must be in the range \[1, 64\]"),
    (["SLICES", "4"], "SLICES needs WINDOW"),
])
def test_reserve_errors(w, args, msg):
    with pytest.raises(redis.ResponseError, match=msg):
        w.execute_command("BF.RESERVE", "bad", "0.01", "100", *args)
    assert not w.exists("bad")


def test_check_and_add_replies(w):
    w.execute_command("BF.RESERVE", "win", "0.01", "1000", "WINDOW", "2", "SLICES", "2")
    assert w.execute_command("BF.ADD", "win", "a") == 1
    assert w.execute_command("BF.ADD", "win", "a") == 0
    assert w.execute_command("BF.MADD", "win", "a", "b", "b") == [0, 1, 0]
    assert w.execute_command("BF.INSERT", "win", "ITEMS", "c", "a") == [1, 0]
    assert w.execute_command("BF.EXISTS", "win", "b") == 1
    assert w.execute_command("BF.MEXISTS", "win", "a", "zz") == [1, 0]
    assert w.execute_command("BF.CARD", "win") == 3
    # BF.INSERT does not create windows: a missing key becomes a plain filter.
    w.execute_command("BF.INSERT", "plain", "ITEMS", "a")
    assert b"Window" not in w.execute_command("BF.INFO", "plain", "ALL")


def test_window_guarantee(w):
    """2 s window, 2 slices (1 s each): found while younger than 2 s,
    forgotten once older than 3 s."""
    w.execute_command("BF.RESERVE", "win", "0.01", "1000", "WINDOW", "2", "SLICES", "2")
    assert w.execute_command("BF.ADD", "win", "old") == 1
    for step in range(19):              # 0.1 s steps up to 1.9 s
        advance(w, 100)
        assert w.execute_command("BF.EXISTS", "win", "old") == 1, step
        w.execute_command("BF.ADD", "win", "tick:%d" % step)
    assert w.execute_command("BF.ADD", "win", "old") == 0   # still seen: not re-added
    advance(w, 1200)                    # 3.1 s after the add
    assert w.execute_command("BF.EXISTS", "win", "old") == 0
    assert w.execute_command("BF.ADD", "win", "old") == 1   # new again
    i = info(w, "win")
    assert i["Rotations"] >= 3 and i["Early rotations"] == 0


def test_idle_window_rotates_from_cron(w):
    w.execute_command("BF.RESERVE", "win", "0.01", "1000", "WINDOW", "2", "SLICES", "2")
    w.execute_command("BF.MADD", "win", "a", "b")
    advance(w, 5000)
    deadline = time.time() + 5
    while info(w, "win")["Rotations"] < 3 and time.time() < deadline:
        time.sleep(0.05)
    i = info(w, "win")
    assert i["Rotations"] >= 3 and i["Slice items"] == [0, 0, 0]
    assert w.execute_command("BF.CARD", "win") == 0


def test_full_slice_rotates_early(w):
    w.execute_command("BF.RESERVE", "win", "0.01", "100", "WINDOW", "3600", "SLICES", "4")
    for i in range(10):
        w.execute_command("BF.MADD", "win", *["i:%d:%d" % (i, j) for j in range(10)])
    i = info(w, "win")
    assert i["Early rotations"] >= 3
    # Items stay found while their slices live.
    assert all(w.execute_command("BF.MEXISTS", "win", *["i:9:%d" % j for j in range(10)]))


def test_fpr_at_capacity(w):
    cap = 5000 if QUICK else 20000
    w.execute_command("BF.RESERVE", "win", "0.01", cap, "WINDOW", "4", "SLICES", "4")
    # Fill the window over its four slices, a quarter per slice period.
    new = 0
    for q in range(4):
        items = ["in:%d:%d" % (q, j) for j in range(cap // 4)]
        for base in range(0, len(items), 1000):
            new += sum(w.execute_command("BF.MADD", "win", *items[base:base + 1000]))
        advance(w, 1000)
    advance(w, -1)
    # A few adds are false positives themselves: reported seen, not added.
    assert cap * 0.99 <= new <= cap
    assert w.execute_command("BF.CARD", "win") == new
    assert info(w, "win")["Early rotations"] == 0
    probes = ["out:%d" % j for j in range(50000 if not QUICK else 20000)]
    fp = 0
    for base in range(0, len(probes), 2000):
        fp += sum(w.execute_command("BF.MEXISTS", "win", *probes[base:base + 2000]))
    assert fp / len(probes) <= 0.01 * 1.2, fp


def test_concurrent_check_and_add_reports_new_once(server, w):
    w.execute_command("BF.RESERVE", "win", "0.001", "100000", "WINDOW", "3600")
    n, threads = (2000, 4) if QUICK else (10000, 8)
    results = [None] * threads

    def run(t):
        c = server.client()
        items = ["item:%d" % i for i in range(n)]
        got = []
        for base in range(0, n, 100):
            pipe = c.pipeline(transaction=False)
            for it in items[base:base + 100]:
                pipe.execute_command("BF.ADD", "win", it)
            got += pipe.execute()
        results[t] = got
        c.close()

    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i in range(n):
        assert sum(res[i] for res in results) == 1, i
    assert w.execute_command("BF.CARD", "win") == n


@pytest.mark.parametrize("how", ["log", "snapshot"])
def test_rotation_across_restart(tmp_path, how):
    datadir = str(tmp_path / "data")
    s = Server(datadir=datadir)
    c = s.client()
    c.execute_command("BF.RESERVE", "win", "0.01", "1000", "WINDOW", "20", "SLICES", "2")
    c.execute_command("BF.MADD", "win", "a", "b")
    advance(c, 10000)                    # one rotation
    c.execute_command("BF.MADD", "win", "c", "a")
    if how == "snapshot":
        c.execute_command("SAVE")
    advance(c, 10000)                    # another
    c.execute_command("BF.ADD", "win", "d")
    before = info(c, "win")
    offset = int(c.config_get("debug-clock-offset-ms")["debug-clock-offset-ms"])
    wait_log_durable(c)
    s.kill()
    s2 = Server("--debug-clock-offset-ms", offset, datadir=datadir)
    c2 = s2.client()
    after = info(c2, "win")
    for k in ("Rotations", "Slice items", "Current slice start", "Number of items inserted"):
        assert after[k] == before[k], k
    assert c2.execute_command("BF.MEXISTS", "win", "a", "b", "c", "d", "zz") == [1, 1, 1, 1, 0]
    # Down across several rotations: the expired slices are dropped.
    advance(c2, 35000)
    assert c2.execute_command("BF.MEXISTS", "win", "a", "b", "c", "d") == [0, 0, 0, 0]
    assert c2.execute_command("BF.ADD", "win", "e") == 1
    rot = info(c2, "win")["Rotations"]
    assert rot > before["Rotations"]
    c2.close()
    s2.stop()
    # And the rotations done after the restart replay too.
    s3 = Server("--debug-clock-offset-ms", offset + 35000, datadir=datadir)
    c3 = s3.client()
    assert info(c3, "win")["Rotations"] == rot
    assert c3.execute_command("BF.MEXISTS", "win", "a", "e") == [0, 1]
    c3.close()
    s3.stop()
    s.stop()
