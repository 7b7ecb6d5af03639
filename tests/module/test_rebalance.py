"""bloomery rebalance against a Redis Cluster of three masters with the
module. One master holds a large filter and a few medium slots (one with
a value of every type: Bloom in each layout, counting and windowed, cuckoo,
count-min, top-k, t-digest), so memory is skewed while slot counts are
even. Without --apply the plan is shown and nothing moves; the other
masters' maxmemory cannot hold the large filter, so that move is refused;
with --apply the other slots move by MIGRATE, every value arrives bit for
bit (DEBUG DIGEST-VALUE), every filter answers through a cluster client,
and the masters' memory spread shrinks."""
import os
import re
import subprocess

from redis.cluster import RedisCluster
from redis.crc import key_slot

import conftest
from clusterutil import cluster_port, masters_ok, nodes_view, owner_ports, wait_for

CLI = os.environ.get("BLOOMERY_CLI") or os.path.join(conftest.ROOT, "build", "bloomery")
MB = 1024 * 1024


def tags_of(owner, port, count, prefix):
    """count hash tags in distinct slots of the master on port."""
    out, seen = [], set()
    i = 0
    while len(out) < count:
        tag = "%s%d" % (prefix, i)
        s = key_slot(tag.encode())
        if owner[s] == port and s not in seen:
            seen.add(s)
            out.append(tag)
        i += 1
    return out


def rebalance(port, *args):
    return subprocess.run([CLI, "rebalance", "--cluster", "127.0.0.1:%d" % port, *args],
                          capture_output=True, text=True, timeout=300)


def used(c):
    """A master's memory: Redis's used_memory, which does not count the
    module's values, plus their bytes."""
    values = sum(c.memory_usage(k) for k in c.keys()
                 if c.type(k).startswith((b"bloomer", b"MBbloom")))
    return c.info("memory")["used_memory"] + values


