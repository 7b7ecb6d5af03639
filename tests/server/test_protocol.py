"""RESP framing: multibulk, inline, pipelining, RESP3, protocol errors."""
import time

import pytest

from conftest import RespError


def test_inline_commands(raw):
    raw.send(b"PING\r\n")
    assert raw.read() == "PONG"
    raw.send(b"ECHO \"hello world\"\n")
    assert raw.read() == b"hello world"
    raw.send(b"ECHO 'it\\'s'\r\n")
    assert raw.read() == b"it's"
    raw.send(b"ECHO \"a\\x41\\n\"\r\n")
    assert raw.read() == b"aA\n"
    # An empty line is ignored.
    raw.send(b"\r\n\r\nPING\r\n")
    assert raw.read() == "PONG"
    raw.send(b"BF.ADD inl item1\r\nBF.EXISTS inl item1\r\n")
    assert raw.read() == 1
    assert raw.read() == 1


def test_inline_unbalanced_quotes_closes(raw):
    raw.send(b"ECHO \"abc\r\n")
    err = raw.read()
    assert str(err) == "ERR Protocol error: unbalanced quotes in request"
    assert raw.closed()


def test_empty_and_negative_multibulk_ignored(raw):
    raw.send(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n")
    assert raw.read() == "PONG"


def test_pipelining_many(raw):
    n = 2000
    assert raw.cmd("BF.RESERVE", "pipe", "0.00001", "10000") == "OK"
    raw.send(b"".join(raw.encode("BF.ADD", "pipe", "i%d" % i) for i in range(n)))
    assert [raw.read() for _ in range(n)] == [1] * n
    raw.send(b"".join(raw.encode("BF.EXISTS", "pipe", "i%d" % i) for i in range(n)))
    assert all(raw.read() == 1 for _ in range(n))


def test_request_split_across_writes(raw):
    msg = raw.encode("BF.MADD", "split", *["item-%d" % i for i in range(300)])
    for i in range(0, len(msg), 7):
        raw.send(msg[i:i + 7])
    assert raw.read() == [1] * 300


def test_large_bulk(raw):
    big = b"x" * (3 << 20)
    assert raw.cmd("ECHO", big) == big


@pytest.mark.parametrize("payload,message", [
    (b"*abc\r\n", "invalid multibulk length"),
    (b"*1\r\n+PING\r\n", "expected '$', got '+'"),
    (b"*1\r\n$-5\r\n", "invalid bulk length"),
    (b"*1\r\n$abc\r\n", "invalid bulk length"),
    (b"*3000000000\r\n", "invalid multibulk length"),
    (b"*1\r\n$999999999999\r\n", "invalid bulk length"),
])
def test_protocol_errors_close_the_connection(server, r, payload, message):
    c = server.raw()
    c.send(payload)
    err = c.read()
    assert isinstance(err, RespError)
    assert str(err) == "ERR Protocol error: " + message
    assert c.closed()
    c.close()
    assert r.ping()


def test_too_big_inline_and_headers(server, r):
    for payload, message in [(b"A" * (70 * 1024), "too big inline request"),
                             (b"*" + b"1" * (70 * 1024), "too big mbulk count string"),
                             (b"*1\r\n$" + b"1" * (70 * 1024), "too big bulk count string")]:
        c = server.raw()
        c.send(payload)
        assert str(c.read()) == "ERR Protocol error: " + message
        assert c.closed()
        c.close()


def test_resp3_hello_and_types(raw):
    hello = raw.cmd("HELLO", "3")
    assert hello[b"server"] == b"redis"
    assert hello[b"proto"] == 3
    assert hello[b"mode"] == b"standalone"
    assert hello[b"role"] == b"master"
    assert b"version" in hello and b"id" in hello and b"modules" in hello
    assert raw.cmd("BF.ADD", "r3", "a") is True
    assert raw.cmd("BF.ADD", "r3", "a") is False
    assert raw.cmd("BF.EXISTS", "r3", "a") is True
    assert raw.cmd("BF.EXISTS", "missing", "a") is False
    assert raw.cmd("BF.MADD", "r3", "a", "b") == [False, True]
    assert raw.cmd("BF.MEXISTS", "r3", "a", "zz") == [True, False]
    info = raw.cmd("BF.INFO", "r3")
    assert list(info) == ["Capacity", "Size", "Number of filters", "Number of items inserted",
                          "Expansion rate"]
    assert info["Capacity"] == 100 and info["Number of items inserted"] == 2
    assert raw.cmd("BF.INFO", "r3", "CAPACITY") == {"Capacity": 100}
    raw.cmd("BF.RESERVE", "ns3", "0.01", "10", "NONSCALING")
    assert raw.cmd("BF.INFO", "ns3")["Expansion rate"] is None
    assert raw.cmd("BF.INFO", "ns3", "EXPANSION") == {"Expansion rate": None}
    cfg = raw.cmd("CONFIG", "GET", "maxmemory")
    assert cfg == {b"maxmemory": b"0"}
    kind, fmt, text = raw.cmd("INFO", "server")
    assert kind == "verbatim" and fmt == "txt" and b"redis_version:" in text
    assert raw.cmd("GETNAME") is not None  # unknown command error object
    # Back to RESP2.
    hello2 = raw.cmd("HELLO", "2")
    assert isinstance(hello2, list) and b"proto" in hello2
    assert raw.cmd("BF.EXISTS", "r3", "a") == 1


def test_hello_errors(raw):
    assert str(raw.cmd("HELLO", "4")) == "NOPROTO unsupported protocol version"
    assert str(raw.cmd("HELLO", "x")) == "ERR Protocol version is not an integer or out of range"
    assert str(raw.cmd("HELLO", "3", "FOO")).startswith("ERR Syntax error in HELLO option 'FOO'")
    hello = raw.cmd("HELLO", "2", "SETNAME", "myconn")
    assert hello[hello.index(b"proto") + 1] == 2
    assert raw.cmd("CLIENT", "GETNAME") == b"myconn"


def test_binary_safe_items(raw):
    items = [bytes([i, 0, 255 - i, 13, 10]) for i in range(50)]
    assert raw.cmd("BF.MADD", "bin", *items) == [1] * 50
    assert raw.cmd("BF.MEXISTS", "bin", *items) == [1] * 50
    assert raw.cmd("BF.EXISTS", "bin", b"\x00\r\n") == 0


def test_pipelined_batches_answer_like_separate_commands(raw):
    """Pipelined BF.ADD/BF.EXISTS on one key run as one batch internally;
    every reply must still be the one the separate command would get."""
    raw.cmd("BF.RESERVE", "full", "0.01", "3", "NONSCALING")
    raw.cmd("PFADD", "h", "x")
    reqs = [("BF.ADD", "full", "a"), ("BF.ADD", "full", "b"), ("BF.ADD", "full", "a"),
            ("BF.ADD", "full", "c"), ("BF.ADD", "full", "d"), ("BF.ADD", "full", "a"),
            ("BF.ADD", "full", "e"), ("BF.EXISTS", "full", "a"), ("BF.EXISTS", "full", "d"),
            ("BF.EXISTS", "nokey", "a"), ("BF.EXISTS", "h", "a"), ("BF.ADD", "h", "a"),
            ("BF.ADD", "h", "b"), ("BF.ADD", "new", "a"), ("BF.ADD", "new", "a"),
            ("bf.add", "new", "b"), ("BF.EXISTS", "new", "b")]
    raw.send(b"".join(raw.encode(*q) for q in reqs))
    got = [raw.read() for _ in reqs]
    got = [str(g) if isinstance(g, RespError) else g for g in got]
    wt = "WRONGTYPE Operation against a key holding the wrong kind of value"
    full = "ERR non scaling filter is full"
    assert got == [1, 1, 0, 1, full, 0, full, 1, 0, 0, 0, wt, wt, 1, 0, 1, 1]
    info = raw.cmd("INFO", "commandstats")
    assert b"cmdstat_bf.add:calls=" in info


def test_failed_calls_counted_batched_or_not(raw):
    """A command that answers an error is a failed call in INFO
    commandstats, whether it ran alone, after the same command (which takes
    the batch path) or pipelined in a batch; errors inside a batch count one
    each."""
    raw.cmd("BF.RESERVE", "full", "0.01", "1", "NONSCALING")
    raw.cmd("BF.ADD", "full", "a")
    raw.cmd("PFADD", "h", "x")
    assert raw.cmd("CONFIG", "RESETSTAT") == "OK"
    for key in ("h", "h", "full", "new", "h"):             # one at a time
        raw.cmd("BF.ADD", key, "b")
    reqs = [("BF.ADD", "h", "x"), ("BF.ADD", "h", "y"), ("BF.ADD", "full", "z"),
            ("BF.ADD", "full", "a"), ("BF.ADD", "new", "c"), ("BF.EXISTS", "h", "x"),
            ("BF.EXISTS", "h", "y"), ("BF.MADD", "h", "x"), ("BF.MADD", "new", "x")]
    raw.send(b"".join(raw.encode(*q) for q in reqs))
    got = [raw.read() for _ in reqs]
    assert sum(isinstance(g, RespError) for g in got) == 4
    info = raw.cmd("INFO", "commandstats").decode()
    stats = {line.split(":")[0]: line.split(":")[1] for line in info.split("\r\n")
             if line.startswith("cmdstat_")}
    assert stats["cmdstat_bf.add"].startswith("calls=10,")
    assert stats["cmdstat_bf.add"].endswith(",failed_calls=7")       # 4 alone, 3 batched
    assert stats["cmdstat_bf.exists"].endswith(",failed_calls=0")
    assert stats["cmdstat_bf.madd"].startswith("calls=2,")
    assert stats["cmdstat_bf.madd"].endswith(",failed_calls=1")
    assert raw.cmd("INFO", "stats").decode().count("total_error_replies:8\r\n") == 1


# One or more answers of every handler, errors and not: what each returns
# must agree with what it answered.
EVERY_HANDLER = [
    ("PING",), ("PING", "a", "b"), ("ECHO", "x"), ("SELECT", "0"), ("SELECT", "1"),
    ("SELECT", "x"), ("DBSIZE",), ("TIME",), ("FLUSHALL", "x"), ("LASTSAVE",),
    ("SHUTDOWN", "abort"), ("SHUTDOWN", "bogus"), ("AUTH", "x"), ("AUTH", "default", "x"),
    ("AUTH", "a", "b", "c"), ("HELLO", "x"), ("HELLO", "4"), ("HELLO", "2", "bogus"),
    ("HELLO", "2"), ("CLIENT", "ID"), ("CLIENT", "SETNAME", "a b"), ("CLIENT", "SETNAME", "ok"),
    ("CLIENT", "GETNAME"), ("CLIENT", "SETINFO", "lib-x", "y"),
    ("CLIENT", "SETINFO", "lib-name", "y"), ("CLIENT", "LIST", "x"), ("CLIENT", "LIST"),
    ("CLIENT", "INFO"), ("CLIENT", "KILL", "1.2.3.4:5"), ("CLIENT", "KILL", "ID", "0"),
    ("CLIENT", "KILL", "ID"), ("CLIENT", "KILL", "ID", "99999"),
    ("CLIENT", "KILL", "TYPE", "pubsub"), ("CLIENT", "NO-EVICT", "x"),
    ("CLIENT", "NO-EVICT", "on"), ("CLIENT", "HELP"), ("CLIENT", "BOGUS"),
    ("CONFIG", "GET", "maxmemory"), ("CONFIG", "SET", "x", "1"),
    ("CONFIG", "SET", "maxmemory", "x"), ("CONFIG", "SET", "maxmemory", "0"),
    ("CONFIG", "REWRITE"), ("CONFIG", "BOGUS"), ("MEMORY", "USAGE", "b"),
    ("MEMORY", "USAGE", "nokey"), ("MEMORY", "USAGE", "b", "x", "1"),
    ("MEMORY", "USAGE", "b", "SAMPLES", "x"), ("MEMORY", "STATS"), ("MEMORY", "BOGUS"),
    ("INFO", "server"), ("COMMAND", "COUNT"), ("COMMAND", "INFO", "get"), ("COMMAND", "BOGUS"),
    ("BGSAVE", "x"), ("BGREWRITEAOF",), ("SAVE",), ("EXISTS", "b", "nokey"), ("TYPE", "b"),
    ("KEYS", "*"), ("SCAN", "0"), ("SCAN", "x"), ("SCAN", "0", "COUNT"),
    ("SCAN", "0", "COUNT", "x"), ("SCAN", "0", "COUNT", "0"), ("SCAN", "0", "BOGUS", "1"),
    ("RANDOMKEY",), ("RENAME", "nokey", "x"), ("RENAME", "r1", "r2"), ("RENAMENX", "r2", "b"),
    ("RENAMENX", "r2", "r2"), ("EXPIRE", "r2", "100", "NX"), ("EXPIRE", "r2", "100", "BOGUS"),
    ("EXPIRE", "r2", "100", "NX", "XX"), ("EXPIRE", "r2", "100", "GT", "LT"),
    ("EXPIRE", "r2", "x"), ("EXPIRE", "r2", "9223372036854775807"), ("EXPIRE", "nokey", "1"),
    ("PEXPIRE", "r2", "100000"), ("EXPIREAT", "r2", "99999999999"), ("PEXPIREAT", "r2", "1"),
    ("TTL", "b"), ("PTTL", "b"), ("EXPIRETIME", "b"), ("PEXPIRETIME", "b"), ("PERSIST", "b"),
    ("DEL", "nokey"), ("BF.RESERVE", "b2", "0.01", "100"), ("BF.RESERVE", "b", "0.01", "100"),
    ("BF.RESERVE", "h", "0.01", "100"), ("BF.RESERVE", "x", "x", "1"), ("BF.RESERVE", "x"),
    ("BF.RESERVE", "w2", "0.01", "100", "WINDOW", "9"),
    ("BF.RESERVE", "w2", "0.01", "100", "WINDOW", "0"),
    ("BF.RESERVE", "w3", "0.01", "100", "SLICES", "2"), ("BF.ADD", "b", "x"), ("BF.ADD", "h", "x"),
    ("BF.ADD", "w", "x"), ("BF.ADD", "load", "x"), ("BF.ADD", "fixed", "y"),
    ("BF.MADD", "fixed", "a", "z"), ("BF.MADD", "cnt", "a", "z"), ("BF.MADD", "h", "a"),
    ("BF.MADD", "w", "a", "b"), ("BF.EXISTS", "h", "a"), ("BF.MEXISTS", "w", "a"),
    ("BF.EXISTS", "b"), ("BF.INSERT", "b", "ITEMS", "q"),
    ("BF.INSERT", "nokey", "NOCREATE", "ITEMS", "q"), ("BF.INSERT", "b", "BOGUS", "ITEMS", "q"),
    ("BF.INSERT", "b", "ITEMS"), ("BF.INSERT", "w", "ITEMS", "q"), ("BF.INFO", "b"),
    ("BF.INFO", "b", "bogus"), ("BF.INFO", "w"), ("BF.INFO", "w", "bogus"),
    ("BF.INFO", "w", "capacity"), ("BF.INFO", "nokey"), ("BF.INFO", "h"), ("BF.INFO", "load"),
    ("BF.CARD", "b"), ("BF.CARD", "w"), ("BF.CARD", "h"), ("BF.CARD", "load"),
    ("BF.CARD", "nokey"), ("BF.DEBUG", "b"), ("BF.DEBUG", "cnt"), ("BF.DEBUG", "w"),
    ("BF.SCANDUMP", "b", "0"), ("BF.SCANDUMP", "classic", "0"), ("BF.SCANDUMP", "b", "x"),
    ("BF.SCANDUMP", "nokey", "0"), ("BF.DEL", "cnt", "a"), ("BF.DEL", "b", "a"),
    ("BF.DEL", "nokey", "a"), ("BF.MERGE", "m", "b"), ("BF.MERGE", "m", "nokey"),
    ("BF.MERGE", "m", "cnt"), ("BF.LOADCHUNK", "nokey", "2", "x"),
    ("BF.LOADCHUNK", "nokey2", "1", "x"), ("BF.LOADCHUNK", "b", "x", "y"),
    ("BF.LOADCHUNK", "h", "2", "y"), ("CF.RESERVE", "c2", "100"), ("CF.RESERVE", "c", "100"),
    ("CF.RESERVE", "c3", "x"), ("CF.RESERVE", "c3", "100", "BUCKETSIZE", "0"),
    ("CF.ADD", "c", "a"), ("CF.ADD", "h", "a"), ("CF.ADDNX", "c", "a"), ("CF.ADDNX", "cload", "a"),
    ("CF.INSERT", "c", "ITEMS", "a"), ("CF.INSERT", "c", "BOGUS"),
    ("CF.INSERTNX", "nokey", "NOCREATE", "ITEMS", "a"), ("CF.EXISTS", "c", "a"),
    ("CF.EXISTS", "h", "a"), ("CF.MEXISTS", "c", "a", "b"), ("CF.COUNT", "c", "a"),
    ("CF.COUNT", "cload", "a"), ("CF.DEL", "c", "a"), ("CF.DEL", "nokey", "a"),
    ("CF.DEL", "h", "a"), ("CF.INFO", "c"), ("CF.INFO", "nokey"), ("CF.SCANDUMP", "c", "0"),
    ("CF.SCANDUMP", "c", "-1"), ("CF.SCANDUMP", "nokey", "0"), ("CF.LOADCHUNK", "c", "0", "x"),
    ("CF.LOADCHUNK", "nokey", "1", "x"), ("CF.LOADCHUNK", "c", "2", "x"),
    ("CF.LOADCHUNK", "cload", "3", "x"), ("PFADD", "h", "z"), ("PFADD", "b", "z"),
    ("PFCOUNT", "h"), ("PFCOUNT", "nokey"), ("PFCOUNT", "b"), ("PFCOUNT", "h", "nokey"),
    ("PFCOUNT", "h", "b"), ("PFMERGE", "hm", "h"), ("PFMERGE", "b", "h"), ("PFMERGE", "hm", "b"),
]


def test_failed_calls_follow_error_replies(start_server):
    """Every handler tells the dispatcher whether it failed: INFO
    commandstats counts, per command, exactly the calls that answered an
    error (or an array holding one) as failed or rejected."""
    s = start_server()
    c = s.raw()
    for cmd in [("BF.ADD", "b", "a"), ("BF.RESERVE", "fixed", "0.01", "1", "NONSCALING"),
                ("BF.ADD", "fixed", "a"), ("BF.RESERVE", "cnt", "0.01", "1", "COUNTING"),
                ("BF.ADD", "cnt", "a"),
                ("BF.RESERVE", "classic", "0.01", "100", "LAYOUT", "CLASSIC"),
                ("BF.RESERVE", "w", "0.01", "100", "WINDOW", "60"), ("PFADD", "h", "a"),
                ("CF.RESERVE", "c", "100"), ("CF.ADD", "c", "a"), ("BF.ADD", "r1", "a")]:
        assert not isinstance(c.cmd(*cmd), RespError), cmd
    assert c.cmd("BF.LOADCHUNK", "load", 1, c.cmd("BF.SCANDUMP", "b", 0)[1]) == "OK"
    assert c.cmd("CF.LOADCHUNK", "cload", 1, c.cmd("CF.SCANDUMP", "c", 0)[1]) == "OK"
    assert c.cmd("CONFIG", "RESETSTAT") == "OK"
    errors = {}
    for cmd in EVERY_HANDLER:
        got = c.cmd(*cmd)
        failed = isinstance(got, RespError) or (
            isinstance(got, list) and any(isinstance(g, RespError) for g in got))
        name = cmd[0].lower()
        errors[name] = errors.get(name, 0) + failed
    info = c.cmd("INFO", "commandstats").decode()
    counted = {}
    for line in info.split("\r\n"):
        if line.startswith("cmdstat_"):
            name, fields = line[len("cmdstat_"):].split(":")
            f = dict(kv.split("=") for kv in fields.split(","))
            counted[name] = int(f["failed_calls"]) + int(f["rejected_calls"])
    assert {n: counted.get(n, 0) for n in errors} == errors
    assert 0 < sum(errors.values()) < len(EVERY_HANDLER)
    c.close()


def test_pipelined_items_of_every_shape(raw):
    """A pipeline on one key takes a shortcut for requests repeating the
    previous one's bytes up to the item; items of any length and content,
    other spellings and requests cut in the middle must answer as separate
    commands do."""
    items = [b"a", b"", b"\r\n", b"x" * 9, b"y" * 10, b"z" * 20000, b"$3\r\nabc", b"0", b"a"]
    reqs = [("BF.ADD", "p", i) for i in items]
    reqs += [("bf.add", "p", "a"), ("BF.ADD", "p2", "a"), ("BF.ADD", "p", "new")]
    reqs += [("BF.EXISTS", "p", i) for i in items] + [("BF.EXISTS", "p", "never")]
    data = b"".join(raw.encode(*q) for q in reqs)
    # Cut inside a header, inside an item and between requests.
    for cut in (7, 40, 75, 20100, len(data) - 3):
        raw.send(data[:cut])
        data = data[cut:]
        time.sleep(0.01)
    raw.send(data)
    got = [raw.read() for _ in reqs]
    assert got[:9] == [1, 1, 1, 1, 1, 1, 1, 1, 0]
    assert got[9:12] == [0, 1, 1]
    assert got[12:] == [1] * 9 + [0]
