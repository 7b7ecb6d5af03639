"""Windowed filters replicate exactly: a master sends its rotations as
BLOOMERY.WINROTATE and the instant each command ran at as
BLOOMERY.WINCLOCK, so a replica whose clock is far off, and an AOF loaded
later at another time, end with the master's window state."""
import os
import time

import pytest

from conftest import redis_with_module

# The replica runs an hour ahead and the reloaded AOF a day behind: their
# own clocks would rotate (or not) very differently.
REPLICA_OFFSET = 3600 * 1000
RELOAD_OFFSET = -86400 * 1000


def wait_for(cond, what, timeout=30):
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, what
        time.sleep(0.02)


def state(c, key):
    """The fields of BF.INFO ALL that are the window's state, not a reading
    of it at the local clock (the item count is), and the digest of its
    bits."""
    info = c.execute_command("BF.INFO", key, "ALL")
    fields = dict(zip(info[0::2], info[1::2]))
    keep = {k: v for k, v in fields.items()
            if k in (b"Current slice start", b"Slice items", b"Rotations",
                     b"Early rotations", b"Capacity", b"Size")}
    return keep, c.execute_command("DEBUG", "DIGEST-VALUE", key)


def set_offset(c, ms):
    c.config_set("bloomery.debug-clock-offset-ms", ms)


def test_windows_replicate_their_rotations_and_clock(start_module, workdir):
    master = start_module("win-master", "--repl-diskless-sync-delay", "0",
                          "--appendonly", "yes")
    replica = start_module("win-replica", "--replicaof", "127.0.0.1", str(master.port),
                           module_args=("debug-clock-offset-ms", str(REPLICA_OFFSET)))
    c, rc = master.client(), replica.client()
    wait_for(lambda: rc.info("replication")["master_link_status"] == "up",
             "the replica did not sync")
    # Slices of one second; every step below moves the master's clock.
    c.execute_command("BF.RESERVE", "w", "0.01", "400", "WINDOW", "4", "SLICES", "4")
    c.execute_command("BF.RESERVE", "idle", "0.01", "400", "WINDOW", "4", "SLICES", "4")
    offset = 0
    for step in range(12):
        items = ["s%d-%d" % (step, i) for i in range(40)] + ["keep"]
        c.execute_command("BF.MADD", "w", *items)
        c.execute_command("BF.ADD", "idle", "x%d" % step)
        offset += 700
        set_offset(c, offset)
    # Slice capacity is 100: these fill the current slice early.
    c.execute_command("BF.MADD", "w", *("full%d" % i for i in range(150)))
    c.execute_command("BF.INSERT", "w", "ITEMS", *("more%d" % i for i in range(150)))
    assert c.execute_command("WAIT", 1, 10000) == 1
    mstate = state(c, "w")
    assert int(mstate[0][b"Rotations"]) >= 6
    assert int(mstate[0][b"Early rotations"]) >= 1
    assert state(rc, "w") == mstate
    assert state(rc, "idle") == state(c, "idle")

    # Idle: only the master's timer rotates it, and the replica follows.
    before = int(state(c, "idle")[0][b"Rotations"])
    offset += 10000
    set_offset(c, offset)
    wait_for(lambda: int(state(c, "idle")[0][b"Rotations"]) > before,
             "the master's timer did not rotate the idle window")
    assert c.execute_command("WAIT", 1, 10000) == 1
    wait_for(lambda: state(rc, "idle") == state(c, "idle"),
             "the replica did not follow the timer's rotations")
    assert state(rc, "w") == state(c, "w")

    # Read at the same clock, every field of BF.INFO ALL is alike.
    set_offset(rc, offset)
    for key in ("w", "idle"):
        assert rc.execute_command("BF.INFO", key, "ALL") == \
            c.execute_command("BF.INFO", key, "ALL")

    # The replica never rotates by its own clock, even far ahead of the
    # master's, and keeps refusing the effects from clients.
    set_offset(rc, offset + 10 ** 9)
    time.sleep(0.3)  # three timer periods on the replica: nothing may move
    assert state(rc, "w") == state(c, "w")
    for cmd in (("BLOOMERY.WINCLOCK", "1"), ("BLOOMERY.WINROTATE", "w", "1", "0")):
        with pytest.raises(Exception, match="only comes from a master"):
            c.execute_command(*cmd)

    # The master's AOF replays the same effects at another time.
    expect = {k: state(c, k) for k in ("w", "idle")}
    c.close()
    rc.close()
    master.stop()
    again = redis_with_module(master.dir, "--appendonly", "yes",
                              module_args=("debug-clock-offset-ms", str(RELOAD_OFFSET)))
    try:
        a = again.client()
        for k in ("w", "idle"):
            assert state(a, k) == expect[k], k
        a.close()
    finally:
        again.stop()


def test_effect_commands_check_their_arguments(m):
    """From clients they are refused before anything is parsed; their
    arguments are checked when they come from a stream (the replication
    test above feeds them)."""
    for args in (("BLOOMERY.WINCLOCK",), ("BLOOMERY.WINCLOCK", "1", "2"),
                 ("BLOOMERY.WINROTATE", "w", "1")):
        with pytest.raises(Exception, match="wrong number of arguments"):
            m.execute_command(*args)
