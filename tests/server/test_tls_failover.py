"""The highly available deployment of test_failover.py with every link over
TLS (README.md, "Run a highly available deployment", its TLS variant): three
bloomeryd nodes with port 0 and a tls-port, tls-auth-clients yes and
tls-replication yes; three redis-sentinel with the same, so that Sentinel
talks TLS to the servers and to the other sentinels and presents its
certificate. The writer goes through redis-py's Sentinel client over TLS.
The master is killed with kill -9: a replica is promoted, every item
acknowledged by WAIT 1 is on the new master and on the other replica, and
the old master restarted on its config file comes back as a replica over
TLS. A replica restarted on the config file Sentinel's CONFIG REWRITE left
comes back over TLS too.

The certificates are made here with the openssl command: a CA, a
certificate for the servers and sentinels (which they also present as
clients), and one for the test's clients."""
import os
import shutil

import pytest
import redis

from conftest import MODULE, QUICK, free_port
from test_failover import Cluster, Load, caught_up, check_everywhere, fail_over, wait_for
from test_tls import openssl

pytestmark = pytest.mark.skipif(bool(MODULE) or not shutil.which("redis-sentinel"),
                                reason="bloomeryd's own replication under redis-sentinel")

ROUNDS = 1 if QUICK else 2


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tls-ha"))
    openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
            "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=ca")
    for name, san in (("server", True), ("client", False)):
        openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key",
                "-out", name + ".csr", "-subj", "/CN=bloomery-" + name,
                *(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"] if san else []))
        openssl(d, "x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "30", "-copy_extensions", "copy",
                "-out", name + ".crt")
    return lambda name: os.path.join(d, name)


class TlsCluster(Cluster):
    def __init__(self, start_server, certs):
        self.certs = certs
        super().__init__(start_server)

    def tls_lines(self):
        """What a server and a sentinel say alike: their certificate (also
        the one they present to the servers they connect to), the CA, and
        that their own links (replication, Sentinel's) are TLS too."""
        c = self.certs
        return ("tls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n"
                "tls-auth-clients yes\ntls-replication yes\n"
                % (c("server.crt"), c("server.key"), c("ca.crt")))

    def client_kw(self):
        c = self.certs
        return {"ssl": True, "ssl_ca_certs": c("ca.crt"), "ssl_certfile": c("client.crt"),
                "ssl_keyfile": c("client.key")}

    def started(self, node):
        node.client_kw = self.client_kw()
        return node

    def start_node(self):
        # The TLS settings are in the config file, so that a restart on it
        # (CONFIG REWRITE's, after Sentinel's reconfiguration) needs them
        # there; conftest's --port is overridden by --port 0.
        port = free_port()
        return self.started(self.start_server(
            "--port", "0", config="tls-port %d\n" % port + self.tls_lines(), port=port))

    def restart_node(self, old):
        again = self.started(self.start_server("--port", "0", config=None, datadir=old.datadir,
                                               conf_path=old.conf_path, port=old.port))
        self.nodes[self.nodes.index(old)] = again
        return again

    def sentinel_listener(self, port):
        return "port 0\ntls-port %d\nbind 127.0.0.1\n" % port + self.tls_lines()

    def sentinel_client_kwargs(self):
        kw = {"socket_timeout": 2, **self.client_kw()}
        return {"sentinel_kwargs": dict(kw), **kw}

    def sentinel_client(self, port):
        return redis.Redis(port=port, decode_responses=True, socket_timeout=10,
                           **self.client_kw())


@pytest.fixture
def cluster(start_server, certs):
    c = TlsCluster(start_server, certs)
    yield c
    c.close()


def announced(cluster):
    """The replicas' ports as the master's INFO shows them and as every
    sentinel lists them, once they agree with the nodes' TLS ports."""
    master = cluster.node(cluster.master_port())
    want = sorted(n.port for n in cluster.nodes if n is not master)

    def info_ports():
        i = master.client().info("replication")
        return sorted(i["slave%d" % k]["port"] for k in range(i["connected_slaves"]))

    wait_for(lambda: info_ports() == want, "the master to show its replicas' TLS ports")
    for port, _ in cluster.sentinels:
        s = cluster.sentinel_client(port)

        def listed():
            got = s.execute_command("SENTINEL", "REPLICAS", "mymaster")
            replicas = [dict(zip(r[::2], r[1::2])) for r in got]
            ok = [int(r["port"]) for r in replicas
                  if not {"disconnected", "s_down"} & set(r["flags"].split(","))]
            return sorted(ok) == want
        wait_for(listed, "sentinel %d to reach the replicas on their TLS ports" % port)


def test_a_tls_deployment_fails_over_and_rejoins_over_tls(cluster):
    for n in cluster.nodes:
        # TLS only: no plain-text port.
        assert n.client().config_get("port") == {"port": "0"}
    announced(cluster)
    load = Load(cluster)
    try:
        for _ in range(ROUNDS):
            def kill(node):
                node.kill()
            old = fail_over(cluster, load, kill)
            # The old master restarts on its config file; Sentinel makes
            # it a replica of the new master, over TLS.
            again = cluster.restart_node(old)
            caught_up(cluster, again)
            check_everywhere(cluster, list(load.acked))
            announced(cluster)
            # The replica Sentinel repointed restarts on the config file
            # its CONFIG REWRITE left: still TLS, still a replica.
            master = cluster.node(cluster.master_port())
            other = next(n for n in cluster.nodes if n is not master and n is not again)
            with open(other.conf_path) as f:
                conf = f.read()
            assert "replicaof 127.0.0.1 %d" % master.port in conf
            assert "tls-port %d" % other.port in conf
            other.kill()
            caught_up(cluster, cluster.restart_node(other))
            announced(cluster)
    finally:
        load.finish()
    assert len(load.acked) > ROUNDS
    check_everywhere(cluster, load.acked)
