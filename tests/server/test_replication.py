"""Replication between bloomeryd servers (docs/REPLICATION.md): a replica
ends with its master's state, bit for bit where the commands can show bits
(SCANDUMP), moves only the chunks it lacks, resumes from its log position
after a failover, refuses writes, and expires keys and rotates windows only
by its master's records."""
import os
import signal
import subprocess
import time

import pytest
import redis

from conftest import MODULE, QUICK, scandump, wait_for

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomeryd's own replication")


def info(c):
    return c.info("replication")


def caught_up(master, replica):
    """The replica's link is up and it applied every record of its master."""
    mc, rc = master.client(), replica.client()

    def done():
        m, r = info(mc), info(rc)
        return (r.get("master_link_status") == "up" and
                r["slave_repl_offset"] == m["master_repl_offset"])
    wait_for(done, "the replica to catch up")
    mc.close()
    rc.close()


def replicate(replica, master):
    c = replica.client()
    assert c.execute_command("REPLICAOF", "127.0.0.1", master.port) == b"OK"
    c.close()
    caught_up(master, replica)


def fill(c):
    """A key of every type, with changes of every kind of record."""
    c.execute_command("BF.RESERVE", "bf", 0.01, 1000)
    c.execute_command("BF.MADD", "bf", *range(3000))          # scales
    c.execute_command("BF.RESERVE", "pbf", 0.01, 1000, "LAYOUT", "PREFIX")
    c.execute_command("BF.MADD", "pbf", *range(3000))         # scales, bins overflow
    c.execute_command("BF.RESERVE", "cnt", 0.01, 1000, "COUNTING")
    c.execute_command("BF.MADD", "cnt", *range(100))
    c.execute_command("BF.DEL", "cnt", 5)
    c.execute_command("BF.RESERVE", "win", 0.01, 1000, "WINDOW", 60, "SLICES", 4)
    c.execute_command("BF.MADD", "win", "w1", "w2")
    c.execute_command("CF.RESERVE", "cf", 1000)
    c.execute_command("CF.INSERT", "cf", "ITEMS", *range(500))
    c.execute_command("CF.DEL", "cf", 7)
    c.execute_command("PFADD", "hll", *range(1000))
    c.execute_command("CMS.INITBYDIM", "cms", 100, 4)
    c.execute_command("CMS.INCRBY", "cms", "a", 5, "b", 7)
    c.execute_command("TOPK.RESERVE", "topk", 3)
    c.execute_command("TOPK.ADD", "topk", *("x" * 10 + "y" * 5 + "z" * 3 + "w"))
    c.execute_command("TDIGEST.CREATE", "td")
    c.execute_command("TDIGEST.ADD", "td", *range(100))
    c.execute_command("BF.MADD", "gone", 1, 2)
    c.execute_command("RENAME", "gone", "renamed")
    c.execute_command("BF.ADD", "deleted", 1)
    c.execute_command("DEL", "deleted")
    c.execute_command("BF.ADD", "expiring", 1)
    c.execute_command("EXPIRE", "expiring", 1000)


def state(c):
    """Everything the commands show of the keys fill() made."""
    return {
        "keys": sorted(c.keys("*")),
        "bf": scandump(c, "BF", "bf"),
        "bf_info": c.execute_command("BF.INFO", "bf"),
        "pbf": scandump(c, "BF", "pbf"),
        "cnt": c.execute_command("BF.MEXISTS", "cnt", *range(110)),
        "win": c.execute_command("BF.MEXISTS", "win", "w1", "w2", "w3"),
        "cf": scandump(c, "CF", "cf"),
        "hll": c.execute_command("PFCOUNT", "hll"),
        "cms": c.execute_command("CMS.QUERY", "cms", "a", "b", "c"),
        "topk": c.execute_command("TOPK.LIST", "topk", "WITHCOUNT"),
        "td": c.execute_command("TDIGEST.QUANTILE", "td", 0.1, 0.5, 0.9),
        "ttl": c.ttl("expiring") > 0,
        "renamed": c.execute_command("BF.EXISTS", "renamed", 2),
    }


