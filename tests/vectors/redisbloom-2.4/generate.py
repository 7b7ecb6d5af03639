#!/usr/bin/python3
"""Record RedisBloom 2.4's replies for tests/server/test_redisbloom_diffs.py.

Generated against RedisBloom 2.4.23 loaded into Debian 12's redis-server
7.0.15:

    REDISBLOOM_SO=/path/to/redisbloom.so ./generate.py

starts `redis-server --port P --save '' --appendonly no --loadmodule
$REDISBLOOM_SO` on a free loopback port (REDIS_SERVER overrides the
binary), runs every script below on an emptied server and writes:

- replies.json: per script, each command with RedisBloom's raw RESP2 reply
  (the bytes as a latin-1 string). An argument is a string, {"hex": ...}
  for bytes, or stands for several: {"items": "x%d", "n": N, "step": S}
  for x0, xS, ... below N, {"floats": seed, "n": N, "scale": s} for N
  values of random.Random(seed) (expand() below);
  MODULE LIST's path is recorded as "redisbloom.so";
- cf-scandump.bin: the CF.SCANDUMP chunks of the cuckoo filter `cf` of the
  script cf_dump, each as iterator (u64) and length (u32), little-endian,
  then the bytes.

Replies are read raw, with a time limit rather than by parsing: some of
RedisBloom's replies announce more array elements than they send.
"""
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def expand(args):
    """The arguments a command stands for."""
    out = []
    for a in args:
        if isinstance(a, dict) and "items" in a:
            out += [a["items"] % i for i in range(0, a["n"], a.get("step", 1))]
        elif isinstance(a, dict) and "floats" in a:
            rnd = random.Random(a["floats"])
            out += [repr(round(rnd.random() * a["scale"], 6)) for _ in range(a["n"])]
        else:
            out.append(a)
    return out


def enc(args):
    args = expand(args)
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = bytes.fromhex(a["hex"]) if isinstance(a, dict) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def reply_end(buf, i=0):
    """Index after the complete reply at buf[i:], or None."""
    j = buf.find(b"\r\n", i)
    if j < 0:
        return None
    t, line = buf[i:i + 1], buf[i + 1:j]
    if t in b"+-:":
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
    raise ValueError("unexpected reply %r" % buf[i:])


class Raw:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)

    def cmd(self, args):
        self.s.sendall(enc(args))
        buf = b""
        self.s.settimeout(10)
        while True:
            end = reply_end(buf) if buf else None
            if end is not None:
                return buf
            try:
                data = self.s.recv(1 << 16)
            except socket.timeout:
                return buf  # an announced element never came
            if not data:
                raise ConnectionError("closed")
            buf += data
            # A reply cut short by RedisBloom: wait a little, not 10 s.
            self.s.settimeout(0.5)


def items(fmt, n, step=1):
    return {"items": fmt, "n": n, "step": step}


def floats(seed, n, scale):
    return {"floats": seed, "n": n, "scale": scale}


