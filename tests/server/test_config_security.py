"""The settings as an attacker sees them: CONFIG SET takes only what the
config file could hold (no control character, every setting checked by the
same rule as at start-up, all pairs or none), immutable settings stay so,
and CONFIG SET -> CONFIG REWRITE -> restart gives back every mutable
setting exactly, at its edge values. The settings are read from
CONFIG GET *, so a new one is covered without a change here."""
import os

import pytest

from conftest import MODULE, RespError, free_port

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomeryd's own settings")

CONTROL = ["\n", "\r", "\t", "\x00", "\x01", "\x1b", "\x7f"]
CONTROL_ERR = "argument must not contain control characters"

# Strings a string setting must keep byte for byte through the file.
ODD = ["with space", 'dou"ble', "sin'gle", "back\\slash", "\\x41\\n", "ünïcødé ✓",
       "#hash", "  lead and trail  ", "", "a\"b'c\\d e # f", "x" * 1000]

# Values that would shut the test's own connection out (one client, or
# commands of one argument): the edges stop short of them.
SAFE_MIN = {"maxclients": 8, "proto-max-multibulk-len": 8}


def config_get(c, pattern="*"):
    got = c.cmd("CONFIG", "GET", pattern)
    if isinstance(got, dict):
        return got
    return dict(zip(got[::2], got[1::2]))


def set_err(name, why):
    return "ERR CONFIG SET failed (possibly related to argument '%s') - %s" % (name, why)


def mutable_names(c):
    """Every setting CONFIG SET may change: those that take their own
    current value back."""
    out = []
    for name, value in config_get(c).items():
        got = c.cmd("CONFIG", "SET", name, value)
        if got == "OK":
            out.append(name.decode())
        else:
            assert str(got).endswith("can't set immutable config"), (name, got)
    return out


