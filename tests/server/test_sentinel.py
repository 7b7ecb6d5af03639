"""Redis Sentinel (Debian's) monitoring a bloomeryd master: it sees the
master up through PING and INFO, two sentinels find each other through
hello messages published on the master's __sentinel__:hello channel, and
redis-py's Sentinel client finds the master through them."""
import os
import shutil
import subprocess
import time

import pytest
from redis.sentinel import Sentinel

from conftest import MODULE, free_port

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomeryd as the master")

REDIS_SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"


def sentinel_command(conf):
    """redis-sentinel when installed; otherwise redis-server in sentinel
    mode, the same program."""
    if os.path.exists("/usr/bin/redis-sentinel"):
        return ["/usr/bin/redis-sentinel", conf]
    if not os.path.exists(REDIS_SERVER):
        pytest.skip("no redis-sentinel or redis-server")
    return [REDIS_SERVER, conf, "--sentinel"]


class RunningSentinel:
    def __init__(self, base, master_port, n):
        self.port = free_port()
        self.dir = os.path.join(base, "sentinel%d" % n)
        os.makedirs(self.dir)
        # Sentinel writes its id and what it learns into its config file.
        self.conf = os.path.join(self.dir, "sentinel.conf")
        with open(self.conf, "w") as f:
            f.write("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"
                    "sentinel monitor mymaster 127.0.0.1 %d 1\n"
                    "sentinel down-after-milliseconds mymaster 1000\n"
                    % (self.port, self.dir, os.path.join(self.dir, "log"), master_port))
        self.proc = subprocess.Popen(sentinel_command(self.conf), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)

    def cli(self, *args):
        out = subprocess.run([REDIS_CLI, "-p", str(self.port)] + list(args),
                             capture_output=True, text=True, timeout=10)
        return out.stdout.splitlines()

    def master(self):
        """SENTINEL MASTER mymaster as a dict (empty until it answers)."""
        lines = self.cli("SENTINEL", "MASTER", "mymaster")
        return dict(zip(lines[::2], lines[1::2])) if len(lines) % 2 == 0 else {}

    def sentinel_ports(self):
        lines = self.cli("SENTINEL", "SENTINELS", "mymaster")
        return {int(lines[i + 1]) for i, v in enumerate(lines[:-1]) if v == "port"}

    def log(self):
        try:
            with open(os.path.join(self.dir, "log")) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def sentinels(tmp_path):
    made = []

    def start(master_port, n=1):
        for _ in range(n):
            made.append(RunningSentinel(str(tmp_path), master_port, len(made)))
        return made[-n:]

    yield start
    for s in made:
        s.stop()


def wait_for(cond, what, logs, timeout=30):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise AssertionError("%s not reached in %ds\n%s" % (what, timeout, logs()))
        time.sleep(0.1)


def test_sentinels_monitor_bloomeryd_and_find_each_other(start_server, sentinels):
    master = start_server(threads=2)
    a, b = sentinels(master.port, 2)

    def logs():
        return "\n".join("--- sentinel %d\n%s" % (s.port, s.log()[-3000:]) for s in (a, b)) + \
            "\n--- bloomeryd\n" + master.output()[-3000:]

    def up(s):
        m = s.master()
        return m.get("flags") == "master" and m.get("role-reported") == "master"

    # Up: PING answered, INFO parsed as a master's, never subjectively down
    # (down-after-milliseconds is 1 s).
    wait_for(lambda: up(a) and up(b), "both sentinels seeing the master up", logs)
    # Hello messages: each sentinel publishes on the master and reads the
    # other's through its subscription there.
    wait_for(lambda: a.sentinel_ports() == {b.port} and b.sentinel_ports() == {a.port},
             "each sentinel listing the other", logs)
    for s in (a, b):
        m = s.master()
        assert m["num-other-sentinels"] == "1"
        assert "s_down" not in m["flags"] and "o_down" not in m["flags"]
    # Still up well past down-after-milliseconds.
    t0 = time.time()
    while time.time() - t0 < 2.5:
        assert a.master()["flags"] == "master", logs()
        time.sleep(0.2)
    # Sentinel's connections as CLIENT LIST shows them: a command link and a
    # pubsub link from each.
    c = master.client()
    subs = c.execute_command("CLIENT", "LIST", "TYPE", "pubsub").decode().splitlines()
    assert len(subs) == 2 and all("name=sentinel-" in ln and "-pubsub " in ln for ln in subs)
    assert c.execute_command("PUBSUB", "NUMSUB", "__sentinel__:hello") == \
        [b"__sentinel__:hello", 2]

    # redis-py's Sentinel client finds the master and uses it.
    sentinel = Sentinel([("127.0.0.1", a.port), ("127.0.0.1", b.port)], socket_timeout=5)
    assert sentinel.discover_master("mymaster") == ("127.0.0.1", master.port)
    m = sentinel.master_for("mymaster", socket_timeout=5)
    assert m.execute_command("BF.ADD", "via-sentinel", "x") == 1
    assert c.execute_command("BF.EXISTS", "via-sentinel", "x") == 1
    m.close()
    c.close()

    # The same sentinel sees a stopped master go down: "up" above was
    # observed, not assumed.
    master.stop()
    wait_for(lambda: "s_down" in a.master().get("flags", ""), "the stopped master down", logs)
