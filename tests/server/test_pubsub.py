"""Pub/Sub: SUBSCRIBE, PSUBSCRIBE, their UNSUBSCRIBEs, PUBLISH, PUBSUB, with
Redis 7's replies; subscribers spread over the worker threads; the RESP2
subscribed mode and RESP3 push messages."""
import threading
import time

import pytest
import redis

from conftest import MODULE, wait_for

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomeryd's own commands")


def read_raw(c, n):
    """The next n bytes the server sends, exactly."""
    while len(c.buf) < n:
        c._fill()
    data, c.buf = c.buf[:n], c.buf[n:]
    return data


def test_subscribe_publish_across_workers(start_server):
    # Connections are handed to the workers in turn: four subscribers on
    # two workers, the publisher on one of them.
    s = start_server(threads=2)
    subs = [s.raw() for _ in range(4)]
    for i, c in enumerate(subs):
        assert c.cmd("SUBSCRIBE", "news", "other%d" % i) == [b"subscribe", b"news", 1]
    for i, c in enumerate(subs):
        # The second reply of SUBSCRIBE with two channels.
        assert c.read() == [b"subscribe", b"other%d" % i, 2]
    pub = s.raw()
    for k in range(50):
        assert pub.cmd("PUBLISH", "news", "m%d" % k) == 4
    for c in subs:
        for k in range(50):
            assert c.read() == [b"message", b"news", b"m%d" % k]
    assert pub.cmd("PUBLISH", "other2", "x") == 1
    assert subs[2].read() == [b"message", b"other2", b"x"]
    assert pub.cmd("PUBLISH", "nobody", "x") == 0
    for c in subs + [pub]:
        c.close()


def test_subscribe_replies(raw):
    assert raw.cmd("SUBSCRIBE", "a") == [b"subscribe", b"a", 1]
    # Subscribing again to the same channel: the count does not change.
    assert raw.cmd("SUBSCRIBE", "a") == [b"subscribe", b"a", 1]
    raw.send(raw.encode("PSUBSCRIBE", "p*", "q?"))
    assert raw.read() == [b"psubscribe", b"p*", 2]
    assert raw.read() == [b"psubscribe", b"q?", 3]
    assert raw.cmd("UNSUBSCRIBE", "zzz") == [b"unsubscribe", b"zzz", 3]
    assert raw.cmd("UNSUBSCRIBE") == [b"unsubscribe", b"a", 2]
    # Nothing left of this kind: one reply with a null channel.
    assert raw.cmd("UNSUBSCRIBE") == [b"unsubscribe", None, 2]
    raw.send(raw.encode("PUNSUBSCRIBE"))
    assert raw.read() == [b"punsubscribe", b"p*", 1]
    assert raw.read() == [b"punsubscribe", b"q?", 0]
    assert raw.cmd("PUNSUBSCRIBE") == [b"punsubscribe", None, 0]
    # Out of subscribed mode: ordinary commands again.
    assert raw.cmd("PING") == "PONG"


def test_resp2_subscribed_mode(raw):
    raw.cmd("SUBSCRIBE", "ch")
    assert str(raw.cmd("BF.ADD", "k", "x")) == (
        "ERR Can't execute 'bf.add': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
        "RESET are allowed in this context")
    assert str(raw.cmd("GET", "k")).startswith("ERR unknown command 'GET'")
    assert str(raw.cmd("PUBLISH", "ch", "x")).startswith("ERR Can't execute 'publish'")
    raw.send(raw.encode("PING"))
    assert read_raw(raw, 20) == b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
    assert raw.cmd("PING", "hi") == [b"pong", b"hi"]
    # A pipelined BF.ADD batch is refused request by request.
    raw.send(raw.encode("BF.ADD", "k", "a") + raw.encode("BF.ADD", "k", "b"))
    assert str(raw.read()).startswith("ERR Can't execute 'bf.add'")
    assert str(raw.read()).startswith("ERR Can't execute 'bf.add'")
    assert raw.cmd("QUIT") == "OK"