def test_a_replica_ends_with_its_masters_state_and_refuses_writes(start_server):
    master, replica = start_server(), start_server()
    m = master.client()
    fill(m)  # before the replica: a full resync carries it
    replicate(replica, master)
    r = replica.client()
    assert state(r) == state(m)
    m.flushall()
    fill(m)  # again, streamed this time (each command's records)
    m.execute_command("BF.MADD", "bf", *range(3000, 6000))
    caught_up(master, replica)
    assert state(r) == state(m)
    # redis-py maps the READONLY prefix to ReadOnlyError and drops it.
    with pytest.raises(redis.exceptions.ReadOnlyError,
                       match="You can't write against a read only replica."):
        r.execute_command("BF.ADD", "bf", "new")
    assert r.execute_command("ROLE")[0] == b"slave"
    assert m.execute_command("ROLE")[0] == b"master"
    slaves = m.execute_command("ROLE")[2]
    assert len(slaves) == 1 and int(slaves[0][1]) == replica.port
    i = info(m)
    assert i["connected_slaves"] == 1 and i["slave0"]["state"] == "online"
    assert i["slave0"]["port"] == replica.port


def stop_process(pid):
    """SIGSTOP, then wait until every thread is stopped: kill() returns
    once the signal is queued, while threads on another core may still run
    (and a replica acknowledge) for a moment."""
    os.kill(pid, signal.SIGSTOP)

    def stopped():
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                if f.read().rsplit(")", 1)[1].split()[0] not in ("T", "t"):
                    return False
        return True
    wait_for(stopped, "the process to stop")


def test_wait_counts_replicas_that_applied_the_writes(start_server):
    master, replica = start_server(), start_server()
    m = master.client()
    replicate(replica, master)
    m.execute_command("BF.ADD", "k", "a")
    assert m.execute_command("WAIT", 1, 5000) == 1
    r = replica.client()
    assert r.execute_command("BF.EXISTS", "k", "a") == 1
    # Two asked, one there: the timeout answers with what acknowledged. The
    # one replica's acknowledgement is awaited first, so a slow machine
    # cannot turn the 300 ms timeout's answer into 0.
    m.execute_command("BF.ADD", "k", "b")
    assert m.execute_command("WAIT", 1, 5000) == 1
    assert m.execute_command("WAIT", 2, 300) == 1
    assert r.execute_command("BF.EXISTS", "k", "b") == 1
    # A stopped replica acknowledges nothing new.
    stop_process(replica.proc.pid)
    try:
        m.execute_command("BF.ADD", "k", "c")
        assert m.execute_command("WAIT", 1, 300) == 0
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    assert m.execute_command("WAIT", 1, 0) == 1
    with pytest.raises(redis.ResponseError, match="WAIT cannot be used with replica"):
        r.execute_command("WAIT", 1, 10)


def test_failover_resumes_from_the_log_without_moving_chunks(start_server):
    master, a, b = start_server(), start_server(), start_server()
    m = master.client()
    m.execute_command("BF.RESERVE", "f", 0.001, 200000)
    m.execute_command("BF.MADD", "f", *range(5000))
    replicate(a, master)
    replicate(b, master)
    m.execute_command("BF.MADD", "f", *range(5000, 6000))
    assert m.execute_command("WAIT", 2, 5000) == 2
    master.kill()
    ac, bc = a.client(), b.client()
    ac.execute_command("REPLICAOF", "NO", "ONE")
    ia = info(ac)
    assert ia["role"] == "master" and ia["master_replid2"] not in (0, "0" * 40)
    bc.execute_command("REPLICAOF", "127.0.0.1", a.port)
    caught_up(a, b)
    ia = info(ac)
    assert ia["bloomery_sync_partial_ok"] == 1 and ia["bloomery_sync_full"] == 0
    ac.execute_command("BF.MADD", "f", *range(6000, 7000))
    assert ac.execute_command("WAIT", 1, 5000) == 1
    assert all(bc.execute_command("BF.MEXISTS", "f", *range(7000)))
    # The old master comes back as a replica of the new one: a full resync,
    # which fetches only the chunks that changed since its own snapshot.
    old = start_server(datadir=master.datadir)
    replicate(old, a)
    oc = old.client()
    assert scandump(oc, "BF", "f") == scandump(ac, "BF", "f")


