"""Power cuts and storage faults for bloomeryd, through tests/faults/syncshim.c.

The shim (LD_PRELOAD) journals every successful fsync/fdatasync/syncfs of a
file under the data directory with the file's size when the sync was called,
and follows renames and unlinks, each event with the time it took effect. A
power cut after SIGKILL is then simulated here: every regular file under the
data directory is truncated to the last size the journal says was synced,
and a file never synced is deleted (its data would not have survived). The
page cache survives the SIGKILL itself, so without this step a kill -9
would keep every byte the server had write()n.

Not modelled: a rename or creation whose directory was never fsynced
surviving or not (names follow the journal's renames at once), and part of
an unsynced tail surviving (the cut is exactly at the synced size).

Faults: ``Faults.set(fsync=..., write=..., match=..., delay=...)`` rewrites
the shim's control file (see syncshim.c; write="enospc" is a full disk); the
shim looks at it on every call. Use the ``faults`` fixture (import it into
the test module) so the faults are cleared before the servers are stopped at
teardown.
"""
import functools
import os
import re
import subprocess
import time

import pytest

from conftest import BLOOMERYD, Server

SHIM = os.environ.get("SYNCSHIM") or os.path.join(os.path.dirname(BLOOMERYD), "libsyncshim.so")


@functools.lru_cache(maxsize=None)
def _preload():
    """LD_PRELOAD for the shim. A sanitizer runtime must come first in the
    library list, so when bloomeryd links one it is preloaded ahead."""
    if not os.path.exists(SHIM):
        raise RuntimeError("%s not found: build the syncshim target (tests/CMakeLists.txt) "
                           "or set SYNCSHIM" % SHIM)
    out = subprocess.run(["ldd", BLOOMERYD], capture_output=True, text=True).stdout
    runtimes = re.findall(r"=>\s*(\S*lib(?:asan|ubsan|tsan|lsan)\.so\S*)", out)
    return " ".join(runtimes + [SHIM])


class Faults:
    """A data directory watched by the shim: its journal, its control file,
    the environment to start servers with, and the power cut."""

    def __init__(self, base):
        base = os.path.realpath(str(base))
        assert not re.search(r"\s", base), "journal lines need paths without spaces: %s" % base
        self.datadir = os.path.join(base, "data")
        os.makedirs(self.datadir, mode=0o700, exist_ok=True)
        self.journal = os.path.join(base, "syncshim.journal")
        self.ctl = os.path.join(base, "syncshim.ctl")
        self.set()

    def env(self):
        return {"LD_PRELOAD": _preload(), "SYNCSHIM_DIR": self.datadir,
                "SYNCSHIM_JOURNAL": self.journal, "SYNCSHIM_CTL": self.ctl}

    def server_kw(self):
        """Keyword arguments for Server / start_server: this data
        directory, under the shim."""
        return {"datadir": self.datadir, "env": self.env()}

    def start(self, *args, **kw):
        return Server(*args, **self.server_kw(), **kw)

    def set(self, fsync="ok", write="ok", match="", delay=0):
        """Replace the control file in one rename: the shim never sees it
        half-written. delay: milliseconds added to every sync."""
        tmp = self.ctl + ".tmp"
        with open(tmp, "w") as f:
            f.write("fsync=%s\nwrite=%s\nmatch=%s\ndelay=%d\n" % (fsync, write, match, delay))
        os.rename(tmp, self.ctl)

    def lines(self):
        """The journal's events (without their times), in the order they
        took effect: a sync's line is written when the sync returns, which
        can be after lines of later events (a long syncfs, and a log fsync
        that came and went meanwhile), so lines are ordered by the time
        each opens with, ties in the order they were written."""
        try:
            with open(self.journal) as f:
                text = f.read()
        except FileNotFoundError:
            return []
        # A line is appended with one write, but a read racing that write
        # can see part of it: the fsync it records has not returned yet, so
        # nothing acknowledged rests on it.
        events = []
        for line in text.split("\n")[:-1]:
            stamp, event = line.split(" ", 1)
            events.append((int(stamp), event))
        events.sort(key=lambda e: e[0])
        return [event for _, event in events]

    def blocked_count(self):
        return sum(1 for line in self.lines() if line.startswith("BLOCKED "))

    def wait_blocked(self, before, timeout=30):
        """Wait until a sync is held by fsync=block (one more BLOCKED line
        than `before`)."""
        deadline = time.time() + timeout
        while self.blocked_count() <= before:
            assert time.time() < deadline, "no sync was blocked:\n" + "\n".join(self.lines()[-20:])
            time.sleep(0.005)

    def synced(self):
        """{path: size} the journal guarantees on disk."""
        sizes = {}
        for line in self.lines():
            if line.startswith("/"):
                path, size = line.rsplit(" ", 1)
                sizes[path] = int(size)
            elif line.startswith("RENAME "):
                _, old, new = line.split(" ")
                if old in sizes:
                    sizes[new] = sizes.pop(old)
                else:
                    sizes.pop(new, None)
            elif line.startswith("UNLINK "):
                sizes.pop(line.split(" ", 1)[1], None)
        return sizes

    def power_cut(self):
        """Apply the power cut to the (stopped) server's data directory.
        Returns (deleted, truncated) paths, for messages."""
        sizes = self.synced()
        deleted, truncated = [], []
        for root, _, files in os.walk(self.datadir):
            for name in files:
                path = os.path.join(root, name)
                if path not in sizes:
                    os.unlink(path)
                    deleted.append(path)
                elif os.path.getsize(path) > sizes[path]:
                    os.truncate(path, sizes[path])
                    truncated.append(path)
        return deleted, truncated

    def crash(self, server):
        """kill -9, then the power cut."""
        server.kill()
        return self.power_cut()


@pytest.fixture
def faults(tmp_path, start_server):
    """A Faults on tmp_path; import it into a test module to use it. It
    depends on start_server, so it is torn down first: the faults are
    cleared before the servers a failed test left running are stopped."""
    f = Faults(tmp_path)
    yield f
    f.set()


def exited(server, timeout):
    """Wait for a server that is expected to exit by itself; returns its
    status, or None if it was still running at the deadline (it is killed
    then). The fixture's exit-0 check is turned off for it; sanitizer
    reports are still checked."""
    try:
        server.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        return None
    server.killed = True
    out = server.output()
    assert "ERROR: AddressSanitizer" not in out and "runtime error:" not in out, out
    return server.proc.returncode
