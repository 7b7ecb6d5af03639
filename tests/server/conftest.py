"""Fixtures for the bloomeryd suites.

Each suite runs against a server this file starts itself: $BLOOMERYD on a
free port with a temporary --dir. The shared server lives for the whole
session; tests that need special settings start their own with
``start_server(...)``. At teardown every server is stopped with SIGTERM and
must exit 0 with no sanitizer report, so a leak, undefined behaviour or a
data race caught by an ASan/UBSan or TSan build fails the suite.

BLOOMERY_QUICK=1 (set for the sanitizer run) shrinks the large loops.

BLOOMERY_MODULE=/path/bloomery.so runs the suites against the other host:
Debian's redis-server ($REDIS_SERVER) with the module loaded, without
persistence. Options naming our settings become module arguments;
--threads has no meaning there and is dropped. CONFIG GET and SET of our
settings go to the module's configs (bloomery.<name>).
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

BLOOMERYD = os.environ.get("BLOOMERYD") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "bloomeryd")
QUICK = os.environ.get("BLOOMERY_QUICK") == "1"
MODULE = os.environ.get("BLOOMERY_MODULE")
REDIS_SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")


# The settings the module registers as configs, as CONFIG names them there.
MODULE_CONFIGS = {n: "bloomery." + n for n in (
    "bf-error-rate", "bf-initial-size", "bf-expansion-factor", "bf-default-layout",
    "cf-max-expansions", "debug-clock-offset-ms")}


def module_config_args(args):
    """CONFIG GET/SET arguments with our settings' names as the module has
    them (BLOOMERY_MODULE); other commands unchanged."""
    if not MODULE or not args:
        return args
    # redis-py sends "CONFIG SET" as one argument (and keeps it so: its
    # reply parser is chosen by it).
    first = str(args[0]).split()
    head = 1 if len(first) == 2 else 2
    words = first if len(first) == 2 else [str(a) for a in args[:2]]
    if len(args) <= head or len(words) < 2 or words[0].upper() != "CONFIG":
        return args
    sub = words[1].upper()
    if sub not in ("GET", "SET"):
        return args
    names = range(head, len(args), 2) if sub == "SET" else range(head, len(args))
    out = list(args)
    for i in names:
        name = out[i].decode() if isinstance(out[i], bytes) else str(out[i])
        out[i] = MODULE_CONFIGS.get(name.lower(), out[i])
    return tuple(out)


class Client(redis.Redis):
    """redis.Redis that names our settings as the host does."""

    def execute_command(self, *args, **options):
        return super().execute_command(*module_config_args(args), **options)

    def config_get(self, pattern="*", *args, **kw):
        got = super().config_get(pattern, *args, **kw)
        back = {v: k for k, v in MODULE_CONFIGS.items()}
        return {back.get(k, k): v for k, v in got.items()}


def wait_for(cond, what="the condition", timeout=30, ignore=()):
    """Poll cond until it returns something true, which is returned; fail
    after timeout seconds. Exceptions of the types in ignore count as not
    yet (a server restarting, a connection refused)."""
    deadline = time.time() + timeout
    while True:
        try:
            v = cond()
        except ignore:
            v = None
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


def snapshot_done(c, seq):
    """A snapshot after seq finished, and none runs."""
    p = c.info("persistence")
    return p["bloomery_snapshot_seq"] > seq and p["rdb_bgsave_in_progress"] == 0


def wait_log_durable(c):
    """Until every log record appended so far is fsynced (appendfsync
    everysec syncs about once a second)."""
    appended = int(c.info("persistence")["bloomery_wal_appended_lsn"])
    wait_for(lambda: int(c.info("persistence")["bloomery_wal_durable_lsn"]) >= appended,
             "the log fsynced up to LSN %d" % appended)


def scandump(c, family, key):
    """Every (iterator, data) chunk of family.SCANDUMP of key."""
    chunks, it = [], 0
    while True:
        it, data = c.execute_command(family + ".SCANDUMP", key, it)
        if it == 0:
            return chunks
        chunks.append((it, data))


class Server:
    # Extra redis.Redis arguments client() connects with (a TLS-only
    # server sets ssl=True and its certificates here).
    client_kw = {}

    def __init__(self, *args, threads=2, config=None, datadir=None, env=None, conf_path=None,
                 port=None, preexec_fn=None):
        """datadir: reuse a data directory (a restart); by default a new
        one under the server's temporary directory. env: variables added to
        the server's environment (the fault shim, powercut.py). config: the
        text of a config file to start with; conf_path: an existing one
        (a restart on a file CONFIG REWRITE changed), port: a given port.
        preexec_fn: run in the child before the server starts (limits)."""
        self.dir = tempfile.mkdtemp(prefix="bloomeryd-test-")
        self.datadir = datadir or os.path.join(self.dir, "data")
        self.killed = False
        self.conf_path = conf_path
        if config is not None and not MODULE:
            self.conf_path = os.path.join(self.dir, "test.conf")
            with open(self.conf_path, "w") as f:
                f.write(config)
        self.log = open(os.path.join(self.dir, "log"), "w+")
        # A port another program took between free_port() and the bind:
        # again on another one.
        for attempt in range(5):
            self.port = port or free_port()
            if MODULE:
                cmd = self.module_command(config, args)
            else:
                cmd = [BLOOMERYD] + ([self.conf_path] if self.conf_path else [])
                cmd += ["--port", str(self.port), "--dir", self.datadir,
                        "--threads", str(threads)]
                cmd += [str(a) for a in args]
            self.log.seek(0)
            self.log.truncate()
            self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                         env=None if env is None else {**os.environ, **env},
                                         preexec_fn=preexec_fn)
            deadline = time.time() + 60  # a sanitizer build on a loaded machine
            while not listening(self.proc.pid, self.port):
                if self.proc.poll() is not None or time.time() > deadline:
                    break
                time.sleep(0.02)
            else:
                return
            if port or attempt == 4 or self.proc.poll() is None or \
                    not bind_failed(self.output()):
                if self.proc.poll() is None:
                    self.proc.kill()
                    self.proc.wait()
                raise RuntimeError("bloomeryd did not start:\n" + self.output())

    def module_command(self, config, args):
        """redis-server with the module, for BLOOMERY_MODULE."""
        os.makedirs(self.datadir, exist_ok=True)
        redis_args, module_args = [], []
        args = [str(a) for a in args]
        i = 0
        while i < len(args):
            name = args[i]
            value = args[i + 1] if i + 1 < len(args) else ""
            if name[2:] in MODULE_CONFIGS:
                module_args += [name[2:], value]
            elif name != "--threads":
                redis_args += [name, value]
            i += 2
        if config is not None:
            raise pytest.skip("a bloomeryd config file has no meaning for the module")
        return [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.datadir, "--save", "", "--enable-debug-command", "yes",
                "--loadmodule", MODULE] + module_args + redis_args

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def client(self, **kw):
        kw = {**self.client_kw, **kw}
        kw.setdefault("socket_timeout", 60)
        return Client(host="127.0.0.1", port=self.port, **kw)

    def raw(self):
        return RawClient(self.port)

    def kill(self):
        """SIGKILL: a crash, as far as the data directory can tell."""
        self.killed = True
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.killed:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("bloomeryd did not stop on SIGTERM")
        out = self.output()
        assert "ERROR: AddressSanitizer" not in out, out
        assert "ERROR: LeakSanitizer" not in out, out
        assert "runtime error:" not in out, out
        assert "WARNING: ThreadSanitizer" not in out, out
        assert self.proc.returncode == 0, "exit status %s\n%s" % (self.proc.returncode, out)


class RespError(Exception):
    pass


class RawClient:
    """A minimal RESP2/RESP3 client on a plain socket: redis-py 4.3 has no
    RESP3, and protocol tests need to send bytes no library would."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, str):
                a = a.encode()
            elif isinstance(a, int):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def cmd(self, *args):
        self.send(self.encode(*module_config_args(args)))
        return self.read()

    def _fill(self):
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("connection closed")
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RespError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if t in (b"*", b"~", b">"):
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        if t == b"%":
            n = int(rest)
            out = {}
            for _ in range(n):
                k = self.read()
                out[k] = self.read()
            return out
        if t == b"_":
            return None
        if t == b"#":
            return rest == b"t"
        if t == b",":
            return float(rest)
        if t == b"=":
            data = self._exact(int(rest))
            return ("verbatim", data[:3].decode(), data[4:])
        raise AssertionError("unexpected reply type %r" % line)

    def closed(self, timeout=10):
        """True when the server has closed the connection."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(1 << 16)
                if not data:
                    return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False


_started = []


def remove_dirs(servers):
    """The servers' temporary directories, once every one stopped cleanly
    (a failure keeps them for a look); a restarted server may live in an
    earlier one's data directory, hence only at the end."""
    for s in servers:
        shutil.rmtree(s.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server():
    s = Server()
    yield s
    s.stop()
    remove_dirs([s])


@pytest.fixture
def start_server():
    made = []

    def start(*args, **kw):
        s = Server(*args, **kw)
        made.append(s)
        return s

    yield start
    for s in made:
        s.stop()
    remove_dirs(made)


@pytest.fixture
def r(server):
    c = server.client()
    c.flushall()
    yield c
    c.close()


@pytest.fixture
def raw(server, r):
    c = server.raw()
    yield c
    c.close()


def acl_categories(flags, module_category):
    """The ACL categories COMMAND INFO lists for a module-family command, as
    Redis derives them: @write or @read from its flags, @fast or @slow, and
    the family's own (Redis 8's @bloom, @cms, ...)."""
    flags = {f.decode() if isinstance(f, bytes) else f for f in flags}
    cats = {module_category, "@fast" if "fast" in flags else "@slow"}
    if "write" in flags:
        cats.add("@write")
    if "readonly" in flags:
        cats.add("@read")
    return sorted(cats)
