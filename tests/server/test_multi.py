"""Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH with Redis 7's
replies; EXEC's writes not interleaved with other clients' writes; EXEC's
reply waiting for the log like any other."""
import socket
import threading
import time

import pytest

from conftest import MODULE
from powercut import faults  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomeryd's own commands")

EXECABORT = "EXECABORT Transaction discarded because of previous errors."


def test_queue_and_exec(raw):
    assert raw.cmd("MULTI") == "OK"
    assert raw.cmd("BF.ADD", "k", "a") == "QUEUED"
    assert raw.cmd("BF.EXISTS", "k", "a") == "QUEUED"
    assert raw.cmd("BF.EXISTS", "k", "zz") == "QUEUED"
    assert raw.cmd("PING") == "QUEUED"
    # Nothing ran yet.
    other = raw.__class__(raw.sock.getpeername()[1])
    assert other.cmd("EXISTS", "k") == 0
    assert raw.cmd("EXEC") == [1, 1, 0, "PONG"]
    assert other.cmd("EXISTS", "k") == 1
    other.close()
    # An empty transaction.
    assert raw.cmd("MULTI") == "OK"
    assert raw.cmd("EXEC") == []


def test_errors(raw):
    assert str(raw.cmd("EXEC")) == "ERR EXEC without MULTI"
    assert str(raw.cmd("DISCARD")) == "ERR DISCARD without MULTI"
    assert raw.cmd("MULTI") == "OK"
    assert str(raw.cmd("MULTI")) == "ERR MULTI calls can not be nested"
    assert str(raw.cmd("WATCH", "x")) == "ERR WATCH inside MULTI is not allowed"
    # Neither error dooms the transaction.
    assert raw.cmd("PING") == "QUEUED"
    assert raw.cmd("EXEC") == ["PONG"]
    # Unknown commands and wrong arity are refused when queued, and EXEC
    # then runs nothing.
    assert raw.cmd("MULTI") == "OK"
    assert raw.cmd("BF.ADD", "k", "a") == "QUEUED"
    assert str(raw.cmd("NOSUCH", "x")).startswith("ERR unknown command 'NOSUCH'")
    assert str(raw.cmd("EXEC")) == EXECABORT
    assert raw.cmd("EXISTS", "k") == 0
    assert raw.cmd("MULTI") == "OK"
    assert str(raw.cmd("TYPE")) == "ERR wrong number of arguments for 'type' command"
    assert str(raw.cmd("EXEC")) == EXECABORT
    # After EXECABORT the client is out of MULTI.
    assert str(raw.cmd("EXEC")) == "ERR EXEC without MULTI"
    # A command failing while EXEC runs is one error among the replies.
    raw.cmd("CMS.INITBYDIM", "cms", "10", "2")
    assert raw.cmd("MULTI") == "OK"
    raw.cmd("BF.ADD", "cms", "a")
    raw.cmd("BF.ADD", "b", "a")
    got = raw.cmd("EXEC")
    assert str(got[0]).startswith("WRONGTYPE")
    assert got[1] == 1


def test_discard(raw):
    assert raw.cmd("MULTI") == "OK"
    assert raw.cmd("BF.ADD", "k", "a") == "QUEUED"
    assert raw.cmd("DISCARD") == "OK"
    assert raw.cmd("EXISTS", "k") == 0
    assert str(raw.cmd("EXEC")) == "ERR EXEC without MULTI"


def test_client_list_shows_multi(raw):
    raw.cmd("CLIENT", "SETNAME", "tx")
    raw.cmd("MULTI")
    raw.cmd("PING")
    raw.cmd("PING")
    other = raw.__class__(raw.sock.getpeername()[1])
    line = [ln for ln in other.cmd("CLIENT", "LIST").decode().splitlines() if "name=tx " in ln][0]
    assert " flags=x " in line and " multi=2 " in line
    raw.cmd("DISCARD")
    line = [ln for ln in other.cmd("CLIENT", "LIST").decode().splitlines() if "name=tx " in ln][0]
    assert " flags=N " in line and " multi=-1 " in line
    other.close()


