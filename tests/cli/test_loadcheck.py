"""bloomery load / check against a real bloomeryd, and against a scripted
fake server for reply parsing (replies split into 1-byte writes, error
elements, garbage, a server that hangs up)."""
import os
import random
import socket
import threading

import pytest

from clihelp import QUICK, free_port, run

N = 3000 if QUICK else 50000


def keys(n, seed):
    rnd = random.Random(seed)
    return [b"k%016x" % rnd.getrandbits(64) for _ in range(n)]


def test_load_then_check(server, tmp_path):
    ks = keys(N, 1)
    (tmp_path / "in").write_bytes(b"\n".join(ks) + b"\n")
    rc, out, err = run(["load", "--key", "lc1", "-p", server.port, tmp_path / "in",
                        "-n", N, "-e", 0.001])
    assert rc == 0, err
    assert "%d keys" % N in err and "keys/s" in err
    new = int(err.split("keys, ")[1].split(" new")[0])
    assert new >= N * 0.99
    # Every loaded key may exist, whatever the batch and pipeline shape.
    for extra in ([], ["-b", 1, "-P", 1], ["-b", 7, "-P", 300], ["-b", 5000]):
        rc, out, err = run(["check", "--key", "lc1", "-p", server.port, tmp_path / "in"] + extra)
        assert rc == 0, err
        assert out.split(b"\n")[:-1] == ks
        assert "%d may exist" % N in err
    # Keys never loaded: almost all absent; --missing and --all agree.
    others = keys(N, 2)
    data = b"\n".join(others) + b"\n"
    rc, present, err = run(["check", "--key", "lc1", "-p", server.port], input=data)
    assert rc == 0 and len(present.split(b"\n")) - 1 <= N * 0.01
    rc, missing, err = run(["check", "--key", "lc1", "-p", server.port, "--missing"], input=data)
    rc, every, err = run(["check", "--key", "lc1", "-p", server.port, "--all"], input=data)
    rows = [r.split(b"\t", 1) for r in every.split(b"\n")[:-1]]
    assert [k for f, k in rows] == others
    assert [k for f, k in rows if f == b"1"] == present.split(b"\n")[:-1]
    assert [k for f, k in rows if f == b"0"] == missing.split(b"\n")[:-1]


def test_load_fields_and_reserve(server, tmp_path):
    (tmp_path / "in").write_bytes(b"a,1,x\nb,2,y\na,1,z\n")
    rc, out, err = run(["load", "--key", "lc2", "-p", server.port, "-f", "1-2", "-d", ",",
                        "-n", 100, tmp_path / "in"])
    assert rc == 0, err
    assert "3 keys, 2 new" in err
    rc, out, err = run(["check", "--key", "lc2", "-p", server.port, "--all"],
                       input=b"a,1\nb,2\na\n")
    assert out == b"1\ta,1\n1\tb,2\n0\ta\n"
    # Reserving an existing filter keeps it.
    rc, out, err = run(["load", "--key", "lc2", "-p", server.port, "-n", 5], input=b"c\n")
    assert rc == 0, err
    rc, out, err = run(["load", "--key", "lc2", "-p", server.port, "-f", "3"], input=b"a,b\n")
    assert rc == 1 and "too few fields" in err


def test_nonscaling_full_stops_with_the_server_text(server, tmp_path):
    rc, out, err = run(["load", "--key", "lc3", "-p", server.port, "-n", 100, "--nonscaling"],
                       input=b"\n".join(keys(5000, 3)) + b"\n")
    assert rc == 1
    assert "server error: ERR non scaling filter is full" in err


def test_wrong_type_and_connection_errors(server):
    assert server.command("PFADD", "lc4", "x").startswith(b":")
    rc, out, err = run(["load", "--key", "lc4", "-p", server.port], input=b"x\n")
    assert rc == 1 and "server error: WRONGTYPE" in err
    rc, out, err = run(["load", "--key", "x", "-p", free_port()], input=b"x\n")
    assert rc == 1 and "cannot connect" in err
    rc, out, err = run(["load", "--key", "x", "-H", "no.such.host.invalid"], input=b"x\n")
    assert rc == 1 and "cannot resolve" in err


