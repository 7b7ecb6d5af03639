"""Dumps recorded from RedisBloom 2.4.23 (tests/vectors/redisbloom-classic.json)
load with BF.LOADCHUNK and answer exactly as RedisBloom did; the same
filters built here with LAYOUT CLASSIC dump byte for byte the same."""
import json
import os

import pytest

VECTORS = os.path.join(os.path.dirname(__file__), "..", "vectors")

with open(os.path.join(VECTORS, "redisbloom-classic.json")) as f:
    CASES = json.load(f)["filters"]


def items_of(case):
    if case["items_are_hex"]:
        return [bytes.fromhex(x) for x in case["items"]]
    return [x.encode() for x in case["items"]]


def dump_of(case):
    return [(it, bytes.fromhex(h)) for it, h in case["scandump"]]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_redisbloom_dump_loads_and_answers(r, case):
    for it, data in dump_of(case):
        assert r.execute_command("BF.LOADCHUNK", "v", it, data) == b"OK"
    info = r.execute_command("BF.INFO", "v")
    assert info == [x.encode() if isinstance(x, str) else x for x in case["info"]]
    items = items_of(case)
    assert r.execute_command("BF.MEXISTS", "v", *items) == [1] * len(items)
    probes = case["absent_probes"]
    assert r.execute_command("BF.MEXISTS", "v", *probes) == case["absent_probe_replies"]
    # And it dumps back to the very same bytes.
    got, it = [], 0
    while True:
        it, data = r.execute_command("BF.SCANDUMP", "v", it)
        if it == 0:
            assert data == b""
            break
        got.append((it, data))
    assert got == dump_of(case)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_classic_layout_builds_identical_filter(r, case):
    assert r.execute_command("BF.RESERVE", "b", *case["reserve"], "LAYOUT", "CLASSIC") == b"OK"
    assert r.execute_command("BF.MADD", "b", *items_of(case)) == case["madd_replies"]
    got, it = [], 0
    while True:
        it, data = r.execute_command("BF.SCANDUMP", "b", it)
        if it == 0:
            break
        got.append((it, data))
    assert got == dump_of(case)
    assert r.execute_command("BF.MEXISTS", "b", *case["absent_probes"]) == \
        case["absent_probe_replies"]
