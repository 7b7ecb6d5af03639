"""`bloomery console` reaching its nodes over TLS as an ACL user: a
bloomeryd with a TLS port only and a password, the console given the CA,
the user and the password (the options `bloomery load` takes). It reads
the node and its filters and writes through it; given a CA that did not
sign the server's certificate, it shows the node unreachable and why."""
import os
import shutil
import sys
import tempfile

import pytest

from consolehelp import BLOOMERYD, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from tlscerts import make_pki  # noqa: E402

pytestmark = pytest.mark.skipif(not shutil.which("openssl"), reason="needs openssl")


@pytest.fixture(scope="module")
def certs():
    d = tempfile.mkdtemp(prefix="bloomery-console-tls-")
    make_pki(d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def tls_node(procs, certs):
    def argv(port, d):
        return [BLOOMERYD, "--port", "0", "--tls-port", str(port), "--dir", os.path.join(d, "data"),
                "--tls-cert-file", os.path.join(certs, "server.crt"),
                "--tls-key-file", os.path.join(certs, "server.key"),
                "--tls-ca-cert-file", os.path.join(certs, "ca.crt"),
                "--tls-auth-clients", "no", "--requirepass", "secret",
                "--user", "ops on >opspw ~* +@all"]
    return procs.start(argv, "bloomeryd (TLS only)")


def console_args(node, certs, ca="ca.crt"):
    return ["--node", node.addr, "--tls", "--cacert", os.path.join(certs, ca),
            "--user", "ops", "--pass", "opspw"]


def test_over_tls_as_an_acl_user(procs, certs, tls_node):
    c = procs.console(console_args(tls_node, certs))
    node = wait_for(lambda: (lambda n: n[0] if n and n[0]["link"] == "up" else None)(
        c.get("/api/nodes")), "the node read over TLS")
    assert node["addr"] == tls_node.addr
    assert node["role"] == "master" and node["error"] is None
    status, body = c.post("/api/filters", name="over:tls", capacity="1000", error_rate="0.01")
    assert status == 200, body
    assert body["reply"] == "OK"
    status, body = c.post("/api/filter/add", name="over:tls", items="a\nb")
    assert status == 200 and body["results"] == [1, 1], body
    status, body = c.post("/api/filter/check", name="over:tls", items="a\nzz")
    assert status == 200 and body["results"] == [1, 0], body
    wait_for(lambda: c.get("/api/filters", match="over:*")["total"] == 1, "the filter listed")
    # bloomeryd's used_memory counts values and entries: 0 until the filter.
    wait_for(lambda: c.get("/api/nodes")[0]["memory_used"] > 0, "the node's memory read")


def test_a_ca_that_did_not_sign_the_server(procs, certs, tls_node):
    c = procs.console(console_args(tls_node, certs, ca="other-ca.crt"))
    node = wait_for(lambda: (lambda n: n[0] if n and n[0]["error"] else None)(
        c.get("/api/nodes")), "the node's error")
    assert node["link"] == "unreachable"
    assert "certificate" in node["error"], node["error"]
    assert c.get("/api/filters")["total"] == 0
