"""50 clients add the same fresh items at the same time: every item is
reported new to exactly one of them, and none is ever missing afterwards."""
import random
import threading

import pytest

from conftest import QUICK, RawClient

CLIENTS = 50
ITEMS = 300 if QUICK else 2000


def run_clients(server, key, items, use_madd):
    barrier = threading.Barrier(CLIENTS)
    results = [None] * CLIENTS
    errors = []

    def work(n):
        c = RawClient(server.port)
        order = items[:]
        random.Random(n).shuffle(order)
        got = {}
        try:
            barrier.wait()
            for base in range(0, len(order), 50):
                chunk = order[base:base + 50]
                if use_madd:
                    replies = c.cmd("BF.MADD", key, *chunk)
                else:
                    c.send(b"".join(c.encode("BF.ADD", key, it) for it in chunk))
                    replies = [c.read() for _ in chunk]
                for it, rep in zip(chunk, replies):
                    got[it] = rep
        except Exception as e:   # reported below, a thread cannot fail the test
            errors.append(e)
        finally:
            c.close()
        results[n] = got

    threads = [threading.Thread(target=work, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


@pytest.mark.parametrize("layout,reserve,use_madd", [
    ("blocked", ["0.0001", "100000"], False),
    ("blocked-growing", ["0.0000001", "100"], True),   # grows to 5+ links meanwhile
    ("classic", ["0.0001", "100000", "LAYOUT", "CLASSIC"], True),
    ("counting", ["0.0001", "100000", "COUNTING"], False),
])
def test_each_item_new_exactly_once(start_server, layout, reserve, use_madd):
    s = start_server(threads=4)
    key = "conc-" + layout
    if reserve:
        assert s.raw().cmd("BF.RESERVE", key, *reserve) == "OK"
    items = ["fresh:%s:%d" % (layout, i) for i in range(ITEMS)]
    results = run_clients(s, key, items, use_madd)
    for it in items:
        ones = sum(1 for r in results if r[it] == 1)
        assert ones == 1, (it, [r[it] for r in results])
        assert all(r[it] in (0, 1) for r in results)
    c = RawClient(s.port)
    assert c.cmd("BF.MEXISTS", key, *items) == [1] * len(items)
    # A counting filter counts every add (a multiset); the others count items.
    assert c.cmd("BF.CARD", key) == len(items) * (CLIENTS if layout == "counting" else 1)
    c.close()


def test_readers_never_miss_completed_adds(start_server):
    """While writers add, a reader that saw an add acknowledged never gets 0."""
    s = start_server(threads=4)
    key = "rw"
    s.raw().cmd("BF.RESERVE", key, "0.001", "1000")    # grows during the test
    n = 200 if QUICK else 1500
    acked = []
    lock = threading.Lock()
    stop = threading.Event()
    bad = []

    def writer(w):
        c = RawClient(s.port)
        for i in range(n):
            it = "w%d:%d" % (w, i)
            c.cmd("BF.ADD", key, it)
            with lock:
                acked.append(it)
        c.close()

    def reader():
        c = RawClient(s.port)
        while not stop.is_set():
            with lock:
                sample = acked[-50:]
            if sample and c.cmd("BF.MEXISTS", key, *sample) != [1] * len(sample):
                bad.append(sample)
        c.close()

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not bad