def test_redis_py_pipeline(r):
    with r.pipeline(transaction=True) as p:
        p.execute_command("BF.ADD", "k", "a")
        p.execute_command("BF.ADD", "k", "a")
        p.execute_command("BF.EXISTS", "k", "a")
        assert p.execute() == [1, 0, 1]


def test_watch(server, r):
    other = server.client()
    # Untouched: EXEC runs.
    r.execute_command("WATCH", "w")
    r.execute_command("MULTI")
    r.execute_command("BF.ADD", "w", "a")
    assert r.execute_command("EXEC") == [1]
    # Written by another client after WATCH: EXEC answers nil, runs nothing.
    r.execute_command("WATCH", "w", "v")
    other.execute_command("BF.ADD", "v", "x")
    r.execute_command("MULTI")
    r.execute_command("BF.ADD", "w", "b")
    assert r.execute_command("EXEC") is None
    assert r.execute_command("BF.EXISTS", "w", "b") == 0
    # The watches end with EXEC, whatever it answered.
    other.execute_command("BF.ADD", "v", "y")
    r.execute_command("MULTI")
    r.execute_command("BF.ADD", "w", "b")
    assert r.execute_command("EXEC") == [1]
    # Another key written: EXEC runs.
    r.execute_command("WATCH", "w")
    other.execute_command("BF.ADD", "unrelated", "x")
    r.execute_command("MULTI")
    r.execute_command("BF.ADD", "w", "c")
    assert r.execute_command("EXEC") == [1]
    # UNWATCH and DISCARD forget the watches.
    r.execute_command("WATCH", "w")
    other.execute_command("BF.ADD", "w", "d")
    r.execute_command("UNWATCH")
    r.execute_command("MULTI")
    r.execute_command("BF.ADD", "w", "e")
    assert r.execute_command("EXEC") == [1]
    r.execute_command("WATCH", "w")
    other.execute_command("BF.ADD", "w", "f")
    r.execute_command("MULTI")
    r.execute_command("DISCARD")
    r.execute_command("MULTI")
    r.execute_command("BF.ADD", "w", "g")
    assert r.execute_command("EXEC") == [1]
    # DEL, RENAME's destination, FLUSHALL count as writes of the key.
    for change in (("DEL", "w"), ("RENAME", "v", "w"), ("FLUSHALL",)):
        other.execute_command("BF.ADD", "v", "z")
        r.execute_command("WATCH", "w")
        other.execute_command(*change)
        r.execute_command("MULTI")
        r.execute_command("PING")
        assert r.execute_command("EXEC") is None, change
    # A watched key that expires (no write sees it go) fails EXEC too.
    other.execute_command("BF.ADD", "w", "h")
    other.execute_command("PEXPIRE", "w", "500")
    r.execute_command("WATCH", "w")
    deadline = time.time() + 20
    while other.execute_command("EXISTS", "w"):
        assert time.time() < deadline
        time.sleep(0.02)
    r.execute_command("MULTI")
    r.execute_command("PING")
    assert r.execute_command("EXEC") is None
    # A key missing at WATCH and still missing: EXEC runs.
    r.execute_command("WATCH", "w")
    r.execute_command("MULTI")
    r.execute_command("PING")
    assert r.execute_command("EXEC") == [b"PONG"]
    # A pipelined batch of adds (run as one library call) counts too: the
    # connection's previous command was BF.ADD, so the pipeline is batched.
    raw = server.raw()
    assert raw.cmd("BF.ADD", "other", "x") == 1
    r.execute_command("WATCH", "w")
    raw.send(b"".join(raw.encode("BF.ADD", "w", "i%d" % i) for i in range(10)))
    assert [raw.read() for _ in range(10)] == [1] * 10
    raw.close()
    r.execute_command("MULTI")
    r.execute_command("PING")
    assert r.execute_command("EXEC") is None
    other.close()


