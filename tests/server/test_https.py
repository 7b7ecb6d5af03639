"""The HTTP listener over HTTPS (http-tls yes; docs/SECURITY.md, "The HTTP
listener over HTTPS"): clients that verify the certificate (curl, Python's
ssl, Prometheus) are answered, one that trusts another CA refuses it, plain
HTTP and old protocol versions get no page, the listener's checks (Host,
password, body size) hold as over HTTP, a handshake never finished is
closed like a request never finished, and a certificate or key that cannot
be used refuses the start with the reason.

The CA, the certificates and the keys are made by the openssl command in a
temporary directory, once for the module."""
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request

import pytest
import redis

from conftest import BLOOMERYD, MODULE, free_port, wait_for
from test_http_security import own_network
from test_metrics import basic, connectable, run_tool, stop_tool

pytestmark = [
    pytest.mark.skipif(bool(MODULE), reason="bloomeryd's own HTTP listener"),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed"),
]

PROMETHEUS = shutil.which("prometheus")
CURL = shutil.which("curl")


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


class Pki:
    """ca.crt signs server.crt (for 127.0.0.1 and localhost) and
    server.key; other-ca.crt is a CA nobody should trust for this server;
    server-pass.key is server.key encrypted with PASS; stranger.key is
    somebody else's key."""
    PASS = "key pass phrase"

    def __init__(self, d):
        self.dir = d
        ext = os.path.join(d, "san.ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        for ca in ("ca", "other-ca"):
            openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca + ".key",
                    "-out", ca + ".crt", "-days", "2", "-subj", "/CN=Bloomery test " + ca,
                    cwd=d)
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
                "server.csr", "-subj", "/CN=127.0.0.1", cwd=d)
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", ext, cwd=d)
        openssl("pkcs8", "-topk8", "-in", "server.key", "-out", "server-pass.key", "-passout",
                "pass:" + self.PASS, cwd=d)
        openssl("genrsa", "-out", "stranger.key", "2048", cwd=d)

    def path(self, name):
        return os.path.join(self.dir, name)


