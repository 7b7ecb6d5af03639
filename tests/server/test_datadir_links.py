"""The data directory against a user who could plant links in it.

bloomeryd follows no symbolic link under --dir (src/persist/datadir_fs.h)
and refuses a data directory that someone else owns or may write:

- a directory the server creates is 0700, its files 0600;
- start-up refuses a directory (or a subdirectory the server makes) of
  mode 0777 or 0770, owned by another uid, or a subdirectory that is a
  link, naming the path, the owner and the mode; `bloomery check-data`
  reports the same;
- for every name the server creates (the log file and its replacement
  name, LAST and LAST.tmp, the snapshot index and its temporary name, chunk
  files and their temporary names, a torn tail kept aside, the files a
  replica's full resync writes, its replication id, the pid file) a link planted at the name
  before the operation that writes it leaves its target, a root-only file
  outside the directory, byte for byte unchanged: the operation succeeds
  without following it (the data then loads at a restart) or fails with a
  clear message while the server keeps serving;
- a file the server reads that is a link is refused with a message saying
  so (start-up and check-data).

The tests run as root, which no permission check stops: ownership is
tested by chown'ing the directory to uid 65534.
"""
import glob
import os
import re
import stat
import struct
import subprocess

import pytest

from conftest import BLOOMERYD, MODULE, Server, wait_for

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomeryd's own data directory")

CLI = os.environ.get("BLOOMERY_CLI") or os.path.join(os.path.dirname(BLOOMERYD), "bloomery")
ARGS = ("--save", "", "--appendfsync", "always")
NOBODY = 65534


def check_data(d, *extra):
    p = subprocess.run([CLI, "check-data", d] + list(extra), capture_output=True, text=True,
                       timeout=120)
    out = p.stdout + p.stderr
    assert "runtime error" not in out and "AddressSanitizer" not in out, out
    return p.returncode, out


def try_start(d, *args):
    """(server, None) when a server started on d, else (None, the message
    it refused with)."""
    try:
        return Server(*(ARGS + args), datadir=d), None
    except RuntimeError as e:
        out = str(e)
        assert "AddressSanitizer" not in out and "runtime error" not in out, out
        m = re.search(r"bloomeryd: can't start: (.*)", out)
        assert m, out
        return None, m.group(1)


class Victim:
    """A root-only file outside the data directory that no operation may
    change."""

    def __init__(self, tmp_path):
        self.path = str(tmp_path / "victim")
        self.data = b"root-only file, do not change\n" + os.urandom(4000)
        with open(self.path, "wb") as f:
            f.write(self.data)
        os.chown(self.path, 0, 0)
        os.chmod(self.path, 0o600)

    def plant(self, *names):
        for n in names:
            if os.path.lexists(n):
                os.unlink(n)
            os.symlink(self.path, n)

    def untouched(self):
        st = os.lstat(self.path)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        with open(self.path, "rb") as f:
            assert f.read() == self.data, "the link's target was written"


def serving(s):
    c = s.client()
    assert c.ping()
    c.execute_command("BF.ADD", "alive", "yes")
    assert c.execute_command("BF.EXISTS", "alive", "yes") == 1
    c.close()


def info(s, field):
    c = s.client()
    v = c.info("persistence").get(field)
    c.close()
    return v


def fill(c, n=20000):
    # Large enough for chunk files of its own (small chunks go inline).
    c.execute_command("BF.RESERVE", "big", "0.001", "100000")
    for base in range(0, n, 5000):
        c.execute_command("BF.MADD", "big", *["big:%d" % i for i in range(base, base + 5000)])
    c.execute_command("PFADD", "hll", *range(300))


def check_filled(c, n=20000):
    got = c.execute_command("BF.MEXISTS", "big", *["big:%d" % i for i in range(0, n, 97)])
    assert all(got)
    assert c.pfcount("hll") > 250


def made_dir(tmp_path, mode=0o700, subdirs=()):
    d = str(tmp_path / "data")
    os.mkdir(d)
    for s in subdirs:
        os.mkdir(os.path.join(d, s), 0o700)
    os.chmod(d, mode)
    return d


# ---- the directory's owner and mode ----


def test_a_directory_the_server_creates_is_0700_and_its_files_0600(start_server):
    s = start_server(*ARGS)
    c = s.client()
    fill(c)
    c.execute_command("SAVE")
    c.close()
    d = s.datadir
    for sub in ("", "log", "snapshots", "chunks"):
        mode = stat.S_IMODE(os.stat(os.path.join(d, sub)).st_mode)
        assert mode == 0o700, "%s: %o" % (os.path.join(d, sub), mode)
    files = [p for p in glob.glob(os.path.join(d, "*", "*"))]
    assert any(p.endswith(".zst") for p in files) and any(p.endswith(".index") for p in files)
    for p in files:
        assert stat.S_IMODE(os.lstat(p).st_mode) == 0o600, p


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o720, 0o702], ids=lambda m: "%04o" % m)
def test_start_refused_for_a_directory_others_may_write(tmp_path, mode):
    d = made_dir(tmp_path, mode)
    s, msg = try_start(d)
    assert s is None
    assert ('data directory "%s" has invalid permissions' % d) in msg, msg
    assert "mode %04o" % mode in msg and "uid 0" in msg, msg
    rc, out = check_data(d)
    assert rc == 1 and msg in out, out