def test_resp3_push_messages(server, raw):
    raw.cmd("HELLO", "3")
    raw.send(raw.encode("SUBSCRIBE", "ch"))
    assert read_raw(raw, 4) == b">3\r\n"
    assert raw.read() == b"subscribe"
    raw.read(), raw.read()
    # RESP3 clients may run anything while subscribed.
    assert raw.cmd("PING") == "PONG"
    assert raw.cmd("BF.ADD", "k", "x") is True
    pub = server.raw()
    assert pub.cmd("PUBLISH", "ch", "hello") == 1
    assert read_raw(raw, 4) == b">3\r\n"
    assert [raw.read() for _ in range(3)] == [b"message", b"ch", b"hello"]
    # Publishing to oneself: the message comes before PUBLISH's answer.
    raw.send(raw.encode("PUBLISH", "ch", "me"))
    assert read_raw(raw, 4) == b">3\r\n"
    assert [raw.read() for _ in range(3)] == [b"message", b"ch", b"me"]
    assert raw.read() == 1
    raw.send(raw.encode("UNSUBSCRIBE", "nope", "ch"))
    assert read_raw(raw, 4) == b">3\r\n"
    pub.close()


def test_patterns(server, raw):
    raw.send(raw.encode("PSUBSCRIBE", "news.*", "n[eo]ws.?"))
    raw.read(), raw.read()
    both = server.raw()
    both.cmd("SUBSCRIBE", "news.a")
    pub = server.raw()
    # news.a: one pattern subscriber twice (two patterns) and one channel one.
    assert pub.cmd("PUBLISH", "news.a", "x") == 3
    got = sorted([tuple(raw.read()), tuple(raw.read())])
    assert got == [(b"pmessage", b"n[eo]ws.?", b"news.a", b"x"),
                   (b"pmessage", b"news.*", b"news.a", b"x")]
    assert both.read() == [b"message", b"news.a", b"x"]
    assert pub.cmd("PUBLISH", "news.long", "y") == 1
    assert raw.read() == [b"pmessage", b"news.*", b"news.long", b"y"]
    # Case matters, as in Redis.
    assert pub.cmd("PUBLISH", "NEWS.a", "z") == 0
    both.close()
    pub.close()


def test_pubsub_introspection(server, raw):
    pub = server.raw()
    # The session's server: earlier tests' subscribers are gone once the
    # server has seen their connections close.
    wait_for(lambda: pub.cmd("PUBSUB", "NUMPAT") == 0, "earlier pattern subscribers to leave")
    wait_for(lambda: pub.cmd("PUBSUB", "CHANNELS") == [], "earlier subscribers to leave")
    assert pub.cmd("PUBSUB", "CHANNELS") == []
    raw.send(raw.encode("SUBSCRIBE", "c1", "c2", "d1"))
    for _ in range(3):
        raw.read()
    other = server.raw()
    other.send(other.encode("SUBSCRIBE", "c1") + other.encode("PSUBSCRIBE", "x*", "y*"))
    for _ in range(3):
        other.read()
    assert sorted(pub.cmd("PUBSUB", "CHANNELS")) == [b"c1", b"c2", b"d1"]
    assert sorted(pub.cmd("PUBSUB", "CHANNELS", "c*")) == [b"c1", b"c2"]
    assert pub.cmd("PUBSUB", "NUMSUB", "c1", "c2", "zz") == [b"c1", 2, b"c2", 1, b"zz", 0]
    assert pub.cmd("PUBSUB", "NUMSUB") == []
    assert pub.cmd("PUBSUB", "NUMPAT") == 2
    assert str(pub.cmd("PUBSUB", "FOO")) == "ERR unknown subcommand 'FOO'. Try PUBSUB HELP."
    info = server.client().info()
    assert info["pubsub_channels"] == 3
    assert info["pubsub_patterns"] == 2
    assert info["pubsub_clients"] == 2
    lines = pub.cmd("CLIENT", "LIST").decode().splitlines()
    subscribed = [ln for ln in lines if " flags=P " in ln]
    assert len(subscribed) == 2
    assert any(" sub=3 psub=0 " in ln for ln in subscribed)
    assert any(" sub=1 psub=2 " in ln for ln in subscribed)
    # A closed subscriber leaves every channel.
    other.close()
    wait_for(lambda: pub.cmd("PUBSUB", "NUMPAT") == 0)
    assert pub.cmd("PUBSUB", "NUMSUB", "c1") == [b"c1", 1]
    raw.cmd("UNSUBSCRIBE", "d1")
    assert sorted(pub.cmd("PUBSUB", "CHANNELS")) == [b"c1", b"c2"]
    pub.close()


