"""`bloomery check-data` on exact filters' store (src/cli/check_exact.c):

- a clean data directory, with table files and fingerprints still only in
  the log after the snapshot, passes;
- a store holding fingerprints that neither the snapshot's window nor the
  log after it has (a store from a later time than the snapshot) fails,
  naming the key and the period;
- a damaged table file fails, naming it;
- a snapshot with exact filters and no store fails.
"""
import os
import re
import shutil
import subprocess

import pytest

from conftest import BLOOMERYD, MODULE, Server, remove_dirs

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomery.so keeps no exact store")

CLI = os.environ.get("BLOOMERY_CLI") or os.path.join(os.path.dirname(BLOOMERYD), "bloomery")
# Small table files, so that the store holds several; no snapshot at stop.
ARGS = ("--save", "", "--appendfsync", "always", "--exact-buffer-keys", "500")


def check_data(d):
    p = subprocess.run([CLI, "check-data", d], capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert "runtime error" not in out and "AddressSanitizer" not in out, out
    return p.returncode, out


def add(c, key, names):
    for i in range(0, len(names), 100):
        assert c.execute_command("BF.MADD", key, *names[i:i + 100]) == [1] * len(names[i:i + 100])


def save(c):
    """A snapshot, done when SAVE answers: the store written out first."""
    seq = c.info("persistence")["bloomery_snapshot_seq"]
    assert c.execute_command("SAVE") in (True, b"OK", "OK")
    assert c.info("persistence")["bloomery_snapshot_seq"] == seq + 1


def exact_server(servers):
    """A server of this suite's settings holding the exact filter x."""
    s = Server(*ARGS)
    servers.append(s)
    c = s.client()
    c.execute_command("BF.RESERVE", "x", 0.01, 100000, "EXACT")
    return s, c


@pytest.fixture
def servers():
    made = []
    yield made
    for s in made:
        s.stop()
    remove_dirs(made)


def test_clean_store_passes(servers):
    s, c = exact_server(servers)
    add(c, "x", ["a%d" % i for i in range(3000)])
    save(c)
    # After the snapshot: in the store's table files and buffer, and in the
    # log only.
    add(c, "x", ["b%d" % i for i in range(3000)])
    s.stop()
    rc, out = check_data(s.datadir)
    assert rc == 0, out
    # Every fingerprint in a table file (500 per file): the snapshot's
    # window has the first 3000, the log after it the others.
    assert re.search(r'exact store: key "x" period \d+: 6000 fingerprints\n', out), out


def test_store_ahead_of_snapshot_and_log_fails(servers):
    s, c = exact_server(servers)
    add(c, "x", ["a%d" % i for i in range(2000)])
    save(c)
    early = os.path.join(s.dir, "early")
    shutil.copytree(s.datadir, early)
    # Later adds, written out to the store by a second snapshot.
    add(c, "x", ["b%d" % i for i in range(2000)])
    save(c)
    s.stop()
    assert check_data(s.datadir)[0] == 0
    # The early snapshot and log with the later store: 2000 fingerprints
    # that nothing but the store knows.
    shutil.rmtree(os.path.join(early, "exact"))
    shutil.copytree(os.path.join(s.datadir, "exact"), os.path.join(early, "exact"))
    rc, out = check_data(early)
    assert rc == 1, out
    assert 'of key "x"' in out and "2000 of 4000 fingerprints are in neither" in out, out


def test_damaged_table_file_fails(servers):
    s, c = exact_server(servers)
    add(c, "x", ["a%d" % i for i in range(3000)])
    save(c)
    s.stop()
    store = os.path.join(s.datadir, "exact")
    sst = sorted(f for f in os.listdir(store) if f.endswith(".sst"))
    assert sst
    biggest = max(sst, key=lambda f: os.path.getsize(os.path.join(store, f)))
    path = os.path.join(store, biggest)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 3] ^= 0xFF
    open(path, "wb").write(bytes(data))
    rc, out = check_data(s.datadir)
    assert rc == 1, out
    assert biggest in out and ("Corruption" in out or "checksum" in out), out


def test_missing_store_fails(servers):
    s, c = exact_server(servers)
    add(c, "x", ["a%d" % i for i in range(100)])
    save(c)
    s.stop()
    shutil.rmtree(os.path.join(s.datadir, "exact"))
    rc, out = check_data(s.datadir)
    assert rc == 1, out
    assert "missing, and the snapshot holds 1 exact filters" in out, out
