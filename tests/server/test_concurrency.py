"""50 clients add the same fresh items at the same time: every item is
reported new to exactly one of them, and none is ever missing afterwards."""
import random
import subprocess
import threading
import time

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
    ("prefix", ["0.0001", "100000", "LAYOUT", "PREFIX"], False),
    ("prefix-growing", ["0.0000001", "100", "LAYOUT", "PREFIX"], True),
    ("growing", ["0.00001", "100", "LAYOUT", "GROWING"], True),    # doubles many times meanwhile
    ("growing-single", ["0.0001", "100", "LAYOUT", "GROWING"], False),
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


@pytest.mark.parametrize("layout", ["BLOCKED", "PREFIX"])
def test_readers_never_miss_completed_adds(start_server, layout):
    """While writers add, a reader that saw an add acknowledged never gets 0."""
    s = start_server(threads=4)
    key = "rw"
    s.raw().cmd("BF.RESERVE", key, "0.001", "1000", "LAYOUT", layout)  # grows meanwhile
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


def test_replica_readers_while_it_applies_its_masters_records(start_server):
    """Readers of every kind of value on a replica while its applier
    replays the master's changes to them (redis-benchmark loads both ends):
    no item the replica acknowledged is ever missing there, and under
    ThreadSanitizer no race (the servers' teardown checks their logs)."""
    master, replica = start_server(), start_server()
    m = RawClient(master.port)
    m.cmd("CF.RESERVE", "cf", 100000)
    m.cmd("CMS.INITBYDIM", "cms", 1000, 4)
    m.cmd("TOPK.RESERVE", "topk", 10)
    m.cmd("TDIGEST.CREATE", "td")
    r = RawClient(replica.port)
    assert r.cmd("REPLICAOF", "127.0.0.1", master.port) == "OK"
    deadline = time.time() + 60
    while b"master_link_status:up" not in r.cmd("INFO", "replication"):
        assert time.time() < deadline, "the replica did not connect"
        time.sleep(0.02)
    n = 2000 if QUICK else 20000

    def load(port, *cmd):
        return subprocess.Popen(["redis-benchmark", "-p", str(port), "-n", str(n), "-c", "2",
                                 "-r", "1000000"] + list(cmd), stdout=subprocess.DEVNULL)
    writes = [load(master.port, "PFADD", "hll", "__rand_int__"),
              load(master.port, "CF.ADD", "cf", "__rand_int__"),
              load(master.port, "CMS.INCRBY", "cms", "__rand_int__", "1"),
              load(master.port, "TOPK.ADD", "topk", "__rand_int__"),
              load(master.port, "TDIGEST.ADD", "td", "__rand_int__")]
    reads = [load(replica.port, "PFCOUNT", "hll"),
             load(replica.port, "CF.EXISTS", "cf", "__rand_int__"),
             load(replica.port, "CMS.QUERY", "cms", "__rand_int__"),
             load(replica.port, "TOPK.LIST", "topk"),
             load(replica.port, "TDIGEST.QUANTILE", "td", "0.5")]
    stop = threading.Event()
    acked, bad, lock = [], [], threading.Lock()

    def writer():
        c = RawClient(master.port)
        for i in range(n // 10):
            it = "i%d" % i
            c.cmd("BF.ADD", "bf", it)
            c.cmd("CF.ADD", "cf", it)
            if c.cmd("WAIT", 1, 5000) == 1:
                with lock:
                    acked.append(it)
        c.close()

    def reader():
        c = RawClient(replica.port)
        while not stop.is_set():
            with lock:
                sample = acked[-20:]
            for it in sample:
                if c.cmd("BF.EXISTS", "bf", it) != 1 or c.cmd("CF.EXISTS", "cf", it) != 1:
                    bad.append(it)
        c.close()

    w = threading.Thread(target=writer)
    rt = threading.Thread(target=reader)
    w.start()
    rt.start()
    w.join()
    for p in writes + reads:
        p.wait()
    stop.set()
    rt.join()
    assert acked and not bad
