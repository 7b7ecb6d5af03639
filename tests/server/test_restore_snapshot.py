"""A BF.LOADCHUNK / CF.LOADCHUNK restore in progress when a snapshot is
taken survives a crash, with everything acknowledged after it.

The snapshot lists the restore's log records (they stay in the log) and
recovery replays them onto the key before the records after the snapshot.
"""
import os
import subprocess

import pytest

from conftest import BLOOMERYD, scandump

QUICK_ITEMS = 20000


def load(c, family, key, chunks):
    for it, data in chunks:
        assert c.execute_command(family + ".LOADCHUNK", key, it, data) == b"OK"


CASES = {
    # Several 2 MiB chunks: the snapshot falls in the middle of the restore.
    "BF": (("BF.RESERVE", "src", "0.001", "3000000"), "BF.MADD", "BF.MEXISTS"),
    "CF": (("CF.RESERVE", "src", "4000000"), "CF.INSERT", "CF.MEXISTS"),
}


def fill(c, family, items):
    create, add, _ = CASES[family]
    c.execute_command(*create)
    if family == "CF":
        c.execute_command(add, "src", "ITEMS", *items)
    else:
        c.execute_command(add, "src", *items)


def add_more(c, family, key, items):
    _, add, _ = CASES[family]
    args = ("ITEMS",) if family == "CF" else ()
    c.execute_command(add, key, *args, *items)


def exists(c, family, key, items):
    return c.execute_command(CASES[family][2], key, *items)


@pytest.mark.parametrize("family", ["BF", "CF"])
@pytest.mark.parametrize("finish_before_crash", [True, False])
def test_restore_across_snapshot_and_crash(tmp_path, start_server, family, finish_before_crash):
    datadir = str(tmp_path / "data")
    s = start_server("--appendfsync", "always", datadir=datadir)
    c = s.client()
    items = ["item:%d" % i for i in range(QUICK_ITEMS)]
    fill(c, family, items)
    chunks = scandump(c, family, "src")
    assert len(chunks) >= 3, len(chunks)
    half = len(chunks) // 2
    load(c, family, "dst", chunks[:half])
    assert c.execute_command("SAVE") is True
    if not finish_before_crash:
        s.kill()
        s = start_server("--appendfsync", "always", datadir=datadir)
        c = s.client()
    load(c, family, "dst", chunks[half:])
    more = ["more:%d" % i for i in range(1000)]
    add_more(c, family, "dst", more)
    s.kill()
    # check-data reads the restore's records below the snapshot too.
    cli = os.path.join(os.path.dirname(BLOOMERYD), "bloomery")
    out = subprocess.run([cli, "check-data", datadir], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    s2 = start_server(datadir=datadir)
    c2 = s2.client()
    assert exists(c2, family, "dst", items) == [1] * len(items)
    assert exists(c2, family, "dst", more) == [1] * len(more)
    # A second snapshot and a restart: the restored key is an ordinary one now.
    assert c2.execute_command("SAVE") is True
    c2.close()
    s2.stop()
    s3 = start_server(datadir=datadir)
    c3 = s3.client()
    assert exists(c3, family, "dst", items + more) == [1] * (len(items) + len(more))
