"""The RESP port against hostile clients, as Redis 7 guards it.

- Cross-protocol requests: a browser made to POST to the port sends HTTP
  lines the inline protocol would read as commands, the body among them.
  A command named POST or Host: closes the connection before anything else
  runs, and the log says why (once a minute).
- Unauthenticated output: with requirepass set, a client that sends without
  reading is closed once a small amount of replies waits for it, so it
  cannot make the server hold megabytes of NOAUTH errors.
- Open files: maxclients is fitted to the open-file limit at start (the
  soft limit raised where the hard one allows); clients past maxclients are
  told so and closed; out of descriptors, the listener neither spins nor
  floods the log, and a waiting client is told and closed too.

Resource bounds (peak RSS, CPU seconds, log bytes) are measured around a
fixed amount of work, never against the clock.
"""
import ctypes
import os
import re
import resource
import select
import socket
import threading
import time

import pytest

from conftest import MODULE, QUICK, RespError, wait_for

ATTACK = "Possible SECURITY ATTACK detected"
FULL = b"-ERR max number of clients reached\r\n"


def read_until_closed(sock, timeout=10):
    """The first bytes the server sends (up to 64 KiB; the rest is read and
    dropped) until it closes the connection; fails if it keeps it open."""
    sock.settimeout(timeout)
    got = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            data = sock.recv(1 << 16)
            if not data:
                return got
            got += data[:(1 << 16) - len(got)]
    except ConnectionResetError:
        return got
    except socket.timeout:
        pass
    raise AssertionError("connection still open; received %r" % got[:200])


def browser_post(port, hints):
    """A cross-origin fetch() of a text body, as Chromium sends it; hints: with
    its client-hint headers (whose quotes Redis's inline parser refuses)."""
    body = b"BF.ADD k v\r\nFLUSHALL\r\n"
    lines = [b"POST / HTTP/1.1", b"Host: 127.0.0.1:%d" % port, b"Connection: keep-alive",
             b"Content-Length: %d" % len(body)]
    if hints:
        lines += [b'sec-ch-ua: "Chromium";v="124", "Google Chrome";v="124", '
                  b'"Not-A.Brand";v="99"',
                  b"sec-ch-ua-mobile: ?0", b'sec-ch-ua-platform: "Linux"']
    lines += [b"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like "
              b"Gecko) Chrome/124.0.0.0 Safari/537.36",
              b"Content-Type: text/plain;charset=UTF-8", b"Accept: */*",
              b"Origin: http://attacker.example", b"Sec-Fetch-Site: cross-site",
              b"Sec-Fetch-Mode: no-cors", b"Sec-Fetch-Dest: empty",
              b"Referer: http://attacker.example/", b"Accept-Encoding: gzip, deflate, br",
              b"Accept-Language: en-US,en;q=0.9"]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def attack(s, payload):
    """Send payload on a fresh connection; what came back before the close."""
    with socket.create_connection(("127.0.0.1", s.port)) as sock:
        sock.sendall(payload)
        return read_until_closed(sock)


def attack_lines(s):
    return [line for line in s.output().splitlines() if ATTACK in line]


@pytest.mark.parametrize("hints", [False, True], ids=["plain", "client-hints"])
def test_browser_post_runs_nothing(start_server, hints):
    s = start_server()
    c = s.client()
    c.execute_command("BF.ADD", "sentinel", "x")
    # Closed at the request line: no reply at all, and neither the BF.ADD
    # nor the FLUSHALL of the body ran.
    assert attack(s, browser_post(s.port, hints)) == b""
    fresh = s.client()
    assert fresh.exists("k") == 0
    assert fresh.exists("sentinel") == 1
    line = wait_for(lambda: attack_lines(s), "the log's security line", timeout=10)[0]
    assert "POST or Host: commands" in line, line
    # Redis names the peer since 7.2, not in 7.0.
    assert MODULE or "from 127.0.0.1:" in line, line
    assert "Connection aborted." in line, line
    fresh.close()
    c.close()


def test_host_line_and_later_commands_close_too(start_server):
    s = start_server()
    c = s.client()
    # A Host: header first (a request line the port took for something
    # else), in any case.
    assert attack(s, b"hOsT: 127.0.0.1:%d\r\nBF.ADD k v\r\n" % s.port) == b""
    assert c.exists("k") == 0
    # Checked on every command, as Redis: after a PING, inside MULTI, and
    # before authentication matters.
    attack(s, b"PING\r\npost / HTTP/1.1\r\nBF.ADD k v\r\n")
    attack(s, b"*1\r\n$5\r\nMULTI\r\n*1\r\n$4\r\nPOST\r\n*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n"
              b"$1\r\nv\r\n*1\r\n$4\r\nEXEC\r\n")
    assert c.exists("k") == 0
    # One line a minute, however many attempts.
    assert len(wait_for(lambda: attack_lines(s), "the security line", timeout=10)) == 1
    c.close()


