"""A highly available deployment on loopback, as README's "Run a highly
available deployment" sets it up: one bloomeryd master, two replicas, three
of Debian's redis-sentinel. A writer adds items through redis-py's Sentinel
client and keeps those WAIT 1 acknowledged; readers read through a replica.
The master is killed (kill -9, or stopped past down-after-milliseconds)
again and again: a replica is promoted, every acknowledged item is on the
new master and on every replica once they caught up, reads kept answering
while the master was down, and the old master comes back as a replica."""
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest
import redis
from redis.sentinel import Sentinel

import conftest
from conftest import MODULE, QUICK, free_port

pytestmark = pytest.mark.skipif(bool(MODULE) or not shutil.which("redis-sentinel"),
                                reason="bloomeryd's own replication under redis-sentinel")

ROUNDS = 3 if QUICK else 10
DOWN_AFTER_MS = 1000


def wait_for(cond, what, timeout=60):
    """As conftest's, through restarts and failovers."""
    return conftest.wait_for(cond, what, timeout,
                             ignore=(redis.ConnectionError, redis.TimeoutError,
                                     redis.ResponseError))


class Cluster:
    """The deployment. A subclass changes how nodes start, what a
    sentinel's config says and how clients connect (test_tls_failover.py:
    all over TLS) through the methods below."""

    def __init__(self, start_server, nodes=3, failover_timeout_ms=10000):
        self.tmp = tempfile.mkdtemp(prefix="bloomery-ha-")
        self.start_server = start_server
        # Each server has a config file: Sentinel's reconfiguration ends
        # with CONFIG REWRITE, so a restart keeps its role.
        self.nodes = [self.start_node() for _ in range(nodes)]
        self.master = self.nodes[0]
        for n in self.nodes[1:]:
            n.client().execute_command("REPLICAOF", "127.0.0.1", self.master.port)
        self.sentinels = []
        for i in range(3):
            port = free_port()
            path = os.path.join(self.tmp, "sentinel%d.conf" % i)
            with open(path, "w") as f:
                f.write(self.sentinel_listener(port) + "dir %s\n"
                        "sentinel monitor mymaster 127.0.0.1 %d 2\n"
                        "sentinel down-after-milliseconds mymaster %d\n"
                        "sentinel failover-timeout mymaster %d\n"
                        "sentinel parallel-syncs mymaster 2\n"
                        % (self.tmp, self.master.port, DOWN_AFTER_MS, failover_timeout_ms))
            log = open(os.path.join(self.tmp, "sentinel%d.log" % i), "w")
            proc = subprocess.Popen(["redis-sentinel", path], stdout=log, stderr=subprocess.STDOUT)
            self.sentinels.append((port, proc))
        self.sentinel = Sentinel([("127.0.0.1", p) for p, _ in self.sentinels],
                                 **self.sentinel_client_kwargs())
        # Every sentinel knows the replicas and the other sentinels.
        for port, _ in self.sentinels:
            s = self.sentinel_client(port)
            wait_for(lambda: len(s.execute_command("SENTINEL", "REPLICAS", "mymaster")) ==
                     nodes - 1 and
                     len(s.execute_command("SENTINEL", "SENTINELS", "mymaster")) == 2,
                     "sentinel %d to discover the deployment" % port)

    def start_node(self):
        return self.start_server(config="")

    def restart_node(self, old):
        """The node again, on its data directory and config file."""
        again = self.start_server(config=None, datadir=old.datadir, conf_path=old.conf_path,
                                  port=old.port)
        self.nodes[self.nodes.index(old)] = again
        return again

    def sentinel_listener(self, port):
        """The lines of a sentinel's config that say where it listens."""
        return "port %d\nbind 127.0.0.1\n" % port

    def sentinel_client_kwargs(self):
        """redis-py's Sentinel(...) arguments besides the addresses."""
        return {"socket_timeout": 2}

    def sentinel_client(self, port):
        return redis.Redis(port=port, decode_responses=True)

    def master_port(self):
        return self.sentinel.discover_master("mymaster")[1]

    def node(self, port):
        return next(n for n in self.nodes if n.port == port)

    def close(self):
        for _, proc in self.sentinels:
            proc.terminate()
            proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def caught_up(cluster, replica):
    """The replica follows the master Sentinel names and applied every
    record that master had when it was first seen (writes may go on
    meanwhile). Sentinel may fail over again while this waits (a loaded
    machine can miss down-after-milliseconds): the wait then follows the
    new master."""
    seen = {}

    def done():
        master = cluster.node(cluster.master_port())
        if master is replica:
            return False
        if master.port not in seen:
            seen[master.port] = master.client().info("replication")["master_repl_offset"]
        ri = replica.client().info("replication")
        return (ri.get("role") == "slave" and ri.get("master_port") == master.port and
                ri.get("master_link_status") == "up" and
                ri["slave_repl_offset"] >= seen[master.port])
    try:
        wait_for(done, "replica %d to catch up" % replica.port)
    except AssertionError:
        # What a failure needs to be understood, where CI keeps it.
        for n in cluster.nodes:
            try:
                print(n.port, n.client().info("replication"))
            except redis.RedisError as e:
                print(n.port, e)
            print(n.output()[-3000:])
        for i in range(len(cluster.sentinels)):
            with open(os.path.join(cluster.tmp, "sentinel%d.log" % i)) as f:
                print("sentinel", i, f.read()[-3000:])
        raise