def test_full_resync_fetches_only_the_chunks_that_changed(start_server):
    master = start_server()
    m = master.client()
    n = 20
    for i in range(n):
        m.execute_command("BF.RESERVE", "f%d" % i, 0.01, 200000)
        m.execute_command("BF.MADD", "f%d" % i, *range(i * 1000, i * 1000 + 2000))
    replica = start_server()
    replicate(replica, master)
    r = replica.client()
    first = info(r)
    assert first["bloomery_sync_chunks_fetched"] >= n
    r.execute_command("SAVE")  # the replica's own chunk files
    replica.stop()
    m.execute_command("BF.MADD", "f3", *range(100000, 100050))
    replica2 = start_server(datadir=replica.datadir)
    replicate(replica2, master)
    r2 = replica2.client()
    second = info(r2)
    # Only f3's chunks (a small part of all) moved again.
    assert second["bloomery_sync_chunks_present"] >= first["bloomery_sync_chunks_fetched"] - 4
    assert second["bloomery_sync_chunks_fetched"] <= 4
    for i in range(n):
        assert scandump(r2, "BF", "f%d" % i) == scandump(m, "BF", "f%d" % i)


def test_expired_keys_leave_a_replica_by_the_masters_deletion(start_server):
    master, replica = start_server(), start_server()
    m, r = master.client(), replica.client()
    replicate(replica, master)
    m.execute_command("BF.ADD", "k", "a")
    m.execute_command("BF.ADD", "keep", "a")
    m.execute_command("PEXPIRE", "k", 200)
    caught_up(master, replica)
    # Gone for readers of both once expired, and removed from the replica
    # only by the deletion the master logs when it removes the key.
    wait_for(lambda: m.dbsize() == 1, "the master to expire the key")
    caught_up(master, replica)
    assert r.dbsize() == 1
    assert r.exists("k") == 0 and r.exists("keep") == 1


def test_a_replica_keeps_its_expired_keys_until_its_master_deletes_them(start_server):
    master, replica = start_server(), start_server()
    m, r = master.client(), replica.client()
    replicate(replica, master)
    m.execute_command("BF.ADD", "k", "a")
    m.execute_command("PEXPIRE", "k", 200)
    caught_up(master, replica)
    # The master stops before its cron can delete the key: the replica
    # hides it from readers but keeps it, as it has no deletion for it.
    stop_process(master.proc.pid)
    try:
        wait_for(lambda: r.exists("k") == 0, "the key to look expired")
        assert r.dbsize() == 1
    finally:
        os.kill(master.proc.pid, signal.SIGCONT)
    wait_for(lambda: r.dbsize() == 0, "the master's deletion")


def window_info(c, key):
    v = c.execute_command("BF.INFO", key, "ALL")
    d = dict(zip(v[::2], v[1::2]))
    return d[b"Current slice start"], d[b"Rotations"]


def test_a_replica_rotates_windows_only_by_its_masters_records(start_server):
    master, replica = start_server(), start_server()
    m, r = master.client(), replica.client()
    replicate(replica, master)
    m.execute_command("BF.RESERVE", "w", 0.01, 1000, "WINDOW", 3600, "SLICES", 2)
    m.execute_command("BF.ADD", "w", "a")
    caught_up(master, replica)
    before = window_info(r, "w")
    # The replica's clock jumps two hours ahead: its cron does not rotate
    # the window (its readers count the item as older than the window).
    r.config_set("debug-clock-offset-ms", 7200 * 1000)
    # A cron round of the replica that runs the window rotations runs its
    # save schedule after them: a scheduled snapshot shows one has passed.
    seq = r.info("persistence")["bloomery_snapshot_seq"]
    r.config_set("save", "1 1")
    wait_for(lambda: r.info("persistence")["bloomery_snapshot_seq"] > seq,
             "a scheduled snapshot of the replica")
    assert window_info(r, "w") == before
    r.config_set("debug-clock-offset-ms", 0)
    assert r.execute_command("BF.EXISTS", "w", "a") == 1
    # The master's clock moves: it rotates and the replica follows it.
    m.config_set("debug-clock-offset-ms", 7200 * 1000)
    wait_for(lambda: window_info(m, "w") != before, "the master to rotate")
    caught_up(master, replica)
    assert window_info(r, "w") == window_info(m, "w")
    assert r.execute_command("BF.EXISTS", "w", "a") == 0


