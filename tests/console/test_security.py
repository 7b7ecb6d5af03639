"""The console's protections (docs/SECURITY.md, "The fleet console"): the
Host allow-list (DNS rebinding), writes only as POSTs with the
X-Bloomery-Console header, protected mode off the loopback, and there
the deployment's own users signing in, their writes decided by the
servers' ACLs."""
import socket
import subprocess

from consolehelp import CLI, bloomeryd, wait_for


def test_host_allow_list_and_post_header(procs):
    node = procs.start(bloomeryd(), "node")
    c = procs.console(["--node", node.addr, "--http-allowed-hosts", "console.example"])
    assert c.get("/api/me")["user"] == "default"
    status, body = c.request("GET", "/api/me", headers={"Host": "evil.example"})
    assert status == 421 and "Host" in body["error"]
    status, _ = c.request("GET", "/", headers={"Host": "evil.example:%d" % c.port})
    assert status == 421
    status, _ = c.request("GET", "/api/me", headers={"Host": "console.example:%d" % c.port})
    assert status == 200
    status, _ = c.request("GET", "/api/me", headers={"Host": "localhost:%d" % c.port})
    assert status == 200
    # A write without the header a page of another site cannot send.
    status, body = c.request("POST", "/api/filters",
                             {"name": "x", "capacity": "100", "error_rate": "0.01"},
                             headers={"X-Bloomery-Console": None})
    assert status == 403 and "X-Bloomery-Console" in body["error"]
    assert node.client().exists("x") == 0
    # Writes are POSTs only.
    status, _ = c.request("GET", "/api/filter/delete", {"name": "x"})
    assert status == 404
    status, _ = c.request("DELETE", "/api/filters")
    assert status == 405
    # No CORS: nothing grants another origin.
    status, _ = c.request("OPTIONS", "/api/filters", headers={"Origin": "http://evil.example"})
    assert status == 405
    # A body over the limit: refused on its Content-Length, before it is sent.
    with socket.create_connection(("127.0.0.1", c.port), timeout=30) as s:
        s.sendall(b"POST /api/filter/add HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"X-Bloomery-Console: 1\r\n"
                  b"Content-Type: application/x-www-form-urlencoded\r\n"
                  b"Content-Length: %d\r\n\r\n" % (2 << 20))
        assert s.recv(100).startswith(b"HTTP/1.1 413 ")


def test_protected_mode_off_the_loopback(procs):
    node = procs.start(bloomeryd(), "node")
    p = subprocess.run([CLI, "console", "--node", node.addr, "--http-bind", "0.0.0.0",
                        "--http-port", "1"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert "refusing to listen on 0.0.0.0" in p.stderr and node.addr in p.stderr


def test_sign_in_off_the_loopback(procs):
    node = procs.start(bloomeryd("--requirepass", "s3cret"), "node")
    admin = node.client(password="s3cret")
    admin.execute_command("ACL", "SETUSER", "reader", "on", ">readpw", "~*", "+@read",
                          "+ping", "+auth")
    c = procs.console(["--node", node.addr, "--pass", "s3cret"], bind="0.0.0.0")
    status, body = c.request("GET", "/api/me")
    assert status == 401
    status, body = c.request("GET", "/api/me", auth=("default", "wrong"))
    assert status == 401
    status, body = c.request("GET", "/api/me", auth=("default", "s3cret"))
    assert status == 200 and body["user"] == "default" and body["may_write"] is True
    c.auth = ("default", "s3cret")
    status, body = c.post("/api/filters", name="made", capacity="100", error_rate="0.01")
    assert status == 200, body
    # A user who may only read: told so, and refused by the server itself.
    c.auth = ("reader", "readpw")
    assert c.get("/api/me") == {"user": "reader", "may_write": False, "mode": "nodes"}
    wait_for(lambda: c.get("/api/filters", match="made")["total"] == 1, "the filter listed")
    status, body = c.post("/api/filter/add", name="made", items="x")
    assert status == 403 and body["error"].startswith("NOPERM"), body
    assert c.post("/api/filter/check", name="made", items="x") == (200, {"results": [0]})
    assert admin.execute_command("BF.EXISTS", "made", "x") == 0
