"""Replies compared with RedisBloom 2.4's, recorded from RedisBloom 2.4.23
(tests/vectors/redisbloom-2.4: replies.json and cf-scandump.bin, made by
its generate.py): BF.DEBUG and CF.DEBUG, RedisBloom's CF.SCANDUMP chunks
through CF.LOADCHUNK, errors inside reply arrays (TOPK.INCRBY, CMS.INCRBY),
BF.INSERT's range checks, BF.LOADCHUNK at arbitrary offsets, TDIGEST.MERGE,
MODULE LIST / INFO modules, CONFIG RESETSTAT.

Replies are compared byte for byte, raw RESP2. Where RedisBloom announces
more array elements than it sends (TOPK.INCRBY stopping at a bad
increment), ours count what is sent: the expected reply is RedisBloom's
bytes with the announced count corrected. TDIGEST.INFO's Memory usage is
left out (a documented departure).

Filters are classic (bf-default-layout classic): RedisBloom's layout, so
BF.DEBUG and dumps are comparable. Runs against bloomeryd and, with
BLOOMERY_MODULE, against redis-server with bloomery.so.
"""
import json
import os
import random
import socket
import struct

import pytest

from conftest import MODULE, Server, remove_dirs

VECTORS = os.path.join(os.path.dirname(__file__), "..", "vectors", "redisbloom-2.4")

with open(os.path.join(VECTORS, "replies.json")) as f:
    SCRIPTS = json.load(f)["scripts"]


def cf_chunks():
    with open(os.path.join(VECTORS, "cf-scandump.bin"), "rb") as f:
        data = f.read()
    out, i = [], 0
    while i < len(data):
        it, n = struct.unpack_from("<QI", data, i)
        out.append((it, data[i + 12:i + 12 + n]))
        i += 12 + n
    return out


def expand(args):
    """The arguments a recorded command stands for (generate.py)."""
    out = []
    for a in args:
        if isinstance(a, dict) and "items" in a:
            out += [a["items"] % i for i in range(0, a["n"], a.get("step", 1))]
        elif isinstance(a, dict) and "floats" in a:
            rnd = random.Random(a["floats"])
            out += [repr(round(rnd.random() * a["scale"], 6)) for _ in range(a["n"])]
        elif isinstance(a, dict):
            out.append(bytes.fromhex(a["hex"]))
        else:
            out.append(a)
    return out


def reply_end(buf, i=0):
    """Index after the complete RESP2 reply at buf[i:], or None."""
    j = buf.find(b"\r\n", i)
    if j < 0:
        return None
    t, line = buf[i:i + 1], buf[i + 1:j]
    if t in (b"+", b"-", b":"):
        return j + 2
    if t == b"$":
        n = int(line)
        return j + 2 if n < 0 else (j + 4 + n if len(buf) >= j + 4 + n else None)
    if t == b"*":
        k = j + 2
        for _ in range(max(int(line), 0)):
            k = reply_end(buf, k)
            if k is None:
                return None
        return k
    raise AssertionError("unexpected reply %r" % buf[i:])


def as_sent(rb):
    """RedisBloom's reply with an array's announced count set to the
    elements it sent."""
    if not rb.startswith(b"*") or reply_end(rb) is not None:
        return rb
    j = rb.index(b"\r\n")
    k, n = j + 2, 0
    while k < len(rb):
        k = reply_end(rb, k)
        n += 1
    return b"*%d\r\n" % n + rb[j + 2:]


class Raw:
    """Raw RESP2: the reply's bytes, as sent."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=60)

    def cmd(self, *args):
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(parts))
        buf = b""
        while reply_end(buf) is None if buf else True:
            data = self.s.recv(1 << 16)
            if not data:
                raise ConnectionError("closed")
            buf += data
        assert reply_end(buf) == len(buf), buf
        return buf

    def close(self):
        self.s.close()


def without_memory_usage(reply):
    """A TDIGEST.INFO reply without its Memory usage value."""
    at = reply.index(b"+Memory usage\r\n")
    return reply[:at]


def run_script(raw, name):
    """Each command of a recorded script, with ours and RedisBloom's reply."""
    for rec in SCRIPTS[name]:
        args = expand(rec["cmd"])
        got = raw.cmd(*args)
        want = as_sent(rec["reply"].encode("latin-1"))
        if str(args[0]).upper() == "TDIGEST.INFO":
            got, want = without_memory_usage(got), without_memory_usage(want)
        yield args, got, want


