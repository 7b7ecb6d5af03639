"""The HTTP listener against an attacker (docs/CONSOLE.md, "Who is
answered"): a DNS-rebinding page (its Host names another site), hosts off
the loopback interface under protected mode, sockets held open with a
request never finished (slowloris), and bodies sent before a password.

Hosts off the loopback interface are made in a network namespace of the
test's own (unshare --net): an address added to its loopback device is not
in 127.0.0.0/8, so a connection from it is a peer like any other host's.
Nothing leaves that namespace."""
import contextlib
import ctypes
import http.client
import os
import shutil
import socket
import subprocess
import threading
import urllib.parse

import pytest

from conftest import MODULE, wait_for
from test_metrics import basic, connectable, http_server

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomeryd's own HTTP listener")


def http_port(s):
    return int(s.http.rsplit(":", 1)[1])


def request(s, method, path, host=None, headers=None, body=None, addr="127.0.0.1",
            timeout=10):
    """(status, body) of one request with exactly the Host given (None: the
    one a client would send; "": none at all)."""
    c = http.client.HTTPConnection(addr, http_port(s), timeout=timeout)
    try:
        c.putrequest(method, path, skip_host=host is not None, skip_accept_encoding=True)
        if host:
            c.putheader("Host", host)
        h = dict(headers or {})
        if body is not None:
            h.setdefault("Content-Type", "application/x-www-form-urlencoded")
            h["Content-Length"] = str(len(body))
        for k, v in h.items():
            c.putheader(k, v)
        c.endheaders(body)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def form(**fields):
    return urllib.parse.urlencode(fields).encode()


CONSOLE = {"X-Bloomery-Console": "1"}


def raw_head(port, head, addr="127.0.0.1", timeout=10):
    """Send a request's head only (no body) and read the status line the
    server answers with: the answer must come without the body."""
    with socket.create_connection((addr, port), timeout=timeout) as sk:
        sk.sendall(head)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sk.recv(65536)
            if not chunk:
                break
            data += chunk
        return data.split(b"\r\n", 1)[0]


# ---- Host: DNS rebinding ----

def test_rebinding_host_is_refused(start_server):
    """A page of evil.example whose name resolves to 127.0.0.1 sends its own
    name in Host: nothing is read, created or deleted, and no password
    prompt appears under its name."""
    s = http_server(start_server)
    c = s.client()
    c.execute_command("BF.RESERVE", "victim", 0.01, 100)
    port = http_port(s)
    for host in ("evil.example:%d" % port, "evil.example", "localhost.evil.example:%d" % port,
                 "127.0.0.1.evil.example:%d" % port):
        st, body = request(s, "GET", "/api/filters", host=host)
        assert st == 421, (host, st, body)
        assert b"victim" not in body
        assert request(s, "GET", "/metrics", host=host)[0] == 421
        assert request(s, "GET", "/", host=host)[0] == 421
        st, _ = request(s, "POST", "/api/filters/delete", host=host, headers=CONSOLE,
                        body=form(name="victim"))
        assert st == 421
        st, _ = request(s, "POST", "/api/filters", host=host, headers=CONSOLE,
                        body=form(name="planted", capacity="10", error_rate="0.1"))
        assert st == 421
    assert c.exists("victim") == 1
    assert c.exists("planted") == 0
    # The same requests, with the server's own name, do what they say.
    st, _ = request(s, "POST", "/api/filters/delete", host="127.0.0.1:%d" % port,
                    headers=CONSOLE, body=form(name="victim"))
    assert st == 200 and c.exists("victim") == 0
    c.close()


def test_rebinding_host_gets_no_password_prompt(start_server):
    s = http_server(start_server, "--requirepass", "pw")
    st, body = request(s, "GET", "/", host="evil.example:%d" % http_port(s))
    assert st == 421, (st, body)
    st, _ = request(s, "GET", "/metrics", host="evil.example", headers=basic("pw"))
    assert st == 421


def test_allowed_hosts(start_server):
    s = http_server(start_server, "--http-allowed-hosts", "metrics.example console.lan:8080")
    port = http_port(s)
    for host in ("localhost:%d" % port, "localhost", "LocalHost:%d" % port,
                 "127.0.0.1:%d" % port, "127.0.0.1", "[::1]:%d" % port,
                 "metrics.example", "metrics.example:%d" % port, "console.lan:8080"):
        st, body = request(s, "GET", "/metrics", host=host)
        assert st == 200, (host, st, body)
    for host in ("console.lan", "console.lan:%d" % port, "other.example:%d" % port,
                 "metrics.example.evil", "[::1", "localhost:x"):
        assert request(s, "GET", "/metrics", host=host)[0] == 421, host
    # Changed at run time, as the names a proxy uses change.
    c = s.client()
    assert c.config_get("http-allowed-hosts") == {
        "http-allowed-hosts": "metrics.example console.lan:8080"}
    c.config_set("http-allowed-hosts", "other.example")
    assert request(s, "GET", "/metrics", host="other.example:%d" % port)[0] == 200
    assert request(s, "GET", "/metrics", host="metrics.example")[0] == 421
    assert request(s, "GET", "/metrics", host="localhost:%d" % port)[0] == 200
    c.close()


