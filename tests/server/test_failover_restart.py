"""Restarts under three of Debian's redis-sentinel, writers running: a
replica killed (kill -9) and restarted on its data directory and config
file comes back as a replica, refusing every write from its first
connection; the master is killed and Sentinel promotes that replica; the
old master restarts on its config file and Sentinel makes it a replica
(REPLICAOF, then CONFIG REWRITE), which a second kill and restart keep.

Writers add items through redis-py's Sentinel client, so they write only to
the node Sentinel names master (an old master restarting as a master
before Sentinel converts it gets no writes: clients ask Sentinel), and
count an item only once WAIT reports a replica has it. Every such item must
be on the final master and its replica: a restarted replica that took a
write of its own and then lost it to its resync, or a resync that dropped
acknowledged records, fails the check."""
import threading

import pytest
import redis

from conftest import RawClient, RespError
import test_failover
from test_failover import Cluster, caught_up, check_everywhere, wait_for

# bloomeryd itself (not the module) and Debian's redis-sentinel, as there.
pytestmark = test_failover.pytestmark


class Writers:
    """BF.ADD and BF.MADD batches through Sentinel's master, each followed
    by WAIT 1: a batch counts as acknowledged when a replica applied it."""

    def __init__(self, cluster, n=2):
        self.cluster = cluster
        self.acked = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.write, args=(i,), daemon=True)
                        for i in range(n)]
        for t in self.threads:
            t.start()

    def count(self):
        with self.lock:
            return len(self.acked)

    def write(self, w):
        master = self.cluster.sentinel.master_for("mymaster", socket_timeout=2)
        i = 0
        while not self.stop.is_set():
            i += 1
            items = ["w%d-%d-%d" % (w, i, k) for k in range(1 if i % 2 else 5)]
            try:
                if len(items) == 1:
                    master.execute_command("BF.ADD", "seen", items[0])
                else:
                    master.execute_command("BF.MADD", "seen", *items)
                if master.execute_command("WAIT", 1, 1000) >= 1:
                    with self.lock:
                        self.acked.extend(items)
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                self.stop.wait(0.01)

    def more(self, what):
        """Wait for batches acknowledged after this call."""
        n = self.count()
        wait_for(lambda: self.count() > n, what)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()
        return list(self.acked)


class WriteProbe:
    """Writes sent straight to a node's port, from before it starts until
    stop(): a connection's first request is ROLE, then BF.ADD and BF.MADD
    of items no one else writes. For a replica every write must be refused
    with READONLY and every first reply must be a replica's."""

    def __init__(self, port):
        self.port = port
        self.roles, self.replies = [], []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        i = 0
        while not self.done.is_set():
            try:
                c = RawClient(self.port)
            except OSError:
                self.done.wait(0.005)  # not listening yet: poll again
                continue
            try:
                self.roles.append(c.cmd("ROLE")[0])
                while not self.done.is_set():
                    i += 1
                    if i % 2:
                        self.replies.append(c.cmd("BF.ADD", "probe", "p%d" % i))
                    else:
                        self.replies.append(c.cmd("BF.MADD", "probe", "p%d" % i, "q%d" % i))
                    self.done.wait(0.005)
            except OSError:
                pass
            finally:
                c.close()

    def stop(self):
        self.done.set()
        self.thread.join()

    def check_refused(self):
        assert self.roles and self.replies, "the probe reached no server"
        assert set(self.roles) == {b"slave"}, self.roles
        taken = [r for r in self.replies
                 if not (isinstance(r, RespError) and
                         str(r) == "READONLY You can't write against a read only replica.")]
        assert not taken, "writes answered %r" % taken[:5]


def restart(cluster, node):
    """kill -9, then the same data directory, config file and port; a probe
    writes to the port from before the start. Returns the new node and the
    probe (still running)."""
    node.kill()
    probe = WriteProbe(node.port)
    again = cluster.start_server(config=None, datadir=node.datadir, conf_path=node.conf_path,
                                 port=node.port)
    cluster.nodes[cluster.nodes.index(node)] = again
    # The probe's connections are made as soon as the port accepts.
    wait_for(lambda: probe.replies, "the probe's first write answered")
    return again, probe


def config_replicaof(node):
    with open(node.conf_path) as f:
        return [ln.strip() for ln in f if ln.startswith("replicaof")]


@pytest.fixture
def pair(start_server):
    """A master and one replica, each with a config file, under three
    sentinels (quorum 2, down after 1 s; a stalled failover is retried
    after 2 x 5 s)."""
    c = Cluster(start_server, nodes=2, failover_timeout_ms=5000)
    yield c
    c.close()


def test_restarts_keep_replicas_replicas_under_sentinel(pair):
    cluster = pair
    master, replica = cluster.nodes
    r = replica.client()
    assert r.config_get("replicaof") == {"replicaof": "127.0.0.1 %d" % master.port}
    # What an operator (or Sentinel's reconfiguration) does after
    # REPLICAOF: the role goes into the config file.
    assert r.execute_command("CONFIG", "REWRITE") == b"OK"
    r.close()
    assert config_replicaof(replica) == ["replicaof 127.0.0.1 %d" % master.port]
    writers, probes = Writers(cluster), []
    try:
        writers.more("writes acknowledged by the replica")

        # The replica, killed and restarted: a replica from its first reply.
        replica, probe = restart(cluster, replica)
        probes.append(probe)
        caught_up(cluster, replica)
        # Judged up to here: later, a loaded machine's Sentinel may promote
        # this replica (it missed down-after-milliseconds), and a master
        # takes writes.
        probe.stop()
        probe.check_refused()
        writers.more("writes acknowledged by the restarted replica")

        # The master, killed: Sentinel promotes the replica.
        master.kill()
        wait_for(lambda: cluster.master_port() == replica.port, "Sentinel to promote the replica")
        assert replica.client().execute_command("ROLE")[0] == b"master"

        # The old master restarts as the master its config file names;
        # Sentinel makes it a replica and rewrites its config file.
        old = cluster.start_server(config=None, datadir=master.datadir,
                                   conf_path=master.conf_path, port=master.port)
        cluster.nodes[cluster.nodes.index(master)] = old
        caught_up(cluster, old)
        wait_for(lambda: config_replicaof(old) == ["replicaof 127.0.0.1 %d" % replica.port],
                 "Sentinel's CONFIG REWRITE of the old master's role")
        writers.more("writes acknowledged by the old master, now a replica")

        # Killed and restarted again: the role Sentinel wrote holds.
        old, probe = restart(cluster, old)
        probes.append(probe)
        caught_up(cluster, old)
        probe.stop()
        probe.check_refused()
        writers.more("writes acknowledged by the restarted old master")
    finally:
        for p in probes:
            p.stop()
        acked = writers.finish()
    check_everywhere(cluster, acked)
    for n in cluster.nodes:
        assert n.client().execute_command("EXISTS", "probe") == 0
