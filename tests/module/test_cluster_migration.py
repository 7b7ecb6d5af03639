"""Replica migration with the module (docs/MODULE.md, "A master that lost
its replica gets one back"): three masters, one with two replicas, the
others with one each (a master that never had a replica may be counted as
orphaned too, and take the spare first). The lone replica is killed with SIGKILL; within
the cluster's own timing (cluster-node-timeout to find it failed, then
Redis's 5 s migration delay) one of the two spares becomes the orphaned
master's replica, syncs, and answers for its filters after READONLY."""
import signal
import subprocess

import redis
from redis.cluster import RedisCluster

import conftest
from clusterutil import cluster_port, masters_ok, nodes_view, wait_for

NODE_TIMEOUT_MS = 2000


def redis_cli(*args):
    out = subprocess.run(["redis-cli", *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def linked(c):
    i = c.info("replication")
    return i["role"] == "slave" and i["master_link_status"] == "up"


def test_spare_replica_migrates_to_orphaned_master(start_module, monkeypatch):
    monkeypatch.setattr(conftest, "free_port", cluster_port)
    extra = ["--cluster-enabled", "yes", "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
             "--repl-diskless-sync-delay", "0"]
    nodes = [start_module("migration-%d" % i, *extra) for i in range(7)]
    monkeypatch.undo()
    m0, m1, m2, spare_a, spare_b, lone, own = nodes
    redis_cli("--cluster", "create", *("127.0.0.1:%d" % n.port for n in (m0, m1, m2)),
              "--cluster-replicas", "0", "--cluster-yes")
    c = {n.port: n.client() for n in nodes}
    wait_for(lambda: masters_ok(c[m0.port], 3), "the cluster did not form")
    ids = {p: v[0] for p, v in nodes_view(c[m0.port]).items()}
    # m0 gets two replicas, m1 and m2 one each.
    for replica, master in ((spare_a, m0), (spare_b, m0), (lone, m1), (own, m2)):
        redis_cli("--cluster", "add-node", "127.0.0.1:%d" % replica.port,
                  "127.0.0.1:%d" % m0.port, "--cluster-slave",
                  "--cluster-master-id", ids[master.port])
    for r in (spare_a, spare_b, lone, own):
        wait_for(lambda r=r: linked(c[r.port]), "a replica did not sync")

    # Filters in m1's slots, on its replica too before it dies.
    rc = RedisCluster(host="127.0.0.1", port=m0.port)
    keys = []
    for i in range(2000):
        k = "f%d" % i
        if rc.get_node_from_key(k).port == m1.port:
            keys.append(k)
        if len(keys) == 20:
            break
    rc.close()
    # Written on m1's own connection, so that WAIT counts these writes.
    for k in keys:
        c[m1.port].execute_command("BF.RESERVE", k, "0.01", "1000")
        c[m1.port].execute_command("BF.MADD", k, "a-" + k, "b-" + k)
    assert c[m1.port].execute_command("WAIT", 1, 10000) == 1

    # Every node must know the lone replica as m1's before it dies: a node
    # that never saw m1 with a replica does not count it as orphaned.
    wait_for(lambda: all(nodes_view(c[n.port]).get(lone.port, ("", "", ""))[2] == ids[m1.port]
                         for n in (m0, m1, m2, spare_a, spare_b)),
             "every node knowing the lone replica")
    # Every node must know the lone replica as m1's before it dies: a node
    # that never saw m1 with a replica does not count it as orphaned.
    wait_for(lambda: all(nodes_view(c[n.port]).get(lone.port, ("", "", ""))[2] == ids[m1.port]
                         for n in (m0, m1, m2, spare_a, spare_b, own)),
             "every node knowing the lone replica")
    lone.proc.send_signal(signal.SIGKILL)
    lone.proc.wait(timeout=30)
    # The killed node cannot shut down cleanly: take it out of the list.
    lone.proc = subprocess.Popen(["true"])
    lone.proc.wait()

    def migrated():
        v = nodes_view(c[m1.port])
        return [p for p in (spare_a.port, spare_b.port)
                if v[p][2] == ids[m1.port] and "fail" not in v[p][1]]

    # Found failed after the node timeout, orphaned for 5 s, then moved.
    wait_for(lambda: migrated(), "no spare replica moved to the orphaned master", timeout=60)
    moved = migrated()[0]
    wait_for(lambda: linked(c[moved]), "the moved replica did not sync")
    assert c[moved].info("replication")["master_port"] == m1.port
    # m0 keeps the other one (the migration barrier, 1).
    # (m0's own view learns of the move by gossip: polled, not read once.)
    kept = [p for p in (spare_a.port, spare_b.port) if p != moved]
    wait_for(lambda: [p for p, n in nodes_view(c[m0.port]).items()
                      if p in (spare_a.port, spare_b.port) and n[2] == ids[m0.port]] == kept,
             "m0 keeping exactly the other spare")

    r = redis.Redis(port=moved, socket_timeout=30)
    r.execute_command("READONLY")
    for k in keys:
        assert r.execute_command("BF.EXISTS", k, "a-" + k) == 1, k
        assert r.execute_command("BF.EXISTS", k, "b-" + k) == 1, k
        assert r.execute_command("BF.EXISTS", k, "nope") == 0, k
    r.close()
    for x in c.values():
        x.close()
