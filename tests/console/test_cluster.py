"""`bloomery console --cluster`: three Redis masters with bloomery.so in a
Redis Cluster. Each master a group with its slots; a new filter's place is
its key's slot's master, shown before creating, and the filter lands
there; a filter anywhere in the cluster is in the table with its slot."""
import os

import pytest

from consolehelp import MODULE, REDIS_SERVER, owner_of, redis_cluster, wait_for

pytestmark = pytest.mark.skipif(not os.path.exists(REDIS_SERVER) or not os.path.exists(MODULE),
                                reason="no redis-server or bloomery.so")


@pytest.fixture
def cluster(procs):
    return redis_cluster(procs, 3)


def test_cluster_slots_placement_create(procs, cluster):
    nodes = cluster
    c = procs.console(["--cluster", nodes[0].addr])
    groups = wait_for(lambda: (lambda g: g if len(g) == 3 else None)(
        c.get("/api/overview")["groups"]), "three groups")
    assert c.get("/api/me")["mode"] == "cluster"
    assert sorted(g["master"] for g in groups) == sorted(n.addr for n in nodes)
    assert all(g["slots"] for g in groups)
    api_nodes = c.get("/api/nodes")
    assert all(n["role"] == "master" and n["id"] and n["slots"] for n in api_nodes)
    for key in ("alpha", "beta", "gamma", "{user1}.seen"):
        slot, owner = owner_of(nodes, key)
        place = c.get("/api/placement", name=key)
        assert (place["slot"], place["node"]) == (slot, owner), key
        status, body = c.post("/api/filters", name=key, capacity="1000", error_rate="0.01")
        assert (status, body) == (200, {"reply": "OK", "node": owner}), key
        lands = [n for n in nodes if n.addr == owner][0]
        assert lands.client().exists(key) == 1
        row = c.get("/api/filters", match=key)["filters"][0]
        assert (row["node"], row["slot"]) == (owner, slot)
        assert c.post("/api/filter/add", name=key, items="x") == (200, {"results": [1]})
    # A filter made behind the console's back is found by its SCAN.
    slot, owner = owner_of(nodes, "outside")
    [n for n in nodes if n.addr == owner][0].client().execute_command(
        "BF.RESERVE", "outside", 0.01, 100)
    wait_for(lambda: c.get("/api/filters", match="outside")["total"] == 1, "the new filter")
    routing = c.get("/api/routing", match="outside")["rows"][0]
    assert (routing["slot"], routing["master"], routing["status"]) == (slot, owner, "ok")


def test_rebalance_routes(procs, cluster):
    """Memory skewed onto one master (filters in a few of its slots): the
    plan moves slots off it; started, the moves are made and followed to
    the end, each moved slot then served by its target."""
    nodes = cluster
    c = procs.console(["--cluster", nodes[0].addr])
    wait_for(lambda: len(c.get("/api/overview")["groups"]) == 3, "three groups")
    heavy = nodes[0]
    made = {}
    for i in range(2000):
        key = "{t%d}.f" % i
        slot, owner = owner_of(nodes, key)
        if owner == heavy.addr:
            heavy.client().execute_command("BF.RESERVE", key, 0.001, 200000)
            made[slot] = key
            if len(made) == 12:
                break
    status, body = c.request("POST", "/api/rebalance/start", {})
    assert status == 400 and "plan" in body["error"]
    plan = c.get("/api/rebalance/plan")
    assert set(plan) == {"moves", "before", "after", "refused"}
    assert plan["moves"], plan
    assert all(m["from"] == heavy.addr and m["to"] != heavy.addr for m in plan["moves"])
    assert plan["after"][heavy.addr] < plan["before"][heavy.addr]
    assert c.post("/api/rebalance/start") == (200, {"reply": "OK"})
    st = wait_for(lambda: (lambda s: s if not s["running"] and s["finished_ms"] else None)(
        c.get("/api/rebalance/status")), "the rebalance to finish", timeout=120)
    assert st["error"] is None and st["done"] == st["total"] == len(plan["moves"]), st
    for m in plan["moves"]:
        owner = [n for n in nodes if n.addr == m["to"]][0]
        slots = owner.client().execute_command("CLUSTER", "SLOTS")
        assert any(lo <= m["slot"] <= hi and "%d" % r[0][1] == m["to"].split(":")[1]
                   for lo, hi, *r in slots), m
    # The console follows: a moved slot's filter is shown on its target.
    moved = [m for m in plan["moves"] if m["slot"] in made][0]
    wait_for(lambda: [f["node"] for f in c.get("/api/filters", match=made[moved["slot"]])[
        "filters"]] == [moved["to"]], "the filter shown on its new master")


def test_rebalance_only_for_a_cluster(procs):
    from consolehelp import bloomeryd
    node = procs.start(bloomeryd(), "node")
    c = procs.console(["--node", node.addr])
    status, body = c.request("GET", "/api/rebalance/plan")
    assert status == 400 and "Cluster" in body["error"]