def test_redis_py_watch_retry(server, r):
    """The optimistic-locking loop of redis-py's transaction helper: two
    clients read a count under WATCH and each transaction records the count
    it computed (read + 1) in a filter. Every count is recorded exactly
    once, which needs every transaction that read a stale count to fail and
    run again."""
    r.execute_command("CMS.INITBYDIM", "c", "100", "4")
    fresh = []

    def incr(pipe):
        v = pipe.execute_command("CMS.QUERY", "c", "a")[0]
        pipe.multi()
        pipe.execute_command("CMS.INCRBY", "c", "a", "1")
        pipe.execute_command("BF.ADD", "seen", str(v + 1))

    def worker(n):
        c = server.client()
        for _ in range(n):
            fresh.append(c.transaction(incr, "c")[1])
        c.close()

    ts = [threading.Thread(target=worker, args=(200,)) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert r.execute_command("CMS.QUERY", "c", "a") == [400]
    assert fresh == [1] * 400


def test_exec_is_not_interleaved_with_other_writes(start_server):
    """A transaction creates a filter, adds to it and checks the add, while
    another client on the other worker deletes the key in a loop: the check
    inside the transaction always sees its own add."""
    s = start_server(threads=2)
    stop = threading.Event()

    def deleter():
        c = s.client()
        while not stop.is_set():
            c.execute_command("DEL", "k")
        c.close()

    t = threading.Thread(target=deleter)
    t.start()
    try:
        c = s.raw()
        seen = set()
        for i in range(3000):
            c.send(c.encode("MULTI") + c.encode("BF.ADD", "k", "x%d" % i) +
                   c.encode("BF.EXISTS", "k", "x%d" % i) + c.encode("EXEC"))
            replies = [c.read() for _ in range(4)]
            # The add itself may answer 0 (a false positive of a grown
            # filter); the check after it must find the item.
            seen.add(replies[3][1])
        c.close()
    finally:
        stop.set()
        t.join()
    assert seen == {1}


def test_sentinel_reconfiguration_shape(start_server, tmp_path):
    """The transaction Sentinel sends to reconfigure a server (without its
    REPLICAOF): CONFIG REWRITE, then CLIENT KILL of normal and pubsub
    clients, which spare the client running EXEC."""
    conf = tmp_path / "b.conf"
    conf.write_text("# bloomeryd\n")
    s = start_server(config=conf.read_text())
    normal = s.raw()
    normal.cmd("PING")
    sub = s.raw()
    sub.cmd("SUBSCRIBE", "__sentinel__:hello")
    c = s.raw()
    assert c.cmd("MULTI") == "OK"
    assert c.cmd("CONFIG", "REWRITE") == "QUEUED"
    assert c.cmd("CLIENT", "KILL", "TYPE", "normal") == "QUEUED"
    assert c.cmd("CLIENT", "KILL", "TYPE", "pubsub") == "QUEUED"
    assert c.cmd("EXEC") == ["OK", 1, 1]
    assert normal.closed()
    assert sub.closed()
    assert c.cmd("PING") == "PONG"
    c.close()


def exec_calls(c):
    stats = c.info("commandstats")
    return stats.get("cmdstat_exec", {}).get("calls", 0)


def test_exec_reply_waits_for_the_log(faults, start_server):
    """Under appendfsync always an EXEC whose commands wrote is answered
    only once the log is durable: with the log's fsync held, the
    transaction runs but its reply waits."""
    s = start_server("--appendfsync", "always", **faults.server_kw())
    c = s.raw()
    assert c.cmd("BF.ADD", "k", "a") == 1
    stats = s.client()
    faults.set(fsync="block", match="/log/")
    n = faults.blocked_count()
    assert c.cmd("MULTI") == "OK"
    assert c.cmd("BF.ADD", "k", "b") == "QUEUED"
    c.send(c.encode("EXEC"))
    faults.wait_blocked(n)
    deadline = time.time() + 20
    while exec_calls(stats) < 1:
        assert time.time() < deadline
        time.sleep(0.01)
    # It ran; its answer must not have left.
    c.sock.settimeout(0.5)
    with pytest.raises(socket.timeout):
        c._fill()
    c.sock.settimeout(30)
    faults.set()
    assert c.read() == [1]
    stats.close()
    c.close()