def edge_values(c, name):
    """The values to try for a setting, found from how it refuses a bad
    one: its range's ends for numbers, each name of an enumeration, odd
    strings for a string."""
    current = config_get(c, name)[name.encode()].decode()
    got = c.cmd("CONFIG", "SET", name, "bogus-value")
    if got == "OK":  # any string goes, or any words
        words = c.cmd("CONFIG", "SET", name, "a  b")
        assert c.cmd("CONFIG", "SET", name, current) == "OK"
        if words == "OK":
            return ODD
        assert str(words).endswith("arguments are separated by single spaces"), (name, words)
        return [v for v in ODD if "  " not in v and v.strip(" ") == v]
    why = str(got).split(") - ", 1)[1]
    if why in ("argument couldn't be parsed into an integer", "argument must be a memory value"):
        rng = str(c.cmd("CONFIG", "SET", name, "-9223372036854775808"))
        lo, hi = (int(x) for x in rng.split("argument must be between ")[1]
                  .split(" inclusive")[0].split(" and "))
        lo = max(lo, SAFE_MIN.get(name, lo))
        if name == "maxclients":
            # As Redis, no more clients than the open-file limit allows:
            # the top edge is what the server says it can take.
            got = str(c.cmd("CONFIG", "SET", name, str(hi)))
            if "try with " in got:
                hi = int(got.rsplit("try with ", 1)[1])
            assert c.cmd("CONFIG", "SET", name, current) == "OK"
        return [str(lo), str(hi), str((lo + hi) // 2)]
    if why == "argument must be 'yes' or 'no'":
        return ["no", "yes"]
    if why.startswith("argument(s) must be one of the following: "):
        return why.split(": ", 1)[1].split(", ")
    if why == "argument must be a number in the range (0, 1)":
        return ["1e-300", "0.25", "0.123456789012345", "0.1"]
    if why == "Invalid save parameters":
        return ["", "1 0", "9223372036854775807 9223372036854775807",
                "3600 1 300 100 60 10000 1 1"]
    if name == "client-output-buffer-limit":
        return ["normal 0 0 0", "normal 9223372036854775807 1 2147483647",
                "normal 1048576 1024 1 pubsub 1 2 3"]
    pytest.fail("no edge values for setting %s (it refuses a bad value with %r): "
                "teach edge_values() its kind" % (name, why))


def restart(start_server, s, password):
    s.stop()
    t = start_server(conf_path=s.conf_path, port=s.port, datadir=s.datadir)
    c = t.raw()
    if password:
        assert c.cmd("AUTH", password) == "OK"
    return t, c


def test_round_trip_of_every_mutable_setting(start_server):
    s = start_server(config="# round trip\n")
    c = s.raw()
    names = mutable_names(c)
    assert "save" in names and "requirepass" in names and "maxmemory" in names
    values = {n: edge_values(c, n) for n in names}
    rounds = max(len(v) for v in values.values())
    password = ""
    for k in range(rounds):
        pairs = {n: v[k % len(v)] for n, v in values.items()}
        # An older name (slave-priority) is the same setting as its current
        # one: set each setting once.
        for n in list(pairs):
            if n.startswith(("slave-", "min-slaves-")):
                del pairs[n]
        # tls-replication yes needs a certificate, as in Redis (test_tls.py
        # sets it with one).
        pairs.pop("tls-replication", None)
        # One pair a command: proto-max-multibulk-len at its low edge
        # takes no longer command.
        for n, v in pairs.items():
            assert c.cmd("CONFIG", "SET", n, v) == "OK", (n, v)
        password = pairs.get("requirepass", password)
        before = config_get(c)
        for n, v in pairs.items():
            got = before[n.encode()].decode()
            if n == "client-output-buffer-limit":
                # The other classes are shown at Redis's defaults.
                assert got.split()[:4] == v.split()[:4], (n, v, got)
            elif n == "bf-error-rate":
                assert float(got) == float(v), (n, v, got)
            else:
                assert got == v, (n, v, got)
        assert c.cmd("CONFIG", "REWRITE") == "OK"
        c.close()
        s, c = restart(start_server, s, password)
        after = config_get(c)
        assert after == before, {k: (before.get(k), after.get(k)) for k in before
                                 if before.get(k) != after.get(k)}
    c.close()


def test_save_injection_is_refused(start_server):
    s = start_server(config="# x\n")
    c = s.raw()
    for bad in ("900 1\nprotected-mode no", "900 1\r\nbind 0.0.0.0", "900 1\nrequirepass \"\"",
                "900 1\ndir /tmp"):
        assert str(c.cmd("CONFIG", "SET", "save", bad)) == set_err(
            "save", "Invalid save parameters")
    assert config_get(c, "save") == {b"save": b"3600 1 300 100 60 10000"}
    assert c.cmd("CONFIG", "SET", "protected-mode", "yes") == "OK"
    assert c.cmd("CONFIG", "REWRITE") == "OK"
    text = open(s.conf_path).read()
    assert "protected-mode no" not in text and "bind 0.0.0.0" not in text, text
    assert "dir /tmp\n" not in text, text
    c.close()
    s, c = restart(start_server, s, "")
    assert config_get(c, "protected-mode") == {b"protected-mode": b"yes"}
    c.close()


@pytest.mark.parametrize("value", ["0 1", "1 -1", "1 2 3", "a b", "1  1", " 1 1", "1 1 ",
                                   "1.5 1", "1 1x", "99999999999999999999 1"])
def test_bad_save_values_are_refused_as_redis_does(raw, value):
    assert str(raw.cmd("CONFIG", "SET", "save", value)) == set_err(
        "save", "Invalid save parameters")
    assert config_get(raw, "save") == {b"save": b"3600 1 300 100 60 10000"}


def test_save_keeps_canonical_pairs(start_server):
    c = start_server().raw()
    assert c.cmd("CONFIG", "SET", "save", "10 1 20 0") == "OK"
    assert config_get(c, "save") == {b"save": b"10 1 20 0"}
    assert c.cmd("CONFIG", "SET", "save", "") == "OK"
    assert config_get(c, "save") == {b"save": b""}
    c.close()


def test_control_characters_are_refused_for_every_setting(start_server):
    """A string setting says why; a number, a name or save's pairs refuse
    the value by their own rule, with Redis's words."""
    c = start_server().raw()
    before = config_get(c)
    names = mutable_names(c)
    strings = [n for n in names if edge_values(c, n)[0] == ODD[0]]
    assert "requirepass" in strings and "maxmemory" not in strings
    for name in names:
        current = before[name.encode()].decode()
        for ch in CONTROL:
            for value in (current + ch, ch + current, "x" + ch + "y"):
                got = str(c.cmd("CONFIG", "SET", name, value))
                if name in strings:
                    assert got == set_err(name, CONTROL_ERR), (name, value, got)
                else:
                    assert got.startswith(set_err(name, "")), (name, value, got)
    assert config_get(c) == before
    c.close()


IMMUTABLE = ["bind", "port", "dir", "logfile", "pidfile", "http-bind", "http-port",
             "appendonly", "threads", "tcp-backlog", "databases", "replicaof"]


@pytest.mark.parametrize("name", IMMUTABLE)
def test_immutable_settings_are_refused(raw, name):
    before = config_get(raw, name)
    for value in ("0.0.0.0", "", "1", "/tmp", "yes", "127.0.0.1 6379"):
        assert str(raw.cmd("CONFIG", "SET", name, value)) == set_err(
            name, "can't set immutable config")
    assert config_get(raw, name) == before


def test_config_set_is_all_or_none(raw):
    assert str(raw.cmd("CONFIG", "SET", "maxmemory", "1mb", "hz", "x")) == set_err(
        "hz", "argument couldn't be parsed into an integer")
    assert str(raw.cmd("CONFIG", "SET", "maxmemory", "1mb", "port", "1")) == set_err(
        "port", "can't set immutable config")
    assert str(raw.cmd("CONFIG", "SET", "maxmemory", "1mb", "nosuch", "1")) == \
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    assert str(raw.cmd("CONFIG", "SET", "hz", "5", "HZ", "6")) == set_err(
        "HZ", "duplicate parameter")
    assert str(raw.cmd("CONFIG", "SET", "replica-priority", "5", "slave-priority", "6")) == \
        set_err("slave-priority", "duplicate parameter")
    assert config_get(raw, "maxmemory") == {b"maxmemory": b"0"}
    assert config_get(raw, "hz") == {b"hz": b"10"}
    assert config_get(raw, "replica-priority") == {b"replica-priority": b"100"}


@pytest.mark.parametrize("line,why", [
    ('requirepass "a\\nb"', CONTROL_ERR),
    ("masterauth a\x01b", CONTROL_ERR),
    ("replica-announce-ip \"x\\x7f\"", CONTROL_ERR),
    ('save "900 1\\nprotected-mode no"', "Invalid save parameters"),
    ('save "900 1" "\\r" 5', "Invalid save parameters"),
    ('maxmemory "1mb\\n"', "argument must be a memory value"),
    ('bind "127.0.0.1\\nx"', CONTROL_ERR),
    ('replicaof "h\\rx" 1', CONTROL_ERR),
    ("save 0 1", "Invalid save parameters"),
    ("save 900", "Invalid save parameters"),
    ("bind 127.0.0.1 not-an-address", "Invalid bind address 'not-an-address'"),
    ("bind " + " ".join(["127.0.0.1"] * 17), "Too many bind addresses specified."),
    ("replicaof 127.0.0.1", "wrong number of arguments"),
    ("replicaof 127.0.0.1 65536", "Invalid master port"),
    ("http-bind \"a b\"", "Invalid http-bind address"),
])
def test_config_file_bad_value_is_refused_with_its_line(start_server, line, why):
    name = line.split()[0]
    with pytest.raises(RuntimeError) as e:
        start_server(config="# first\nhz 10\n%s\nhz 10\n" % line)
    out = str(e.value)
    assert "test.conf:3: '%s': %s" % (name, why) in out, out


def test_config_file_good_words_are_read(start_server):
    s = start_server(config="save 900 1 300 10\nbind 127.0.0.1 -::1\nreplicaof no one\n")
    c = s.raw()
    assert config_get(c, "save") == {b"save": b"900 1 300 10"}
    assert config_get(c, "bind") == {b"bind": b"127.0.0.1 -::1"}
    assert config_get(c, "replicaof") == {b"replicaof": b""}
    c.close()


def test_replicaof_is_shown_and_rewritten(start_server):
    s = start_server(config="# x\n")
    c = s.raw()
    port = free_port()  # nothing listens there: the replica keeps trying
    assert c.cmd("REPLICAOF", "127.0.0.1", str(port)) == "OK"
    assert config_get(c, "replicaof") == {b"replicaof": b"127.0.0.1 %d" % port}
    assert c.cmd("CONFIG", "REWRITE") == "OK"
    lines = open(s.conf_path).read().splitlines()
    assert "replicaof 127.0.0.1 %d" % port in lines, lines
    assert c.cmd("REPLICAOF", "NO", "ONE") == "OK"
    assert config_get(c, "replicaof") == {b"replicaof": b""}
    assert c.cmd("CONFIG", "REWRITE") == "OK"
    lines = open(s.conf_path).read().splitlines()
    assert not any(ln.startswith("replicaof 127") for ln in lines), lines
    c.close()
    s, c = restart(start_server, s, "")
    assert config_get(c, "replicaof") == {b"replicaof": b""}
    assert c.cmd("ROLE")[0] == b"master"
    c.close()


def test_config_get_shows_a_long_value_whole(start_server):
    c = start_server().raw()
    long = "p" * 5000
    assert c.cmd("CONFIG", "SET", "masterauth", long) == "OK"
    assert config_get(c, "masterauth") == {b"masterauth": long.encode()}
    c.close()


def test_rewrite_quotes_each_word(start_server):
    """A word of a several-word setting is quoted like any value: the
    rewrite reads back the same words."""
    s = start_server(config="replicaof 'we\"ird\\\\host' 7\nappendonly yes\n")
    c = s.raw()
    assert config_get(c, "replicaof") == {b"replicaof": b'we"ird\\\\host 7'}
    assert c.cmd("CONFIG", "REWRITE") == "OK"
    text = open(s.conf_path).read()
    assert 'replicaof "we\\"ird\\\\\\\\host" 7\n' in text, text
    c.close()
    s, c = restart(start_server, s, "")
    assert config_get(c, "replicaof") == {b"replicaof": b'we"ird\\\\host 7'}
    assert c.cmd("REPLICAOF", "NO", "ONE") == "OK"
    c.close()
    assert os.path.exists(s.conf_path)


def test_output_buffer_soft_seconds_stay_an_int(raw):
    """As Redis keeps them: a larger count, in milliseconds, would overflow
    the check that closes a client over its soft limit."""
    name = "client-output-buffer-limit"
    before = config_get(raw, name)
    assert str(raw.cmd("CONFIG", "SET", name, "normal 0 0 2147483648")) == set_err(
        name, "Invalid arguments")
    assert config_get(raw, name) == before
    assert raw.cmd("CONFIG", "SET", name, "normal 0 0 2147483647") == "OK"
    assert raw.cmd("PING") == "PONG"
    assert raw.cmd("CONFIG", "SET", name, before[name.encode()]) == "OK"


def test_config_subcommand_arity_as_redis(raw):
    wrong = "ERR wrong number of arguments for 'config|%s' command"
    assert str(raw.cmd("CONFIG", "GET")) == wrong % "get"
    assert str(raw.cmd("CONFIG", "SET", "maxmemory")) == wrong % "set"
    assert str(raw.cmd("CONFIG", "REWRITE", "x")) == wrong % "rewrite"
    assert str(raw.cmd("CONFIG", "RESETSTAT", "x")) == wrong % "resetstat"
    assert str(raw.cmd("CONFIG", "SET", "maxmemory", "1mb", "hz")) == "ERR syntax error"
    assert config_get(raw, "maxmemory") == {b"maxmemory": b"0"}


def test_replicaof_host_cannot_plant_a_line(start_server):
    """REPLICAOF's host goes into replicaof only when the file can hold it
    as it is: a host with a newline leaves the setting as it was."""
    s = start_server(config="# x\n")
    c = s.raw()
    c.cmd("REPLICAOF", "h\nprotected-mode no\nx", "1")
    assert b"\n" not in config_get(c, "replicaof")[b"replicaof"]
    assert c.cmd("CONFIG", "REWRITE") == "OK"
    lines = open(s.conf_path).read().splitlines()
    assert "protected-mode no" not in lines, lines
    assert not any(ln.startswith("replicaof") for ln in lines), lines
    assert c.cmd("REPLICAOF", "NO", "ONE") == "OK"
    c.close()


def test_rewrite_follows_no_link_at_its_temporary_name(start_server, tmp_path):
    # A link planted at the temporary name must not aim the rewrite (run
    # with the server's rights) at another file.
    s = start_server(config="# x\n")
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    os.symlink(victim, "%s.rewrite-%d" % (s.conf_path, s.proc.pid))
    c = s.raw()
    assert c.cmd("CONFIG", "SET", "maxmemory", "1mb") == "OK"
    assert c.cmd("CONFIG", "REWRITE") == "OK"
    c.close()
    assert victim.read_text() == "keep me\n"
    assert "maxmemory 1mb" in open(s.conf_path).read()
