"""redis-cli and redis-benchmark work against bloomeryd unchanged."""
import os
import subprocess

from conftest import QUICK


def run(*cmd, input=None):
    p = subprocess.run(cmd, input=input, capture_output=True, timeout=120)
    assert p.returncode == 0, (cmd, p.stdout, p.stderr)
    return p.stdout.decode()


def test_redis_cli(server, r):
    port = str(server.port)
    assert run("redis-cli", "-p", port, "PING").strip() == "PONG"
    assert run("redis-cli", "-p", port, "BF.ADD", "cli", "a").strip() == "1"
    assert run("redis-cli", "-p", port, "BF.EXISTS", "cli", "a").strip() == "1"
    assert "redis_version:" in run("redis-cli", "-p", port, "INFO", "server")
    # RESP3: BF.EXISTS is a boolean, which redis-cli prints as (true).
    assert run("redis-cli", "-p", port, "-3", "BF.EXISTS", "cli", "a").strip() == "(true)"
    assert run("redis-cli", "-p", port, "-3", "BF.EXISTS", "cli", "zz").strip() == "(false)"
    out = run("redis-cli", "-p", port, "BF.INFO", "cli")
    assert "Capacity" in out and "Expansion rate" in out
    # Interactive-style session on stdin, with inline commands.
    out = run("redis-cli", "-p", port, input=b"BF.MADD cli b c\nBF.CARD cli\n")
    assert out.split() == ["1", "1", "3"]


def test_redis_cli_pipe_mode(server, r):
    n = 1000 if QUICK else 10000
    r.execute_command("BF.RESERVE", "pipe", "0.00001", "100000")
    payload = "".join("BF.ADD pipe item%d\r\n" % i for i in range(n)).encode()
    out = run("redis-cli", "-p", str(server.port), "--pipe", input=payload)
    assert "errors: 0, replies: %d" % n in out
    assert r.execute_command("BF.CARD", "pipe") == n


def test_redis_benchmark(server, r):
    port = str(server.port)
    n = "2000" if QUICK else "20000"
    out = run("redis-benchmark", "-p", port, "-n", n, "-c", "10", "-q", "-t", "ping")
    assert "requests per second" in out
    out = run("redis-benchmark", "-p", port, "-n", n, "-c", "20", "-P", "16", "-r", "1000000",
              "-q", "BF.ADD", "bench", "__rand_int__")
    assert "requests per second" in out
    out = run("redis-benchmark", "-p", port, "-n", n, "-c", "20", "-r", "1000000", "-q",
              "BF.EXISTS", "bench", "__rand_int__")
    assert "requests per second" in out
    assert r.execute_command("BF.CARD", "bench") > 0
    assert os.path.exists(server.dir)