SCRIPTS = {
    "bf_debug": [
        ["BF.RESERVE", "b", "0.001", "10", "EXPANSION", "3"],
        ["BF.MADD", "b"] + [items("x%d", 100)],
        ["BF.DEBUG", "b"],
        ["BF.ADD", "auto", "a"],
        ["BF.DEBUG", "auto"],
        ["BF.RESERVE", "ns", "0.01", "10", "NONSCALING"],
        ["BF.DEBUG", "ns"],
        ["BF.DEBUG", "nokey"],
        ["BF.DEBUG"],
        ["BF.DEBUG", "b", "extra"],
    ],
    "cf_debug": [
        ["CF.RESERVE", "c", "100", "BUCKETSIZE", "4", "MAXITERATIONS", "30", "EXPANSION", "2"],
        ["CF.INSERT", "c", "ITEMS", items("x%d", 300)],
        ["CF.DEL", "c", "x1"],
        ["CF.DEBUG", "c"],
        ["CF.ADD", "auto", "a"],
        ["CF.DEBUG", "auto"],
        ["CF.DEBUG", "nokey"],
        ["CF.DEBUG"],
        ["CF.DEBUG", "c", "extra"],
    ],
    "topk_incrby": [
        ["TOPK.RESERVE", "t", "3"],
        ["TOPK.INCRBY", "t", "a", "5", "b", "100001", "c", "3"],
        ["TOPK.LIST", "t", "WITHCOUNT"],
        ["TOPK.INCRBY", "t", "a", "x"],
        ["TOPK.INCRBY", "t", "b", "2", "c", "-1"],
        ["TOPK.INCRBY", "t", "c", "4", "d", "1"],
        ["TOPK.LIST", "t", "WITHCOUNT"],
        ["TOPK.INCRBY", "t", "a", "5", "b"],
    ],
    "cms_saturation": [
        ["CMS.INITBYDIM", "m", "10", "2"],
        ["CMS.INCRBY", "m", "a", "4294967294"],
        ["CMS.INCRBY", "m", "a", "1"],
        ["CMS.QUERY", "m", "a"],
        ["CMS.INCRBY", "m", "b", "4294967295", "c", "5"],
        ["CMS.QUERY", "m", "a", "b", "c"],
        ["CMS.INCRBY", "m", "c", "x"],
        ["CMS.INCRBY", "m", "c", "-1"],
    ],
    "bf_insert_ranges": [
        ["BF.INSERT", "i1", "EXPANSION", "0", "ITEMS", "a"],
        ["BF.INSERT", "i1", "EXPANSION", "0", "NONSCALING", "ITEMS", "a"],
        ["BF.INSERT", "i1", "EXPANSION", "-1", "ITEMS", "a"],
        ["BF.INSERT", "i1", "ERROR", "2", "EXPANSION", "0", "ITEMS", "a"],
        ["BF.INSERT", "i1", "CAPACITY", "0", "ITEMS", "a"],
        ["BF.INSERT", "i1", "ERROR", "0", "ITEMS", "a"],
        ["BF.INSERT", "i1", "EXPANSION", "x", "ITEMS", "a"],
        ["BF.INSERT", "i1", "EXPANSION", "0", "ERROR", "x", "ITEMS", "a"],
        ["BF.INSERT", "i1", "EXPANSION", "0", "FOO", "ITEMS", "a"],
        ["BF.INSERT", "i1", "EXPANSION", "0", "NOCREATE", "ITEMS", "a"],
        ["BF.INSERT", "i1", "EXPANSION", "0"],
        ["BF.EXISTS", "i1", "a"],
        ["BF.INSERT", "i2", "EXPANSION", "0", "EXPANSION", "4", "ITEMS", "a"],
        ["BF.INFO", "i2"],
        ["BF.INSERT", "i2", "EXPANSION", "0", "ITEMS", "b"],
        ["BF.INSERT", "i2", "EXPANSION", "3", "ITEMS", "b"],
        ["BF.INFO", "i2"],
    ],
    "bf_loadchunk_offsets": [
        ["BF.RESERVE", "s", "0.01", "100"],
        ["BF.MADD", "s", items("x%d", 150)],
        ["BF.SCANDUMP", "s", "0"],
        ["BF.SCANDUMP", "s", "1"],
        ["BF.SCANDUMP", "s", "145"],
        ["BF.SCANDUMP", "s", "457"],
        ["BF.LOADCHUNK", "d", "5", "abc"],
        ["BF.LOADCHUNK", "d", "1", "<header of s>"],
        ["BF.LOADCHUNK", "d", "1", "<header of s>"],
        ["BF.LOADCHUNK", "d", "0", "x"],
        ["BF.LOADCHUNK", "d", "1", "x"],
        ["BF.LOADCHUNK", "d", "2", "x"],
        ["BF.LOADCHUNK", "d", "2", "xx"],
        ["BF.LOADCHUNK", "d", "3", "xx"],
        ["BF.LOADCHUNK", "d", "5", "abcd"],
        ["BF.LOADCHUNK", "d", "145", "aaaaaaaa"],
        ["BF.LOADCHUNK", "d", "150", "bbbbbbbbbb"],
        ["BF.LOADCHUNK", "d", "153", "cccccccc"],
        ["BF.LOADCHUNK", "d", "457", "dddd"],
        ["BF.LOADCHUNK", "d", "458", "dddd"],
        ["BF.LOADCHUNK", "d", "2000", "a"],
        ["BF.LOADCHUNK", "d", "-5", "a"],
        ["BF.LOADCHUNK", "d", "9223372036854775807", "a"],
        ["BF.LOADCHUNK", "d", "10000000000000000000", "a"],
        ["BF.LOADCHUNK", "d", "x", "a"],
        ["BF.LOADCHUNK", "d", "10", ""],
        ["BF.LOADCHUNK", "d", "1", ""],
        ["BF.SCANDUMP", "d", "1"],
        ["BF.SCANDUMP", "d", "145"],
        ["BF.MEXISTS", "d", items("x%d", 150, 7)],
    ],
    # The filter whose dump is cf-scandump.bin: made here, dumped, then the
    # checks below run on RedisBloom's own filter and, in the test, on the
    # dump loaded into ours.
    "cf_dump": [
        ["CF.RESERVE", "cf", "200", "BUCKETSIZE", "2", "MAXITERATIONS", "25", "EXPANSION", "2"],
        ["CF.INSERT", "cf", "ITEMS", items("in:%d", 500)],
        ["CF.ADD", "cf", "in:0"],
        ["CF.DEL", "cf", "in:1"],
    ],
    "cf_checks": [
        ["CF.MEXISTS", "cf", items("in:%d", 500)],
        ["CF.MEXISTS", "cf", items("out:%d", 600)],
        ["CF.COUNT", "cf", "in:0"],
        ["CF.COUNT", "cf", "in:1"],
        ["CF.INFO", "cf"],
        ["CF.DEBUG", "cf"],
        ["CF.LOADCHUNK", "cf", "1", "<header of cf>"],
        ["CF.LOADCHUNK", "cf-new", "2", "abc"],
        ["CF.LOADCHUNK", "cf-new", "1", "short header"],
        ["CF.LOADCHUNK", "cf-new", "0", "x"],
        ["CF.LOADCHUNK", "cf-new", "x", "x"],
        ["CF.LOADCHUNK", "cf-new", "-1", "x"],
        ["CF.ADD", "cf", "after"],
        ["CF.EXISTS", "cf", "after"],
        ["CF.INFO", "cf"],
    ],
    "tdigest_merge": [
        ["TDIGEST.CREATE", "a", "COMPRESSION", "10"],
        ["TDIGEST.ADD", "a", floats(1, 200, 100)],
        ["TDIGEST.CREATE", "b", "COMPRESSION", "10"],
        ["TDIGEST.ADD", "b", floats(2, 150, 300)],
        ["TDIGEST.CREATE", "c"],
        ["TDIGEST.ADD", "c", floats(3, 400, 10)],
        ["TDIGEST.MERGE", "d", "2", "a", "b"],
        ["TDIGEST.INFO", "d"],
        ["TDIGEST.QUANTILE", "d", "0.1", "0.5", "0.9"],
        ["TDIGEST.MERGE", "e", "3", "a", "b", "c"],
        ["TDIGEST.INFO", "e"],
        ["TDIGEST.QUANTILE", "e", "0.1", "0.5", "0.9", "0.99"],
        ["TDIGEST.MERGE", "e", "2", "c", "a", "COMPRESSION", "50"],
        ["TDIGEST.INFO", "e"],
        ["TDIGEST.CDF", "e", "1", "5", "50"],
    ],
    "modules": [
        ["MODULE", "LIST"],
        ["INFO", "modules"],
        ["MODULE", "LIST", "x"],
        ["MODULE", "FOO"],
        ["MODULE", "UNLOAD", "bf"],
    ],
    "resetstat": [
        ["BF.ADD", "k", "a"],
        ["BF.EXISTS", "k", "b"],
        ["BF.INFO", "nokey"],
        ["CONFIG", "RESETSTAT"],
        ["INFO", "stats"],
    ],
}


