"""The bloomeryd fixture for the CLI suites (see clihelp.py)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from clihelp import Server  # noqa: E402


@pytest.fixture(scope="session")
def server():
    s = Server()
    yield s
    assert s.stop() == 0, "bloomeryd did not exit cleanly"
