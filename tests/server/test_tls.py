"""TLS on the RESP port (docs/SECURITY.md, "TLS"): tls-port beside port (or
alone with port 0), client certificates as tls-auth-clients says, the
context rebuilt by CONFIG SET, start-up refused without a usable key, and
replication over TLS with full and partial resync.

The certificates are made here, in a temporary directory, with the openssl
command: a CA, a server and a client certificate it signed, a second CA and
a client certificate of its own, a self-signed server certificate, an
expired one (openssl ca with dates in the past) and a second server
certificate for the reload."""
import os
import socket
import ssl
import subprocess

import pytest
import redis

from conftest import BLOOMERYD, MODULE, free_port, wait_for

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomeryd's own listener")

CA_CNF = """[ ca ]
default_ca = ca_default
[ ca_default ]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = policy_any
copy_extensions = copy
unique_subject = no
[ policy_any ]
commonName = supplied
"""


def openssl(d, *args):
    subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tls"))

    def ca(name):
        openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
                "-keyout", name + ".key", "-out", name + ".crt", "-subj", "/CN=" + name)

    def request(name, cn, san=True):
        openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key",
                "-out", name + ".csr", "-subj", "/CN=" + cn,
                *(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"] if san else []))

    def sign(name, by):
        openssl(d, "x509", "-req", "-in", name + ".csr", "-CA", by + ".crt", "-CAkey",
                by + ".key", "-CAcreateserial", "-days", "30", "-copy_extensions", "copy",
                "-out", name + ".crt")

    ca("ca")
    ca("otherca")
    for name, cn, by in (("server", "bloomery-a", "ca"), ("server2", "bloomery-b", "ca"),
                         ("client", "client", "ca"), ("otherclient", "client", "otherca"),
                         ("untrusted", "bloomery-u", "otherca")):
        request(name, cn, san=name != "client" and name != "otherclient")
        sign(name, by)
    # Self-signed, for localhost.
    openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
            "-keyout", "selfsigned.key", "-out", "selfsigned.crt", "-subj", "/CN=bloomery-s",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1")
    # The server's key under a pass phrase.
    openssl(d, "rsa", "-in", "server.key", "-aes256", "-passout", "pass:secret",
            "-out", "server.enc.key")
    # Expired: valid for January 2020 only, signed by the CA.
    with open(os.path.join(d, "ca.cnf"), "w") as f:
        f.write(CA_CNF)
    open(os.path.join(d, "index.txt"), "w").close()
    with open(os.path.join(d, "serial"), "w") as f:
        f.write("1000\n")
    request("expired", "bloomery-e")
    openssl(d, "ca", "-batch", "-config", "ca.cnf", "-cert", "ca.crt", "-keyfile", "ca.key",
            "-in", "expired.csr", "-out", "expired.crt", "-notext",
            "-startdate", "20200101000000Z", "-enddate", "20200201000000Z")
    return lambda name: os.path.join(d, name)


def tls_args(certs, tls_port, auth="no", cert="server", plain=True):
    args = ["--tls-port", tls_port, "--tls-cert-file", certs(cert + ".crt"),
            "--tls-key-file", certs(cert + ".key"), "--tls-ca-cert-file", certs("ca.crt"),
            "--tls-auth-clients", auth]
    return args if plain else args + ["--port", "0"]


def start_tls(start_server, certs, *extra, auth="no", cert="server", plain=True):
    """A server with a TLS port (s.tls_port); with plain=False TLS only."""
    tp = free_port()
    args = tls_args(certs, tp, auth, cert, plain) + list(extra)
    s = start_server(*args, port=None if plain else tp)
    s.tls_port = tp
    return s


def tls_client(certs, port, cert=None, ca="ca.crt", **kw):
    kw.setdefault("socket_timeout", 30)
    if cert:
        kw.update(ssl_certfile=certs(cert + ".crt"), ssl_keyfile=certs(cert + ".key"))
    return redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=certs(ca), **kw)


def peer_cn(certs, port):
    """The CN of the certificate the server presents to a new connection."""
    ctx = ssl.create_default_context(cafile=certs("ca.crt"))
    ctx.check_hostname = False
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        with ctx.wrap_socket(raw) as s:
            subject = dict(x[0] for x in s.getpeercert()["subject"])
            return subject["commonName"]


