"""bloomery load / check over TLS and as an ACL user, against Debian's
redis-server with bloomery.so (for the BF.* commands) on a TLS port.

The certificates (a CA, the server's for 127.0.0.1 and localhost, a
client's, and a second CA nobody trusts) are made here with the openssl
command in a temporary directory. $BLOOMERY_MODULE names the module
(default: bloomery.so next to the CLI), $REDIS_SERVER Redis, and
$REDIS_PRELOAD a sanitizer runtime to preload into Redis for a module built
with one."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from clihelp import CLI, bind_failed, free_port, listening, run
from tlscerts import make_pki

REDIS_SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")
MODULE = os.path.abspath(os.environ.get("BLOOMERY_MODULE") or
                         os.path.join(os.path.dirname(CLI), "bloomery.so"))
REDIS_PRELOAD = os.environ.get("REDIS_PRELOAD")

pytestmark = pytest.mark.skipif(
    not (os.path.exists(REDIS_SERVER) and shutil.which("openssl") and os.path.exists(MODULE)),
    reason="needs redis-server, openssl and bloomery.so")


@pytest.fixture(scope="module")
def certs():
    d = tempfile.mkdtemp(prefix="bloomery-cli-tls-")
    make_pki(d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Redis:
    """redis-server with the module on a free port: TLS only unless plain."""

    def __init__(self, certs, *extra, plain=False):
        self.dir = tempfile.mkdtemp(prefix="bloomery-cli-redis-")
        env = None if not REDIS_PRELOAD else {
            **os.environ, "LD_PRELOAD": REDIS_PRELOAD,
            "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1"}
        for attempt in range(5):
            self.port = free_port()
            ports = (["--port", str(self.port)] if plain else
                     ["--port", "0", "--tls-port", str(self.port),
                      "--tls-cert-file", os.path.join(certs, "server.crt"),
                      "--tls-key-file", os.path.join(certs, "server.key"),
                      "--tls-ca-cert-file", os.path.join(certs, "ca.crt")])
            self.log = open(os.path.join(self.dir, "log-%d" % self.port), "w+")
            self.proc = subprocess.Popen(
                [REDIS_SERVER, *ports, "--bind", "127.0.0.1", "--dir", self.dir, "--save", "",
                 "--loadmodule", MODULE, *extra],
                stdout=self.log, stderr=subprocess.STDOUT, env=env)
            deadline = time.time() + 20
            while not listening(self.proc.pid, self.port):
                if self.proc.poll() is not None or time.time() > deadline:
                    break
                time.sleep(0.02)
            else:
                return
            out = self.output()
            if attempt == 4 or self.proc.poll() is None or not bind_failed(out):
                self.stop()
                raise RuntimeError("redis-server did not start:\n" + out)

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_server(certs):
    # A client certificate is welcome, not required; an ACL user, and one
    # limited to some keys.
    s = Redis(certs, "--tls-auth-clients", "optional",
              "--user", "loader", "on", ">pw", "~*", "+@all",
              "--user", "lim", "on", ">pw", "~allowed:*", "+@all")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def mtls_server(certs):
    s = Redis(certs, "--tls-auth-clients", "yes")
    yield s
    s.stop()


KEYS = b"".join(b"key-%d\n" % i for i in range(2000))


def tls_args(certs, *more):
    return ["--tls", "--cacert", os.path.join(certs, "ca.crt"), *more]


def test_load_then_check_over_tls(certs, tls_server):
    p = tls_server.port
    rc, out, err = run(["load", "--key", "t1", "-p", p, *tls_args(certs), "-b", 100],
                       input=KEYS)
    assert rc == 0, err
    assert "2000 keys, 2000 new" in err
    rc, out, err = run(["check", "--key", "t1", "-p", p, *tls_args(certs), "-b", 7, "-P", 50],
                       input=KEYS + b"absent\n")
    assert rc == 0, err
    assert out == KEYS
    # The CA from a directory of hashed names, as redis-cli's --cacertdir.
    cadir = os.path.join(certs, "cadir")
    os.makedirs(cadir, exist_ok=True)
    shutil.copy(os.path.join(certs, "ca.crt"), cadir)
    subprocess.run(["openssl", "rehash", cadir], check=True, capture_output=True)
    rc, out, err = run(["check", "--key", "t1", "-p", p, "--tls", "--cacertdir", cadir],
                       input=b"key-1\n")
    assert rc == 0 and out == b"key-1\n", err
    # By name: the certificate holds localhost too.
    rc, out, err = run(["check", "--key", "t1", "-H", "localhost", "-p", p, *tls_args(certs)],
                       input=b"key-2\n")
    assert rc == 0 and out == b"key-2\n", err


def test_untrusted_certificate(certs, tls_server):
    p = tls_server.port
    rc, out, err = run(["load", "--key", "t2", "-p", p, "--tls", "--cacert",
                        os.path.join(certs, "other-ca.crt")], input=KEYS)
    assert rc == 1
    assert "cannot verify the certificate of 127.0.0.1:%d" % p in err, err
    assert "--insecure" in err
    # Trusted CA, wrong name.
    rc, out, err = run(["load", "--key", "t2", "-p", p, *tls_args(certs, "--sni",
                                                                   "elsewhere.example")],
                       input=KEYS)
    assert rc == 1 and "hostname mismatch" in err, err
    # Nothing was added.
    rc, out, err = run(["check", "--key", "t2", "-p", p, *tls_args(certs)], input=b"key-1\n")
    assert rc == 0 and out == b"", err
    rc, out, err = run(["load", "--key", "t2", "-p", p, "--tls", "--insecure"], input=KEYS)
    assert rc == 0, err


def test_client_certificate(certs, mtls_server):
    p = mtls_server.port
    rc, out, err = run(["load", "--key", "t3", "-p", p, *tls_args(certs)], input=KEYS)
    assert rc == 1
    assert "client certificate" in err, err
    client = ["--cert", os.path.join(certs, "client.crt"),
              "--tls-key", os.path.join(certs, "client.key")]
    rc, out, err = run(["load", "--key", "t3", "-p", p, *tls_args(certs, *client)], input=KEYS)
    assert rc == 0, err
    rc, out, err = run(["check", "--key", "t3", "-p", p, *tls_args(certs, *client)],
                       input=b"key-5\n")
    assert rc == 0 and out == b"key-5\n", err
    # A key that is not the certificate's.
    rc, out, err = run(["load", "--key", "t3", "-p", p,
                        *tls_args(certs, "--cert", os.path.join(certs, "client.crt"),
                                  "--tls-key", os.path.join(certs, "server.key"))], input=KEYS)
    assert rc == 1 and "cannot load the private key" in err, err


def test_acl_user(certs, tls_server):
    p = tls_server.port
    base = ["-p", p, *tls_args(certs)]
    rc, out, err = run(["load", "--key", "t4", "--user", "loader", "--pass", "pw", *base],
                       input=KEYS)
    assert rc == 0, err
    rc, out, err = run(["load", "--key", "t4", "--user", "loader", "-a", "bad", *base],
                       input=KEYS)
    assert rc == 1
    assert "authentication failed: WRONGPASS" in err, err
    # The password from the environment, as redis-cli's REDISCLI_AUTH.
    env_run = subprocess.run([CLI, "check", "--key", "t4", "--user", "loader", *map(str, base)],
                             input=b"key-9\n", capture_output=True,
                             env={**os.environ, "REDISCLI_AUTH": "pw"}, timeout=60)
    assert env_run.returncode == 0 and env_run.stdout == b"key-9\n", env_run.stderr
    # A user limited to some keys: the server's refusal, word for word.
    rc, out, err = run(["load", "--key", "allowed:t4", "--user", "lim", "-a", "pw", *base],
                       input=KEYS)
    assert rc == 0, err
    rc, out, err = run(["load", "--key", "t4", "--user", "lim", "-a", "pw", *base], input=KEYS)
    assert rc == 1
    assert "NOPERM this user has no permissions to access one of the keys" in err, err


def test_plain_and_tls_mismatch(certs, tls_server):
    # A TLS port without --tls.
    rc, out, err = run(["load", "--key", "t5", "-p", tls_server.port], input=KEYS)
    assert rc == 1
    assert "use --tls" in err, err
    # A plain port with --tls.
    plain = Redis(certs, plain=True)
    try:
        rc, out, err = run(["load", "--key", "t5", "-p", plain.port, *tls_args(certs)],
                           input=KEYS)
        assert rc == 1
        assert "drop --tls" in err, err
    finally:
        plain.stop()


def test_usage(certs):
    for args in (["--cert", "c.crt", "--tls"], ["--tls-key", "k.key", "--tls"],
                 ["--user", "u"], ["--cacert", "ca.crt"], ["--insecure"], ["--sni", "x"]):
        rc, out, err = run(["load", "--key", "k", *args], input=b"")
        assert rc == 2, (args, err)
    rc, out, err = run(["load", "--help"])
    assert rc == 0
    for opt in (b"--tls", b"--cacert", b"--cacertdir", b"--cert", b"--tls-key", b"--sni",
                b"--insecure", b"--user", b"--pass"):
        assert opt in out, opt
