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
