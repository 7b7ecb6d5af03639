"""bloomery dedup: exact mode never drops a unique record and removes every
duplicate; filter-only mode drops duplicates plus false positives within the
stated bound; bad inputs and options give clear errors and exit codes."""
import math
import os
import random
import re
import subprocess

import pytest

from clihelp import CLI, QUICK, run

N = 4000 if QUICK else 30000


def gen(n, dup_fraction, seed, length=16):
    """n records, a fraction repeating an earlier one; some repeats adjacent
    (same batch) and some far apart."""
    rnd = random.Random(seed)
    out, distinct = [], []
    for i in range(n):
        if distinct and rnd.random() < dup_fraction:
            r = rnd.random()
            out.append(distinct[-1] if r < 0.2 else rnd.choice(distinct))
        else:
            k = ("%0*x" % (length, rnd.getrandbits(4 * length))).encode()
            distinct.append(k)
            out.append(k)
    return out


def first_occurrences(records, key=lambda r: r):
    seen, keep, dups = set(), [], []
    for r in records:
        k = key(r)
        if k in seen:
            dups.append(r)
        else:
            seen.add(k)
            keep.append(r)
    return keep, dups


def sort_uniq(path):
    """The reference result: `sort | uniq`."""
    p = subprocess.run("LC_ALL=C sort '%s' | LC_ALL=C uniq" % path, shell=True,
                       stdout=subprocess.PIPE, check=True)
    return p.stdout.split(b"\n")[:-1]


def write(tmp_path, name, records, terminated=True):
    p = tmp_path / name
    data = b"\n".join(records) + (b"\n" if terminated and records else b"")
    p.write_bytes(data)
    return p


def lines(data):
    assert data == b"" or data.endswith(b"\n")
    return data.split(b"\n")[:-1]


def summary(err):
    return {m.group(1): m.group(2) for m in re.finditer(r"^([a-z ]+?)\s{2,}(.*)$", err, re.M)}


@pytest.mark.parametrize("dup", [0.0, 0.01, 0.5])
@pytest.mark.parametrize("capacity", [None, 1, 50])
def test_exact_matches_sort_uniq(tmp_path, dup, capacity):
    recs = gen(N, dup, seed=int(dup * 100) + (capacity or 0))
    inp = write(tmp_path, "in", recs)
    args = ["dedup", inp, "--dups", tmp_path / "dups"]
    if capacity:
        args += ["--capacity", capacity]
    rc, out, err = run(args)
    assert rc == 0, err
    keep, dups = first_occurrences(recs)
    got = lines(out)
    assert got == keep                      # first occurrences, input order
    assert sorted(got) == sort_uniq(inp)    # nothing unique dropped, no duplicate kept
    assert lines((tmp_path / "dups").read_bytes()) == dups
    s = summary(err)
    assert s["records"] == str(N)
    assert s["unique"] == str(len(keep))
    assert s["duplicates"] == str(len(dups))
    assert "exact" in s["mode"]
    assert s["false drops"].startswith("0")


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_exact_threads_and_files(tmp_path, threads):
    recs = gen(N, 0.3, seed=threads)
    half = len(recs) // 2
    a = write(tmp_path, "a", recs[:half])
    b = write(tmp_path, "b", recs[half:], terminated=False)  # unterminated last record
    rc, out, err = run(["dedup", "-t", threads, "-o", tmp_path / "out", a, b])
    assert rc == 0, err
    assert out == b""
    assert lines((tmp_path / "out").read_bytes()) == first_occurrences(recs)[0]


def test_key_fields(tmp_path):
    rnd = random.Random(7)
    recs = []
    for i in range(N):
        caller, callee = rnd.randrange(60), rnd.randrange(60)
        t = rnd.randrange(5)
        recs.append(b"%d,%d,x%d,%d" % (caller, t, i, callee))  # key: fields 1,2,4
    inp = write(tmp_path, "in", recs)
    rc, out, err = run(["dedup", "--key", "1-2,4", "--delimiter", ",", inp, "--capacity", 10])
    assert rc == 0, err

    def key(r):
        f = r.split(b",")
        return (f[0], f[1], f[3])
    assert lines(out) == first_occurrences(recs, key)[0]


