"""Server and connection commands: PING, ECHO, SELECT, AUTH, INFO, CLIENT,
CONFIG, COMMAND, MEMORY, unknown commands, QUIT, SHUTDOWN."""
import signal
import socket
import subprocess
import time

import redis

from conftest import BLOOMERYD, RawClient, RespError, free_port


def test_ping_echo_select(raw):
    assert raw.cmd("PING") == "PONG"
    assert raw.cmd("PING", "hi") == b"hi"
    assert str(raw.cmd("PING", "a", "b")) == "ERR wrong number of arguments for 'ping' command"
    assert raw.cmd("ECHO", "x") == b"x"
    assert raw.cmd("SELECT", "0") == "OK"
    assert str(raw.cmd("SELECT", "1")) == "ERR DB index is out of range"
    assert str(raw.cmd("SELECT", "x")) == "ERR value is not an integer or out of range"


def test_unknown_command_and_arity(raw):
    assert str(raw.cmd("FOO", "a1", "a2")) == \
        "ERR unknown command 'FOO', with args beginning with: 'a1' 'a2' "
    assert str(raw.cmd("NOPE")) == "ERR unknown command 'NOPE', with args beginning with: "
    assert str(raw.cmd("GET", "x")) == \
        "ERR unknown command 'GET', with args beginning with: 'x' "
    assert str(raw.cmd("TYPE")) == "ERR wrong number of arguments for 'type' command"
    assert str(raw.cmd("DEL")) == "ERR wrong number of arguments for 'del' command"


def test_auth_without_password(raw):
    assert str(raw.cmd("AUTH", "x")) == (
        "ERR AUTH <password> called without any password configured for the default user. "
        "Are you sure your configuration is correct?")
    assert raw.cmd("AUTH", "default", "anything") == "OK"


