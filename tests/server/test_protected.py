"""protected-mode as Redis 7: without a password, a client from anywhere but
the loopback interface gets Redis's DENIED text and is closed.

The non-loopback client is real but never leaves the machine: it connects
from an address of one of this machine's own interfaces (eth0's, say), so
the server sees that address as its peer. Without such an address a dummy
interface with 10.213.7.1/32 is made for the module and removed after.
"""
import socket
import subprocess

import pytest
import redis


DENIED = (
    b"-DENIED Redis is running in protected mode because protected mode is enabled and no "
    b"password is set for the default user. In this mode connections are only accepted from "
    b"the loopback interface. If you want to connect from external computers to Redis you may "
    b"adopt one of the following solutions: 1) Just disable protected mode sending the command "
    b"'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from "
    b"the same host the server is running, however MAKE SURE Redis is not publicly accessible "
    b"from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) "
    b"Alternatively you can just disable the protected mode by editing the Redis configuration "
    b"file, and setting the protected mode option to 'no', and then restarting the server. 3) "
    b"If you started the server manually just for testing, restart it with the "
    b"'--protected-mode no' option. 4) Set up an authentication password for the default user. "
    b"NOTE: You only need to do one of the above things in order for the server to start "
    b"accepting connections from the outside.\r\n")

DUMMY = "bloomerytest0"


def interface_addresses():
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    addrs = []
    for line in out.splitlines():
        words = line.split()
        if "inet" in words:
            a = words[words.index("inet") + 1].split("/")[0]
            if not a.startswith("127."):
                addrs.append(a)
    return addrs


def usable(addr):
    """Can a socket bound to addr reach a listener on addr?"""
    try:
        with socket.socket() as srv, socket.socket() as c:
            srv.bind((addr, 0))
            srv.listen(1)
            c.settimeout(5)
            c.connect(srv.getsockname())
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def outside_addr():
    for a in interface_addresses():
        if usable(a):
            yield a
            return
    made = False
    try:
        for cmd in (["ip", "link", "add", DUMMY, "type", "dummy"],
                    ["ip", "addr", "add", "10.213.7.1/32", "dev", DUMMY],
                    ["ip", "link", "set", DUMMY, "up"]):
            subprocess.run(cmd, check=True, capture_output=True)
            made = True
    except (OSError, subprocess.CalledProcessError) as e:
        if made:
            subprocess.run(["ip", "link", "del", DUMMY], capture_output=True)
        pytest.skip("no non-loopback IPv4 address on this machine and a dummy interface "
                    "could not be made (%s)" % e)
    try:
        if not usable("10.213.7.1"):
            pytest.skip("the dummy interface's address 10.213.7.1 is not reachable locally")
        yield "10.213.7.1"
    finally:
        subprocess.run(["ip", "link", "del", DUMMY], capture_output=True)


def connect_from(addr, port, via=None):
    """A connection whose source address is addr, to via (default: addr)."""
    s = socket.socket()
    s.settimeout(30)
    s.bind((addr, 0))
    s.connect((via or addr, port))
    return s


def everything(sock):
    got = b""
    try:
        while True:
            data = sock.recv(1 << 16)
            if not data:
                return got
            got += data
    except ConnectionResetError:
        return got


def denied(addr, port, send=b"", via=None):
    s = connect_from(addr, port, via)
    try:
        if send:
            s.sendall(send)
        return everything(s) == DENIED
    finally:
        s.close()


def cmd_from(addr, port, *args):
    s = connect_from(addr, port)
    s.sendall(b"".join(b"*%d\r\n" % len(a) + b"".join(
        b"$%d\r\n%s\r\n" % (len(x), x) for x in a) for a in args))
    s.shutdown(socket.SHUT_WR)
    try:
        return everything(s)
    finally:
        s.close()


def rejected(c):
    return c.info("stats")["rejected_connections"]


def test_denied_from_outside_loopback(start_server, outside_addr):
    s = start_server("--bind", "0.0.0.0")
    c = s.client()
    assert c.config_get("protected-mode") == {"protected-mode": "yes"}
    assert c.config_get("requirepass") == {"requirepass": ""}

    # The peer the server sees is the outside address, not loopback.
    probe = connect_from(outside_addr, s.port)
    assert probe.getsockname()[0] == outside_addr
    assert everything(probe) == DENIED
    probe.close()
    # Also when the client speaks first, as every client library does.
    assert denied(outside_addr, s.port, send=b"*1\r\n$4\r\nPING\r\n")
    assert rejected(c) == 2

    # Loopback clients are not affected.
    assert c.ping()
    raw = s.raw()
    assert raw.cmd("PING") == "PONG"
    raw.close()

    # A password lifts the restriction: outside clients get in and must AUTH.
    c.config_set("requirepass", "secret")
    assert cmd_from(outside_addr, s.port, [b"PING"], [b"AUTH", b"secret"], [b"PING"]) == (
        b"-NOAUTH Authentication required.\r\n+OK\r\n+PONG\r\n")
    c.config_set("requirepass", "")
    assert denied(outside_addr, s.port)

    # So does protected-mode no, at runtime.
    c.config_set("protected-mode", "no")
    assert c.config_get("protected-mode") == {"protected-mode": "no"}
    assert cmd_from(outside_addr, s.port, [b"PING"]) == b"+PONG\r\n"
    c.config_set("protected-mode", "yes")
    assert denied(outside_addr, s.port)
    assert rejected(c) == 4

    with pytest.raises(redis.exceptions.ResponseError) as e:
        c.config_set("protected-mode", "maybe")
    assert str(e.value) == ("CONFIG SET failed (possibly related to argument "
                            "'protected-mode') - argument must be 'yes' or 'no'")
    c.close()


def test_bind_does_not_matter(start_server, outside_addr):
    # As Redis 7: bound to the outside address by name, still denied ...
    s = start_server("--bind", "127.0.0.1", outside_addr)
    assert denied(outside_addr, s.port)
    assert s.client().ping()
    # ... and bound to loopback alone, a peer with an outside address (a
    # socket bound to it before connecting) is denied as well.
    s = start_server("--bind", "127.0.0.1")
    assert denied(outside_addr, s.port, via="127.0.0.1")


def test_protected_mode_no_at_start(start_server, outside_addr):
    s = start_server("--bind", "0.0.0.0", "--protected-mode", "no")
    assert cmd_from(outside_addr, s.port, [b"PING"]) == b"+PONG\r\n"
    s = start_server("--bind", "0.0.0.0", config="protected-mode no\n")
    assert cmd_from(outside_addr, s.port, [b"PING"]) == b"+PONG\r\n"
    s = start_server("--bind", "0.0.0.0", "--requirepass", "secret")
    assert cmd_from(outside_addr, s.port, [b"AUTH", b"secret"], [b"PING"]) == (
        b"+OK\r\n+PONG\r\n")