def test_filter_only_stdin_within_bound(tmp_path):
    # A filter sized far too small, so false positives are many and measurable.
    recs = gen(N, 0.2, seed=11)
    data = b"\n".join(recs) + b"\n"
    rc, out, err = run(["dedup", "--capacity", N // 20, "--error", 0.05, "--dups",
                        tmp_path / "dups", "-t", 2], input=data)
    assert rc == 0, err
    s = summary(err)
    assert "filter-only" in s["mode"]
    bound = float(re.match(r"expected <= ([0-9.e+-]+)", s["false drops"]).group(1))
    keep, dups = first_occurrences(recs)
    got, dropped = lines(out), lines((tmp_path / "dups").read_bytes())
    assert len(got) + len(dropped) == len(recs)
    # Every kept record is a first occurrence, kept in order; every duplicate is dropped.
    keys = set(got)
    assert len(keys) == len(got)
    assert [r for r in keep if r in keys] == got
    assert "more than --capacity %d" % (N // 20) in err
    false_drops = len(keep) - len(got)
    assert false_drops > 0
    assert false_drops <= bound + 4 * math.sqrt(bound) + 5, (false_drops, bound)


def test_filter_only_default_sizing_drops_nothing_unique():
    recs = gen(N, 0.1, seed=3)
    rc, out, err = run(["dedup"], input=b"\n".join(recs) + b"\n")
    assert rc == 0, err
    assert lines(out) == first_occurrences(recs)[0]
    assert "filter-only" in err


def test_exact_on_streams_spools_them(tmp_path):
    recs = gen(N, 0.3, seed=12)
    data = b"\n".join(recs) + b"\n"
    keep = first_occurrences(recs)[0]
    rc, out, err = run(["dedup", "--exact", "--capacity", 5], input=data)
    assert rc == 0 and "exact" in err, err
    assert lines(out) == keep
    # stdin redirected from a file is still read once, then spooled.
    (tmp_path / "in").write_bytes(data)
    with open(tmp_path / "in", "rb") as f:
        rc, out, err = run(["dedup", "--exact", "-k", "1"], stdin=f)
    assert rc == 0 and lines(out) == keep
    with open(tmp_path / "in", "rb") as f:
        rc, out, err = run(["dedup"], stdin=f)
    assert rc == 0 and "filter-only" in err and lines(out) == keep
    rc, out, err = run(["dedup", "--exact", "-k", "2"], input=b"a\tb\nc\n")
    assert out == b"a\tb\nc\n" and "1 record lacks a key field (first: stdin line 2)" in err
    env = dict(os.environ, TMPDIR=str(tmp_path / "nope"))
    p = subprocess.run([CLI, "dedup", "--exact"], input=b"a\n", env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.returncode == 1 and b"cannot create a temporary file" in p.stderr


def test_files_can_be_forced_to_one_pass(tmp_path):
    recs = gen(N, 0.1, seed=5)
    inp = write(tmp_path, "in", recs)
    rc, out, err = run(["dedup", "--filter-only", inp])
    assert rc == 0 and "filter-only" in err
    assert lines(out) == first_occurrences(recs)[0]


def test_empty_inputs(tmp_path):
    e = write(tmp_path, "empty", [])
    rc, out, err = run(["dedup", e, e])
    assert (rc, out) == (0, b"")
    assert summary(err)["records"] == "0"
    rc, out, err = run(["dedup"], input=b"")
    assert (rc, out) == (0, b"")


def test_huge_line_and_binary_bytes(tmp_path):
    big = random.Random(1).randbytes(1 << 20).replace(b"\n", b"x")
    binary = b"\x00\xff\r\x01bin\x00ary\xfe"
    recs = [b"a", big, binary, b"", b"b", big, binary, b"", big + b"y", b"a"]
    inp = write(tmp_path, "in", recs)
    for extra in ([], ["-t", 1], ["--filter-only"]):
        rc, out, err = run(["dedup", inp] + extra)
        assert rc == 0, err
        assert lines(out) == [b"a", big, binary, b"", b"b", big + b"y"]


def test_nul_separated(tmp_path):
    (tmp_path / "in").write_bytes(b"a\nb\0c\0a\nb\0c\0")
    rc, out, err = run(["dedup", "-z", tmp_path / "in"])
    assert rc == 0, err
    assert out == b"a\nb\0c\0"


def test_missing_key_fields_are_counted_and_kept(tmp_path):
    recs = [b"1\t2\t3", b"1\t9\t3", b"short", b"1\t7\t3", b"", b"short", b"4\t5\t6"]
    inp = write(tmp_path, "in", recs)
    rc, out, err = run(["dedup", "-k", "1,3", inp])
    assert rc == 0, err
    assert lines(out) == [b"1\t2\t3", b"short", b"", b"short", b"4\t5\t6"]
    assert "3 records lack a key field (first: %s line 3)" % inp in err
    assert summary(err)["missing key"].startswith("3")


def test_unreadable_inputs(tmp_path):
    rc, out, err = run(["dedup", tmp_path / "nope"])
    assert rc == 1 and "cannot open" in err and "nope" in err
    rc, out, err = run(["dedup", tmp_path])
    assert rc == 1 and "is a directory" in err
    locked = write(tmp_path, "locked", [b"x"])
    os.chmod(locked, 0)
    if os.geteuid() != 0:  # root reads anything
        rc, out, err = run(["dedup", locked])
        assert rc == 1 and "Permission denied" in err


def test_write_errors(tmp_path):
    inp = write(tmp_path, "in", [b"a", b"b"])
    rc, out, err = run(["dedup", inp, "-o", "/dev/full"])
    assert rc == 1 and "cannot write /dev/full" in err
    rc, out, err = run(["dedup", inp, "--dups", "/dev/full"], input=None)
    assert rc == 0  # nothing was written to the duplicates
    rc, out, err = run(["dedup", inp, "-o", tmp_path / "no" / "dir"])
    assert rc == 1 and "cannot create" in err


def test_usage_errors(tmp_path):
    inp = write(tmp_path, "in", [b"a"])
    for args in (["--bogus"], ["--capacity", "0", inp], ["--capacity", "x", inp],
                 ["--error", "1.5", inp], ["--key", "0", inp], ["--key", "2-1", inp],
                 ["--key", "a", inp], ["--delimiter", "ab", inp], ["-t", "0", inp],
                 ["--out"], ["-", "-"], ["-o", inp, inp], ["--dups", inp, inp],
                 ["-k", "1", "-d", "\\n", inp]):
        rc, out, err = run(["dedup"] + args, input=b"a\n")
        assert rc == 2, (args, err)
        assert "bloomery dedup:" in err
    assert inp.read_bytes() == b"a\n"  # -o onto an input refused before writing


def test_help():
    rc, out, err = run(["dedup", "--help"])
    assert rc == 0 and b"usage: bloomery dedup" in out and b"Exit codes" in out
    rc, out, err = run(["--help"])
    assert rc == 0
    for cmd in (b"calc", b"dedup", b"load", b"check", b"exit codes"):
        assert cmd in out


def test_progress_and_memory_errors(tmp_path):
    inp = write(tmp_path, "in", gen(N, 0.1, seed=9))
    rc, out, err = run(["dedup", "--progress", inp, "-o", tmp_path / "out"])
    assert rc == 0 and "pass 1/2 [" in err and "pass 2/2 [" in err and "100.0%" in err
    rc, out, err = run(["dedup", "--progress", "-q", "--no-progress", inp])
    assert rc == 0 and err == ""
    rc, out, err = run(["dedup", "--progress"], input=b"a\nb\na\n")
    assert rc == 0 and out == b"a\nb\n" and "dedup 6 B, 3 records" in err
    rc, out, err = run(["dedup", "--capacity", "1e15", "--error", "1e-9"], input=b"a\n")
    assert rc == 1 and "cannot create a filter" in err