def test_start_refused_for_a_directory_another_user_owns(tmp_path):
    d = made_dir(tmp_path)
    os.chown(d, NOBODY, NOBODY)
    s, msg = try_start(d)
    assert s is None
    assert ('data directory "%s" has wrong ownership' % d) in msg, msg
    assert "uid %d" % NOBODY in msg and "mode 0700" in msg and "uid 0" in msg, msg
    # check-data, run by root, says the server must run as the owner.
    rc, out = check_data(d)
    assert "owned by uid %d, not by uid 0" % NOBODY in out, out


@pytest.mark.parametrize("case", ["group-writable", "other-owner", "link"])
def test_start_refused_for_a_subdirectory(tmp_path, case):
    d = made_dir(tmp_path, 0o700, ["snapshots", "chunks"])
    log = os.path.join(d, "log")
    if case == "link":
        elsewhere = str(tmp_path / "elsewhere")
        os.mkdir(elsewhere, 0o700)
        os.symlink(elsewhere, log)
        want = 'data directory "%s" is a symbolic link' % log
    else:
        os.mkdir(log, 0o700)
        if case == "group-writable":
            os.chmod(log, 0o770)
            want = 'data directory "%s" has invalid permissions: mode 0770' % log
        else:
            os.chown(log, NOBODY, NOBODY)
            want = 'data directory "%s" has wrong ownership: owned by uid %d' % (log, NOBODY)
    s, msg = try_start(d)
    assert s is None
    assert want in msg, msg
    rc, out = check_data(d)
    assert rc == 1 and want in out, out
    if case == "link":
        assert os.listdir(str(tmp_path / "elsewhere")) == []


def test_a_directory_of_an_older_version_still_starts(tmp_path, start_server):
    """0755, as earlier versions made it: nobody else may write it."""
    d = made_dir(tmp_path, 0o755, ["log", "snapshots", "chunks"])
    for sub in ("log", "snapshots", "chunks"):
        os.chmod(os.path.join(d, sub), 0o755)
    s = start_server(*ARGS, datadir=d)
    serving(s)
    rc, out = check_data(d)
    assert rc == 0, out


def test_a_data_directory_given_as_a_link_is_used(tmp_path, start_server):
    """--dir itself may be a link (an administrator's choice): the
    directory it names is checked and used."""
    real = made_dir(tmp_path)
    d = str(tmp_path / "link")
    os.symlink(real, d)
    s = start_server(*ARGS, datadir=d)
    c = s.client()
    fill(c)
    c.execute_command("SAVE")
    c.close()
    s.stop()
    assert glob.glob(os.path.join(real, "chunks", "*.zst"))
    s2 = start_server(*ARGS, datadir=d)
    c = s2.client()
    check_filled(c)
    c.close()
    rc, out = check_data(d)
    assert rc == 0, out


# ---- links planted at the names the server writes ----


@pytest.mark.parametrize("which", ["log.new", "LAST.tmp"])
def test_links_at_the_names_written_at_start(tmp_path, start_server, which):
    """The first log file is made under "<name>.new" (nothing of its own is
    at its name) and LAST through LAST.tmp. (A link at a log file's own
    name is read at start, and refused:
    test_a_file_read_through_a_link_is_refused.)"""
    v = Victim(tmp_path)
    d = made_dir(tmp_path, 0o700, ["log", "snapshots", "chunks"])
    first = os.path.join(d, "log", "%016x.wal" % 1)
    name = {"log.new": first + ".new", "LAST.tmp": os.path.join(d, "log", "LAST.tmp")}[which]
    v.plant(name)
    s = start_server(*ARGS, datadir=d)
    serving(s)
    v.untouched()
    assert not os.path.lexists(name), "%s was not the name the server wrote" % name
    assert stat.S_ISREG(os.lstat(first).st_mode)
    c = s.client()
    fill(c)
    c.close()
    s.stop()
    s2 = start_server(*ARGS, datadir=d)
    c = s2.client()
    check_filled(c)
    c.close()
    v.untouched()


SNAPSHOT_NAMES = ["chunk", "chunk.tmp", "index", "index.tmp", "log", "log.new", "LAST",
                  "LAST.tmp"]


