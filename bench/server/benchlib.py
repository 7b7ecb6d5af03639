"""What the server benchmarks share: starting servers pinned to a core,
redis-benchmark runs with the server's CPU time per item, and the sections of
docs/BENCHMARKS.md they write."""
import csv
import io
import os
import re
import socket
import subprocess
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SERVER_CPU, CLIENT_CPU = "0", "1"
HZ = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server on %d did not start" % port)


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port)] + [str(a) for a in args],
                          capture_output=True, check=True).stdout.decode().strip()


def process_cpu_seconds(pid):
    """utime+stime of pid from /proc/pid/stat: clock tick resolution, but it
    keeps the time of threads that have exited (snapshot writers)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def cpu_seconds(pid):
    """CPU time of every thread of pid: the scheduler's nanosecond count from
    /proc/pid/task/*/schedstat (utime+stime in /proc/pid/stat only has clock
    tick resolution)."""
    total = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except OSError:
        return process_cpu_seconds(pid)


def user_sys_ticks(pid):
    """User and kernel CPU time of every thread of pid, in clock ticks
    (utime and stime of /proc/pid/task/*/stat)."""
    user = sys_ = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            user += int(fields[11])
            sys_ += int(fields[12])
    except OSError:
        pass
    return user, sys_


def bench(port, pid, args, requests, items_per_request, clients=50, pipeline=1,
          client_cpus=CLIENT_CPU, client_threads=1, options=()):
    """options: more redis-benchmark options (before the command), such as
    --tls --cacert ca.crt."""
    cmd = ["taskset", "-c", client_cpus, "redis-benchmark", "-p", str(port), "-n",
           str(requests), "-c", str(clients), "-P", str(pipeline), "-r", "100000000",
           "--csv"]
    if client_threads > 1:
        cmd += ["--threads", str(client_threads)]
    cmd += [str(o) for o in options]
    cmd += [str(a) for a in args]
    before = cpu_seconds(pid)
    ticks_before = user_sys_ticks(pid)
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, check=True).stdout.decode()
    wall = time.time() - t0
    cpu = cpu_seconds(pid) - before
    ticks_after = user_sys_ticks(pid)
    user_ticks = ticks_after[0] - ticks_before[0]
    sys_ticks = ticks_after[1] - ticks_before[1]
    # The scheduler's exact total, split between user space and the kernel
    # in the proportion of the tick-sampled utime and stime.
    user_share = user_ticks / (user_ticks + sys_ticks) if user_ticks + sys_ticks else 0.0
    row = list(csv.DictReader(io.StringIO(out)))[-1]
    items = requests * items_per_request
    return {
        "items_s": float(row["rps"]) * items_per_request,
        "p50": float(row["p50_latency_ms"]),
        "p99": float(row["p99_latency_ms"]),
        "cpu_us": cpu * 1e6 / items,
        "user_us": cpu * user_share * 1e6 / items,
        "sys_us": cpu * (1 - user_share) * 1e6 / items,
        "wall": wall,
    }


def start(cmd, cpus=SERVER_CPU):
    return subprocess.Popen(["taskset", "-c", cpus] + cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def loadavg():
    return "%.2f %.2f %.2f" % os.getloadavg()


def cli_version():
    out = subprocess.run(["redis-server", "--version"], capture_output=True).stdout.decode()
    m = re.search(r"v=(\S+)", out)
    return m.group(1) if m else "?"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def write_section(table, title="Server"):
    path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    section = "## %s\n\n" % title + table + "\n"
    m = re.search(r"^## %s\n.*?(?=^## |\Z)" % re.escape(title), text, flags=re.S | re.M)
    if m:
        # Hand-written analysis under "### Notes" survives a new run.
        notes = re.search(r"^### Notes\n.*", m.group(0), flags=re.S | re.M)
        if notes:
            section += "\n" + notes.group(0).rstrip("\n") + "\n"
        text = text[:m.start()] + section + ("\n" if text[m.end():] else "") + text[m.end():]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


class Resp:
    """A Redis-protocol connection for setting up a benchmark where
    redis-cli may be missing (a machine with only the built binaries)."""

    def __init__(self, port, host="127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=600)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            self.buf += data
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-"):
            text = rest.decode(errors="replace")
            if kind == b"-":
                raise RuntimeError(text)
            return text
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self._reply()


def parse_cpus(spec):
    """'0-3,8' -> [0, 1, 2, 3, 8]"""
    cpus = []
    for part in spec.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            cpus += range(int(lo), int(hi) + 1)
        elif part:
            cpus.append(int(part))
    return cpus


def cpu_siblings(cpu):
    """The hardware threads sharing cpu's core (cpu itself included)."""
    for name in ("core_cpus_list", "thread_siblings_list"):
        try:
            with open("/sys/devices/system/cpu/cpu%d/topology/%s" % (cpu, name)) as f:
                return set(parse_cpus(f.read().strip()))
        except OSError:
            continue
    return {cpu}


def raise_nofile():
    """preexec_fn: a process that holds many connections gets the hard
    limit of open files."""
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
