"""Keyspace notifications: every write command that changed data sends
its lower-case name as the event (class 'g', generic) on its first key;
reads send nothing."""
import time

WRITES = [
    (("BF.RESERVE", "b", "0.01", "100"), "bf.reserve", "b"),
    (("BF.ADD", "b", "x"), "bf.add", "b"),
    (("BF.MADD", "b", "y", "z"), "bf.madd", "b"),
    (("BF.INSERT", "b", "ITEMS", "q"), "bf.insert", "b"),
    (("BF.RESERVE", "bc", "0.01", "100", "COUNTING"), "bf.reserve", "bc"),
    (("BF.DEL", "bc", "x"), None, None),  # x was never added: nothing changes
    (("BF.ADD", "bc", "x"), "bf.add", "bc"),
    (("BF.DEL", "bc", "x"), "bf.del", "bc"),
    (("BF.MERGE", "bm", "b"), "bf.merge", "bm"),
    (("BF.RESERVE", "w", "0.01", "100", "WINDOW", "60"), "bf.reserve", "w"),
    (("BF.ADD", "w", "x"), "bf.add", "w"),
    (("CF.RESERVE", "c", "100"), "cf.reserve", "c"),
    (("CF.ADD", "c", "x"), "cf.add", "c"),
    (("CF.ADDNX", "c", "y"), "cf.addnx", "c"),
    (("CF.INSERT", "c", "ITEMS", "z"), "cf.insert", "c"),
    (("CF.INSERTNX", "c", "ITEMS", "w"), "cf.insertnx", "c"),
    (("CF.DEL", "c", "x"), "cf.del", "c"),
    (("CMS.INITBYDIM", "m", "10", "5"), "cms.initbydim", "m"),
    (("CMS.INITBYPROB", "m2", "0.01", "0.01"), "cms.initbyprob", "m2"),
    (("CMS.INCRBY", "m", "a", "1"), "cms.incrby", "m"),
    (("CMS.INITBYDIM", "m3", "10", "5"), "cms.initbydim", "m3"),
    (("CMS.MERGE", "m3", "1", "m"), "cms.merge", "m3"),
    (("TOPK.RESERVE", "t", "3"), "topk.reserve", "t"),
    (("TOPK.ADD", "t", "a"), "topk.add", "t"),
    (("TOPK.INCRBY", "t", "a", "2"), "topk.incrby", "t"),
    (("TDIGEST.CREATE", "d"), "tdigest.create", "d"),
    (("TDIGEST.ADD", "d", "1"), "tdigest.add", "d"),
    (("TDIGEST.RESET", "d"), "tdigest.reset", "d"),
    (("TDIGEST.CREATE", "d2"), "tdigest.create", "d2"),
    (("TDIGEST.MERGE", "d3", "2", "d", "d2"), "tdigest.merge", "d3"),
]

READS = [
    ("BF.EXISTS", "b", "x"), ("BF.MEXISTS", "b", "x", "y"), ("BF.INFO", "b"),
    ("CF.EXISTS", "c", "y"), ("CF.COUNT", "c", "y"), ("CMS.QUERY", "m", "a"),
    ("TOPK.QUERY", "t", "a"), ("TDIGEST.QUANTILE", "d2", "0.5"), ("BF.EXISTS", "w", "x"),
]


def drain(p, want, timeout=10):
    """Messages until the marker key's event arrives (PUBLISH order is the
    commands' order on one connection)."""
    got = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        msg = p.get_message(timeout=0.5)
        if msg is None or msg["type"] != "pmessage":
            continue
        got.append((msg["channel"].decode(), msg["data"].decode()))
        if got[-1] == want:
            return got
    raise AssertionError("no marker event; got %r" % got)


def test_every_write_sends_its_event(m):
    m.config_set("notify-keyspace-events", "KEA")
    p = m.pubsub()
    p.psubscribe("__key*@0__:*")
    assert p.get_message(timeout=5)["type"] == "psubscribe"
    expect = []
    for args, event, key in WRITES:
        m.execute_command(*args)
        if event:
            expect.append(("__keyspace@0__:" + key, event))
            expect.append(("__keyevent@0__:" + event, key))
    for args in READS:
        m.execute_command(*args)
    m.set("marker", "1")
    got = drain(p, ("__keyevent@0__:set", "marker"))
    assert got[:-2] == expect
    p.close()
    m.config_set("notify-keyspace-events", "")