def test_missing_and_repeated_host(start_server):
    s = http_server(start_server)
    port = http_port(s)
    # HTTP/1.0 needs no Host, and no browser leaves it out: answered.
    line = raw_head(port, b"GET /metrics HTTP/1.0\r\n\r\n")
    assert line.startswith(b"HTTP/1.") and b" 200 " in line, line
    # HTTP/1.1 requires one (RFC 9112).
    assert b" 400 " in raw_head(port, b"GET /metrics HTTP/1.1\r\n\r\n")
    # Two, even of names answered alone: which one did a proxy read?
    for second in (b"localhost", b"evil.example"):
        two = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nHost: %s\r\n\r\n" % (port, second)
        assert b" 400 " in raw_head(port, two), second


# ---- the body is not read before the password ----

def test_unauthenticated_body_is_not_read(start_server):
    """200 MB announced, no credentials: 401 as soon as the headers are in,
    without one byte of the body sent."""
    s = http_server(start_server, "--requirepass", "pw")
    port = http_port(s)
    for auth in (b"", b"Authorization: Basic %s\r\n" % b"ZGVmYXVsdDp3cm9uZw=="):
        head = (b"POST /api/filters HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\n"
                b"X-Bloomery-Console: 1\r\n%sContent-Length: 200000000\r\n\r\n" % (port, auth))
        line = raw_head(port, head)
        assert b" 401 " in line, line


def test_authenticated_body_is_bounded(start_server):
    s = http_server(start_server, "--requirepass", "pw")
    port = http_port(s)
    auth = basic("pw")["Authorization"].encode()
    head = (b"POST /api/filters HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: %s\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n"
            b"X-Bloomery-Console: 1\r\nContent-Length: 200000000\r\n\r\n" % (port, auth))
    line = raw_head(port, head)
    assert b" 413 " in line, line
    # A chunked body has no length to refuse up front: past the bound the
    # connection is closed, and nothing is created.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sk:
        sk.sendall(b"POST /api/filters HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: %s\r\n"
                   b"Content-Type: application/x-www-form-urlencoded\r\n"
                   b"X-Bloomery-Console: 1\r\nTransfer-Encoding: chunked\r\n\r\n" % (port, auth))
        sk.sendall(b"name=big&capacity=10&error_rate=0.1&x=")
        answer = b""
        try:
            for _ in range(64):  # up to 4 MB
                sk.sendall(b"10000\r\n" + b"a" * 0x10000 + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            while True:
                chunk = sk.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except (ConnectionResetError, socket.timeout):
            pass
        assert b" 200 " not in answer.split(b"\r\n", 1)[0]
    # A form of ordinary size still works.
    st, _ = request(s, "POST", "/api/filters", headers={**CONSOLE, **basic("pw")},
                    body=form(name="small", capacity="10", error_rate="0.1"))
    assert st == 200
    c = s.client(password="pw")
    assert c.exists("big") == 0 and c.exists("small") == 1
    c.close()


# ---- slowloris ----

class SlowClients:
    """n connections, each sending a request head a byte at a time, every
    second, and never finishing it."""

    def __init__(self, port, n):
        self.socks = []
        for _ in range(n):
            sk = socket.create_connection(("127.0.0.1", port), timeout=10)
            sk.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Slow: " % port)
            self.socks.append(sk)
        self.closed = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.drip, daemon=True)
        self.thread.start()

    def drip(self):
        while not self.stop.wait(1):
            for i, sk in enumerate(self.socks):
                if i in self.closed:
                    continue
                try:
                    sk.sendall(b"a")
                except OSError:
                    self.closed.add(i)

    def closed_by_server(self):
        """How many the server has closed (read as EOF or reset)."""
        n = 0
        for sk in self.socks:
            sk.setblocking(False)
            try:
                if sk.recv(65536) == b"":
                    n += 1
            except BlockingIOError:
                pass
            except OSError:
                n += 1
        return n

    def close(self):
        self.stop.set()
        self.thread.join()
        for sk in self.socks:
            sk.close()


@pytest.mark.parametrize("n", [100, 400])
def test_metrics_answers_while_slow_clients_hold_sockets(start_server, n):
    """n sockets held with a request never finished: /metrics answers
    still, every time. 100 is more than the old limit of 64 connections;
    400 is more than the listener keeps, so the oldest unfinished ones are
    closed to make room."""
    s = http_server(start_server)
    slow = SlowClients(http_port(s), n)
    try:
        for _ in range(20):
            st, body = request(s, "GET", "/metrics", timeout=10)
            assert st == 200 and b"bloomery_uptime_seconds" in body
        if n > 128:
            assert slow.closed_by_server() > 0
    finally:
        slow.close()


# ---- hosts off the loopback interface: a network namespace of our own ----

CLONE_NEWNET = 0x40000000
OTHER = "10.200.0.1"