def test_min_replicas_to_write_and_stale_data(start_server):
    master = start_server("--min-replicas-to-write", 1)
    m = master.client()
    with pytest.raises(redis.ResponseError, match="NOREPLICAS Not enough good replicas"):
        m.execute_command("BF.ADD", "k", "a")
    replica = start_server("--replica-serve-stale-data", "no")
    replicate(replica, master)
    assert m.execute_command("BF.ADD", "k", "a") == 1
    caught_up(master, replica)
    r = replica.client()
    assert r.execute_command("BF.EXISTS", "k", "a") == 1
    master.kill()
    wait_for(lambda: info(r)["master_link_status"] == "down", "the link to go down")
    with pytest.raises(redis.ResponseError, match="MASTERDOWN Link with MASTER is down"):
        r.execute_command("BF.EXISTS", "k", "a")
    r.config_set("replica-serve-stale-data", "yes")
    assert r.execute_command("BF.EXISTS", "k", "a") == 1


def test_a_replica_behind_the_log_kept_gets_a_full_resync(start_server):
    master, replica = start_server(), start_server()
    m, r = master.client(), replica.client()
    replicate(replica, master)
    batch = 5000 if QUICK else 10000
    stop_process(replica.proc.pid)
    try:
        # Far more log than the sockets hold, so the master's sender waits
        # in the middle of it; meanwhile two snapshots delete the log files
        # it has not reached (a master keeps the log from its last snapshot).
        for i in range(300):
            m.execute_command("BF.MADD", "k", *range(i * batch, (i + 1) * batch))
        m.execute_command("SAVE")
        m.execute_command("BF.MADD", "k", "between")
        m.execute_command("SAVE")
        m.execute_command("BF.MADD", "k", "after")
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    caught_up(master, replica)
    i = info(m)
    assert i["bloomery_sync_full"] >= 2 and i["bloomery_sync_partial_err"] >= 1
    assert r.execute_command("BF.MEXISTS", "k", "between", "after", 0, 300 * batch - 1) == [1] * 4
    assert scandump(r, "BF", "k") == scandump(m, "BF", "k")


def test_a_replica_killed_and_restarted_catches_up(start_server):
    master, replica = start_server(), start_server()
    m = master.client()
    replicate(replica, master)
    m.execute_command("BF.MADD", "k", *range(1000))
    assert m.execute_command("WAIT", 1, 5000) == 1
    replica.kill()
    m.execute_command("BF.MADD", "k", *range(1000, 2000))
    again = start_server("--replicaof", "127.0.0.1 %d" % master.port, datadir=replica.datadir)
    caught_up(master, again)
    r = again.client()
    assert all(r.execute_command("BF.MEXISTS", "k", *range(2000)))
    assert scandump(r, "BF", "k") == scandump(m, "BF", "k")


def test_a_dropped_link_resumes_from_the_log_without_moving_chunks(start_server):
    master, replica = start_server(), start_server()
    m, r = master.client(), replica.client()
    m.execute_command("BF.MADD", "k", *range(1000))
    replicate(replica, master)
    assert info(m)["bloomery_sync_full"] == 1
    # As in Redis, CLIENT KILL TYPE master on a replica drops its link.
    assert r.execute_command("CLIENT", "KILL", "TYPE", "master") == 1
    m.execute_command("BF.MADD", "k", *range(1000, 2000))
    wait_for(lambda: info(m)["bloomery_sync_partial_ok"] == 1, "a partial resync")
    caught_up(master, replica)
    assert info(m)["bloomery_sync_full"] == 1
    assert all(r.execute_command("BF.MEXISTS", "k", *range(2000)))


def test_loadchunk_restores_replicate_also_across_a_full_resync(start_server):
    master, replica = start_server(), start_server()
    m, r = master.client(), replica.client()
    m.execute_command("BF.RESERVE", "src", 0.001, 300000)
    m.execute_command("BF.MADD", "src", *range(20000))
    m.execute_command("CF.RESERVE", "csrc", 10000)
    m.execute_command("CF.INSERT", "csrc", "ITEMS", *range(2000))
    bf, cf = scandump(m, "BF", "src"), scandump(m, "CF", "csrc")
    assert len(bf) > 1
    # A restore begun before the replica's full resync: the snapshot it
    # gets holds the restore in progress and the log from its first chunk.
    m.execute_command("BF.LOADCHUNK", "dst", *bf[0])
    m.execute_command("SAVE")
    replicate(replica, master)
    for it, data in bf[1:]:
        m.execute_command("BF.LOADCHUNK", "dst", it, data)
    for it, data in cf:
        m.execute_command("CF.LOADCHUNK", "cdst", it, data)
    caught_up(master, replica)
    assert scandump(r, "BF", "dst") == bf
    assert scandump(r, "CF", "cdst") == cf
    assert all(r.execute_command("BF.MEXISTS", "dst", *range(20000)))
    assert r.execute_command("CF.COUNT", "cdst", 5) == m.execute_command("CF.COUNT", "cdst", 5)