def test_empty_input_and_files(server, tmp_path):
    rc, out, err = run(["load", "--key", "lc5", "-p", server.port], input=b"")
    assert rc == 0 and "0 keys" in err
    rc, out, err = run(["load", "--key", "lc5", "-p", server.port], input=b"\n\nx")
    assert rc == 0 and "3 keys, 2 new" in err
    rc, out, err = run(["check", "--key", "lc5", "-p", server.port, "--all"], input=b"\ny\nx\n")
    assert out == b"1\t\n0\ty\n1\tx\n"
    rc, out, err = run(["load", "--key", "lc5", "-p", server.port, tmp_path / "nope"])
    assert rc == 1 and "cannot open" in err


def test_usage(tmp_path):
    for cmd in ("load", "check"):
        rc, out, err = run([cmd, "--help"])
        assert rc == 0 and b"usage: bloomery " + cmd.encode() in out and b"Exit codes" in out
        for args in ([], ["--key"], ["--key", "k", "--bogus"], ["--key", "k", "-b", "0"],
                     ["--key", "k", "-P", "0"], ["--key", "k", "-p", "70000"],
                     ["--key", "k", "-f", "x"], ["--key", "k", "-", "-"]):
            rc, out, err = run([cmd] + args, input=b"")
            assert rc == 2, (cmd, args, err)
    rc, out, err = run(["check", "--key", "k", "-n", "5"], input=b"")
    assert rc == 2
    rc, out, err = run(["load", "--key", "k", "--all"], input=b"")
    assert rc == 2


class FakeServer:
    """Answers each command with reply(cmd_args) written 1 byte at a time."""

    def __init__(self, reply):
        self.reply = reply
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        conn, _ = self.sock.accept()
        buf = b""
        with conn:
            while True:
                cmd, buf = self.parse(conn, buf)
                if cmd is None:
                    return
                out = self.reply(cmd)
                if out is None:
                    return
                for i in range(len(out)):
                    conn.sendall(out[i:i + 1])

    @staticmethod
    def parse(conn, buf):
        def need(n):
            nonlocal buf
            while len(buf) < n:
                d = conn.recv(65536)
                if not d:
                    raise EOFError
                buf += d

        def line():
            nonlocal buf
            while b"\r\n" not in buf:
                need(len(buf) + 1)
            l, buf = buf.split(b"\r\n", 1)
            return l
        try:
            n = int(line()[1:])
            args = []
            for _ in range(n):
                ln = int(line()[1:])
                need(ln + 2)
                args.append(buf[:ln])
                buf = buf[ln + 2:]
            return args, buf
        except EOFError:
            return None, buf


def test_fake_server_split_replies():
    def reply(cmd):
        n = len(cmd) - 2
        return b"*%d\r\n" % n + b"".join(b":%d\r\n" % (len(k) % 2) for k in cmd[2:])
    fs = FakeServer(reply)
    ks = [b"x" * (i % 5) + b"y" for i in range(300)]
    rc, out, err = run(["check", "--key", "f", "-p", fs.port, "-b", 13, "-P", 4, "--all"],
                       input=b"\n".join(ks) + b"\n")
    assert rc == 0, err
    assert out.split(b"\n")[:-1] == [b"%d\t%s" % (len(k) % 2, k) for k in ks]


@pytest.mark.parametrize("bad,msg", [
    (b"*2\r\n:1\r\n-ERR something odd\r\n", "server error: ERR something odd"),
    (b"-ERR whole reply\r\n", "server error: ERR whole reply"),
    (b"?what\r\n", "cannot parse"),
    (b":12\r\n", "unexpected reply"),
    (b"*2\r\n:1\r\n:7\r\n", "unexpected element"),
    (b"*2\r\n$1\r\nx\r\n:1\r\n", "unexpected element"),
    (None, "closed the connection"),
])
def test_fake_server_bad_replies(bad, msg):
    fs = FakeServer(lambda cmd: bad)
    rc, out, err = run(["load", "--key", "f", "-p", fs.port], input=b"a\nb\n")
    assert rc == 1 and msg in err, err


def test_progress(server):
    rc, out, err = run(["load", "--key", "lc6", "-p", server.port, "--progress"],
                       input=b"a\nb\n")
    assert rc == 0 and "\rload 2 keys" in err