def cli(certs, port, *args):
    out = subprocess.run(["redis-cli", "--tls", "-p", str(port)] + list(args),
                         capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def test_redis_cli_with_and_without_a_ca(start_server, certs):
    s = start_tls(start_server, certs)
    p = s.tls_port
    assert cli(certs, p, "--cacert", certs("ca.crt"), "PING") == "PONG"
    assert cli(certs, p, "--cacert", certs("ca.crt"), "BF.ADD", "k", "a") == "1"
    assert cli(certs, p, "--cacert", certs("ca.crt"), "BF.EXISTS", "k", "a") == "1"
    assert cli(certs, p, "--insecure", "BF.EXISTS", "k", "b") == "0"
    # The plain port serves the same data beside it.
    assert s.client().execute_command("BF.EXISTS", "k", "a") == 1
    c = s.client()
    assert c.config_get("tls-port") == {"tls-port": str(p)}
    assert c.info("server")["tcp_port"] == s.port


def test_a_tls_client_is_a_client_like_any_other(start_server, certs):
    s = start_tls(start_server, certs, auth="yes")
    c = tls_client(certs, s.tls_port, cert="client")
    assert c.ping()
    assert c.execute_command("BF.MADD", "k", "a", "b") == [1, 1]
    tx = c.pipeline(transaction=True)
    tx.execute_command("BF.ADD", "k", "c")
    tx.execute_command("BF.EXISTS", "k", "c")
    assert tx.execute() == [1, 1]
    sub = tls_client(certs, s.tls_port, cert="client").pubsub()
    sub.subscribe("ch")
    wait_for(lambda: sub.get_message(timeout=1), "the subscription")
    assert c.publish("ch", "hello") == 1
    msg = wait_for(lambda: sub.get_message(timeout=1), "the message")
    assert msg["data"] == b"hello"
    sub.close()
    assert any(":%d" % s.tls_port in cl["laddr"] for cl in c.client_list())


def test_auth_clients_yes_refuses_no_certificate_and_another_ca(start_server, certs):
    s = start_tls(start_server, certs, auth="yes")
    with pytest.raises(redis.ConnectionError):
        tls_client(certs, s.tls_port).ping()
    with pytest.raises(redis.ConnectionError):
        tls_client(certs, s.tls_port, cert="otherclient").ping()
    assert tls_client(certs, s.tls_port, cert="client").ping()


def test_auth_clients_optional_checks_a_certificate_only_if_sent(start_server, certs):
    s = start_tls(start_server, certs, auth="optional")
    assert tls_client(certs, s.tls_port).ping()
    assert tls_client(certs, s.tls_port, cert="client").ping()
    with pytest.raises(redis.ConnectionError):
        tls_client(certs, s.tls_port, cert="otherclient").ping()


def listening_ports(pid):
    """The TCP ports the process pid itself listens on."""
    fds = "/proc/%d/fd" % pid
    mine = set()
    for name in os.listdir(fds):
        try:
            mine.add(os.readlink(os.path.join(fds, name)))
        except OSError:
            pass
    ports = set()
    for table in ("/proc/%d/net/tcp" % pid, "/proc/%d/net/tcp6" % pid):
        with open(table) as f:
            for row in f.readlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and "socket:[%s]" % cols[9] in mine:
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def test_port_0_serves_tls_only(start_server, certs):
    s = start_tls(start_server, certs, plain=False)
    c = tls_client(certs, s.tls_port)
    assert c.config_get("port") == {"port": "0"}
    assert c.info("server")["tcp_port"] == s.tls_port
    assert listening_ports(s.proc.pid) == {s.tls_port}
    # A server with both listens on both.
    both = start_tls(start_server, certs)
    assert listening_ports(both.proc.pid) == {both.port, both.tls_port}


def test_large_replies_and_pipelines_over_tls(start_server, certs):
    s = start_tls(start_server, certs)
    c = tls_client(certs, s.tls_port)
    c.execute_command("BF.RESERVE", "big", 0.001, 3000000)
    c.execute_command("BF.MADD", "big", *range(1000))
    plain = s.client()
    asked, chunks = [0], []
    while True:
        it, data = plain.execute_command("BF.SCANDUMP", "big", asked[-1])
        if it == 0:
            break
        chunks.append(data)
        asked.append(it)
    asked.pop()
    assert max(len(d) for d in chunks) >= 1 << 20
    # Every chunk, three times over, asked for in one pipeline: the
    # replies fill the socket's buffer while the client is still sending.
    p = c.pipeline(transaction=False)
    for _ in range(3):
        for it in asked:
            p.execute_command("BF.SCANDUMP", "big", it)
    got = p.execute()
    assert [g[1] for g in got] == chunks * 3
    p = c.pipeline(transaction=False)
    for i in range(20000):
        p.execute_command("BF.ADD", "k", i)
    for i in range(200):
        p.execute_command("BF.MADD", "m", *range(i * 500, i * 500 + 500))
    got = p.execute()
    assert sum(got[:20000]) >= 19900
    assert all(len(g) == 500 for g in got[20000:])
    assert all(plain.execute_command("BF.MEXISTS", "m", *range(0, 100000, 97)))
    # The largest chunk four times, read slowly, a few KB at a time.
    j = max(range(len(chunks)), key=lambda k: len(chunks[k]))
    it = str(asked[j]).encode()
    req = b"*3\r\n$11\r\nBF.SCANDUMP\r\n$3\r\nbig\r\n$%d\r\n%s\r\n" % (len(it), it)
    raw = ssl.create_default_context(cafile=certs("ca.crt")).wrap_socket(
        socket.create_connection(("127.0.0.1", s.tls_port), timeout=30),
        server_hostname="localhost")
    raw.sendall(req * 4)
    data = bytearray()
    while len(data) < 4 * len(chunks[j]) or data.count(chunks[j]) < 4:
        got = raw.recv(4096)
        assert got
        data += got
    raw.close()


def closed(sock):
    """True once the server closed sock (an alert may come first)."""
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return True


def test_a_plain_text_client_on_the_tls_port_is_closed(start_server, certs):
    s = start_tls(start_server, certs)
    raw = socket.create_connection(("127.0.0.1", s.tls_port), timeout=30)
    raw.sendall(b"PING\r\n")
    assert closed(raw)
    raw.close()
    # One that says nothing is closed when the handshake's time is up.
    silent = socket.create_connection(("127.0.0.1", s.tls_port), timeout=30)
    assert closed(silent)
    silent.close()
    assert tls_client(certs, s.tls_port).ping()
    assert s.client().ping()


@pytest.mark.parametrize("cert", ["expired", "selfsigned", "untrusted"])
def test_a_verifying_client_rejects_a_bad_server_certificate(start_server, certs, cert):
    s = start_tls(start_server, certs, cert=cert)
    with pytest.raises(redis.ConnectionError) as e:
        tls_client(certs, s.tls_port).ping()
    assert "certificate verify failed" in str(e.value)
    # The same server, when the client does not verify.
    assert tls_client(certs, s.tls_port, ssl_cert_reqs="none").ping()


def test_config_set_of_a_certificate_serves_it_to_new_connections(start_server, certs):
    s = start_tls(start_server, certs)
    old = tls_client(certs, s.tls_port)
    assert old.ping()
    assert peer_cn(certs, s.tls_port) == "bloomery-a"
    c = s.client()
    assert c.execute_command("CONFIG", "SET", "tls-cert-file", certs("server2.crt"),
                             "tls-key-file", certs("server2.key")) == b"OK"
    assert peer_cn(certs, s.tls_port) == "bloomery-b"
    # The connection made before keeps its session.
    assert old.ping()
    assert old.execute_command("BF.ADD", "k", "x") == 1


def test_config_set_of_a_missing_file_is_refused_and_the_old_one_kept(start_server, certs):
    s = start_tls(start_server, certs)
    c = s.client()
    with pytest.raises(redis.ResponseError) as e:
        c.config_set("tls-cert-file", certs("missing.crt"))
    assert str(e.value) == ("CONFIG SET failed (possibly related to argument 'tls-cert-file') - "
                            "Unable to update TLS configuration. Check server logs.")
    assert c.config_get("tls-cert-file") == {"tls-cert-file": certs("server.crt")}
    # A key that is not the certificate's fails the same way.
    with pytest.raises(redis.ResponseError):
        c.config_set("tls-key-file", certs("server2.key"))
    assert c.config_get("tls-key-file") == {"tls-key-file": certs("server.key")}
    assert peer_cn(certs, s.tls_port) == "bloomery-a"
    assert tls_client(certs, s.tls_port).ping()
    assert "Failed to load certificate" in s.output()


def test_tls_replication_without_a_certificate_is_refused(start_server, certs):
    s = start_server()
    c = s.client()
    with pytest.raises(redis.ResponseError) as e:
        c.config_set("tls-replication", "yes")
    assert "Unable to update TLS configuration" in str(e.value)
    assert c.config_get("tls-replication") == {"tls-replication": "no"}
    assert "No tls-cert-file configured!" in s.output()
    # With one (and its CA) it builds the context.
    c.execute_command("CONFIG", "SET", "tls-cert-file", certs("server.crt"),
                      "tls-key-file", certs("server.key"), "tls-ca-cert-file", certs("ca.crt"))
    assert c.config_set("tls-replication", "yes")


def test_start_up_without_a_readable_key_is_refused(tmp_path, certs):
    tp = free_port()
    out = subprocess.run(
        [BLOOMERYD, "--port", str(free_port()), "--dir", str(tmp_path / "d"), "--tls-port",
         str(tp), "--tls-cert-file", certs("server.crt"), "--tls-key-file",
         certs("missing.key"), "--tls-auth-clients", "no"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "Failed to load private key" in out.stdout
    assert "Failed to configure TLS. Check logs for more info." in out.stdout


def test_a_key_under_a_pass_phrase(start_server, tmp_path, certs):
    tp = free_port()
    args = ["--tls-port", str(tp), "--tls-cert-file", certs("server.crt"),
            "--tls-key-file", certs("server.enc.key"), "--tls-auth-clients", "no"]
    s = start_server(*args, "--tls-key-file-pass", "secret")
    assert tls_client(certs, tp).ping()
    out = subprocess.run([BLOOMERYD, "--port", str(free_port()), "--dir", str(tmp_path / "d")] +
                         args + ["--tls-key-file-pass", "wrong"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "Failed to load private key" in out.stdout
    assert s.proc.poll() is None


def tls_version(certs, port, highest=None):
    ctx = ssl.create_default_context(cafile=certs("ca.crt"))
    if highest:
        ctx.maximum_version = highest
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return s.version()


def test_tls_protocols_limits_the_versions(start_server, certs):
    s = start_tls(start_server, certs, "--tls-protocols", "TLSv1.3")
    assert tls_version(certs, s.tls_port) == "TLSv1.3"
    with pytest.raises(ssl.SSLError):
        tls_version(certs, s.tls_port, ssl.TLSVersion.TLSv1_2)
    c = s.client()
    assert c.config_set("tls-protocols", "TLSv1.2")
    assert tls_version(certs, s.tls_port) == "TLSv1.2"
    with pytest.raises(redis.ResponseError):
        c.config_set("tls-protocols", "TLSv1.4")
    assert c.config_get("tls-protocols") == {"tls-protocols": "TLSv1.2"}
    assert "Invalid tls-protocols specified." in s.output()


def repl_info(c):
    return c.info("replication")


def caught_up(mc, rc):
    def done():
        m, r = repl_info(mc), repl_info(rc)
        return (r.get("master_link_status") == "up" and
                r["slave_repl_offset"] == m["master_repl_offset"])
    wait_for(done, "the replica to catch up")


def test_replication_over_tls_full_then_partial_resync(start_server, certs):
    common = ["--tls-replication", "yes", "--tls-client-cert-file", certs("client.crt"),
              "--tls-client-key-file", certs("client.key")]
    master = start_tls(start_server, certs, *common, auth="yes", plain=False)
    m = tls_client(certs, master.tls_port, cert="client")
    m.execute_command("BF.MADD", "k", *range(1000))
    rargs = common + ["--replicaof", "127.0.0.1 %d" % master.tls_port]
    replica = start_tls(start_server, certs, *rargs, auth="yes", plain=False)
    r = tls_client(certs, replica.tls_port, cert="client")
    caught_up(m, r)
    assert repl_info(m)["bloomery_sync_full"] == 1
    assert all(r.execute_command("BF.MEXISTS", "k", *range(1000)))
    # Writes stream to the replica, and WAIT (over TLS) sees it acknowledge.
    m.execute_command("BF.MADD", "k", *range(1000, 1500))
    assert m.execute_command("WAIT", 1, 30000) == 1
    caught_up(m, r)
    assert all(r.execute_command("BF.MEXISTS", "k", *range(1500)))
    assert repl_info(m)["slave0"]["port"] == replica.tls_port
    # A restart resumes from its log: a partial resync over TLS.
    replica.kill()
    m.execute_command("BF.MADD", "k", *range(1500, 2000))
    again = start_server(*(tls_args(certs, replica.tls_port, "yes", plain=False) + rargs),
                         datadir=replica.datadir, port=replica.tls_port)
    r = tls_client(certs, replica.tls_port, cert="client")
    caught_up(m, r)
    i = repl_info(m)
    assert i["bloomery_sync_full"] == 1 and i["bloomery_sync_partial_ok"] == 1
    assert all(r.execute_command("BF.MEXISTS", "k", *range(2000)))
    assert again.proc.poll() is None
