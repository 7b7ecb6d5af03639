"""Helpers for the `bloomery console` suites: the servers of a deployment
(bloomeryd from the build, Debian's redis-server with bloomery.so and
redis-sentinel), the console itself ($BLOOMERY_CLI, default build/bloomery)
and HTTP requests to it. Every process is started on a free port
(tests/freeport.py) and stopped by the `procs` fixture (conftest.py).
BLOOMERY_QUICK=1 (the sanitizer run) shrinks inputs."""
import base64
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

import redis

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from freeport import bind_failed, free_port, listening  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CLI = os.environ.get("BLOOMERY_CLI") or os.path.join(ROOT, "build", "bloomery")
BLOOMERYD = os.environ.get("BLOOMERYD") or os.path.join(ROOT, "build", "bloomeryd")
MODULE = os.environ.get("BLOOMERY_MODULE") or os.path.join(ROOT, "build", "bloomery.so")
REDIS_SERVER = "/usr/bin/redis-server"
REDIS_SENTINEL = "/usr/bin/redis-sentinel"
REDIS_PRELOAD = os.environ.get("REDIS_PRELOAD")
QUICK = os.environ.get("BLOOMERY_QUICK") == "1"


def wait_for(cond, what, timeout=60):
    """Polls cond until it is true; its exceptions count as not yet."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            v = cond()
            if v:
                return v
        except (OSError, redis.RedisError, ValueError, KeyError) as e:
            last = e
        time.sleep(0.1)
    raise AssertionError("%s not reached in %ds (last error: %r)" % (what, timeout, last))


class Proc:
    """A server process on a free port; argv(port) gives its command."""

    def __init__(self, argv, name, env=None, listen=True):
        self.dir = tempfile.mkdtemp(prefix="bloomery-console-test-")
        self.name = name
        for attempt in range(5):
            self.port = free_port()
            self.logpath = os.path.join(self.dir, "log")
            self.log = open(self.logpath, "w+")
            self.proc = subprocess.Popen(argv(self.port, self.dir), stdout=self.log,
                                         stderr=subprocess.STDOUT, cwd=self.dir,
                                         env=None if env is None else {**os.environ, **env})
            if not listen:
                return
            deadline = time.time() + 30
            while not listening(self.proc.pid, self.port):
                if self.proc.poll() is not None or time.time() > deadline:
                    break
                time.sleep(0.02)
            else:
                return
            out = self.output()
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if attempt == 4 or not bind_failed(out):
                raise RuntimeError("%s did not start:\n%s" % (name, out))

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def output(self):
        self.log.flush()
        with open(self.logpath) as f:
            return f.read()

    def client(self, **kw):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10, **kw)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.proc.returncode


def bloomeryd(*args):
    return lambda port, d: [BLOOMERYD, "--port", str(port), "--dir", os.path.join(d, "data"),
                            "--threads", "2"] + [str(a) for a in args]


def redis_module(*args):
    return lambda port, d: [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1",
                            "--dir", d, "--save", "", "--loadmodule", os.path.abspath(MODULE)] + \
        [str(a) for a in args]


def module_env():
    if not REDIS_PRELOAD:
        return None
    return {"LD_PRELOAD": REDIS_PRELOAD, "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1"}


def sentinel_group(procs, name="mymaster"):
    """A bloomeryd master, two replicas and three Sentinels watching them,
    returned once every Sentinel knows both replicas and the others."""
    master = procs.start(bloomeryd(), "master")
    replicas = [procs.start(bloomeryd("--replicaof", "127.0.0.1 %d" % master.port), "replica")
                for _ in range(2)]
    sentinels = [procs.start(sentinel(master.port, name), "sentinel") for _ in range(3)]
    for s in sentinels:
        cl = s.client(decode_responses=True)
        wait_for(lambda: len(cl.execute_command("SENTINEL", "REPLICAS", name)) == 2 and
                 len(cl.execute_command("SENTINEL", "SENTINELS", name)) == 2,
                 "sentinel %d to discover the deployment" % s.port)
    return master, replicas, sentinels


def cluster_node():
    """redis_module's argv for a Redis Cluster node (its bus on a free port)."""
    return redis_module("--cluster-enabled", "yes", "--cluster-port", free_port(),
                        "--cluster-node-timeout", "2000", "--cluster-config-file", "nodes.conf")


