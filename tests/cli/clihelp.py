"""Helpers for the bloomery CLI suites (dedup, load, check).

The CLI is $BLOOMERY_CLI (default build/bloomery); load and check run
against a bloomeryd ($BLOOMERYD, default build/bloomeryd) that this file
starts on a free port with a temporary --dir, stopped with SIGTERM at the
end of the session (fixture in conftest.py). BLOOMERY_QUICK=1 (the
sanitizer run) shrinks inputs. A module of its own, not conftest, so that
`from clihelp import ...` never picks up another suite's conftest.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from freeport import bind_failed, free_port, listening  # noqa: E402,F401

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CLI = os.environ.get("BLOOMERY_CLI") or os.path.join(ROOT, "build", "bloomery")
BLOOMERYD = os.environ.get("BLOOMERYD") or os.path.join(ROOT, "build", "bloomeryd")
QUICK = os.environ.get("BLOOMERY_QUICK") == "1"


def run(args, stdin=None, input=None, timeout=120):
    """Runs the CLI; returns (exit code, stdout bytes, stderr text)."""
    p = subprocess.run([CLI] + [str(a) for a in args], input=input, stdin=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="bloomery-cli-test-")
        self.log = open(os.path.join(self.dir, "log"), "w+")
        # A port another program took before the bind: again on another.
        for attempt in range(5):
            self.port = free_port()
            self.log.seek(0)
            self.log.truncate()
            self.proc = subprocess.Popen(
                [BLOOMERYD, "--port", str(self.port), "--dir", os.path.join(self.dir, "data"),
                 "--threads", "2"], stdout=self.log, stderr=subprocess.STDOUT)
            deadline = time.time() + 20
            while not listening(self.proc.pid, self.port):
                if self.proc.poll() is not None or time.time() > deadline:
                    break
                time.sleep(0.02)
            else:
                return
            self.log.seek(0)
            out = self.log.read()
            if attempt == 4 or self.proc.poll() is None or not bind_failed(out):
                if self.proc.poll() is None:
                    self.proc.kill()
                    self.proc.wait()
                raise RuntimeError("bloomeryd did not start:\n" + out)

    def command(self, *args):
        """One command over a raw socket; returns the raw reply bytes."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            msg = b"*%d\r\n" % len(args)
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                msg += b"$%d\r\n%s\r\n" % (len(a), a)
            s.sendall(msg)
            return s.recv(65536)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc
