"""The data directory: bloomeryd's start-up and `bloomery check-data` agree.

Both read the directory through src/persist/datadir.c, so:

- a healthy directory holding every type (plain, classic, counting,
  windowed and cuckoo filters, HLL), with a snapshot and a log after it,
  starts and passes check-data;
- every kind of damage the server refuses (index, chunk file, log record,
  the last complete record, a deleted log file: the newest, one in the
  middle, all of them, with or without a snapshot; LAST itself) makes
  check-data exit 1 with the very message the server stops with;
- a torn tail (a record cut by the end of the newest log file, or zeros
  where data never arrived) is kept aside in <file>.torn-<offset> with the
  cut bytes, by the server at start (INFO log_torn_tails) and by
  check-data --fix; check-data reports it until then, and notes kept files;
- a directory from before LAST existed still starts.
"""
import os
import re
import shutil
import struct
import subprocess

import pytest

from conftest import BLOOMERYD, Server

CLI = os.environ.get("BLOOMERY_CLI") or os.path.join(os.path.dirname(BLOOMERYD), "bloomery")

# No snapshot at stop (the log matters), every record durable at its reply.
ARGS = ("--save", "", "--appendfsync", "always")


def check_data(d, *extra):
    p = subprocess.run([CLI, "check-data", d] + list(extra), capture_output=True, text=True,
                       timeout=120)
    out = p.stdout + p.stderr
    assert "runtime error" not in out and "AddressSanitizer" not in out, out
    return p.returncode, out


def try_start(d):
    """(True, output) when a server started on d (then stopped), else
    (False, the message it refused with)."""
    try:
        s = Server(*ARGS, datadir=d)
    except RuntimeError as e:
        out = str(e)
        assert "AddressSanitizer" not in out and "runtime error" not in out, out
        m = re.search(r"bloomeryd: can't start: (.*)", out)
        assert m, out
        return False, m.group(1)
    out = s.output()
    s.stop()
    return True, out


def refused_by_both(d, name):
    """The server refuses d naming `name`; check-data exits 1 with the same
    message."""
    started, msg = try_start(d)
    assert not started, "the server started on a damaged directory:\n" + msg
    assert name in msg and "offset" in msg, msg
    rc, out = check_data(d)
    assert rc == 1, out
    assert msg in out, "check-data does not report %r:\n%s" % (msg, out)
    return msg


def wal_files(d):
    return sorted(n for n in os.listdir(os.path.join(d, "log")) if n.endswith(".wal"))


def records(path):
    """(offset, size) of each record of a log file."""
    data = open(path, "rb").read()
    out, off = [], 32
    while off + 17 <= len(data):
        plen = struct.unpack_from("<I", data, off)[0]
        out.append((off, 17 + plen + 8))
        off += 17 + plen + 8
    return out


def flip(path, pos):
    data = bytearray(open(path, "rb").read())
    data[pos] ^= 0x01
    open(path, "wb").write(bytes(data))


def copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def make_every_type(c, tag):
    # Large enough for a chunk file of its own (small chunks go inline).
    c.execute_command("BF.RESERVE", "big", "0.001", "100000")
    for base in range(0, 20000, 5000):
        c.execute_command("BF.MADD", "big", *["big:%d" % i for i in range(base, base + 5000)])
    c.execute_command("BF.RESERVE", "plain", "0.01", "1000")
    c.execute_command("BF.RESERVE", "classic", "0.001", "500", "LAYOUT", "CLASSIC")
    c.execute_command("BF.RESERVE", "counting", "0.01", "1000", "COUNTING")
    c.execute_command("BF.RESERVE", "window", "0.01", "1000", "WINDOW", "3600")
    c.execute_command("CF.RESERVE", "cuckoo", "1000")
    add_every_type(c, tag)