def test_redis_py_pubsub(server):
    c = server.client()
    p = c.pubsub()
    p.subscribe("__sentinel__:hello")
    assert p.get_message(timeout=5)["type"] == "subscribe"
    assert c.publish("__sentinel__:hello", "hi") == 1
    m = p.get_message(timeout=5)
    assert m["type"] == "message" and m["data"] == b"hi"
    p.psubscribe("__sentinel__:*")
    assert p.get_message(timeout=5)["type"] == "psubscribe"
    assert c.publish("__sentinel__:hello", "again") == 2
    got = [p.get_message(timeout=5) for _ in range(2)]
    assert sorted(m["type"] for m in got) == ["message", "pmessage"]
    # PING in subscribed mode answers as a message would (Redis's pong).
    p.ping("x")
    assert p.get_message(timeout=5) == {"type": "pong", "pattern": None, "channel": None,
                                        "data": b"x"}
    p.close()
    c.close()


def test_publishers_and_subscribers_racing(start_server):
    """Publishers on every worker while subscribers come and go: every
    message a subscriber got is one that was published, in each publisher's
    order, and the server stays clean (sanitizer builds)."""
    s = start_server(threads=2)
    stop = threading.Event()
    errors = []

    def publisher(n):
        c = s.client()
        k = 0
        while not stop.is_set():
            c.publish("race", "%d:%d" % (n, k))
            k += 1
        c.close()

    def churn():
        while not stop.is_set():
            c = s.raw()
            c.cmd("SUBSCRIBE", "race")
            c.close()

    pubs = [threading.Thread(target=publisher, args=(n,)) for n in range(2)]
    threads = pubs + [threading.Thread(target=churn)]
    for t in threads:
        t.start()
    try:
        sub = s.raw()
        sub.cmd("SUBSCRIBE", "race")
        last = {}
        for _ in range(2000):
            kind, ch, data = sub.read()
            n, k = (int(x) for x in data.split(b":"))
            if n in last and k <= last[n]:
                errors.append((n, k, last[n]))
            last[n] = k
        sub.close()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []


def test_slow_subscriber_is_dropped_past_its_output_limit(start_server):
    s = start_server("--client-output-buffer-limit", "normal 1mb 0 0", threads=2)
    slow = s.raw()
    slow.cmd("SUBSCRIBE", "flood")
    pub = s.client()
    payload = "x" * 65536
    # The subscriber never reads: its replies pile up past the hard limit.
    wait_for(lambda: pub.publish("flood", payload) == 0, timeout=60)
    assert slow.closed()


def test_command_info_flags(raw):
    """COMMAND shows the new commands with Redis 7's flags (redis-cli and
    client libraries read them)."""
    want = {
        b"subscribe": (-2, {"pubsub", "noscript", "loading", "stale"}),
        b"unsubscribe": (-1, {"pubsub", "noscript", "loading", "stale"}),
        b"psubscribe": (-2, {"pubsub", "noscript", "loading", "stale"}),
        b"punsubscribe": (-1, {"pubsub", "noscript", "loading", "stale"}),
        b"publish": (3, {"pubsub", "loading", "stale", "fast"}),
        b"pubsub": (-2, {"pubsub", "loading", "stale"}),
        b"multi": (1, {"noscript", "loading", "stale", "fast", "allow_busy"}),
        b"exec": (1, {"noscript", "loading", "stale", "skip_slowlog"}),
        b"discard": (1, {"noscript", "loading", "stale", "fast", "allow_busy"}),
        b"watch": (-2, {"noscript", "loading", "stale", "fast", "allow_busy"}),
        b"unwatch": (1, {"noscript", "loading", "stale", "fast", "allow_busy"}),
    }
    got = raw.cmd("COMMAND", "INFO", *[n.decode() for n in want])
    for entry in got:
        name, arity, flags = entry[0], entry[1], entry[2]
        assert (arity, set(flags)) == want[name], name
    watch = [e for e in got if e[0] == b"watch"][0]
    assert watch[3:6] == [1, -1, 1]
    listed = set(raw.cmd("COMMAND", "LIST"))
    assert set(want) <= listed