def redis_cluster(procs, masters=3, replicas=0):
    """masters Redis servers with bloomery.so in a cluster, each with
    replicas replicas, once every node says cluster_state:ok and knows the
    others."""
    nodes = [procs.start(cluster_node(), "cluster node", env=module_env())
             for _ in range(masters * (1 + replicas))]
    out = subprocess.run(["redis-cli", "--cluster", "create"] + [n.addr for n in nodes] +
                         ["--cluster-replicas", str(replicas), "--cluster-yes"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    for n in nodes:
        wait_for(lambda: n.client().cluster("info")["cluster_state"] == "ok" and
                 len(n.client().execute_command("CLUSTER", "NODES").splitlines()) == len(nodes),
                 "cluster_state ok")
    return nodes


def slot_ranges(node):
    """[(first slot, last slot, "host:port" of their master)] as node's
    CLUSTER SLOTS says."""
    out = []
    for lo, hi, master, *_ in node.client().execute_command("CLUSTER", "SLOTS"):
        host = master[0].decode() if isinstance(master[0], bytes) else master[0]
        out.append((lo, hi, "%s:%d" % (host, master[1])))
    return out


def owner_of(nodes, key):
    """(slot, "host:port" of its master) for key, by CLUSTER KEYSLOT and
    CLUSTER SLOTS."""
    slot = nodes[0].client().execute_command("CLUSTER", "KEYSLOT", key)
    return slot, [a for lo, hi, a in slot_ranges(nodes[0]) if lo <= slot <= hi][0]


def sentinel(master_port, name="mymaster", quorum=2):
    def argv(port, d):
        conf = os.path.join(d, "sentinel.conf")
        with open(conf, "w") as f:
            f.write("port %d\nbind 127.0.0.1\ndir %s\n"
                    "sentinel monitor %s 127.0.0.1 %d %d\n"
                    "sentinel down-after-milliseconds %s 1000\n"
                    "sentinel failover-timeout %s 10000\n"
                    % (port, d, name, master_port, quorum, name, name))
        return [REDIS_SENTINEL, conf]
    return argv


class Console:
    """`bloomery console ARGS` on a free port; fails when it exits."""

    def __init__(self, args, bind="127.0.0.1", wait=True):
        self.bind = bind
        self.p = Proc(lambda port, d: [CLI, "console", "--http-port", str(port),
                                       "--http-bind", bind] + [str(a) for a in args],
                      "bloomery console", listen=wait)
        self.port = self.p.port
        self.auth = None

    def request(self, method, path, fields=None, headers=None, auth=None):
        """(status, parsed JSON or text)."""
        h = {"Host": "127.0.0.1:%d" % self.port}
        a = auth if auth is not None else self.auth
        if a:
            h["Authorization"] = "Basic " + base64.b64encode(("%s:%s" % a).encode()).decode()
        body = None
        if method == "POST":
            h["Content-Type"] = "application/x-www-form-urlencoded"
            h["X-Bloomery-Console"] = "1"
            body = urllib.parse.urlencode(fields or {})
        elif fields:
            path += "?" + urllib.parse.urlencode(fields)
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
        finally:
            c.close()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data.decode(errors="replace")

    def get(self, path, **fields):
        status, body = self.request("GET", path, fields)
        assert status == 200, (path, status, body)
        return body

    def post(self, path, **fields):
        return self.request("POST", path, fields)

    def stop(self):
        rc = self.p.stop()
        return rc