def test_similar_commands_are_only_unknown(start_server):
    s = start_server()
    r = s.raw()
    for name in ("POSTS", "HEAD", "PUT", "Host", "host:x"):
        reply = r.cmd(name, "/")
        assert isinstance(reply, RespError) and "unknown command" in str(reply), reply
    # As arguments the words mean nothing.
    assert r.cmd("BF.ADD", "post", "host:") == 1
    assert r.cmd("BF.EXISTS", "post", "host:") == 1
    assert r.cmd("PING") == "PONG"
    r.close()
    assert attack_lines(s) == []


def test_security_guard_with_a_password(start_server):
    s = start_server("--requirepass", "secret")
    assert attack(s, browser_post(s.port, False)) == b""
    c = s.client(password="secret")
    assert c.exists("k") == 0
    assert wait_for(lambda: attack_lines(s), "the security line", timeout=10)
    c.close()


# ---- unauthenticated output ----

def status_bytes(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no %s in /proc/%d/status" % (field, pid))


def flood(port, nbytes, result):
    """Send nbytes of inline PINGs without reading a reply; result gets how
    many were sent and whether the server closed the connection."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    chunk = b"PING\r\n" * 16384
    sent = 0
    closed = False
    try:
        while sent < nbytes:
            sock.sendall(chunk)
            sent += len(chunk)
    except OSError:
        closed = True
    result.append((sent, closed, sock))


def test_unauthenticated_non_reader_is_closed(start_server):
    s = start_server("--requirepass", "secret")
    pid = s.proc.pid
    c = s.client(password="secret")
    assert c.ping()
    peak_before = status_bytes(pid, "VmHWM")
    # Each client's PINGs would answer 5.7 times their size in NOAUTH errors:
    # 16 MB sent, 90 MB of replies held for each of four clients.
    per_client = (4 if QUICK else 16) << 20
    results = []
    threads = [threading.Thread(target=flood, args=(s.port, per_client, results))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # The server has read nearly all that was sent (or refused it): what it
    # held for it shows in its peak.
    growth = status_bytes(pid, "VmHWM") - peak_before
    assert growth < 64 << 20, "peak RSS grew by %d MB" % (growth >> 20)
    for sent, closed, sock in results:
        # Sent away before it sent everything, or (its bytes all buffered by
        # the kernels) closed as soon as the server read them.
        if not closed:
            read_until_closed(sock, timeout=30)
        sock.close()
    assert s.output().count("for overcoming of output buffer limits") >= 4
    wait_for(lambda: c.info("clients")["connected_clients"] == 1, "the floods to be closed")
    c.close()


def test_unauthenticated_reader_and_authenticated_pipeline_are_served(start_server):
    s = start_server("--requirepass", "secret")
    r = s.raw()
    # A client that reads its (few) refusals keeps its connection.
    r.send(b"PING\r\n" * 100)
    for _ in range(100):
        assert str(r.read()).startswith("NOAUTH")
    assert r.cmd("AUTH", "secret") == "OK"
    # Once authenticated, a large pipeline is no reason to close.
    n = 5000 if QUICK else 20000
    r.send(b"PING\r\n" * n)
    for _ in range(n):
        assert r.read() == "PONG"
    r.close()


# ---- open files ----

PR_CAPBSET_DROP = 24
CAP_SYS_RESOURCE = 24


def nofile_limit(soft, hard):
    """preexec_fn: the server starts under this RLIMIT_NOFILE and, even as
    root, cannot raise the hard limit (CAP_SYS_RESOURCE dropped)."""
    def pre():
        if os.geteuid() == 0:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return pre


def can_raise_limits(pid):
    with open("/proc/%d/status" % pid) as f:
        eff = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    return bool(eff & (1 << CAP_SYS_RESOURCE))


def server_nofile(pid):
    with open("/proc/%d/limits" % pid) as f:
        line = next(line for line in f if line.startswith("Max open files"))
    soft, hard = line.split()[3:5]
    return int(soft), (int(hard) if hard != "unlimited" else resource.RLIM_INFINITY)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime, the 14th and 15th fields (the 12th and 13th after
    # the command name).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def log_size(s):
    s.log.flush()
    return os.fstat(s.log.fileno()).st_size


def own_nofile_at_least(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= n:
        return
    if hard != resource.RLIM_INFINITY and hard < n:
        pytest.skip("this test needs %d open files; the hard limit is %d" % (n, hard))
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


def answered_full(socks, want, timeout=60):
    """Wait until want of socks were told the server is full and closed;
    returns the set of those sockets (the others stay open)."""
    poll = select.poll()
    by_fd = {}
    for sock in socks:
        poll.register(sock.fileno(), select.POLLIN)
        by_fd[sock.fileno()] = [sock, b""]
    done = set()

    def step():
        for fd, _ in poll.poll(100):
            sock, got = by_fd[fd]
            try:
                data = sock.recv(4096)
            except ConnectionResetError:
                data = b""
            if data:
                by_fd[fd][1] = got + data
                continue
            assert got == FULL, got
            poll.unregister(fd)
            done.add(sock)
        return len(done) >= want

    wait_for(step, "%d clients told the server is full" % want, timeout=timeout)
    return done


def test_maxclients_fitted_to_a_fixed_open_file_limit(start_server):
    own_nofile_at_least(1300)
    s = start_server(preexec_fn=nofile_limit(1024, 1024))
    pid = s.proc.pid
    if can_raise_limits(pid):
        pytest.skip("the server may raise its hard limit here (CAP_SYS_RESOURCE kept)")
    out = s.output()
    assert "You requested maxclients of 10000 requiring at least" in out, out
    m = re.search(r"Current maximum open files is 1024\. maxclients has been reduced to (\d+) "
                  r"to compensate for low ulimit\.", out)
    assert m, out
    n = int(m.group(1))
    assert 0 < n <= 1024 - 32
    c = s.raw()
    assert c.cmd("CONFIG", "GET", "maxclients") == [b"maxclients", b"%d" % n]
    # More than fits is refused, as Redis; less is taken.
    err = c.cmd("CONFIG", "SET", "maxclients", "5000")
    assert isinstance(err, RespError), err
    assert ("The operating system is not able to handle the specified number of clients, "
            "try with %d" % n) in str(err), err
    assert c.cmd("CONFIG", "GET", "maxclients") == [b"maxclients", b"%d" % n]
    assert c.cmd("CONFIG", "SET", "maxclients", str(n - 1)) == "OK"
    assert c.cmd("CONFIG", "SET", "maxclients", str(n)) == "OK"
    assert server_nofile(pid) == (1024, 1024)

    # Only c holds a place (a connection closed before is given back late).
    wait_for(lambda: b"connected_clients:1\r\n" in c.cmd("INFO", "clients"), "one client")
    cpu0, log0 = cpu_seconds(pid), log_size(s)
    socks = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(1100)]
    try:
        # c holds one place: n - 1 of these are kept, each other one is told
        # and closed.
        refused = answered_full(socks, 1100 - (n - 1))
        assert len(refused) == 1100 - (n - 1)
        wait_for(lambda: b"connected_clients:%d\r\n" % n in c.cmd("INFO", "clients"),
                 "%d clients" % n)
        for _ in range(200):
            assert c.cmd("PING") == "PONG"
        # Still full: one more is told so.
        with socket.create_connection(("127.0.0.1", s.port)) as extra:
            assert read_until_closed(extra) == FULL
        # Bounds over the whole period: 1100 connections, 200 PINGs.
        cpu = cpu_seconds(pid) - cpu0
        grown = log_size(s) - log0
        assert cpu < 1.5, "%.2f CPU seconds" % cpu
        assert grown < 4096, s.output()[-2000:]
    finally:
        for sock in socks:
            sock.close()
    wait_for(lambda: b"connected_clients:1\r\n" in c.cmd("INFO", "clients"), "the room back")
    again = s.raw()
    assert again.cmd("PING") == "PONG"
    again.close()
    c.close()


def test_soft_open_file_limit_is_raised(start_server):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 10100:
        pytest.skip("the hard open-file limit (%d) leaves no room to raise to" % hard)
    s = start_server(preexec_fn=nofile_limit(1024, hard))
    pid = s.proc.pid
    out = s.output()
    m = re.search(r"Increased maximum number of open files to (\d+) \(it was originally set "
                  r"to 1024\)\.", out)
    assert m, out
    soft = server_nofile(pid)[0]
    assert soft == int(m.group(1)) and soft >= 10000 + 32
    assert "maxclients has been reduced" not in out
    c = s.client()
    assert c.config_get("maxclients") == {"maxclients": "10000"}
    c.close()


@pytest.mark.skipif(MODULE is not None, reason="Redis 7.0 logs every failed accept (it spins)")
def test_out_of_descriptors_neither_spins_nor_floods_the_log(start_server):
    s = start_server()
    pid = s.proc.pid
    c = s.raw()
    assert c.cmd("PING") == "PONG"
    # Only c left (a connection closed before gives its descriptor back
    # late), so the descriptors in use stay as they are.
    wait_for(lambda: b"connected_clients:1\r\n" in c.cmd("INFO", "clients"), "one client")
    # Lower the running server's limit to its lowest free descriptor: no
    # new one can be had (a fault maxclients cannot see, as a file held by
    # something else).
    used = {int(fd) for fd in os.listdir("/proc/%d/fd" % pid)}
    lowest = next(i for i in range(len(used) + 1) if i not in used)
    soft, hard = server_nofile(pid)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest, hard))
    try:
        cpu0, log0 = cpu_seconds(pid), log_size(s)
        n = 50 if QUICK else 200
        socks = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(n)]
        try:
            # Each is told and closed; none waits for a descriptor.
            assert len(answered_full(socks, n)) == n
            for _ in range(200):
                assert c.cmd("PING") == "PONG"
        finally:
            for sock in socks:
                sock.close()
        cpu = cpu_seconds(pid) - cpu0
        grown = log_size(s) - log0
        assert cpu < 1.5, "%.2f CPU seconds" % cpu
        assert grown < 4096, s.output()[-2000:]
        assert "Accepting client connection: Too many open files" in s.output()
        stats = c.cmd("INFO", "stats")
        assert int(re.search(rb"rejected_connections:(\d+)", stats).group(1)) >= n
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
    fresh = s.raw()
    assert fresh.cmd("PING") == "PONG"
    fresh.close()
    c.close()