def three_masters(start_module, monkeypatch, name):
    """Three masters with the module made into a cluster: (nodes, {port: client})."""
    monkeypatch.setattr(conftest, "free_port", cluster_port)
    nodes = [start_module("%s-%d" % (name, i), "--cluster-enabled", "yes",
                          "--cluster-node-timeout", "5000") for i in range(3)]
    monkeypatch.undo()
    out = subprocess.run(["redis-cli", "--cluster", "create",
                          *("127.0.0.1:%d" % n.port for n in nodes), "--cluster-replicas", "0",
                          "--cluster-yes"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    c = {n.port: n.client() for n in nodes}
    for x in c.values():
        wait_for(lambda x=x: masters_ok(x, 3), "the cluster did not form")
    return nodes, c


def test_rebalance_by_memory(start_module, monkeypatch):
    nodes, c = three_masters(start_module, monkeypatch, "rebalance")
    heavy, light1, light2 = sorted(c)
    owner = owner_ports(c[heavy])
    rc = RedisCluster(host="127.0.0.1", port=heavy)

    big_tag, every_tag, *medium_tags = tags_of(owner, heavy, 5, "h")
    big = "{%s}big" % big_tag
    rc.execute_command("BF.RESERVE", big, "0.01", "8000000", "NONSCALING")
    blooms = {big: ["b%d" % i for i in range(500)]}
    # A value of every type in one slot.
    t = "{%s}" % every_tag
    for key, layout in (("blocked", "BLOCKED"), ("classic", "CLASSIC"), ("prefix", "PREFIX")):
        rc.execute_command("BF.RESERVE", t + key, "0.01", "200000", "LAYOUT", layout)
        blooms[t + key] = []
    rc.execute_command("BF.RESERVE", t + "scaling", "0.01", "1000")
    rc.execute_command("BF.RESERVE", t + "counting", "0.01", "100000", "COUNTING")
    rc.execute_command("BF.RESERVE", t + "window", "0.01", "100000", "WINDOW", "3600")
    blooms.update({t + "scaling": [], t + "counting": [], t + "window": []})
    rc.execute_command("CF.RESERVE", t + "cuckoo", "200000")
    rc.execute_command("CMS.INITBYDIM", t + "cms", "20000", "5")
    rc.execute_command("TOPK.RESERVE", t + "topk", "50", "20000", "7", "0.9")
    rc.execute_command("TDIGEST.CREATE", t + "tdigest", "COMPRESSION", "500")
    for i in range(0, 3000, 100):
        items = ["x%d" % j for j in range(i, i + 100)]
        rc.execute_command("CF.INSERT", t + "cuckoo", "ITEMS", *items)
        rc.execute_command("CMS.INCRBY", t + "cms", *(a for it in items for a in (it, 1)))
        rc.execute_command("TOPK.ADD", t + "topk", *items)
        rc.execute_command("TDIGEST.ADD", t + "tdigest", *range(i, i + 100))
    for tag in medium_tags:
        key = "{%s}medium" % tag
        rc.execute_command("BF.RESERVE", key, "0.01", "1000000")
        blooms[key] = []
    # Small filters on the other two.
    for port in (light1, light2):
        for tag in tags_of(owner, port, 10, "l%d-" % port):
            key = "{%s}small" % tag
            rc.execute_command("BF.RESERVE", key, "0.01", "1000")
            blooms[key] = []
    for key, items in blooms.items():
        items += ["%s-%d" % (key, i) for i in range(200)]
        rc.execute_command("BF.MADD", key, *items)
    keys = [k for port, x in c.items() for k in x.keys()]
    digest = {}
    for k in keys:
        k = k.decode()
        digest[k] = c[owner[key_slot(k.encode())]].execute_command("DEBUG", "DIGEST-VALUE", k)
    before = {p: used(x) for p, x in c.items()}
    assert before[heavy] > 10 * MB + max(before[light1], before[light2])

    # ---- the plan alone: shown, nothing moves
    out = rebalance(heavy)
    assert out.returncode == 0, out.stdout + out.stderr
    moves = re.findall(r"^move slot (\d+) \(\d+ keys, [^)]*\): (\S+) -> (\S+)$", out.stdout, re.M)
    assert moves, out.stdout
    # With no maxmemory, the large filter's slot is the first to go.
    assert int(moves[0][0]) == key_slot(big.encode()), out.stdout
    assert "refused" not in out.stdout.replace("0 refused", "")
    assert owner_ports(c[heavy]) == owner
    assert {p: x.dbsize() for p, x in c.items()} == {p: len(x.keys()) for p, x in c.items()}
    assert sum(x.dbsize() for x in c.values()) == len(keys)
    for p in (light1, light2):
        assert c[p].dbsize() == 10

    # ---- the others' maxmemory cannot hold the large filter: refused
    limit = {p: used(c[p]) + 6 * MB for p in (light1, light2)}
    for p, lim in limit.items():
        c[p].config_set("maxmemory", lim)
    out = rebalance(heavy, "--apply", "--tolerance", "0.05")
    assert out.returncode == 0, out.stdout + out.stderr
    print(out.stdout)
    big_slot = key_slot(big.encode())
    assert re.search(r"^refused: slot %d \(" % big_slot, out.stdout, re.M), out.stdout
    moves = re.findall(r"^move slot (\d+) \(\d+ keys, [^)]*\): (\S+) -> (\S+)$", out.stdout, re.M)
    moved = {int(s) for s, _, _ in moves}
    assert big_slot not in moved
    # Every medium slot moves, the one with every type among them.
    assert moved == {key_slot(tag.encode()) for tag in [every_tag] + medium_tags}, out.stdout
    assert "done: %d slots moved" % len(moves) in out.stdout

    for x in c.values():
        wait_for(lambda x=x: masters_ok(x, 3), "the cluster is not ok after the moves")
    after_owner = owner_ports(c[light1])
    for s, src, dst in moves:
        assert after_owner[int(s)] == int(dst.rsplit(":", 1)[1])
        assert c[int(src.rsplit(":", 1)[1])].execute_command(
            "CLUSTER", "COUNTKEYSINSLOT", int(s)) == 0
    assert after_owner[big_slot] == heavy
    view = nodes_view(c[heavy])
    assert all(not any(r.startswith("[") for r in n[3]) for n in view.values())
    # Every value bit for bit where its slot now is, every filter answers.
    for k, d in digest.items():
        assert c[after_owner[key_slot(k.encode())]].execute_command(
            "DEBUG", "DIGEST-VALUE", k) == d, k
    rc.close()
    rc = RedisCluster(host="127.0.0.1", port=light2)
    for key, items in blooms.items():
        assert rc.execute_command("BF.MEXISTS", key, *items) == [1] * len(items), key
    assert rc.execute_command("CF.EXISTS", t + "cuckoo", "x2999") == 1
    assert rc.execute_command("CMS.QUERY", t + "cms", "x7") == [1]
    assert rc.execute_command("TDIGEST.MAX", t + "tdigest") in (b"2999", "2999")
    rc.close()
    after = {p: used(x) for p, x in c.items()}
    for p, lim in limit.items():
        assert after[p] <= lim
    assert max(after.values()) - min(after.values()) < \
        max(before.values()) - min(before.values()), (before, after)
    for x in c.values():
        x.close()


def test_rebalance_as_acl_user_and_failed_move_rolled_back(start_module, monkeypatch):
    """--user/--pass reach MIGRATE (AUTH2) on nodes whose default user has a
    password; a MIGRATE refused (the user may not MIGRATE) stops the run
    with the slot STABLE again on both nodes and the filter in place."""
    nodes, c = three_masters(start_module, monkeypatch, "rebalance-acl")
    heavy = sorted(c)[0]
    owner = owner_ports(c[heavy])
    tag = tags_of(owner, heavy, 1, "acl")[0]
    key = "{%s}f" % tag
    slot = key_slot(key.encode())
    c[heavy].execute_command("BF.RESERVE", key, "0.01", "3000000")
    c[heavy].execute_command("BF.MADD", key, "a", "b")
    d = c[heavy].execute_command("DEBUG", "DIGEST-VALUE", key)
    for x in c.values():
        # Connections open now stay authenticated as default.
        x.execute_command("ACL", "SETUSER", "reb", "on", ">pw", "~*", "+@all", "-migrate")
        x.execute_command("ACL", "SETUSER", "default", "resetpass", ">adminpw")

    out = rebalance(heavy, "--apply", "--user", "reb", "--pass", "pw")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "moving slot %d " % slot in out.stdout, out.stdout
    assert "NOPERM" in out.stderr, out.stderr
    for p, x in c.items():
        assert not any(r.startswith("[") for n in nodes_view(x).values() for r in n[3]), p
    assert owner_ports(c[heavy])[slot] == heavy
    assert c[heavy].execute_command("DEBUG", "DIGEST-VALUE", key) == d

    for x in c.values():
        x.execute_command("ACL", "SETUSER", "reb", "+migrate")
    out = rebalance(heavy, "--apply", "--user", "reb", "--pass", "pw")
    assert out.returncode == 0, out.stdout + out.stderr
    to = owner_ports(c[heavy])[slot]
    assert to != heavy
    assert c[to].execute_command("DEBUG", "DIGEST-VALUE", key) == d
    assert c[to].execute_command("BF.MEXISTS", key, "a", "b") == [1, 1]
    for x in c.values():
        x.close()


def test_rebalance_usage_and_errors(module_server):
    def cli(*args):
        return subprocess.run([CLI, "rebalance", *args], capture_output=True, text=True,
                              timeout=60)
    assert cli().returncode == 2
    assert "--cluster HOST:PORT is needed" in cli().stderr
    assert cli("--cluster", "127.0.0.1:1", "--tolerance", "1.5").returncode == 2
    assert cli("--cluster", "127.0.0.1:1", "--frobnicate").returncode == 2
    assert cli("--cluster", "127.0.0.1:1", "--user", "u").returncode == 2
    out = cli("--help")
    assert out.returncode == 0 and "--apply" in out.stdout and "--tls" in out.stdout
    # Nothing listens on port 1 of loopback; a server not in cluster mode.
    out = cli("--cluster", "127.0.0.1:1")
    assert out.returncode == 1 and "127.0.0.1:1" in out.stderr, out.stderr
    out = cli("--cluster", "127.0.0.1:%d" % module_server.port)
    assert out.returncode == 1 and "cluster support disabled" in out.stderr, out.stderr