@pytest.fixture(scope="module")
def classic():
    s = Server("--bf-default-layout", "classic")
    yield s
    s.stop()
    remove_dirs([s])


@pytest.fixture
def raw(classic):
    c = Raw(classic.port)
    c.cmd("FLUSHALL")
    yield c
    c.close()


@pytest.mark.parametrize("name", ["bf_debug", "cf_debug", "topk_incrby", "cms_saturation",
                                  "bf_insert_ranges", "bf_loadchunk_offsets", "tdigest_merge"])
def test_replies_as_redisbloom(raw, name):
    for args, got, want in run_script(raw, name):
        assert got == want, args[:3]


def test_redisbloom_cf_dump_loads(raw):
    """RedisBloom's CF.SCANDUMP chunks load with CF.LOADCHUNK; the filter
    answers CF.MEXISTS, CF.COUNT, CF.INFO and CF.DEBUG as RedisBloom's did,
    refuses what RedisBloom refuses, and takes adds after."""
    for it, data in cf_chunks():
        assert raw.cmd("CF.LOADCHUNK", "cf", it, data) == b"+OK\r\n"
    for args, got, want in run_script(raw, "cf_checks"):
        assert got == want, args[:3]


def test_redisbloom_cf_chunks_any_order_and_bounds(raw):
    """After the header, RedisBloom's chunks may come in any order; a chunk
    that does not lie inside one sub-filter is refused and changes nothing."""
    chunks = cf_chunks()
    assert raw.cmd("CF.LOADCHUNK", "cf", *chunks[0]) == b"+OK\r\n"
    for it, data in reversed(chunks[1:]):
        assert raw.cmd("CF.LOADCHUNK", "cf", it, data) == b"+OK\r\n"
    want = SCRIPTS["cf_checks"][0]["reply"].encode("latin-1")
    assert raw.cmd("CF.MEXISTS", "cf", *expand(SCRIPTS["cf_checks"][0]["cmd"][2:])) == want
    last_it, last = chunks[-1]
    for it, data in [(last_it + 1, last), (last_it, last + b"x"), (-1, b"x"), (2, b"")]:
        assert raw.cmd("CF.LOADCHUNK", "cf", it, data) == b"-Couldn't load chunk!\r\n", it
    assert raw.cmd("CF.MEXISTS", "cf", *expand(SCRIPTS["cf_checks"][0]["cmd"][2:])) == want


def test_redisbloom_cf_dump_survives_restart(tmp_path):
    """A filter loaded from RedisBloom's chunks is logged as it was loaded:
    a restart (DEBUG RELOAD in Redis) answers the same."""
    datadir = str(tmp_path / "data")
    s = Server("--save", "", "--appendfsync", "always", datadir=datadir)
    made = [s]
    try:
        raw = Raw(s.port)
        for it, data in cf_chunks():
            assert raw.cmd("CF.LOADCHUNK", "cf", it, data) == b"+OK\r\n"
        checks = SCRIPTS["cf_checks"][:6]
        if MODULE:
            assert raw.cmd("DEBUG", "RELOAD") == b"+OK\r\n"
        else:
            raw.close()
            s.kill()
            s = Server(datadir=datadir)
            made.append(s)
            raw = Raw(s.port)
        for rec in checks:
            args = expand(rec["cmd"])
            assert raw.cmd(*args) == rec["reply"].encode("latin-1"), args[:2]
        raw.close()
    finally:
        for x in made:
            x.stop()
        remove_dirs(made)


def tdigest_state(raw, key):
    return (raw.cmd("TDIGEST.INFO", key), raw.cmd("TDIGEST.QUANTILE", key, 0.1, 0.5, 0.9),
            raw.cmd("TDIGEST.CDF", key, 1, 50))