def test_masterauth_and_announced_address(start_server):
    master = start_server("--requirepass", "s3cret")
    m = master.client(password="s3cret")
    m.execute_command("BF.ADD", "k", "a")
    replica = start_server("--replica-announce-ip", "10.1.2.3", "--replica-announce-port", 7777)
    r = replica.client()
    r.execute_command("REPLICAOF", "127.0.0.1", master.port)
    # Without the password the link never comes up.
    wait_for(lambda: "NOAUTH" in replica.output() or "AUTH" in replica.output(),
             "the replica's failed handshake in its log")
    assert info(r)["master_link_status"] == "down"
    r.config_set("masterauth", "s3cret")
    wait_for(lambda: info(r)["master_link_status"] == "up", "the link with masterauth")
    assert r.execute_command("BF.EXISTS", "k", "a") == 1
    slave = info(m)["slave0"]
    assert slave["ip"] == "10.1.2.3" and slave["port"] == 7777


def test_replicaof_is_kept_in_the_config_and_a_restart_stays_a_replica(start_server):
    master, replica = start_server(), start_server(config="")
    m, r = master.client(), replica.client()
    r.execute_command("REPLICAOF", "127.0.0.1", master.port)
    # As Redis: CONFIG GET and CONFIG REWRITE show the role REPLICAOF set,
    # which is what Sentinel's reconfiguration (REPLICAOF, then CONFIG
    # REWRITE) counts on.
    assert r.config_get("replicaof") == {"replicaof": "127.0.0.1 %d" % master.port}
    assert r.execute_command("CONFIG", "REWRITE") == b"OK"
    with open(replica.conf_path) as f:
        assert "replicaof 127.0.0.1 %d\n" % master.port in f.read()
    m.execute_command("BF.MADD", "k", *range(1000))
    assert m.execute_command("WAIT", 1, 5000) == 1
    replica.kill()
    m.execute_command("BF.MADD", "k", *range(1000, 2000))
    again = start_server(config=None, datadir=replica.datadir, conf_path=replica.conf_path,
                         port=replica.port)
    # A replica from its first reply: no write taken that a resync erases.
    raw = again.raw()
    assert raw.cmd("ROLE")[0] == b"slave"
    got = raw.cmd("BF.ADD", "k", "written-to-the-replica")
    assert str(got) == "READONLY You can't write against a read only replica."
    raw.close()
    caught_up(master, again)
    r = again.client()
    assert all(r.execute_command("BF.MEXISTS", "k", *range(2000)))
    assert r.execute_command("BF.EXISTS", "k", "written-to-the-replica") == 0
    # REPLICAOF NO ONE clears it: the next restart is a master's.
    r.execute_command("REPLICAOF", "NO", "ONE")
    assert r.config_get("replicaof") == {"replicaof": ""}
    assert r.execute_command("CONFIG", "REWRITE") == b"OK"
    again.kill()
    third = start_server(config=None, datadir=replica.datadir, conf_path=replica.conf_path,
                         port=replica.port)
    assert third.client().execute_command("ROLE")[0] == b"master"


@pytest.mark.parametrize("args,why", [
    (["--replicaof", "127.0.0.1 nope"], "Invalid master port"),
    (["--replicaof", "127.0.0.1"], "wrong number of arguments"),
    (["--replicaof", "127.0.0.1 6379", "--appendonly", "no"], "appendonly yes"),
])
def test_a_replicaof_that_cant_be_followed_stops_the_start(tmp_path, args, why):
    # Coming up as a master instead would take writes the replica's first
    # resync erases.
    from conftest import BLOOMERYD
    out = subprocess.run([BLOOMERYD, "--port", "0", "--dir", str(tmp_path / "d")] + args,
                         capture_output=True, text=True, timeout=30)
    # A bad port is the settings' own rule (the same as CONFIG SET's); a
    # replica without its log is refused where replication starts.
    assert out.returncode == 1
    assert why in out.stderr


