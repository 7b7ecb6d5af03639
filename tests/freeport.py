"""Loopback ports for the servers the suites start, safe while suites run
side by side (`make test` runs them so).

Binding port 0 and closing hands out a port the kernel may give the next
caller too, and any client connection may take as its local port: two
suites started servers on one port. free_port() takes ports from below the
kernel's ephemeral range, where no connection's local port lands, and marks
each one taken for the life of the process by a lock on that byte of one
file every suite shares (a POSIX record lock: the kernel drops it when the
process ends, however it ends). A program outside the suites may still
hold a port: start-ups retry on another one when the bind fails
(bind_failed), and tell their own server's listener from a stranger's
(listening). Port 0 keeps Redis's meaning, no TCP listener; it never means
"any".
"""
import fcntl
import os
import random
import socket
import tempfile

# Below this, ports other services are configured with are common.
LOWEST = 20000

_lock = None
_mine = set()


def _bindable(port):
    with socket.socket() as s:
        # As the servers bind: a port in TIME_WAIT is free for them.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ephemeral_low():
    """The lowest port the kernel gives connections as their local port."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def reserve(port):
    """Marks port taken for this process; False when another suite (or this
    one) has it, or something listens on it."""
    global _lock
    if _lock is None:
        _lock = open(os.path.join(tempfile.gettempdir(), "bloomery-test-ports.lock"), "a+")
    if port in _mine:
        return False
    try:
        fcntl.lockf(_lock, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
    except OSError:
        return False
    _mine.add(port)
    return _bindable(port)


def free_port():
    """A port no other suite was handed and nothing listens on now."""
    low = ephemeral_low()
    if low - LOWEST < 1000:
        # An unusual ephemeral range: fall back to the kernel's choice.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    for _ in range(1000):
        port = random.randrange(LOWEST, low)
        if reserve(port):
            return port
    raise RuntimeError("no free port between %d and %d" % (LOWEST, low))


def listening(pid, port):
    """True when the process pid itself listens on TCP port: a connection
    to the port could reach another program that holds it."""
    inodes = set()
    # The sockets of its own network namespace (a test may start it in
    # another one).
    for table in ("/proc/%d/net/tcp" % pid, "/proc/%d/net/tcp6" % pid):
        try:
            with open(table) as f:
                rows = f.readlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            # local address, state 0A (LISTEN), inode
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add("socket:[%s]" % cols[9])
    if not inodes:
        return False
    fds = "/proc/%d/fd" % pid
    try:
        names = os.listdir(fds)
    except OSError:
        return False
    for name in names:
        try:
            if os.readlink(os.path.join(fds, name)) in inodes:
                return True
        except OSError:
            pass
    return False


def bind_failed(output):
    """A server's output says its port was taken (bloomeryd, redis-server)."""
    return "Address already in use" in output