def add_every_type(c, tag):
    items = ["%s:%d" % (tag, i) for i in range(200)]
    for key in ("plain", "classic", "counting", "window"):
        c.execute_command("BF.MADD", key, *items)
    c.execute_command("BF.DEL", "counting", items[0])
    c.execute_command("CF.INSERT", "cuckoo", "ITEMS", *items)
    c.execute_command("CF.DEL", "cuckoo", items[1])
    c.execute_command("PFADD", "hll", *items)


def answers(c):
    probe = ["%s:%d" % (t, i) for t in ("a", "b", "c", "zz") for i in range(0, 200, 7)]
    out = {}
    for key in ("plain", "classic", "counting", "window"):
        out[key] = tuple(c.execute_command("BF.MEXISTS", key, *probe))
    out["cuckoo"] = tuple(c.execute_command("CF.MEXISTS", "cuckoo", *probe))
    out["hll"] = c.pfcount("hll")
    return out


def test_every_type_passes_check_data(tmp_path, start_server):
    d = str(tmp_path / "data")
    s = start_server(*ARGS, datadir=d)
    c = s.client()
    make_every_type(c, "a")
    c.execute_command("SAVE")
    add_every_type(c, "b")           # after the snapshot: only in the log
    before = answers(c)
    c.close()
    s.stop()
    rc, out = check_data(d)
    assert rc == 0, out
    assert out.rstrip().endswith(": ok"), out
    assert re.search(r": 7 keys, \d+ chunks, log from LSN \d+: ok", out), out
    assert os.listdir(os.path.join(d, "chunks")), "no chunk file"
    n = int(re.search(r"log: (\d+) records checked", out).group(1))
    assert n >= 8, out                # one record or more per type after the snapshot
    # The server reads the same directory back to the same answers.
    s2 = start_server(*ARGS, datadir=d)
    c2 = s2.client()
    assert answers(c2) == before
    c2.close()
    s2.stop()


# ---- damage ----

def build(d, snapshot):
    """A directory with three log files (three server runs), and a
    snapshot before them when asked; keys of every type."""
    for run in range(3):
        s = Server(*ARGS, datadir=d)
        try:
            c = s.client()
            if run == 0:
                make_every_type(c, "a")
                if snapshot:
                    c.execute_command("SAVE")
            add_every_type(c, "r%d" % run)
            c.close()
        finally:
            s.stop()
        # LAST as this run left it (for a test that puts an old one back).
        shutil.copy(os.path.join(d, "log", "LAST"), "%s.LAST.%d" % (d, run))
    assert len(wal_files(d)) == 3, wal_files(d)
    assert os.path.exists(os.path.join(d, "log", "LAST"))
    return d


@pytest.fixture(scope="module")
def with_snapshot(tmp_path_factory):
    return build(str(tmp_path_factory.mktemp("snap") / "data"), True)


@pytest.fixture(scope="module")
def without_snapshot(tmp_path_factory):
    return build(str(tmp_path_factory.mktemp("nosnap") / "data"), False)


@pytest.mark.parametrize("snap", [True, False])
def test_pristine_starts_and_checks(with_snapshot, without_snapshot, tmp_path, snap):
    d = copy(with_snapshot if snap else without_snapshot, str(tmp_path / "d"))
    rc, out = check_data(d)
    assert rc == 0 and out.rstrip().endswith(": ok"), out
    assert "LAST names %s" % wal_files(d)[-1] in out, out
    started, out = try_start(d)
    assert started, out


