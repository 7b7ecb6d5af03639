"""Fixtures of the console suites (consolehelp.py)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from consolehelp import Console, Proc  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "report: prints figures (-s shows them), asserts none")


@pytest.fixture
def procs():
    """start(argv, name) -> Proc; console(args) -> Console; all stopped at
    the end, the console first, checked to exit cleanly."""
    made = []
    consoles = []

    class Starter:
        def start(self, argv, name="server", env=None):
            p = Proc(argv, name, env=env)
            made.append(p)
            return p

        def console(self, args, **kw):
            c = Console(args, **kw)
            consoles.append(c)
            return c

    yield Starter()
    bad = []
    for c in consoles:
        running = c.p.proc.poll() is None
        out = c.p.output()
        rc = c.stop()
        if running and rc != 0:
            bad.append("console exited %s:\n%s" % (rc, out))
        if "ERROR: AddressSanitizer" in out or "runtime error:" in out:
            bad.append(out)
    for p in made:
        p.stop()
    assert not bad, "\n".join(bad)