@pytest.mark.parametrize("which", SNAPSHOT_NAMES)
@pytest.mark.parametrize("how", ["SAVE", "BGSAVE", "BGREWRITEAOF"])
def test_links_at_the_names_a_snapshot_writes(tmp_path, start_server, how, which):
    v = Victim(tmp_path)
    s = start_server(*ARGS)
    d = s.datadir
    c = s.client()
    fill(c)
    c.execute_command("SAVE")
    # Learn the chunk files' names, then remove them so the next snapshot
    # writes them again: through their temporary names, to the same names.
    chunks = sorted(glob.glob(os.path.join(d, "chunks", "*.zst")))
    assert chunks
    for p in chunks:
        os.unlink(p)
    # A record after it: the next snapshot starts a log file of a new name.
    c.execute_command("PFADD", "hll", "one more")
    seq = int(info(s, "bloomery_snapshot_seq"))
    nxt = int(info(s, "bloomery_wal_written_lsn")) + 1
    index = os.path.join(d, "snapshots", "%016x.index" % (seq + 1))
    wal = os.path.join(d, "log", "%016x.wal" % nxt)
    last = os.path.join(d, "log", "LAST")
    # Temporary chunk names are "<name>.tmp.<key>.<chunk>": every one the
    # two keys' chunks could take; one per chunk file is used.
    tmps = ["%s.tmp.%d.%d" % (p, k, i) for p in chunks for k in range(2) for i in range(16)]
    finals, temps = {
        "chunk": (chunks, []), "chunk.tmp": ([], tmps),
        "index": ([index], []), "index.tmp": ([], [index + ".tmp"]),
        "log": ([wal], []), "log.new": ([], [wal + ".new"]),
        "LAST": ([last], []), "LAST.tmp": ([], [last + ".tmp"]),
    }[which]
    v.plant(*(finals + temps))
    if which == "log.new":
        # The rotation's file goes through "<name>.new" when something not
        # its own is at its name: a link there too.
        v.plant(wal)
    if how == "SAVE":
        assert c.execute_command("SAVE")
    else:
        c.execute_command(how)
        wait_for(lambda: int(info(s, "bloomery_snapshot_seq")) == seq + 1 and
                 int(info(s, "rdb_bgsave_in_progress")) == 0, "the snapshot")
    assert info(s, "rdb_last_bgsave_status") == "ok"
    v.untouched()
    for p in finals + [wal]:
        assert stat.S_ISREG(os.lstat(p).st_mode), "%s: not the server's file" % p
    used = [p for p in temps if not os.path.lexists(p)]
    assert len(used) == (len(chunks) if which == "chunk.tmp" else len(temps)), \
        "the temporary names planted were not the ones the server wrote"
    serving(s)
    c.close()
    s.stop()
    rc, out = check_data(d)
    assert rc == 0, out
    # The files the snapshot wrote are the data: a restart loads it.
    s2 = start_server(*ARGS, datadir=d)
    c = s2.client()
    check_filled(c)
    c.close()
    v.untouched()


def records(path):
    """(offset, size) of each record of a log file."""
    data = open(path, "rb").read()
    out, off = [], 32
    while off + 17 <= len(data):
        plen = struct.unpack_from("<I", data, off)[0]
        out.append((off, 17 + plen + 8))
        off += 17 + plen + 8
    return out


