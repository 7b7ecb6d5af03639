"""The Redis Cluster recipe of docs/MODULE.md, run as written: the shell
block between its recipe:cluster markers starts six nodes and creates the
cluster, the python block writes through redis-py's RedisCluster with
WAIT 1. Only the variables the recipe defines at its top (PORT_BASE, DIR,
MODULE) are set, through the environment, so that it runs beside the
other suites. Then a master holding a filter is killed with SIGKILL: its
replica takes over within the recipe's cluster-node-timeout and holds
every add WAIT acknowledged."""
import os
import re
import signal
import subprocess
import time

import redis
from redis.cluster import RedisCluster

import conftest
from clusterutil import cluster_ports, masters_ok, nodes_view, wait_for

DOC = os.path.join(conftest.ROOT, "docs", "MODULE.md")


def recipe(name):
    """The fenced block between <!-- recipe:NAME --> and its end marker."""
    with open(DOC) as f:
        doc = f.read()
    m = re.search(r"<!-- recipe:%s -->\n```\w*\n(.*?)```\n<!-- /recipe:%s -->" %
                  (re.escape(name), re.escape(name)), doc, re.S)
    assert m, "no recipe:%s in docs/MODULE.md" % name
    return m.group(1)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cluster_recipe_as_written(workdir, monkeypatch, capsys):
    base = cluster_ports(6)
    d = os.path.join(workdir, "recipe")
    env = {**os.environ, "PORT_BASE": str(base), "DIR": d, "MODULE": conftest.MODULE}
    if conftest.REDIS_PRELOAD:
        env.update(LD_PRELOAD=conftest.REDIS_PRELOAD,
                   ASAN_OPTIONS="detect_leaks=0:abort_on_error=1")
    ports = list(range(base, base + 6))
    pids = {}
    try:
        out = subprocess.run(["sh", "-e", "-c", recipe("cluster")], env=env,
                             capture_output=True, text=True, timeout=180)
        for p in ports:
            try:
                with open(os.path.join(d, str(p), "redis.pid")) as f:
                    pids[p] = int(f.read())
            except FileNotFoundError:
                pass
        assert out.returncode == 0, out.stdout + out.stderr
        assert "[OK] All 16384 slots covered" in out.stdout, out.stdout

        clients = {p: redis.Redis(port=p, socket_timeout=30) for p in ports}
        for c in clients.values():
            wait_for(lambda c=c: masters_ok(c, 3), "the cluster did not form")

        # The python block, as written, against the cluster.
        monkeypatch.setenv("PORT_BASE", str(base))
        ns = {}
        exec(compile(recipe("cluster-python"), DOC, "exec"), ns)
        assert "[1, 0]" in capsys.readouterr().out
        rc, add_acked = ns["rc"], ns["add_acked"]

        # Every replica synced: from now on every add must be acknowledged.
        view = nodes_view(clients[base])
        for p, (nid, flags, master, _) in view.items():
            if "slave" in flags:
                wait_for(lambda p=p: clients[p].info("replication")["master_link_status"]
                         == "up", "a replica did not sync")
        master = rc.get_node_from_key("signups").port
        heir = next(p for p, n in view.items() if n[2] == view[master][0])
        # Only what WAIT acknowledged counts (a busy machine may take longer
        # than the recipe's 1 s to answer it).
        acked, sent = [], [0]

        def add_batch():
            items = ["user%d" % j for j in range(sent[0], sent[0] + 10)]
            sent[0] += 10
            if add_acked("signups", *items):
                acked.extend(items)
            return len(acked) >= 300

        wait_for(add_batch, "adds were not acknowledged")
        rc.close()

        # kill -9 the master holding the filter; its replica takes over.
        os.kill(pids[master], signal.SIGKILL)
        t0 = time.time()
        wait_for(lambda: not pid_alive(pids[master]), "the master did not die")
        survivor = next(p for p in ports if p not in (master, heir))
        wait_for(lambda: "master" in nodes_view(clients[survivor])[heir][1] and
                 masters_ok(clients[survivor], 3), "the replica was not promoted", timeout=60)
        with capsys.disabled():
            print("\nfailover with the recipe's settings: %.1f s from SIGKILL to "
                  "cluster_state:ok" % (time.time() - t0))
        assert clients[heir].execute_command("BF.MEXISTS", "signups", *acked) == [1] * len(acked)
        rc = RedisCluster(host="127.0.0.1", port=survivor)
        assert rc.get_node_from_key("signups").port == heir
        assert rc.execute_command("BF.MEXISTS", "signups", *acked) == [1] * len(acked)
        rc.close()
        for c in clients.values():
            c.close()
    finally:
        for p in ports:
            if p in pids:
                if pid_alive(pids[p]):
                    os.kill(pids[p], signal.SIGTERM)
                continue
            # No pid file of its own (a recipe gone wrong): by its port.
            try:
                redis.Redis(port=p, socket_timeout=5).shutdown(nosave=True)
            except redis.RedisError:
                pass
        for p, pid in pids.items():
            wait_for(lambda pid=pid: not pid_alive(pid), "a node did not stop")
            with open(os.path.join(d, str(p), "redis.log")) as f:
                log = f.read()
            assert "ERROR: AddressSanitizer" not in log, log
            assert "runtime error:" not in log, log
