"""Fixtures for the module suite: Debian's redis-server with bloomery.so,
and bloomeryd, each started by the suite on loopback.

$BLOOMERY_MODULE names the module (default build/bloomery.so),
$BLOOMERYD the server (default build/bloomeryd), $REDIS_SERVER Redis
(default /usr/bin/redis-server). For a module built with ASan and UBSan,
$REDIS_PRELOAD names the sanitizer runtime to preload into Redis (which is
not built with it); a report aborts Redis, which fails the test.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import redis

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from freeport import bind_failed, free_port, listening  # noqa: E402,F401

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
MODULE = os.path.abspath(os.environ.get("BLOOMERY_MODULE") or
                         os.path.join(ROOT, "build", "bloomery.so"))
BLOOMERYD = os.environ.get("BLOOMERYD") or os.path.join(ROOT, "build", "bloomeryd")
REDIS_SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")
REDIS_PRELOAD = os.environ.get("REDIS_PRELOAD")


class Process:
    """A server on a free loopback port, ready when it accepts connections."""

    def __init__(self, cmd_for_port, workdir, env=None):
        self.dir = workdir
        # A port another program took before the bind: again on another.
        for attempt in range(5):
            self.port = free_port()
            self.log = open(os.path.join(workdir, "log-%d" % self.port), "w+")
            self.proc = subprocess.Popen(cmd_for_port(self.port), stdout=self.log,
                                         stderr=subprocess.STDOUT, cwd=workdir,
                                         env=None if env is None else {**os.environ, **env})
            deadline = time.time() + 20
            while True:
                if listening(self.proc.pid, self.port):
                    try:
                        with socket.create_connection(("127.0.0.1", self.port),
                                                      timeout=1) as s:
                            s.sendall(b"*1\r\n$4\r\nPING\r\n")
                            if s.recv(64).startswith(b"+PONG"):
                                return
                    except OSError:
                        pass
                if self.proc.poll() is not None or time.time() > deadline:
                    break
                time.sleep(0.05)
            if attempt == 4 or self.proc.poll() is None or not bind_failed(self.output()):
                if self.proc.poll() is None:
                    self.proc.kill()
                    self.proc.wait()
                raise RuntimeError("server did not start:\n" + self.output())

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def client(self, **kw):
        kw.setdefault("socket_timeout", 60)
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def raw(self):
        return RawClient(self.port)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
        out = self.output()
        assert "ERROR: AddressSanitizer" not in out, out
        assert "runtime error:" not in out, out
        assert self.proc.returncode == 0, out


def redis_with_module(workdir, *extra, module_args=()):
    """redis-server with the module: no save points, DEBUG allowed."""
    return Process(lambda port: [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1",
                                 "--dir", workdir, "--save", "", "--enable-debug-command", "yes",
                                 "--loadmodule", MODULE, *module_args, *extra], workdir,
                   env=None if not REDIS_PRELOAD else {
                       "LD_PRELOAD": REDIS_PRELOAD,
                       "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1"})


class RawClient:
    """Replies as the bytes the server sent, one whole reply at a time."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def close(self):
        self.sock.close()

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def cmd(self, *args):
        self.sock.sendall(self.encode(*args))
        return self.read()

    def _need(self, n):
        while len(self.buf) < n:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("connection closed")
            self.buf += data

    def _skip(self, at):
        """The offset just past the reply starting at `at`."""
        while True:
            end = self.buf.find(b"\r\n", at)
            if end >= 0:
                break
            self._need(len(self.buf) + 1)
        t, rest = self.buf[at:at + 1], self.buf[at + 1:end]
        at = end + 2
        if t in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return at
            self._need(at + n + 2)
            return at + n + 2
        if t in (b"*", b"~", b">", b"%"):
            n = int(rest)
            for _ in range(max(n, 0) * (2 if t == b"%" else 1)):
                at = self._skip(at)
        return at

    def read(self):
        end = self._skip(0)
        out, self.buf = self.buf[:end], self.buf[end:]
        return out


@pytest.fixture(scope="session")
def workdir():
    d = tempfile.mkdtemp(prefix="bloomery-module-test-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def module_server(workdir):
    d = os.path.join(workdir, "shared")
    os.makedirs(d)
    s = redis_with_module(d)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def bloomeryd(workdir):
    d = os.path.join(workdir, "bloomeryd")
    os.makedirs(d)
    s = Process(lambda port: [BLOOMERYD, "--port", str(port), "--dir", os.path.join(d, "data"),
                              "--threads", "1"], d)
    yield s
    s.stop()


@pytest.fixture
def m(module_server):
    c = module_server.client()
    c.flushall()
    yield c
    c.close()


@pytest.fixture
def start_module(workdir):
    made = []

    def start(subdir, *extra, module_args=()):
        d = os.path.join(workdir, subdir)
        os.makedirs(d, exist_ok=True)
        s = redis_with_module(d, *extra, module_args=module_args)
        made.append(s)
        return s

    yield start
    for s in made:
        s.stop()