@pytest.mark.parametrize("snap", [True, False])
@pytest.mark.parametrize("which", ["newest", "middle", "oldest", "all"])
def test_deleted_log_file(with_snapshot, without_snapshot, tmp_path, snap, which):
    d = copy(with_snapshot if snap else without_snapshot, str(tmp_path / "d"))
    files = wal_files(d)
    gone = {"newest": files[-1:], "middle": files[1:2], "oldest": files[:1], "all": files}[which]
    for name in gone:
        os.unlink(os.path.join(d, "log", name))
    # The newest (or all): LAST names the missing file. The middle or the
    # oldest: the LSN chain from the snapshot's start (or 1) breaks at the
    # next file.
    name = files[-1] if which in ("newest", "all") else files[files.index(gone[0]) + 1]
    msg = refused_by_both(d, name)
    if which in ("newest", "all"):
        assert "named by LAST is missing" in msg, msg
    else:
        assert "a log file is missing" in msg, msg
    if which == "oldest" and snap:
        # The file the snapshot's start needs is gone.
        idx = os.listdir(os.path.join(d, "snapshots"))[0]
        start = struct.unpack_from("<Q", open(os.path.join(d, "snapshots", idx), "rb").read(),
                                   24)[0]
        assert int(files[0][:16], 16) == start
        assert "the snapshot needs records from LSN %d" % start in msg, msg


