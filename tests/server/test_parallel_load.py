"""A snapshot's chunks load on several threads (load-threads).

- A data set of many multi-chunk keys (plain, classic, counting and
  cuckoo filters of several 2 MiB chunks each, beside small keys whose
  chunks sit inline in the index) restarts identically with 1, 2, 3 and
  8 loading threads and with the default (one per CPU): every key's
  SCANDUMP is byte for byte what it was, and every item added is there.
- One damaged chunk file among many (a flipped byte, a cut file, a
  missing file) stops the start at every thread count with the same
  message, naming that file, the one `bloomery check-data` gives: no
  thread count loads around it or serves the other keys.
"""
import os
import re
import shutil
import subprocess

import pytest

from conftest import BLOOMERYD, Server, scandump

CLI = os.environ.get("BLOOMERY_CLI") or os.path.join(os.path.dirname(BLOOMERYD), "bloomery")

ARGS = ("--save", "", "--appendonly", "no")
THREADS = [1, 2, 3, 8, 0]

# key -> (family, command that creates it); each big key spans several
# 2 MiB chunks.
KEYS = {
    "big0": ("BF", ["BF.RESERVE", "big0", "0.01", "5000000", "NONSCALING"]),
    "big1": ("BF", ["BF.RESERVE", "big1", "0.001", "4000000", "NONSCALING"]),
    "big2": ("BF", ["BF.RESERVE", "big2", "0.01", "3000000", "NONSCALING"]),
    "classic": ("BF", ["BF.RESERVE", "classic", "0.01", "3000000", "NONSCALING", "LAYOUT",
                       "CLASSIC"]),
    "counting": ("BF", ["BF.RESERVE", "counting", "0.01", "1500000", "COUNTING"]),
    "cuckoo": ("CF", ["CF.RESERVE", "cuckoo", "3000000"]),
    "small0": ("BF", ["BF.RESERVE", "small0", "0.01", "1000"]),
    "small1": ("BF", ["BF.RESERVE", "small1", "0.01", "1000"]),
}


def items(key):
    return ["%s:%d" % (key, i) for i in range(0, 6000, 1)]


@pytest.fixture(scope="module")
def data_set(tmp_path_factory):
    """The directory (SAVEd, server stopped), every key's SCANDUMP and the
    number of chunks of the snapshot."""
    d = str(tmp_path_factory.mktemp("load") / "data")
    s = Server(*ARGS, datadir=d)
    try:
        c = s.client()
        for key, (family, create) in KEYS.items():
            c.execute_command(*create)
            its = items(key)
            for at in range(0, len(its), 1000):
                if family == "CF":
                    c.execute_command("CF.INSERT", key, "ITEMS", *its[at:at + 1000])
                else:
                    c.execute_command("BF.MADD", key, *its[at:at + 1000])
        dumps = {key: scandump(c, family, key) for key, (family, _) in KEYS.items()}
        c.execute_command("SAVE")
        chunks = int(c.info("persistence")["bloomery_snapshot_chunks"])
        c.close()
    finally:
        s.stop()
    files = os.listdir(os.path.join(d, "chunks"))
    # Many chunks, most in files of their own, several per key.
    assert chunks >= 20 and len(files) >= 12, (chunks, files)
    return d, dumps, chunks


def loaded_line(out):
    m = re.findall(r"Loaded snapshot .*: (\d+) keys, (\d+) chunks in [0-9.]+ s \((\d+) threads?\)",
                   out)
    assert m, out
    return tuple(int(x) for x in m[-1])


@pytest.mark.parametrize("threads", THREADS)
def test_restarts_identically(data_set, tmp_path, threads):
    src, dumps, chunks = data_set
    d = str(tmp_path / "d")
    shutil.copytree(src, d)
    s = Server(*ARGS, "--load-threads", str(threads), datadir=d)
    try:
        c = s.client()
        nkeys, nchunks, used = loaded_line(s.output())
        assert (nkeys, nchunks) == (len(KEYS), chunks)
        assert used == (threads if threads else min(os.cpu_count(), 16))
        assert c.execute_command("CONFIG", "GET", "load-threads") == [b"load-threads",
                                                                     str(threads).encode()]
        for key, (family, _) in KEYS.items():
            assert scandump(c, family, key) == dumps[key], key
            its = items(key)
            got = c.execute_command(family + ".MEXISTS", key, *its)
            assert got == [1] * len(its), key
        c.close()
    finally:
        s.stop()


def chunk_files(d):
    return sorted(os.listdir(os.path.join(d, "chunks")))


def refusal(d, threads):
    try:
        s = Server(*ARGS, "--load-threads", str(threads), datadir=d)
    except RuntimeError as e:
        out = str(e)
        assert "AddressSanitizer" not in out and "runtime error" not in out, out
        assert "ThreadSanitizer" not in out, out
        m = re.search(r"bloomeryd: can't start: (.*)", out)
        assert m, out
        return m.group(1)
    out = s.output()
    s.stop()
    raise AssertionError("the server started on a damaged chunk with %d threads:\n%s" %
                         (threads, out))


def flip(path, pos):
    data = bytearray(open(path, "rb").read())
    data[pos] ^= 0x10
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("damage", ["flip-frame", "flip-end", "cut", "gone"])
def test_one_damaged_chunk_among_many_is_refused(data_set, tmp_path, damage):
    src, _, _ = data_set
    d = str(tmp_path / "d")
    shutil.copytree(src, d)
    files = chunk_files(d)
    # One in the middle: neither the first nor the last a thread takes.
    victim = os.path.join(d, "chunks", files[len(files) // 2])
    size = os.path.getsize(victim)
    if damage == "flip-frame":
        flip(victim, size // 2)
    elif damage == "flip-end":
        flip(victim, size - 1)
    elif damage == "cut":
        open(victim, "r+b").truncate(size - 100)
    else:
        os.unlink(victim)
    msgs = {t: refusal(d, t) for t in THREADS}
    first = msgs[THREADS[0]]
    assert os.path.basename(victim) in first and "offset" in first, first
    for t, msg in msgs.items():
        assert msg == first, "with %d threads: %r, with %d: %r" % (t, msg, THREADS[0], first)
    p = subprocess.run([CLI, "check-data", d], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and first in p.stdout + p.stderr, p.stdout + p.stderr
