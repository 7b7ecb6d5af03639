"""Redis Cluster with the module: three masters and three replicas on
loopback, made by redis-cli --cluster create. Filters spread over every
slot through redis-py's RedisCluster; a reshard moves slots holding
filters (a large one among them) with MIGRATE; replicas answer reads after
READONLY; a master killed with SIGKILL under load is replaced by its
replica and every add acknowledged by WAIT 1 is still there.

$BLOOMERY_CLUSTER_BIG_MB sizes the large filter (default 64 MiB). Above
512 MiB its DUMP payload is over Redis's proto-max-bulk-len and its
RESTORE over the replicas' output buffer limit: the test raises both on
every node then, and the nodes' timeout (docs/MODULE.md, "Redis Cluster").
"""
import os
import random
import signal
import subprocess
import threading
import time

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

import conftest
from clusterutil import cluster_port, masters_ok, nodes_view, owner_ports, wait_for

BIG_MB = int(os.environ.get("BLOOMERY_CLUSTER_BIG_MB", "64"))
# A node busy with one large value (its digest, its MIGRATE) answers no
# cluster pings meanwhile: a huge filter needs a longer timeout, or its
# node is failed over while it works.
NODE_TIMEOUT_MS = 2000 if BIG_MB <= 128 else 20000
FILTERS = 1000