def test_tdigest_merged_weight_survives_reload(tmp_path):
    """TDIGEST.MERGE leaves RedisBloom's merged and unmerged nodes, and a
    reload (DEBUG RELOAD in Redis, a restart here) keeps them as they were:
    RedisBloom compresses a digest when it saves it, we do not."""
    datadir = str(tmp_path / "data")
    s = Server("--save", "", datadir=datadir)
    made = [s]
    try:
        raw = Raw(s.port)
        for args, got, want in run_script(raw, "tdigest_merge"):
            assert got == want, args[:3]
        before = {k: tdigest_state(raw, k) for k in ("d", "e")}
        assert b"+Merged weight\r\n:200\r\n" in before["d"][0]
        if MODULE:
            assert raw.cmd("DEBUG", "RELOAD") == b"+OK\r\n"
        else:
            assert raw.cmd("SAVE") == b"+OK\r\n"
            raw.close()
            s.stop()
            s = Server(datadir=datadir)
            made.append(s)
            raw = Raw(s.port)
        assert {k: tdigest_state(raw, k) for k in ("d", "e")} == before
        raw.close()
    finally:
        for x in made:
            x.stop()
        remove_dirs(made)


def module_entry(reply):
    """MODULE LIST's one entry as a dict, from raw RESP2."""
    parts = reply.split(b"\r\n")
    assert parts[0] == b"*1" and parts[1] == b"*8", reply
    fields, i = {}, 2
    while len(fields) < 4:
        name = parts[i + 1]
        if parts[i + 2].startswith(b":"):
            fields[name], i = int(parts[i + 2][1:]), i + 3
        elif parts[i + 2].startswith(b"*"):
            fields[name], i = parts[i + 2], i + 3
        else:
            fields[name], i = parts[i + 3], i + 4
    return fields


@pytest.mark.skipif(MODULE is not None, reason="bloomeryd's own MODULE and INFO modules")
def test_module_list_and_info_modules(classic, raw):
    """bloomeryd shows RedisBloom's module as Redis does with it loaded:
    MODULE LIST (its path aside), INFO modules, HELLO, and INFO's default
    sections include Modules, which client libraries read."""
    got = {}
    for args, reply, want in run_script(raw, "modules"):
        got[tuple(args)] = reply
        if args[:2] == ["MODULE", "LIST"] and len(args) == 2:
            mine, theirs = module_entry(reply), module_entry(want)
            assert mine.pop(b"path") == b"builtin"
            theirs.pop(b"path")
            assert mine == theirs == {b"name": b"bf", b"ver": 20423, b"args": b"*0"}
        else:
            assert reply == want, args
    c = classic.client()
    assert [(m["name"], m["ver"]) for m in c.info()["modules"]] == [("bf", 20423)]
    r3 = classic.raw()
    assert r3.cmd("HELLO", "3")[b"modules"] == [{b"name": b"bf", b"ver": 20423,
                                                 b"path": b"builtin", b"args": []}]
    r3.close()
    c.close()


RESET_FIELDS = ["total_connections_received", "total_commands_processed",
                "total_net_input_bytes", "total_net_output_bytes", "rejected_connections",
                "expired_keys", "evicted_keys", "keyspace_hits", "keyspace_misses",
                "total_error_replies"]


def info_fields(reply):
    body = reply.split(b"\r\n", 1)[1].decode()
    return dict(line.split(":", 1) for line in body.split("\r\n") if ":" in line)


def test_config_resetstat_resets_what_redis_resets(start_server):
    """After CONFIG RESETSTAT, INFO stats counts only what came after, as
    Redis does: connections, commands, network bytes, keyspace hits and
    misses, errors; commandstats restart too."""
    s = start_server()
    raw = Raw(s.port)
    got = list(run_script(raw, "resetstat"))
    mine, theirs = info_fields(got[-1][1]), info_fields(got[-1][2])
    assert {k: mine[k] for k in RESET_FIELDS} == {k: theirs[k] for k in RESET_FIELDS}
    stats = info_fields(raw.cmd("INFO", "commandstats"))
    assert [k for k in stats if k.startswith("cmdstat_bf.")] == []
    raw.close()