@contextlib.contextmanager
def own_network():
    """Move this thread (and what it starts) into a new network namespace
    whose loopback device also has OTHER, an address outside 127.0.0.0/8;
    back on leaving. Skips where namespaces cannot be made."""
    if not shutil.which("unshare") or not shutil.which("ip"):
        pytest.skip("unshare or ip is not installed")
    holder = subprocess.Popen(["unshare", "--net", "sleep", "600"], stderr=subprocess.PIPE)
    try:
        mine = os.readlink("/proc/self/ns/net")

        def moved():
            if holder.poll() is not None:
                return "exited"
            try:
                return os.readlink("/proc/%d/ns/net" % holder.pid) != mine
            except OSError:
                return False
        if wait_for(moved, "unshare --net", timeout=10) == "exited":
            pytest.skip("unshare --net is not permitted: %s" % holder.stderr.read().decode())
        libc = ctypes.CDLL(None, use_errno=True)
        back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        there = os.open("/proc/%d/ns/net" % holder.pid, os.O_RDONLY)
        try:
            if libc.setns(there, CLONE_NEWNET) != 0:
                pytest.skip("setns: %s" % os.strerror(ctypes.get_errno()))
            try:
                for cmd in (["ip", "link", "set", "lo", "up"],
                            ["ip", "addr", "add", OTHER + "/32", "dev", "lo"]):
                    p = subprocess.run(cmd, capture_output=True)
                    if p.returncode != 0:
                        pytest.skip("%s: %s" % (" ".join(cmd), p.stderr.decode()))
                yield OTHER
            finally:
                assert libc.setns(back, CLONE_NEWNET) == 0
        finally:
            os.close(there)
            os.close(back)
    finally:
        holder.kill()
        holder.wait()


def test_protected_mode_on_http(start_server):
    with own_network() as other:
        s = http_server(start_server, "--http-bind", "0.0.0.0")
        port = http_port(s)
        wait_for(lambda: connectable(port, other), "the listener on " + other)
        # From another host, no password: refused with the reason, on every
        # path, whatever the Host.
        for path in ("/metrics", "/", "/api/filters"):
            st, body = request(s, "GET", path, host="%s:%d" % (other, port), addr=other)
            assert st == 403 and body.startswith(b"DENIED"), (path, st, body)
        c = s.client()
        c.execute_command("BF.RESERVE", "victim", 0.01, 100)
        st, _ = request(s, "POST", "/api/filters/delete", host="%s:%d" % (other, port),
                        addr=other, headers=CONSOLE, body=form(name="victim"))
        assert st == 403 and c.exists("victim") == 1
        # From the loopback interface: answered.
        assert request(s, "GET", "/metrics")[0] == 200
        assert "protected mode answers only clients on the loopback" in s.output()
        # A password lifts it, as for RESP: then the password is asked for.
        c.config_set("requirepass", "pw")
        st, _ = request(s, "GET", "/metrics", host="%s:%d" % (other, port), addr=other)
        assert st == 401
        st, _ = request(s, "GET", "/metrics", host="%s:%d" % (other, port), addr=other,
                        headers=basic("pw"))
        assert st == 200
        # So does protected-mode no; the Host is still checked.
        c.config_set("requirepass", "")
        c.config_set("protected-mode", "no")
        assert request(s, "GET", "/metrics", host="%s:%d" % (other, port), addr=other)[0] == 200
        assert request(s, "GET", "/metrics", host="evil.example:%d" % port, addr=other)[0] == 421
        c.close()


def test_one_remote_peer_holds_a_bounded_share(start_server):
    """A host off the loopback interface may hold 16 connections; the
    loopback interface (Prometheus on the same machine) is not limited."""
    with own_network() as other:
        s = http_server(start_server, "--http-bind", "0.0.0.0", "--protected-mode", "no")
        port = http_port(s)
        wait_for(lambda: connectable(port, other), "the listener on " + other)
        held = []
        try:
            for _ in range(16):
                sk = socket.create_connection((other, port), timeout=10)
                sk.sendall(b"GET /metrics HTTP/1.1\r\n")
                held.append(sk)
            # The 17th is closed unanswered.
            with socket.create_connection((other, port), timeout=10) as sk:
                try:
                    sk.sendall(b"GET /metrics HTTP/1.1\r\nHost: %s\r\n\r\n" % other.encode())
                    got = sk.recv(65536)
                except ConnectionResetError:
                    got = b""
                assert got == b""
            # Loopback is not limited.
            loop = [socket.create_connection(("127.0.0.1", port), timeout=10)
                    for _ in range(32)]
            held += loop
            assert request(s, "GET", "/metrics")[0] == 200
            # One of the 16 leaves: the host may connect again.
            held.pop(0).close()
            wait_for(lambda: request(s, "GET", "/metrics", host="%s:%d" % (other, port),
                                     addr=other)[0] == 200,
                     "a connection from the host again", ignore=(OSError,
                                                                 http.client.HTTPException))
        finally:
            for sk in held:
                sk.close()
