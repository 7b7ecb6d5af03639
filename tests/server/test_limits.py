"""maxmemory, request size caps, maxclients, output-buffer limit, idle timeout."""
import socket
import time

from conftest import RawClient, RespError


def exact(s, *args):
    c = s.raw()
    try:
        return c.cmd(*args)
    finally:
        c.close()


OOM = "OOM command not allowed when used memory > 'maxmemory'."


def test_maxmemory_refuses_reserve_and_growth(start_server):
    s = start_server("--maxmemory", "1mb")
    c = s.client()
    before = c.info("memory")["used_memory"]
    assert str(exact(s, "BF.RESERVE", "big", "0.01", "10000000")) == OOM
    assert c.exists("big") == 0
    assert c.info("memory")["used_memory"] == before
    assert str(exact(s, "BF.RESERVE", "big", "0.01", "10000000", "COUNTING")) == OOM
    # A filter with the bf-* defaults (100 items) fits under the limit: the
    # refusal above is about that filter's size, not about the limit itself.
    assert exact(s, "BF.ADD", "x", "a") == 1
    assert c.execute_command("BF.EXISTS", "x", "a") == 1
    assert c.delete("x") == 1
    # A filter whose next link would pass the limit: the add that needs the
    # link is refused and nothing changes.
    assert c.execute_command("BF.RESERVE", "g", "0.01", "1000", "EXPANSION", "1000") == b"OK"
    items = ["i%d" % i for i in range(990)]
    c.execute_command("BF.MADD", "g", *items)
    # Full: an add that found its bits set (a false positive) is not
    # counted, so fill to exactly the capacity one new item at a time.
    while c.execute_command("BF.CARD", "g") < 1000:
        c.execute_command("BF.ADD", "g", "i%d" % len(items))
        items.append("i%d" % len(items))
    info = c.execute_command("BF.INFO", "g")
    used = c.info("memory")["used_memory"]
    new = next(x for x in ("n%d" % i for i in range(100000))
               if c.execute_command("BF.EXISTS", "g", x) == 0)
    assert str(exact(s, "BF.ADD", "g", new)) == OOM
    reply = exact(s, "BF.MADD", "g", items[0], new, "another")
    assert reply[0] == 0 and str(reply[1]) == OOM and len(reply) == 2
    assert c.execute_command("BF.INFO", "g") == info
    assert c.info("memory")["used_memory"] == used
    assert c.execute_command("BF.EXISTS", "g", new) == 0
    # Reads still work; raising the limit lets the growth happen.
    assert c.execute_command("BF.EXISTS", "g", items[5]) == 1
    c.config_set("maxmemory", "0")
    assert c.execute_command("BF.ADD", "g", new) == 1
    assert c.execute_command("BF.INFO", "g", "FILTERS") == [2]
    c.close()


def test_denyoom_when_over_limit(start_server):
    s = start_server()
    c = s.client()
    c.execute_command("BF.RESERVE", "a", "0.01", "100000")
    c.config_set("maxmemory", "1000")
    assert str(exact(s, "BF.ADD", "b", "x")) == OOM
    assert str(exact(s, "PFADD", "h", "x")) == OOM
    assert c.execute_command("BF.EXISTS", "a", "x") == 0
    assert c.delete("a") == 1          # deleting is always allowed
    assert c.execute_command("PFADD", "h", "x") == 1
    c.close()


def test_proto_limits(start_server):
    s = start_server("--proto-max-bulk-len", "1mb", "--proto-max-multibulk-len", "100")
    c = s.raw()
    c.send(b"*2\r\n$4\r\nECHO\r\n$2000000\r\n")
    assert str(c.read()) == "ERR Protocol error: invalid bulk length"
    assert c.closed()
    c.close()
    c = s.raw()
    c.send(b"*101\r\n")
    assert str(c.read()) == "ERR Protocol error: invalid multibulk length"
    assert c.closed()
    c.close()
    c = s.raw()
    # 100 arguments, the limit itself: accepted, every item new.
    assert c.cmd(*(["BF.MADD", "k"] + ["i%d" % i for i in range(98)])) == [1] * 98
    assert c.cmd("PING") == "PONG"
    c.close()


def connect_when_room(s, timeout=10):
    """Connections closed a moment ago are released asynchronously: retry."""
    deadline = time.time() + timeout
    while True:
        c = s.raw()
        try:
            reply = c.cmd("PING")
        except OSError:   # refused and closed before our PING got in
            reply = RespError("ERR max number of clients reached")
        if reply == "PONG":
            return c
        c.close()
        assert str(reply) == "ERR max number of clients reached"
        assert time.time() < deadline
        time.sleep(0.05)


def test_maxclients(start_server):
    s = start_server("--maxclients", "3")
    keep = [connect_when_room(s) for _ in range(3)]
    extra = s.raw()
    assert str(extra.read()) == "ERR max number of clients reached"
    assert extra.closed()
    extra.close()
    keep[0].close()
    again = connect_when_room(s)
    again.close()
    for k in keep[1:]:
        k.close()
    c = connect_when_room(s)
    assert c.cmd("INFO", "stats").count(b"rejected_connections:0") == 0
    c.close()


def test_output_buffer_limit_drops_non_reader(start_server):
    s = start_server("--client-output-buffer-limit", "normal", "1mb", "0", "0")
    c = s.client()
    p = c.pipeline(transaction=False)
    for i in range(3000):
        p.execute_command("BF.ADD", "key:%06d" % i, "x")
    p.execute()
    slow = socket.create_connection(("127.0.0.1", s.port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    # Each KEYS * answers ~45 KB; ask for far more than the limit.
    slow.sendall(b"KEYS *\r\n" * 2000)
    # Dropped once its replies pass the limit: only c is left.
    deadline = time.time() + 30
    while c.info("clients")["connected_clients"] != 1:
        assert time.time() < deadline, c.info("clients")
        time.sleep(0.01)
    assert c.ping()
    total = 0
    slow.settimeout(20)
    while True:
        data = slow.recv(1 << 20)
        if not data:
            break
        total += len(data)
    assert total < 2000 * 45000 // 4
    slow.close()
    assert c.execute_command("BF.EXISTS", "key:000001", "x") == 1
    c.close()


def test_idle_timeout(start_server):
    s = start_server("--timeout", "1")
    idle = s.raw()
    assert idle.cmd("PING") == "PONG"
    assert idle.closed(timeout=10)
    idle.close()
    fresh = s.raw()
    assert fresh.cmd("PING") == "PONG"
    fresh.close()