@pytest.fixture(scope="module")
def pki():
    d = tempfile.mkdtemp(prefix="bloomery-pki-")
    try:
        yield Pki(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tls_args(pki, key="server.key", *more):
    return ["--http-tls", "yes", "--tls-cert-file", pki.path("server.crt"),
            "--tls-key-file", pki.path(key)] + list(more)


def https_server(start_server, pki, *args, key="server.key"):
    port = free_port()
    s = start_server("--http-port", port, *(tls_args(pki, key) + list(args)))
    s.http_port = port
    s.https = "https://127.0.0.1:%d" % port
    wait_for(lambda: connectable(port), "the HTTPS listener")
    return s


def context(pki, ca="ca.crt", **kw):
    """A client context that verifies the server against ca."""
    ctx = ssl.create_default_context(cafile=pki.path(ca))
    for k, v in kw.items():
        setattr(ctx, k, v)
    return ctx


def get(url, ctx, headers=None, method="GET", body=None, timeout=30):
    """(status, headers, body); HTTP errors are answers too."""
    req = urllib.request.Request(url, headers=headers or {}, method=method, data=body)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def test_metrics_over_https(start_server, pki):
    s = https_server(start_server, pki)
    # The line follows the listen: a client can connect before it is written.
    line = "HTTPS (metrics, console) on 127.0.0.1:%d" % s.http_port
    wait_for(lambda: line in s.output(), "the HTTPS listener's log line")
    st, hdrs, body = get(s.https + "/metrics", context(pki))
    assert st == 200 and b"bloomery_uptime_seconds" in body
    assert hdrs["Content-Type"].startswith("text/plain; version=0.0.4")
    # The name the certificate also holds.
    st, _, _ = get("https://localhost:%d/metrics" % s.http_port, context(pki))
    assert st == 200
    if CURL:
        out = subprocess.run([CURL, "-sS", "--fail", "--cacert", pki.path("ca.crt"),
                              s.https + "/metrics"], capture_output=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert b"bloomery_uptime_seconds" in out.stdout


def test_untrusted_ca_is_refused(start_server, pki):
    s = https_server(start_server, pki)
    with pytest.raises(urllib.error.URLError) as e:
        get(s.https + "/metrics", context(pki, "other-ca.crt"))
    assert isinstance(e.value.reason, ssl.SSLCertVerificationError), e.value
    if CURL:
        out = subprocess.run([CURL, "-sS", "--cacert", pki.path("other-ca.crt"),
                              s.https + "/metrics"], capture_output=True, timeout=60)
        assert out.returncode == 60, out  # peer certificate cannot be authenticated
        assert out.stdout == b""


def read_all(sk):
    data = b""
    while True:
        try:
            chunk = sk.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def test_plain_http_to_the_https_port_gets_no_page(start_server, pki):
    """A request in the clear is no handshake: the connection is closed
    with no page (at most a TLS alert)."""
    s = https_server(start_server, pki)
    with socket.create_connection(("127.0.0.1", s.http_port), timeout=10) as sk:
        sk.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % s.http_port)
        got = read_all(sk)
    assert b"HTTP/" not in got and b"bloomery" not in got, got
    # And the listener goes on answering.
    assert get(s.https + "/metrics", context(pki))[0] == 200


def old_client(pki, version):
    """A client that offers protocol versions up to version only (below
    OpenSSL's default security level for TLS 1.0 and 1.1, so that it is the
    server that refuses)."""
    ctx = context(pki)
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    ctx.minimum_version = ssl.TLSVersion.TLSv1
    ctx.maximum_version = version
    return ctx


def handshake(port, ctx):
    """The version agreed, or None when the handshake failed."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as sk:
                return sk.version()
        except (ssl.SSLError, ConnectionResetError):
            return None


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion:DeprecationWarning")
def test_tls_12_and_later_only(start_server, pki):
    s = https_server(start_server, pki)
    assert handshake(s.http_port, old_client(pki, ssl.TLSVersion.TLSv1)) is None
    assert handshake(s.http_port, old_client(pki, ssl.TLSVersion.TLSv1_1)) is None
    assert handshake(s.http_port, old_client(pki, ssl.TLSVersion.TLSv1_2)) == "TLSv1.2"
    assert handshake(s.http_port, context(pki)) == "TLSv1.3"


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion:DeprecationWarning")
def test_tls_protocols_chooses_among_12_and_13(start_server, pki):
    """tls-protocols names the versions, as for RESP; TLSv1.1 is not spoken
    over HTTPS even when named (a warning says so)."""
    s = https_server(start_server, pki, "--tls-protocols", "TLSv1.1 TLSv1.3")
    assert handshake(s.http_port, old_client(pki, ssl.TLSVersion.TLSv1_2)) is None
    assert handshake(s.http_port, old_client(pki, ssl.TLSVersion.TLSv1_1)) is None
    assert handshake(s.http_port, context(pki)) == "TLSv1.3"
    assert "speaks TLSv1.2 and TLSv1.3 only, not TLSv1.1" in s.output()


def test_console_over_https(start_server, pki):
    s = https_server(start_server, pki)
    st, hdrs, body = get(s.https + "/", context(pki))
    assert st == 200 and hdrs["Content-Type"].startswith("text/html")
    assert b"console.js" in body
    st, hdrs, _ = get(s.https + "/console.js", context(pki))
    assert st == 200 and "javascript" in hdrs["Content-Type"]
    st, _, body = get(s.https + "/api/status", context(pki))
    assert st == 200 and isinstance(json.loads(body), dict)


def test_password_over_https(start_server, pki):
    s = https_server(start_server, pki, "--requirepass", "pw")
    ctx = context(pki)
    st, hdrs, _ = get(s.https + "/metrics", ctx)
    assert st == 401 and hdrs["WWW-Authenticate"].startswith("Basic")
    assert get(s.https + "/metrics", ctx, basic("wrong"))[0] == 401
    assert get(s.https + "/metrics", ctx, basic("pw"))[0] == 200
    assert get(s.https + "/metrics", ctx, {"Authorization": "Bearer pw"})[0] == 200
    # The console's API posts with the password too.
    form = urllib.parse.urlencode({"name": "f", "capacity": "100", "error_rate": "0.01"})
    hdrs = {"X-Bloomery-Console": "1", "Content-Type": "application/x-www-form-urlencoded"}
    st, _, _ = get(s.https + "/api/filters", ctx, hdrs, "POST", form.encode())
    assert st == 401
    st, _, body = get(s.https + "/api/filters", ctx, {**hdrs, **basic("pw")}, "POST",
                      form.encode())
    assert st == 200, body
    c = s.client(password="pw")
    assert c.exists("f") == 1
    c.close()


def test_host_and_body_checks_over_https(start_server, pki):
    """A rebinding page's Host is refused, and a body too large is refused
    on its headers, over HTTPS as over HTTP."""
    s = https_server(start_server, pki)
    ctx = context(pki)
    st, _, _ = get(s.https + "/metrics", ctx, {"Host": "evil.example:%d" % s.http_port})
    assert st == 421
    with socket.create_connection(("127.0.0.1", s.http_port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as sk:
            sk.sendall(b"POST /api/filters HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       b"X-Bloomery-Console: 1\r\n"
                       b"Content-Type: application/x-www-form-urlencoded\r\n"
                       b"Content-Length: 100000000\r\n\r\n")
            head = b""
            while b"\r\n" not in head:
                chunk = sk.recv(4096)
                if not chunk:
                    break
                head += chunk
    assert head.startswith(b"HTTP/1.1 413"), head


def test_protected_mode_over_https(start_server, pki):
    """A host off the loopback interface, no password: 403 DENIED over
    HTTPS too; with a password, 401 until it is given."""
    with own_network() as other:
        s = https_server(start_server, pki, "--http-bind", "0.0.0.0")
        wait_for(lambda: connectable(s.http_port, other), "the listener on " + other)
        # The certificate names 127.0.0.1, not this address: the CA is
        # still verified.
        ctx = context(pki, check_hostname=False)
        url = "https://%s:%d/metrics" % (other, s.http_port)
        st, _, body = get(url, ctx)
        assert st == 403 and body.startswith(b"DENIED"), (st, body)
        assert get(s.https + "/metrics", context(pki))[0] == 200
        c = s.client()
        c.config_set("requirepass", "pw")
        assert get(url, ctx)[0] == 401
        assert get(url, ctx, basic("pw"))[0] == 200
        c.close()


# ---- handshakes never finished ----

# A TLS record header announcing a handshake message of 512 bytes: the
# server waits for the rest.
RECORD_HEAD = b"\x16\x03\x01\x02\x00"


def closed_by_server(socks):
    """How many of socks the server has closed (read as EOF or reset)."""
    n = 0
    for sk in socks:
        sk.setblocking(False)
        try:
            if sk.recv(65536) == b"":
                n += 1
        except BlockingIOError:
            pass
        except OSError:
            n += 1
    return n


class SlowHandshakes:
    """n connections, each sending the start of a ClientHello a byte a
    second and never finishing it."""

    def __init__(self, port, n):
        self.socks = []
        for _ in range(n):
            sk = socket.create_connection(("127.0.0.1", port), timeout=10)
            sk.sendall(RECORD_HEAD + b"\x01")
            self.socks.append(sk)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.drip, daemon=True)
        self.thread.start()

    def drip(self):
        while not self.stop.wait(1):
            for sk in self.socks:
                try:
                    sk.sendall(b"\x00")
                except OSError:
                    pass

    def closed_by_server(self):
        return closed_by_server(self.socks)

    def close(self):
        self.stop.set()
        self.thread.join()
        for sk in self.socks:
            sk.close()


def test_silent_handshake_meets_the_header_deadline(start_server, pki):
    """A client that connects and says nothing, and one that starts a
    ClientHello and never ends it, are closed once the header deadline
    (10 s from connecting) has passed, as a request never finished is:
    well before libmicrohttpd's own idle timeout (30 s)."""
    s = https_server(start_server, pki)
    silent = socket.create_connection(("127.0.0.1", s.http_port), timeout=10)
    dripping = SlowHandshakes(s.http_port, 1)
    try:
        def both_closed():
            # A new connection is when the late ones are looked for.
            assert get(s.https + "/metrics", context(pki))[0] == 200
            return closed_by_server([silent]) == 1 and dripping.closed_by_server() == 1
        wait_for(both_closed, "the unfinished handshakes to be closed", timeout=25)
    finally:
        silent.close()
        dripping.close()


@pytest.mark.parametrize("n", [100, 400])
def test_metrics_answers_while_handshakes_hold_sockets(start_server, pki, n):
    """n sockets held in a handshake never finished: /metrics answers over
    HTTPS every time; past the listener's 128, the oldest are closed."""
    s = https_server(start_server, pki)
    slow = SlowHandshakes(s.http_port, n)
    try:
        for _ in range(20):
            st, _, body = get(s.https + "/metrics", context(pki), timeout=10)
            assert st == 200 and b"bloomery_uptime_seconds" in body
        if n > 128:
            assert slow.closed_by_server() > 0
    finally:
        slow.close()


# ---- start-up refused ----

def start_refused(pki, *args):
    """bloomeryd's exit status and log when started with args."""
    d = tempfile.mkdtemp(prefix="bloomery-https-")
    try:
        out = subprocess.run([BLOOMERYD, "--port", str(free_port()), "--dir", os.path.join(d, "data"),
                              "--http-port", str(free_port())] + [str(a) for a in args],
                             capture_output=True, text=True, timeout=30)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return out.returncode, out.stdout + out.stderr


PREFIX = "Failed to configure TLS for the HTTP listener: "


@pytest.mark.parametrize("case", ["no cert", "missing cert", "not a cert", "wrong key",
                                  "encrypted key, no pass", "encrypted key, wrong pass",
                                  "unknown protocol", "no protocol"])
def test_unusable_certificate_refuses_the_start(pki, case):
    cert, key = pki.path("server.crt"), pki.path("server.key")
    more = []
    why = {
        "no cert": "tls-cert-file is not set",
        "missing cert": "tls-cert-file %s: No such file or directory" % pki.path("nope.crt"),
        "not a cert": "tls-cert-file %s: no PEM certificate read" % key,
        "wrong key": "tls-key-file %s is not the key of tls-cert-file" % pki.path(
            "stranger.key"),
        "encrypted key, no pass": "tls-key-file %s: no PEM private key read:" % pki.path(
            "server-pass.key"),
        "encrypted key, wrong pass": "tls-key-file %s: no PEM private key read with "
                                     "tls-key-file-pass:" % pki.path("server-pass.key"),
        "unknown protocol": "tls-protocols: unknown protocol TLSv9",
        "no protocol": "tls-protocols names neither TLSv1.2 nor TLSv1.3",
    }[case]
    if case == "no cert":
        cert = ""
    elif case == "missing cert":
        cert = pki.path("nope.crt")
    elif case == "not a cert":
        cert = key
    elif case == "wrong key":
        key = pki.path("stranger.key")
    elif case.startswith("encrypted key"):
        key = pki.path("server-pass.key")
        if case.endswith("wrong pass"):
            more = ["--tls-key-file-pass", "not it"]
    elif case == "unknown protocol":
        more = ["--tls-protocols", "TLSv9"]
    else:
        more = ["--tls-protocols", "TLSv1.1"]
    rc, log = start_refused(pki, "--http-tls", "yes", "--tls-cert-file", cert,
                            "--tls-key-file", key, *more)
    assert rc == 1 and PREFIX + why in log, log


def test_encrypted_key_with_its_pass(start_server, pki):
    s = https_server(start_server, pki, "--tls-key-file-pass", Pki.PASS, key="server-pass.key")
    assert get(s.https + "/metrics", context(pki))[0] == 200


def test_http_tls_is_set_at_start_only(start_server, pki):
    s = https_server(start_server, pki)
    c = s.client()
    assert c.config_get("http-tls") == {"http-tls": "yes"}
    with pytest.raises(Exception) as e:
        c.config_set("http-tls", "no")
    assert "can't set immutable config" in str(e.value)
    c.close()


# ---- Prometheus ----

def prometheus_scrapes(s, pki, user, password):
    """Debian's prometheus scrapes s's /metrics over HTTPS, verifying the
    certificate against the test's CA, as user with password."""
    work = tempfile.mkdtemp(prefix="bloomery-prom-")
    conf = os.path.join(work, "prometheus.yml")
    with open(conf, "w") as f:
        f.write("""global:
  scrape_interval: 1s
scrape_configs:
  - job_name: bloomery
    scrape_interval: 1s
    scheme: https
    tls_config:
      ca_file: %s
    basic_auth:
      username: %s
      password: %s
    static_configs:
      - targets: ['127.0.0.1:%d']
""" % (json.dumps(pki.path("ca.crt")), json.dumps(user), json.dumps(password), s.http_port))
    port = free_port()
    log = open(os.path.join(work, "log"), "w+")
    p = run_tool([PROMETHEUS, "--config.file", conf, "--storage.tsdb.path",
                  os.path.join(work, "tsdb"), "--web.listen-address", "127.0.0.1:%d" % port],
                 log)
    api = "http://127.0.0.1:%d/api/v1/" % port

    def api_get(path):
        try:
            with urllib.request.urlopen(api + path, timeout=5) as resp:
                return json.loads(resp.read())["data"]
        except (OSError, ValueError):
            return None
    try:
        def target_up():
            data = api_get("targets")
            targets = data and data["activeTargets"]
            return targets and targets[0]["health"] == "up" and targets[0]
        t = wait_for(target_up, "prometheus to scrape bloomeryd over HTTPS", timeout=90)
        assert t["lastError"] == "" and t["scrapeUrl"].startswith("https://")

        def items():
            q = urllib.parse.quote('bloomery_filter_items{key="seen"}')
            data = api_get("query?query=" + q)
            res = data and data["result"]
            return res and res[0]["value"][1]
        assert wait_for(items, "the filter's items in prometheus") == "3"
    finally:
        stop_tool(p)
        log.seek(0)
        out = log.read()
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    assert "level=error" not in out, out


@pytest.mark.skipif(PROMETHEUS is None, reason="Debian's prometheus is not installed")
@pytest.mark.parametrize("user,password", [("default", "s3cret"), ("scraper", "scrape-pw")])
def test_prometheus_scrapes_over_https(start_server, pki, user, password):
    s = https_server(start_server, pki, "--requirepass", "s3cret")
    c = s.client(password="s3cret")
    if user != "default":
        # The least docs/SECURITY.md gives a scraper that reads the filters.
        c.execute_command("ACL", "SETUSER", user, "on", ">" + password, "+info", "+scan",
                          "+bf.info", "+cf.info", "%R~*")
    c.execute_command("BF.RESERVE", "seen", 0.01, 1000)
    c.execute_command("BF.MADD", "seen", "a", "b", "c")
    prometheus_scrapes(s, pki, user, password)
    c.close()


def test_config_set_reloads_the_certificate(start_server, pki):
    """CONFIG SET of tls-cert-file and tls-key-file: new handshakes get the
    new pair; a pair that cannot be read is refused and the old one stays."""
    d = pki.dir
    if not os.path.exists(pki.path("other-server.crt")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "other-server.key", "-out",
                "other-server.csr", "-subj", "/CN=127.0.0.1", cwd=d)
        openssl("x509", "-req", "-in", "other-server.csr", "-CA", "other-ca.crt", "-CAkey",
                "other-ca.key", "-CAcreateserial", "-out", "other-server.crt", "-days", "2",
                "-extfile", pki.path("san.ext"), cwd=d)
    s = https_server(start_server, pki)
    url = s.https + "/metrics"
    assert get(url, context(pki))[0] == 200
    c = s.client()
    c.execute_command("CONFIG", "SET", "tls-cert-file", pki.path("other-server.crt"),
                      "tls-key-file", pki.path("other-server.key"))
    assert get(url, context(pki, "other-ca.crt"))[0] == 200
    with pytest.raises(urllib.error.URLError):
        get(url, context(pki))
    with pytest.raises(redis.ResponseError, match="Unable to update TLS configuration"):
        c.config_set("tls-cert-file", pki.path("missing.crt"))
    assert c.config_get("tls-cert-file")["tls-cert-file"] == pki.path("other-server.crt")
    assert get(url, context(pki, "other-ca.crt"))[0] == 200
