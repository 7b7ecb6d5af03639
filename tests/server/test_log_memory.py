"""The log's buffers give their memory back after a burst.

The log thread is held in an fsync (the sync shim's fsync=block) while a
burst of adds piles up in the append buffer; once the disk answers, the
buffers that burst grew must be freed, not kept for the next burst.
"""
import subprocess
import time

import pytest

from conftest import BLOOMERYD, QUICK
from powercut import faults  # noqa: F401 (a fixture)

# AddressSanitizer keeps freed memory in its quarantine: RSS says nothing
# there. The release build runs this test.
SANITIZED = "libasan" in subprocess.run(["ldd", BLOOMERYD], capture_output=True,
                                        text=True).stdout

BURST_MB = 24 if QUICK else 48


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(SANITIZED, reason="RSS is not meaningful under AddressSanitizer")
def test_log_buffers_shrink_after_a_burst(faults, start_server):
    f = faults
    s = start_server("--appendfsync", "everysec", "--save", "", **f.server_kw())
    c = s.client()
    # Duplicates are logged too (their records make them durable), so the
    # burst re-adds a small set: the filter's own memory does not grow.
    items = ["d%d" % j for j in range(1000)]
    c.execute_command("BF.RESERVE", "k", "0.01", "2000", "NONSCALING")
    c.execute_command("BF.MADD", "k", *items)
    f.set(fsync="block", match="/log/")
    before = f.blocked_count()
    c.execute_command("BF.ADD", "k", "first")
    f.wait_blocked(before)     # the log thread now waits in fdatasync
    base = rss_mb(s.proc.pid)
    # Each item is a 17-byte record entry (hash and "new" bit): the burst
    # stays in the append buffer while the thread is held.
    n = int(BURST_MB * 2**20 / 17 / len(items))
    p = c.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("BF.MADD", "k", *items)
        if i % 50 == 49:
            p.execute()
    p.execute()
    grown = rss_mb(s.proc.pid)
    assert grown > base + BURST_MB * 0.8, (base, grown)
    f.set()
    # Small writes after the burst: the large buffers are freed as the log
    # thread cycles through them.
    deadline = time.time() + 60
    while rss_mb(s.proc.pid) > base + BURST_MB * 0.25:
        assert time.time() < deadline, (base, grown, rss_mb(s.proc.pid))
        c.execute_command("BF.ADD", "k", "d1")
        time.sleep(0.05)
    assert c.execute_command("BF.EXISTS", "k", "d0") == 1