def start_cluster(start_module):
    big = BIG_MB > 512
    extra = ["--cluster-enabled", "yes", "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
             "--repl-diskless-sync-delay", "0", "--cluster-replica-validity-factor", "0"]
    if big:
        # Uncompressed, so that the DUMP payload is as large as the filter
        # (an empty filter compresses to almost nothing).
        extra += ["--rdbcompression", "no", "--proto-max-bulk-len", "2gb",
                  "--client-output-buffer-limit", "replica 0 0 0"]
    saved = conftest.free_port
    conftest.free_port = cluster_port
    try:
        nodes = [start_module("cluster-%d" % i, *extra) for i in range(6)]
    finally:
        conftest.free_port = saved
    out = subprocess.run(
        ["redis-cli", "--cluster", "create",
         *("127.0.0.1:%d" % n.port for n in nodes), "--cluster-replicas", "1",
         "--cluster-yes"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    clients = {n.port: n.client() for n in nodes}
    for c in clients.values():
        wait_for(lambda c=c: masters_ok(c, 3), "the cluster did not form")
    # Every replica synced with its master.
    for p, c in clients.items():
        if c.info("replication")["role"] == "slave":
            wait_for(lambda c=c: c.info("replication")["master_link_status"] == "up",
                     "a replica did not sync")
    return nodes, clients


def add_acked(client, pairs):
    """BF.ADD each (key, item) on one master, then WAIT 1 on the same
    connection: the items are acknowledged only when a replica has them."""
    pipe = client.pipeline(transaction=False)
    for k, it in pairs:
        pipe.execute_command("BF.ADD", k, it)
    pipe.execute_command("WAIT", 1, 5000)
    res = pipe.execute()
    return res[-1] >= 1 and all(r in (0, 1) for r in res[:-1])


def test_cluster_failover_reshard_and_replica_reads(start_module):
    nodes, clients = start_cluster(start_module)
    by_port = {n.port: n for n in nodes}
    any_port = nodes[0].port
    rc = RedisCluster(host="127.0.0.1", port=any_port, socket_timeout=120)

    keys = ["f%d" % i for i in range(FILTERS)]
    for k in keys:
        rc.execute_command("BF.RESERVE", k, "0.01", "1000")
    owner = owner_ports(clients[any_port])
    per_master = {}
    for k in keys:
        per_master.setdefault(owner[key_slot(k.encode())], []).append(k)
    assert len(per_master) == 3 and min(len(v) for v in per_master.values()) > 250
    acked = {}
    for port, ks in per_master.items():
        for r in range(3):
            pairs = [(k, "i%d-%s" % (r, k)) for k in ks]
            assert add_acked(clients[port], pairs)
            for k, it in pairs:
                acked.setdefault(k, set()).add(it)

    # ---- reshard: the lowest slots of one master, the large filter among them
    src_port = sorted(per_master)[0]
    dst_port = sorted(per_master)[1]
    view = nodes_view(clients[any_port])
    src_slots = sorted(s for s, p in owner.items() if p == src_port)
    big = next("big-%d" % i for i in range(10 ** 6)
               if key_slot(("big-%d" % i).encode()) == src_slots[0])
    capacity = BIG_MB * 1024 * 1024 * 8 // 10  # about 10 bits an item at 1%
    rc.execute_command("BF.RESERVE", big, "0.01", capacity, "NONSCALING")
    rc.execute_command("BF.MADD", big, *("b%d" % i for i in range(1000)))
    big_digest = clients[src_port].execute_command("DEBUG", "DIGEST-VALUE", big)
    big_bytes = clients[src_port].execute_command("MEMORY", "USAGE", big)
    assert big_bytes >= BIG_MB * 1024 * 1024 * 0.9
    moved = 300
    moving = [k for k in keys if key_slot(k.encode()) in set(src_slots[:moved])]
    assert moving, "no filter in the moved slots"
    t0 = time.time()
    out = subprocess.run(
        ["redis-cli", "--cluster", "reshard", "127.0.0.1:%d" % any_port,
         "--cluster-from", view[src_port][0], "--cluster-to", view[dst_port][0],
         "--cluster-slots", str(moved), "--cluster-yes", "--cluster-timeout", "120000",
         "--cluster-pipeline", "10"],
        capture_output=True, text=True, timeout=600)
    reshard_s = time.time() - t0
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    owner = owner_ports(clients[any_port])
    assert owner[src_slots[0]] == dst_port
    assert clients[dst_port].execute_command("DEBUG", "DIGEST-VALUE", big) == big_digest
    assert clients[src_port].execute_command("CLUSTER", "COUNTKEYSINSLOT", src_slots[0]) == 0
    rc.close()
    rc = RedisCluster(host="127.0.0.1", port=any_port, socket_timeout=120)
    assert rc.execute_command("BF.MEXISTS", big, "b0", "b999") == [1, 1]
    for k in moving:
        assert clients[dst_port].execute_command(
            "BF.MEXISTS", k, *sorted(acked[k])) == [1] * len(acked[k]), k
    print("reshard of %d slots with a %d-byte filter: %.1f s" % (moved, big_bytes, reshard_s))

    # ---- reads from replicas after READONLY
    view = nodes_view(clients[any_port])
    for port, (nid, flags, master_id, _) in view.items():
        if "slave" not in flags:
            continue
        mport = next(p for p, n in view.items() if n[0] == master_id)
        mine = [k for k in keys if owner[key_slot(k.encode())] == mport][:50]
        r = redis.Redis(port=port, socket_timeout=30)
        wait_for(lambda: r.info("replication")["master_link_status"] == "up",
                 "a replica lost its master")
        r.execute_command("READONLY")
        for k in mine:
            assert r.execute_command("BF.MEXISTS", k, *sorted(acked[k])) == \
                [1] * len(acked[k]), (port, k)
        r.close()

    # ---- kill -9 a master under load
    owner = owner_ports(clients[any_port])
    per_master = {}
    for k in keys:
        per_master.setdefault(owner[key_slot(k.encode())], []).append(k)
    victim = sorted(per_master)[-1]
    victim_id = view[victim][0]
    heir = next(p for p, n in view.items() if n[2] == victim_id)
    lock = threading.Lock()
    stop = threading.Event()
    counts = {"acked": 0, "failed": 0}

    def writer(port, ks):
        c = redis.Redis(port=port, socket_timeout=10)
        n = 0
        while not stop.is_set():
            pairs = [(k, "load%d" % (n + j)) for j, k in enumerate(random.sample(ks, 20))]
            n += 20
            try:
                ok = add_acked(c, pairs)
            except redis.RedisError:
                ok = False
                if port == victim:
                    return
            with lock:
                if ok:
                    counts["acked"] += 1
                    for k, it in pairs:
                        acked[k].add(it)
                else:
                    counts["failed"] += 1

    threads = [threading.Thread(target=writer, args=(p, ks)) for p, ks in per_master.items()]
    for t in threads:
        t.start()
    wait_for(lambda: counts["acked"] >= 30, "no acknowledged writes under load")
    by_port[victim].proc.send_signal(signal.SIGKILL)
    by_port[victim].proc.wait(timeout=30)
    t0 = time.time()
    survivor = next(p for p in per_master if p != victim)
    wait_for(lambda: "master" in nodes_view(clients[survivor])[heir][1] and
             masters_ok(clients[survivor], 3), "the replica was not promoted")
    failover_s = time.time() - t0
    stop.set()
    for t in threads:
        t.join(timeout=60)
    print("failover in %.1f s; %d acknowledged batches" % (failover_s, counts["acked"]))

    # The promoted replica takes writes (no replica of its own: WAIT 0).
    h = redis.Redis(port=heir)
    assert h.execute_command("BF.ADD", per_master[victim][0], "after") == 1
    acked[per_master[victim][0]].add("after")
    h.close()

    # ---- every acknowledged item is still there
    rc.close()
    rc = RedisCluster(host="127.0.0.1", port=survivor, socket_timeout=120)
    missing = []
    for k in keys:
        got = rc.execute_command("BF.MEXISTS", k, *sorted(acked[k]))
        missing += [it for it, g in zip(sorted(acked[k]), got) if g != 1]
    assert missing == []
    rc.close()
    for p, c in clients.items():
        c.close()
    # The killed node cannot shut down cleanly: take it out of the list.
    by_port[victim].proc = subprocess.Popen(["true"])
    by_port[victim].proc.wait()