def test_a_restarted_replica_resumes_with_a_partial_resync(start_server):
    master, replica = start_server(), start_server()
    m = master.client()
    m.execute_command("BF.MADD", "k", *range(1000))
    replicate(replica, master)
    assert info(m)["bloomery_sync_full"] == 1
    replica.kill()
    m.execute_command("BF.MADD", "k", *range(1000, 2000))
    # DIR/replid: the history its log follows, so the master sends only
    # the records it missed.
    again = start_server("--replicaof", "127.0.0.1 %d" % master.port, datadir=replica.datadir)
    caught_up(master, again)
    i = info(m)
    assert i["bloomery_sync_full"] == 1 and i["bloomery_sync_partial_ok"] == 1
    r = again.client()
    assert info(r)["master_replid"] == i["master_replid"]
    assert all(r.execute_command("BF.MEXISTS", "k", *range(2000)))
    assert scandump(r, "BF", "k") == scandump(m, "BF", "k")
    # A master starts a new history (its log may have lost a tail its
    # replicas had): a replica restarted against it resyncs in full.
    again.kill()
    master.stop()
    master2 = start_server(datadir=master.datadir, port=master.port)
    m2 = master2.client()
    m2.execute_command("BF.MADD", "k", *range(2000, 2100))
    third = start_server("--replicaof", "127.0.0.1 %d" % master.port, datadir=replica.datadir)
    caught_up(master2, third)
    i = info(m2)
    assert i["bloomery_sync_full"] == 1 and i["bloomery_sync_partial_ok"] == 0
    assert all(third.client().execute_command("BF.MEXISTS", "k", *range(2100)))
    # A promoted replica's log takes its own writes: the file goes, and a
    # restart as a replica resyncs in full.
    t = third.client()
    t.execute_command("REPLICAOF", "NO", "ONE")
    t.execute_command("BF.ADD", "k", "own")
    third.kill()
    # The master's log goes past the promoted one's: a partial resync from
    # the promoted log's end would keep "own" and skip a record.
    m2.execute_command("BF.MADD", "k", *range(2100, 2200))
    m2.execute_command("BF.MADD", "k", *range(2200, 2300))
    fourth = start_server("--replicaof", "127.0.0.1 %d" % master.port, datadir=replica.datadir)
    caught_up(master2, fourth)
    assert info(m2)["bloomery_sync_full"] == 2
    f = fourth.client()
    assert f.execute_command("BF.EXISTS", "k", "own") == 0
    assert all(f.execute_command("BF.MEXISTS", "k", *range(2300)))


def test_a_replica_restarted_as_a_master_resyncs_in_full_later(start_server):
    master, replica = start_server(), start_server()
    m = master.client()
    m.execute_command("BF.MADD", "k", *range(100))
    replicate(replica, master)
    replica.kill()
    # Started without replicaof: a master, whose own writes leave the
    # master's history.
    alone = start_server(datadir=replica.datadir)
    alone.client().execute_command("BF.ADD", "k", "own")
    alone.kill()
    m.execute_command("BF.MADD", "k", *range(100, 200))
    m.execute_command("BF.MADD", "k", *range(200, 300))
    again = start_server("--replicaof", "127.0.0.1 %d" % master.port, datadir=replica.datadir)
    caught_up(master, again)
    assert info(m)["bloomery_sync_full"] == 2
    r = again.client()
    assert r.execute_command("BF.EXISTS", "k", "own") == 0
    assert all(r.execute_command("BF.MEXISTS", "k", *range(300)))


def test_a_transaction_queued_on_a_master_writes_nothing_once_it_is_a_replica(start_server):
    master, node = start_server(), start_server()
    n = node.client()
    n.execute_command("BF.ADD", "k", "before")
    # Queued while a master (the dispatcher lets it in) ...
    tx = node.raw()
    assert tx.cmd("MULTI") == "OK"
    assert tx.cmd("BF.ADD", "k", "queued") == "QUEUED"
    # ... run after Sentinel (say) made it a replica: the write is refused,
    # not logged where the master's records go.
    n.execute_command("REPLICAOF", "127.0.0.1", master.port)
    got = tx.cmd("EXEC")
    assert len(got) == 1 and str(got[0]).startswith("READONLY"), got
    tx.close()
    caught_up(master, node)
    assert n.execute_command("BF.EXISTS", "k", "queued") == 0