def test_a_link_at_the_name_a_torn_tail_is_kept_under(tmp_path, start_server):
    v = Victim(tmp_path)
    s = start_server(*ARGS)
    d = s.datadir
    c = s.client()
    for i in range(50):
        c.execute_command("BF.ADD", "k", "item%d" % i)
    c.close()
    s.kill()
    newest = sorted(glob.glob(os.path.join(d, "log", "*.wal")))[-1]
    off, size = records(newest)[-1]
    data = open(newest, "rb").read()
    open(newest, "r+b").truncate(off + size // 2)
    kept = "%s.torn-%d" % (newest, off)
    v.plant(kept)
    s2 = start_server(*ARGS, datadir=d)
    serving(s2)
    v.untouched()
    assert stat.S_ISREG(os.lstat(kept).st_mode)
    assert open(kept, "rb").read() == data[off:off + size // 2]
    c = s2.client()
    assert c.execute_command("BF.EXISTS", "k", "item48") == 1
    c.close()


RESYNC_NAMES = ["chunk", "chunk.tmp", "index", "index.tmp", "log", "log.new", "LAST.tmp",
                "replid", "replid.tmp"]


@pytest.mark.parametrize("which", RESYNC_NAMES)
def test_links_at_the_names_a_full_resync_writes(tmp_path, start_server, which):
    v = Victim(tmp_path)
    master = start_server(*ARGS)
    m = master.client()
    fill(m)
    m.execute_command("SAVE")
    # The resync takes a snapshot of its own: the next sequence (or one
    # more, should a slow link make the replica ask twice), the same chunks
    # (nothing changed), the log from the next LSN.
    seq = int(info(master, "bloomery_snapshot_seq")) + 1
    lsn = int(info(master, "bloomery_wal_written_lsn")) + 1
    hashes = sorted(os.path.basename(p) for p in
                    glob.glob(os.path.join(master.datadir, "chunks", "*.zst")))
    assert hashes
    replica = start_server(*ARGS)
    d = replica.datadir
    chunks = [os.path.join(d, "chunks", h) for h in hashes]
    indexes = [os.path.join(d, "snapshots", "%016x.index" % q) for q in (seq, seq + 1)]
    wal = os.path.join(d, "log", "%016x.wal" % lsn)
    last = os.path.join(d, "log", "LAST")
    replid = os.path.join(d, "replid")
    finals, temps = {
        "chunk": (chunks, []), "chunk.tmp": ([], [p + ".tmp" for p in chunks]),
        "index": (indexes, []), "index.tmp": ([], [p + ".tmp" for p in indexes]),
        "log": ([wal], []), "log.new": ([wal], [wal + ".new"]),
        "LAST.tmp": ([], [last + ".tmp"]),
        "replid": ([replid], []), "replid.tmp": ([], [replid + ".tmp"]),
    }[which]
    v.plant(*(finals + temps))
    r = replica.client()
    assert r.execute_command("REPLICAOF", "127.0.0.1", master.port) == b"OK"

    def caught_up():
        rep = r.info("replication")
        return (rep.get("master_link_status") == "up" and
                rep["slave_repl_offset"] == m.info("replication")["master_repl_offset"])
    wait_for(caught_up, "the replica to catch up")
    v.untouched()
    why = "\n" + replica.output()
    for p in finals:
        assert not os.path.islink(p), "a link left at %s%s" % (p, why)
    have = chunks + [wal, replid] + [p for p in indexes if os.path.lexists(p)]
    assert len(have) == len(chunks) + 3, why
    for p in have:
        assert stat.S_ISREG(os.lstat(p).st_mode), "%s: not the server's file%s" % (p, why)
    # Used and renamed, or (a stale temporary name) removed at the end.
    for p in temps:
        assert not os.path.lexists(p), "%s left%s" % (p, why)
    check_filled(r)
    r.close()
    m.close()
    replica.stop()
    # What the replica wrote is its data: it starts from it.
    s2 = start_server(*ARGS, datadir=d)
    c = s2.client()
    check_filled(c)
    c.close()
    v.untouched()


def test_a_link_at_the_pid_file(tmp_path, start_server):
    v = Victim(tmp_path)
    d = made_dir(tmp_path, 0o700)
    pid = os.path.join(d, "bloomeryd.pid")
    v.plant(pid)
    s = start_server(*ARGS, "--pidfile", pid, datadir=d)
    serving(s)
    v.untouched()
    assert "Failed to write PID file %s" % pid in s.output(), s.output()
    assert "symbolic link" in s.output()
    # Not removed at exit either: the server did not write it.
    s.stop()
    assert os.path.islink(pid)
    v.untouched()
    # With nothing planted, the pid file is written.
    os.unlink(pid)
    s2 = start_server(*ARGS, "--pidfile", pid, datadir=d)

    def written():
        with open(pid) as f:
            return f.read().strip() == str(s2.proc.pid)
    wait_for(written, "the pid file", ignore=(OSError,))
    assert stat.S_ISREG(os.lstat(pid).st_mode)


# ---- reads ----


@pytest.mark.parametrize("which", ["index", "chunk", "log", "LAST"])
def test_a_file_read_through_a_link_is_refused(tmp_path, start_server, which):
    s = start_server(*ARGS)
    d = s.datadir
    c = s.client()
    fill(c)
    c.execute_command("SAVE")
    c.execute_command("BF.ADD", "after", "x")
    c.close()
    s.stop()
    pick = {
        "index": lambda: glob.glob(os.path.join(d, "snapshots", "*.index")),
        "chunk": lambda: glob.glob(os.path.join(d, "chunks", "*.zst")),
        "log": lambda: glob.glob(os.path.join(d, "log", "*.wal")),
        "LAST": lambda: [os.path.join(d, "log", "LAST")],
    }[which]
    path = sorted(pick())[-1]
    # A link to an exact copy: only the link itself is wrong.
    copy = str(tmp_path / "copy")
    os.rename(path, copy)
    os.symlink(copy, path)
    srv, msg = try_start(d)
    assert srv is None, "started reading %s through a link" % path
    assert path in msg and "symbolic link" in msg, msg
    rc, out = check_data(d)
    assert rc == 1 and msg in out, out
    assert "warning: %s is a symbolic link" % path in out, out