def substitute(raw, args, dumps):
    """Arguments naming a dump's header take the bytes recorded for it."""
    out = []
    for a in args:
        if a == "<header of s>":
            a = {"hex": dumps["s"][0][1].hex()}
        elif a == "<header of cf>":
            a = {"hex": dumps["cf"][0][1].hex()}
        out.append(a)
    return out


def scandump(raw, family, key):
    chunks, it = [], 0
    while True:
        rep = raw.cmd([family + ".SCANDUMP", key, it])
        # *2 :it $n data
        lines = rep.split(b"\r\n", 3)
        it = int(lines[1][1:])
        if it == 0:
            return chunks
        n = int(lines[2][1:])
        chunks.append((it, lines[3][:n]))


def main():
    so = os.environ.get("REDISBLOOM_SO")
    if not so:
        sys.exit("set REDISBLOOM_SO to RedisBloom 2.4's redisbloom.so")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = tempfile.mkdtemp()
    proc = subprocess.Popen([os.environ.get("REDIS_SERVER", "redis-server"), "--port", str(port),
                             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", tmp, "--loadmodule", so],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                raw = Raw(port)
                break
            except OSError:
                time.sleep(0.05)
        out, dumps = {}, {}
        for name, script in SCRIPTS.items():
            if name != "cf_checks":  # runs on cf_dump's filter
                raw.cmd(["FLUSHALL"])
            rec = []
            for args in script:
                args = substitute(raw, args, dumps)
                reply = raw.cmd(args)
                # MODULE LIST names the library's path: recorded as its
                # file name, so nothing outside the repository is named.
                path = so.encode()
                reply = reply.replace(b"$%d\r\n%s\r\n" % (len(path), path),
                                      b"$13\r\nredisbloom.so\r\n")
                rec.append({"cmd": args, "reply": reply.decode("latin-1")})
                if args[:2] == ["BF.MADD", "s"]:
                    dumps["s"] = scandump(raw, "BF", "s")
            if name == "cf_dump":
                dumps["cf"] = scandump(raw, "CF", "cf")
                with open(os.path.join(HERE, "cf-scandump.bin"), "wb") as f:
                    for it, data in dumps["cf"]:
                        f.write(struct.pack("<QI", it, len(data)) + data)
            out[name] = rec
        made = raw.cmd(["MODULE", "LIST"]).decode("latin-1")
        with open(os.path.join(HERE, "replies.json"), "w") as f:
            # One command per line: small, and diffs stay readable.
            f.write('{"made_with": %s,\n "scripts": {\n' % json.dumps(
                "RedisBloom " + ("2.4.23" if ":20423" in made else "?") +
                " in redis-server 7.0.15, by generate.py"))
            f.write(",\n".join(
                "  %s: [\n%s]" % (json.dumps(name), ",\n".join("   " + json.dumps(r) for r in rec))
                for name, rec in out.items()))
            f.write("}}\n")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