def damage_cases(d):
    """(label, how to damage d, the file the message must name)."""
    files = [os.path.join(d, "log", n) for n in wal_files(d)]
    newest, older = files[-1], files[0]
    last_rec = records(newest)[-1]
    mid_rec = records(older)[len(records(older)) // 2]
    idx = os.path.join(d, "snapshots", os.listdir(os.path.join(d, "snapshots"))[0])
    chunks = sorted(os.listdir(os.path.join(d, "chunks")))
    assert chunks, "the test needs a chunk file"
    chunk = os.path.join(d, "chunks", chunks[0])
    last = os.path.join(d, "log", "LAST")

    def cut(path, n):
        return lambda: open(path, "r+b").truncate(n)

    return [
        ("index-flip", lambda: flip(idx, os.path.getsize(idx) // 2), idx),
        ("index-cut", cut(idx, os.path.getsize(idx) - 3), idx),
        ("chunk-flip", lambda: flip(chunk, os.path.getsize(chunk) // 2), chunk),
        ("chunk-gone", lambda: os.unlink(chunk), chunk),
        ("log-header", lambda: flip(older, 17), older),
        ("log-middle-record", lambda: flip(older, mid_rec[0] + mid_rec[1] // 2), older),
        ("log-last-record-payload", lambda: flip(newest, last_rec[0] + 20), newest),
        ("log-last-record-checksum", lambda: flip(newest, last_rec[0] + last_rec[1] - 1), newest),
        ("log-last-record-prefix", lambda: flip(newest, last_rec[0] + 6), newest),
        ("LAST-flip", lambda: flip(last, 18), last),
        ("LAST-cut", cut(last, 20), last),
    ]


CASES = ["index-flip", "index-cut", "chunk-flip", "chunk-gone", "log-header", "log-middle-record",
         "log-last-record-payload", "log-last-record-checksum", "log-last-record-prefix",
         "LAST-flip", "LAST-cut"]


@pytest.mark.parametrize("case", CASES)
def test_damage_refused_by_both(with_snapshot, tmp_path, case):
    d = copy(with_snapshot, str(tmp_path / "d"))
    how, path = {label: (h, p) for label, h, p in damage_cases(d)}[case]
    how()
    refused_by_both(d, os.path.basename(path))
    # Nothing was cut or kept aside: the evidence is where it was.
    assert not [n for n in os.listdir(os.path.join(d, "log")) if ".torn-" in n]


def test_record_in_a_file_newer_than_last(without_snapshot, tmp_path):
    """LAST names an older file than one holding records: the writer never
    leaves that (LAST is updated before a file's first record), so it is
    damage: a LAST put back from elsewhere, or log files copied in."""
    d = copy(without_snapshot, str(tmp_path / "d"))
    files = wal_files(d)
    shutil.copy("%s.LAST.1" % without_snapshot, os.path.join(d, "log", "LAST"))
    msg = refused_by_both(d, files[2])
    assert "newer than %s" % files[1] in msg, msg


# ---- torn tails ----

def torn_files(d):
    return sorted(n for n in os.listdir(os.path.join(d, "log")) if ".torn-" in n)


def info(s, field):
    c = s.client()
    v = c.info("persistence").get(field)
    c.close()
    return v


@pytest.mark.parametrize("cut", ["mid-record", "prefix", "zeros"])
def test_torn_tail_is_kept_aside_by_the_server(with_snapshot, tmp_path, start_server, cut):
    d = copy(with_snapshot, str(tmp_path / "d"))
    newest = os.path.join(d, "log", wal_files(d)[-1])
    data = open(newest, "rb").read()
    off, size = records(newest)[-1]
    if cut == "mid-record":
        end = off + size // 2
        open(newest, "r+b").truncate(end)
        tail = data[off:end]
    elif cut == "prefix":
        end = off + 9
        open(newest, "r+b").truncate(end)
        tail = data[off:end]
    else:
        # The record's end never arrived: zeros from a sector boundary inside
        # it, and the file extended past it.
        sector = (off // 512 + 1) * 512
        if sector >= off + size:
            sector = off + size - 8
        tail = data[off:sector] + bytes(off + size - sector) + bytes(4096)
        open(newest, "wb").write(data[:off] + tail)
    rc, out = check_data(d)
    assert rc == 1, out
    kept = "%s.torn-%d" % (newest, off)
    assert "torn tail of %d bytes at offset %d" % (len(tail), off) in out, out
    assert kept in out, out
    s = start_server(*ARGS, datadir=d)
    assert "torn tail" in s.output() and kept in s.output(), s.output()
    assert int(info(s, "log_torn_tails")) == 1
    assert info(s, "log_torn_tail_last") == kept
    s.stop()
    assert open(kept, "rb").read() == tail
    assert torn_files(d) == [os.path.basename(kept)]
    # Cut at the record: what was before it is intact and replayed.
    rc, out = check_data(d)
    assert rc == 0, out
    assert "note: %s" % kept in out, out


def test_check_data_fix_keeps_the_torn_tail_aside(with_snapshot, tmp_path):
    d = copy(with_snapshot, str(tmp_path / "d"))
    newest = os.path.join(d, "log", wal_files(d)[-1])
    data = open(newest, "rb").read()
    off, size = records(newest)[-1]
    open(newest, "r+b").truncate(off + size - 3)
    rc, out = check_data(d, "--fix")
    assert rc == 0, out
    kept = "%s.torn-%d" % (newest, off)
    assert "kept aside in %s" % kept in out, out
    assert open(kept, "rb").read() == data[off:off + size - 3]
    assert os.path.getsize(newest) == off
    rc, out = check_data(d)
    assert rc == 0 and "note: %s" % kept in out, out
    started, out = try_start(d)
    assert started and "torn tail" not in out, out


def test_torn_header_of_a_new_file(with_snapshot, tmp_path):
    """A crash while a log file was being created (before LAST names it):
    its partial header is a torn tail."""
    d = copy(with_snapshot, str(tmp_path / "d"))
    last = wal_files(d)[-1]
    following = "%016x.wal" % (int(last[:16], 16) + 1000)
    partial = open(os.path.join(d, "log", last), "rb").read()[:20]
    open(os.path.join(d, "log", following), "wb").write(partial)
    rc, out = check_data(d)
    assert rc == 1 and "torn tail of 20 bytes at offset 0" in out, out
    started, out = try_start(d)
    assert started, out
    assert open(os.path.join(d, "log", following + ".torn-0"), "rb").read() == partial
    assert following not in wal_files(d)


def test_directory_without_last_still_starts(with_snapshot, tmp_path):
    """A directory written before LAST existed: accepted, and the first log
    file the server creates writes LAST."""
    d = copy(with_snapshot, str(tmp_path / "d"))
    last = os.path.join(d, "log", "LAST")
    os.unlink(last)
    rc, out = check_data(d)
    assert rc == 0 and "no LAST file" in out, out
    started, out = try_start(d)
    assert started, out
    assert os.path.exists(last)
    rc, out = check_data(d)
    assert rc == 0 and "LAST names %s" % wal_files(d)[-1] in out, out