class Load:
    """A writer through Sentinel's master, readers through its replicas."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.acked = []
        self.stop = threading.Event()
        self.reads_ok, self.reads_failed = [], 0
        self.threads = [threading.Thread(target=self.write), threading.Thread(target=self.read)]
        for t in self.threads:
            t.start()

    def write(self):
        master = self.cluster.sentinel.master_for("mymaster", socket_timeout=2)
        i = 0
        while not self.stop.is_set():
            i += 1
            item = "item-%d" % i
            try:
                master.execute_command("BF.ADD", "seen", item)
                if master.execute_command("WAIT", 1, 2000) >= 1:
                    self.acked.append(item)
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                time.sleep(0.01)

    def read(self):
        replica = self.cluster.sentinel.slave_for("mymaster", socket_timeout=2)
        while not self.stop.is_set():
            try:
                replica.execute_command("BF.EXISTS", "seen", "item-1")
                self.reads_ok.append(time.time())
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                self.reads_failed += 1
                time.sleep(0.01)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def check_everywhere(cluster, items):
    """Every acknowledged item on the master and every caught-up replica."""
    while True:
        master = cluster.node(cluster.master_port())
        for n in cluster.nodes:
            if n is not master:
                caught_up(cluster, n)
        if cluster.node(cluster.master_port()) is master:
            break
    for n in cluster.nodes:
        got = n.client().execute_command("BF.MEXISTS", "seen", *items) if items else []
        missing = [it for it, g in zip(items, got) if not g]
        assert not missing, "%d acknowledged items missing on %d" % (len(missing), n.port)


@pytest.fixture
def cluster(start_server):
    c = Cluster(start_server)
    yield c
    c.close()


def fail_over(cluster, load, stop_master):
    """Take the master down with stop_master(node), wait for Sentinel to
    promote a replica and for a write to succeed through it; returns the
    old master's node."""
    old = cluster.node(cluster.master_port())
    writes_before = len(load.acked)
    wait_for(lambda: len(load.acked) > writes_before, "a write before the failure")
    down_at = time.time()
    stop_master(old)
    wait_for(lambda: cluster.master_port() != old.port, "Sentinel to promote a replica")
    n = len(load.acked)
    wait_for(lambda: len(load.acked) > n, "a write through the new master")
    # Reads answered while the master was down.
    assert any(t > down_at for t in load.reads_ok)
    return old


def test_kill_the_master_again_and_again(cluster):
    load = Load(cluster)
    try:
        for _ in range(ROUNDS):
            def kill(node):
                node.kill()
            old = fail_over(cluster, load, kill)
            # The old master restarts on its data directory and config
            # file; Sentinel makes it a replica of the new master.
            again = cluster.restart_node(old)
            caught_up(cluster, again)
            check_everywhere(cluster, list(load.acked))
    finally:
        load.finish()
    assert len(load.acked) > ROUNDS
    check_everywhere(cluster, load.acked)


def test_a_paused_master_is_replaced_and_rejoins(cluster):
    load = Load(cluster)
    try:
        paused = []

        def pause(node):
            os.kill(node.proc.pid, signal.SIGSTOP)
            paused.append(node)
        old = fail_over(cluster, load, pause)
        os.kill(old.proc.pid, signal.SIGCONT)
        # Sentinel turns the old master into a replica of the new one.
        caught_up(cluster, old)
    finally:
        load.finish()
    check_everywhere(cluster, load.acked)


def test_a_replica_killed_and_restarted_rejoins(cluster):
    load = Load(cluster)
    try:
        master = cluster.node(cluster.master_port())
        replica = next(n for n in cluster.nodes if n is not master)
        n = len(load.acked)
        wait_for(lambda: len(load.acked) > n, "writes")
        replica.kill()
        n = len(load.acked)
        wait_for(lambda: len(load.acked) > n + 10, "writes with one replica down")
        again = cluster.restart_node(replica)
        caught_up(cluster, again)
    finally:
        load.finish()
    check_everywhere(cluster, load.acked)
