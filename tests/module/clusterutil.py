"""What the Redis Cluster suites share: ports whose cluster bus port is
free too, waiting for a condition, and the cluster as CLUSTER NODES and
CLUSTER SLOTS show it."""
import random
import time

import redis

import freeport


def cluster_ports(count=1):
    """The first of count consecutive free ports whose cluster bus ports
    (port + 10000) are free too, all held from the other suites
    (freeport)."""
    while True:
        base = random.randrange(freeport.LOWEST, freeport.ephemeral_low() - 10000 - count)
        if all(freeport.reserve(p) and freeport.reserve(p + 10000)
               for p in range(base, base + count)):
            return base


def cluster_port():
    return cluster_ports(1)


def wait_for(cond, what, timeout=60):
    deadline = time.time() + timeout
    while True:
        try:
            if cond():
                return
        except redis.RedisError:
            pass
        assert time.time() < deadline, what
        time.sleep(0.05)


def nodes_view(c):
    """CLUSTER NODES as {port: (id, flags, master id, slot ranges)}."""
    out = {}
    raw = c.execute_command("CLUSTER", "NODES")
    raw = raw.decode() if isinstance(raw, bytes) else raw
    for line in raw.splitlines():
        f = line.split()
        port = int(f[1].split("@")[0].split(":")[1])
        out[port] = (f[0], f[2].split(","), f[3], f[8:])
    return out


def masters_ok(c, count):
    """cluster_state:ok with count masters serving slots, none failed."""
    v = nodes_view(c)
    live = [p for p, n in v.items() if "master" in n[1] and "fail" not in n[1] and n[3]]
    info = c.execute_command("CLUSTER", "INFO")
    info = info.decode() if isinstance(info, bytes) else info
    return "cluster_state:ok" in info and len(live) == count


def owner_ports(c):
    """slot -> port of its master."""
    owner = {}
    for rng in c.execute_command("CLUSTER", "SLOTS"):
        for s in range(rng[0], rng[1] + 1):
            owner[s] = rng[2][1]
    return owner