def test_requirepass(start_server):
    s = start_server("--requirepass", "s3cret")
    c = s.raw()
    assert str(c.cmd("PING")) == "NOAUTH Authentication required."
    assert str(c.cmd("BF.ADD", "k", "a")) == "NOAUTH Authentication required."
    # Unknown commands and arity are reported before authentication, as Redis 7.
    assert str(c.cmd("FOO")).startswith("ERR unknown command 'FOO'")
    assert str(c.cmd("AUTH", "wrong")) == \
        "WRONGPASS invalid username-password pair or user is disabled."
    assert str(c.cmd("AUTH", "bob", "s3cret")) == \
        "WRONGPASS invalid username-password pair or user is disabled."
    assert str(c.cmd("HELLO", "3")).startswith("NOAUTH HELLO must be called")
    assert c.cmd("AUTH", "s3cret") == "OK"
    assert c.cmd("PING") == "PONG"
    c.close()
    c = s.raw()
    hello = c.cmd("HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "n1")
    assert hello[b"proto"] == 3
    assert c.cmd("CLIENT", "GETNAME") == b"n1"
    c.close()
    # Large requests before AUTH are refused as Redis does.
    c = s.raw()
    c.send(b"*20\r\n")
    assert str(c.read()) == "ERR Protocol error: unauthenticated multibulk length"
    assert c.closed()
    c.close()
    c = s.raw()
    c.send(b"*2\r\n$4\r\nECHO\r\n$20000\r\n")
    assert str(c.read()) == "ERR Protocol error: unauthenticated bulk length"
    c.close()
    ok = s.client(password="s3cret")
    assert ok.ping()
    ok.close()


def test_info_sections(r):
    info = r.info()
    for field in ["redis_version", "redis_mode", "process_id", "run_id", "tcp_port",
                  "uptime_in_seconds", "connected_clients", "maxclients", "used_memory",
                  "maxmemory", "maxmemory_policy", "loading", "rdb_bgsave_in_progress",
                  "total_connections_received", "total_commands_processed",
                  "instantaneous_ops_per_sec", "expired_keys", "keyspace_hits",
                  "keyspace_misses", "role", "cluster_enabled", "blocked_clients"]:
        assert field in info, field
    assert info["redis_version"].startswith("7.")
    assert info["redis_mode"] == "standalone"
    assert info["role"] == "master"
    assert info["maxmemory_policy"] == "noeviction"
    r.config_resetstat()
    r.execute_command("BF.ADD", "k", "a")
    r.expire("k", 100)
    ks = r.info("keyspace")
    assert ks["db0"]["keys"] == 1 and ks["db0"]["expires"] == 1
    raw = RawClient(r.connection_pool.connection_kwargs["port"])
    text = lambda *a: raw.cmd("INFO", *a).decode()
    mods = text("modules")
    assert "module:name=bf,ver=20423,api=1,filters=0," in mods
    stats = text("commandstats")
    assert "cmdstat_bf.add:calls=1," in stats
    everything = text("everything")
    assert "# Commandstats" in everything and "# Keyspace" in everything
    two = text("server", "clients")
    assert "# Server" in two and "# Clients" in two and "# Memory" not in two
    raw.close()


def test_memory_counts_filter_bytes_exactly(r):
    base = r.info("memory")["used_memory"]
    r.execute_command("BF.RESERVE", "m", "0.01", "100000")
    info = r.execute_command("BF.INFO", "m", "ALL")
    filter_bytes = dict(zip(info[::2], info[1::2]))[b"Bytes"]
    usage = r.memory_usage("m")
    grown = r.info("memory")["used_memory"] - base
    assert grown == usage
    assert filter_bytes < usage < filter_bytes + 256
    assert r.memory_usage("nokey") is None
    r.delete("m")
    assert r.info("memory")["used_memory"] == base


def test_client_commands(server, r):
    c1 = server.raw()
    c2 = server.raw()
    id1 = c1.cmd("CLIENT", "ID")
    id2 = c2.cmd("CLIENT", "ID")
    assert id1 != id2
    assert c1.cmd("CLIENT", "GETNAME") is None
    assert c1.cmd("CLIENT", "SETNAME", "first") == "OK"
    assert str(c1.cmd("CLIENT", "SETNAME", "has space")) == \
        "ERR Client names cannot contain spaces, newlines or special characters."
    assert c1.cmd("CLIENT", "SETINFO", "LIB-NAME", "mylib") == "OK"
    assert c1.cmd("CLIENT", "SETINFO", "LIB-VER", "1.2") == "OK"
    listing = c2.cmd("CLIENT", "LIST")
    assert b"id=%d " % id1 in listing and b"name=first" in listing
    assert b"lib-name=mylib" in listing
    assert c2.cmd("CLIENT", "LIST", "ID", str(id1)).count(b"\n") == 1
    assert b"id=%d " % id2 in c2.cmd("CLIENT", "INFO")
    assert c2.cmd("CLIENT", "KILL", "ID", str(id1)) == 1
    assert c1.closed()
    assert c2.cmd("CLIENT", "KILL", "ID", "999999") == 0
    assert str(c2.cmd("CLIENT", "KILL", "1.2.3.4:5")) == "ERR No such client"
    assert str(c2.cmd("CLIENT", "FOO")).startswith("ERR unknown subcommand")
    c1.close()
    c2.close()


def test_config_get_set(raw):
    assert raw.cmd("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"0"]
    got = raw.cmd("CONFIG", "GET", "bf-*")
    assert b"bf-error-rate" in got and b"bf-initial-size" in got
    assert raw.cmd("CONFIG", "GET", "save") == [b"save", b"3600 1 300 100 60 10000"]
    assert raw.cmd("CONFIG", "GET", "appendonly") == [b"appendonly", b"yes"]
    assert raw.cmd("CONFIG", "GET", "appendfsync") == [b"appendfsync", b"everysec"]
    assert raw.cmd("CONFIG", "SET", "maxmemory", "10mb", "timeout", "0") == "OK"
    assert raw.cmd("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"10485760"]
    assert raw.cmd("CONFIG", "SET", "maxmemory", "0") == "OK"
    assert str(raw.cmd("CONFIG", "SET", "nosuch", "1")) == \
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    assert str(raw.cmd("CONFIG", "SET", "port", "1")) == \
        "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"
    assert str(raw.cmd("CONFIG", "SET", "maxmemory", "lots")).startswith(
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory')")
    assert raw.cmd("CONFIG", "RESETSTAT") == "OK"


def test_command_introspection(raw):
    n = raw.cmd("COMMAND", "COUNT")
    assert n > 40
    assert len(raw.cmd("COMMAND")) == n
    info = raw.cmd("COMMAND", "INFO", "bf.add", "nosuch")
    assert info[0][0] == b"bf.add" and info[1] is None
    docs = raw.cmd("COMMAND", "DOCS")
    assert isinstance(docs, list) and len(docs) == 2 * n
    assert raw.cmd("COMMAND", "DOCS", "nosuch") == []


def test_quit(server, r):
    c = server.raw()
    assert c.cmd("QUIT") == "OK"
    assert c.closed()
    c.close()


def test_persistence_commands(raw):
    before = raw.cmd("LASTSAVE")
    assert isinstance(before, int)
    assert raw.cmd("SAVE") == "OK"
    assert raw.cmd("LASTSAVE") >= before
    # (tests/server/test_durability.py covers what a save keeps)


def test_shutdown(start_server):
    s = start_server()
    c = s.raw()
    c.cmd("BF.ADD", "k", "a")
    c.send(c.encode("SHUTDOWN", "NOSAVE"))
    assert c.closed()
    s.proc.wait(timeout=30)
    assert s.proc.returncode == 0


def test_config_file_and_options(start_server):
    conf = ("# comment\nmaxclients 123\nbf-initial-size 77\n"
            "client-output-buffer-limit \"normal 0 0 0\"\nhll-sparse-max-bytes 2000\n")
    s = start_server("--timeout", "0", config=conf)
    c = s.client()
    assert c.config_get("maxclients") == {"maxclients": "123"}
    assert c.config_get("bf-initial-size") == {"bf-initial-size": "77"}
    c.execute_command("BF.ADD", "k", "a")
    assert c.execute_command("BF.INFO", "k", "CAPACITY") == [77]
    assert c.info("server")["config_file"].endswith("test.conf")
    c.close()


def test_redis_py_client(r):
    assert r.execute_command("BF.ADD", "py", "a") == 1
    p = r.pipeline(transaction=False)
    p.execute_command("BF.EXISTS", "py", "a")
    p.execute_command("BF.EXISTS", "py", "b")
    assert p.execute() == [1, 0]
    assert r.client_setname("x")
    assert r.client_getname() in ("x", b"x")
    try:
        r.execute_command("WAIT", 0, 0)
    except redis.ResponseError as e:
        assert "unknown command" in str(e)


def test_sigterm_as_soon_as_the_port_accepts(tmp_path):
    """A client may connect once the port listens: a SIGTERM sent right
    then must find the server's handler and stop it cleanly (exit 0), not
    kill it. Before the handler was installed ahead of listening, about a
    third of these starts died of the signal under AddressSanitizer."""
    for i in range(20):
        port = free_port()
        p = subprocess.Popen([BLOOMERYD, "--port", str(port), "--dir", str(tmp_path / str(i))],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 20
        while True:   # as tight as a client can be: connect, then signal
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert p.poll() is None and time.time() < deadline, p.stderr.read()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, (i, p.returncode, err)
