"""`bloomery console --sentinel ... --master-name ...`: three bloomeryd (a
master, two replicas) and three of Debian's redis-sentinel. The group
as the Sentinels see it (quorum, Sentinels, replicas); then the master is
killed: the console, not restarted, shows the new master, the failover and
the replica that is now missing."""
import os

import pytest

from consolehelp import REDIS_SENTINEL, sentinel_group, wait_for

pytestmark = pytest.mark.skipif(not os.path.exists(REDIS_SENTINEL), reason="no redis-sentinel")


@pytest.fixture
def group(procs):
    return sentinel_group(procs)


def group_of(c):
    groups = c.get("/api/overview")["groups"]
    assert len(groups) == 1
    return groups[0]


def test_failover_shows_without_restart(procs, group):
    master, replicas, sentinels = group
    master.client().execute_command("BF.RESERVE", "kept", 0.01, 1000)
    c = procs.console(["--sentinel", ",".join(s.addr for s in sentinels),
                       "--master-name", "mymaster"])
    g = wait_for(lambda: (lambda g: g if len(g["replicas"]) == 2 else None)(group_of(c)),
                 "the group with its replicas")
    assert g["name"] == "mymaster"
    assert g["master"] == master.addr
    assert sorted(g["replicas"]) == sorted(r.addr for r in replicas)
    assert g["quorum"] == 2 and g["sentinels"] == 3
    assert g["ok"] is True and g["missing_replica"] is False
    assert g["last_failover_ms"] is None
    assert c.get("/api/me")["mode"] == "sentinel"
    nodes = {n["addr"]: n for n in c.get("/api/nodes")}
    assert nodes[master.addr]["role"] == "master"
    assert all(nodes[r.addr]["role"] == "replica" and nodes[r.addr]["group"] == "mymaster"
               for r in replicas)
    wait_for(lambda: c.get("/api/filters", match="kept")["total"] == 1, "the filter listed")

    master.kill()
    promoted = wait_for(
        lambda: (lambda g: g if g["master"] in [r.addr for r in replicas] and g["ok"] else None)(
            group_of(c)), "the console showing the new master")
    assert promoted["last_failover_ms"] is not None
    # The old master is gone: one replica short, said loudly.
    g = wait_for(lambda: (lambda g: g if g["missing_replica"] else None)(group_of(c)),
                 "the missing replica")
    alerts = c.get("/api/overview")["alerts"]
    assert any(a["severity"] == "critical" and "replica is missing" in a["text"] for a in alerts)
    # Writes follow the new master.
    new = [r for r in replicas if r.addr == g["master"]][0]
    wait_for(lambda: c.get("/api/filter", name="kept")["master"] == new.addr,
             "the filter on the new master")
    status, body = c.post("/api/filter/add", name="kept", items="after")
    assert (status, body) == (200, {"results": [1]})
    assert new.client().execute_command("BF.EXISTS", "kept", "after") == 1
