"""The keyspace's hash is keyed with a secret drawn at start-up
(src/server/base/keyhash.h), so a client cannot choose keys that share a
bucket. SCAN walks the table in hash order: the same keys, added the same
way to two fresh servers, come back in different orders."""
from conftest import MODULE

import pytest

pytestmark = pytest.mark.skipif(MODULE is not None, reason="Redis keys its own dict")


def scan_order(srv):
    c = srv.client()
    p = c.pipeline(transaction=False)
    for i in range(300):
        p.execute_command("PFADD", "key:%d" % i, "x")
    p.execute()
    order, cursor = [], 0
    while True:
        cursor, keys = c.scan(cursor, count=20)
        order += keys
        if cursor == 0:
            break
    c.close()
    assert sorted(order) == sorted(b"key:%d" % i for i in range(300))
    return order


def test_hash_differs_between_runs(start_server):
    first = scan_order(start_server())
    second = scan_order(start_server())
    assert first != second
