"""`bloomery console` in a real browser (headless chromium, browser.py)
over the deployments it is made for, both started here: a Sentinel group
(three bloomeryd, three Sentinels) with 10,000 filters, searched, sorted,
paged, created, filled, made read-only and deleted through the page, then
failed over while the Deployment view is open; and a Redis Cluster (three
masters, three replicas, bloomery.so) whose memory is skewed, rebalanced
through the page. Every expectation is checked against the servers
themselves, not against the console's API alone. BLOOMERY_SCREENSHOTS=docs
regenerates the docs/fleet-*.png screenshots; BLOOMERY_QUICK=1 (the
sanitizer run) loads fewer filters, with every check kept."""
import os
import threading
import time

import pytest
from redis.crc import key_slot

from browser import Browser, available
from consolehelp import (MODULE, QUICK, REDIS_SENTINEL, REDIS_SERVER, owner_of, redis_cluster,
                         sentinel_group, slot_ranges, wait_for)

pytestmark = [
    pytest.mark.skipif(not available(), reason="chromium, chromedriver or selenium missing"),
    pytest.mark.skipif(not os.path.exists(REDIS_SENTINEL) or not os.path.exists(REDIS_SERVER) or
                       not os.path.exists(MODULE), reason="no redis-sentinel, redis-server or "
                       "bloomery.so"),
]

FILTERS = 2000 if QUICK else 10000
PREFIXES = ("app", "user", "sess", "cart")
PER_PAGE = 50


def count(n):
    return "{:,}".format(n)


def load_filters(client, n):
    """n filters, pipelined: Bloom filters of distinct capacities (100 + i),
    every tenth a cuckoo filter, every fifth with items, every seventh with
    a TTL. Returns {name: capacity} of the Bloom filters."""
    caps = {}
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        name = "%s:%05d" % (PREFIXES[i % 4], i)
        if i % 10 == 9:
            pipe.execute_command("CF.RESERVE", name, 64)
        else:
            caps[name] = 100 + i
            pipe.execute_command("BF.RESERVE", name, 0.01, 100 + i)
            if i % 5 == 0:
                pipe.execute_command("BF.MADD", name, *["item%d" % j for j in range(1 + i % 50)])
        if i % 7 == 0:
            pipe.expire(name, 3600 + i)
        if len(pipe) >= 2000:
            pipe.execute()
    pipe.execute()
    return caps


def wait_catalog(c, total):
    """Until the console's index is complete and holds total filters."""
    wait_for(lambda: (lambda o: o["catalog_complete"] and o["filters_total"] == total)(
        c.get("/api/overview")), "the catalog of %d filters" % total, timeout=120)


def row_names(b, table):
    return b.attrs("#%s tbody tr[data-name]" % table, "data-name")


def test_sentinel_group_in_a_browser(procs):
    master, replicas, sentinels = sentinel_group(procs)
    m = master.client(decode_responses=True)
    caps = load_filters(m, FILTERS)
    names = sorted(k for k in m.scan_iter(count=1000))
    assert len(names) == FILTERS
    c = procs.console(["--sentinel", ",".join(s.addr for s in sentinels),
                       "--master-name", "mymaster"])
    wait_catalog(c, FILTERS)
    url = "http://127.0.0.1:%d/" % c.port
    with Browser() as b:
        # The whole catalog, the first page in name order.
        b.get(url + "#/filters")
        b.wait_text("#filters-total", count(FILTERS) + " filters")
        b.wait(lambda: row_names(b, "filters-table") == names[:PER_PAGE], "the first page")
        b.wait_text("#filters-pager .page-of", "page 1 of " + count(FILTERS // PER_PAGE))
        b.screenshot("fleet-filters.png")

        # Paging: two pages on, then the last.
        b.click("#filters-pager .page-next")
        b.wait_text("#filters-pager .page-of", "page 2 of")
        b.click("#filters-pager .page-next")
        b.wait(lambda: row_names(b, "filters-table") == names[2 * PER_PAGE:3 * PER_PAGE],
               "page 3's rows")
        b.click("#filters-pager .page-last")
        b.wait(lambda: row_names(b, "filters-table") == names[-PER_PAGE:], "the last page's rows")

        # Search: the count of the servers' own SCAN for the pattern.
        b.get(url + "#/filters")
        b.type("#filters-match", "user:01*")
        scanned = sorted(m.scan_iter(match="user:01*", count=1000))
        assert 0 < len(scanned) < FILTERS
        b.wait_text("#filters-total", count(len(scanned)) + " filters matching user:01*")
        b.wait(lambda: row_names(b, "filters-table") == scanned[:PER_PAGE], "the matching rows")

        # Sort by capacity (a numeric column: largest first), against the
        # capacities the filters were made with; the cuckoo filters' are
        # smaller than any of the first page's.
        b.get(url + "#/filters")
        b.click('#filters-table th[data-sort="capacity"]')
        want = sorted(caps, key=lambda k: -caps[k])[:PER_PAGE]
        b.wait(lambda: b.css('#filters-table th[data-sort="capacity"][aria-sort="descending"]'),
               "the capacity header marked as sorted")
        b.wait(lambda: row_names(b, "filters-table") == want, "the largest filters first")
        shown = [int(t.replace(",", "")) for t in
                 b.texts("#filters-table tbody tr td:nth-child(6)")]
        assert shown == [caps[k] for k in want]
        # Clicked again: smallest first (cuckoo filters, then the Bloom
        # filters of capacity 100, 101, ...).
        b.click('#filters-table th[data-sort="capacity"]')
        b.wait(lambda: b.css('#filters-table th[data-sort="capacity"][aria-sort="ascending"]'),
               "ascending order")
        b.wait(lambda: (lambda v: v == sorted(v) and len(v) == PER_PAGE)(
            [int(t.replace(",", "")) for t in b.texts("#filters-table tbody tr td:nth-child(6)")]),
            "capacities in ascending order")

        # Create: where it goes is shown first (the group's master).
        b.get(url + "#/create")
        b.type("#c-name", "made:here")
        b.type("#c-capacity", "50000")
        b.wait_text("#placement-node", master.addr)
        b.click("#c-submit")
        b.wait_text("#create-result", "Created")
        assert m.execute_command("BF.INFO", "made:here", "CAPACITY") == [50000]
        b.get(url + "#/filters?match=made:*")
        b.wait_css('#filters-table tr[data-name="made:here"]')

        # One filter: add, check, read-only and back, delete.
        b.get(url + "#/filter/made%3Ahere")
        b.type("#add-items", "red\ngreen\nblue")
        b.click("#add-submit")
        b.wait(lambda: b.attrs("#results-add tbody tr", "data-result") == ["1", "1", "1"],
               "three items added")
        assert m.execute_command("BF.MEXISTS", "made:here", "red", "green", "blue") == [1, 1, 1]
        b.type("#check-items", "green\nabsent-one\nred")
        b.click("#check-form button[type=submit]")
        b.wait(lambda: b.attrs("#results-check tbody tr", "data-result") == ["1", "0", "1"],
               "the check's answers per item")
        b.click("#readonly-toggle")
        b.wait_css("#filter-h .badge.ro")
        b.wait_text('#filter-summary [data-field="Read-only"] dd', "yes")
        with pytest.raises(Exception, match="read-only"):
            m.execute_command("BF.ADD", "made:here", "refused")
        b.screenshot("fleet-filter.png", top=True)
        b.wait_text("#readonly-toggle", "Make writable")
        b.click("#readonly-toggle")
        b.wait_gone("#filter-h .badge.ro")
        assert m.execute_command("BF.ADD", "made:here", "accepted") == 1
        b.click("#delete")
        b.wait_text("#confirm-text", "made:here")
        b.click("#confirm-ok")
        b.wait_text("#filters-flash", "Deleted")
        assert m.exists("made:here") == 0
        b.get(url + "#/filters?match=made:*")
        b.wait_text("#filters-total", "0 filters matching made:*")

        # Failover with the Deployment view open: the master killed, the
        # view shows a replica as the new master. Timed from the kill and
        # from Sentinel's own answer, which isolates the console's share.
        b.get(url + "#/nodes")
        master_cell = 'tr[data-group="mymaster"] td:nth-child(2)'
        b.wait_text(master_cell, master.addr)
        sc = sentinels[0].client(decode_responses=True)
        said = {}

        def watch():
            while "at" not in said and time.monotonic() - t0 < 120:
                try:
                    host, port = sc.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                                                    "mymaster")
                    if "%s:%s" % (host, port) != master.addr:
                        said["at"] = time.monotonic()
                        said["addr"] = "%s:%s" % (host, port)
                except Exception:  # noqa: BLE001 (a Sentinel busy failing over)
                    pass
                time.sleep(0.01)

        t0 = time.monotonic()
        master.kill()
        watcher = threading.Thread(target=watch)
        watcher.start()
        new = b.wait(lambda: (lambda t: t in [r.addr for r in replicas] and t)(
            b.text(master_cell)), "a replica shown as the master", timeout=60)
        shown_at = time.monotonic()
        watcher.join()
        assert said.get("addr") == new, said
        b.wait_css('tr[data-group="mymaster"] .missing-replica')
        b.screenshot("fleet-failover.png")
        assert b.errors() == []
    lag = shown_at - said["at"]
    print("\nfailover: %d filters; Sentinel named %s %.2f s after the kill; the page showed it "
          "%.2f s after the kill, %.2f s after Sentinel" % (FILTERS, new, said["at"] - t0,
                                                             shown_at - t0, lag))
    # The goal (the page shows the new master within 5 s) is measured and
    # reported here and in docs/CONSOLE.md, not asserted: a machine loaded by
    # the suites running beside this one would make a bound on time flaky.


CLUSTER_FILTERS = 500 if QUICK else 2000


def test_cluster_in_a_browser(procs):
    nodes = redis_cluster(procs, 3, replicas=1)
    by_addr = {n.addr: n for n in nodes}
    ranges = slot_ranges(nodes[0])
    masters = sorted({a for _, _, a in ranges})
    assert len(masters) == 3
    owner = lambda key, rs=ranges: [a for lo, hi, a in rs if lo <= key_slot(key.encode()) <= hi][0]  # noqa: E731
    # Many small filters everywhere, a few big ones on one master: its
    # memory is what the rebalance evens out.
    keys = ["c:%05d" % i for i in range(CLUSTER_FILTERS)]
    heavy = masters[0]
    big = [k for k in ("{t%d}.big" % i for i in range(3000)) if owner(k) == heavy][:12]
    pipes = {a: by_addr[a].client().pipeline(transaction=False) for a in masters}
    for k in keys:
        pipes[owner(k)].execute_command("BF.RESERVE", k, 0.01, 100)
        pipes[owner(k)].execute_command("BF.ADD", k, "in-" + k)
    for k in big:
        pipes[heavy].execute_command("BF.RESERVE", k, 0.001, 200000)
        pipes[heavy].execute_command("BF.ADD", k, "in-" + k)
    for p in pipes.values():
        p.execute()
    everything = keys + big

    c = procs.console(["--cluster", nodes[0].addr])
    wait_for(lambda: len(c.get("/api/overview")["groups"]) == 3, "three groups")
    wait_catalog(c, len(everything))
    url = "http://127.0.0.1:%d/" % c.port
    with Browser() as b:
        # Deployment: six nodes, the masters with their slots.
        b.get(url + "#/nodes")
        b.wait(lambda: len(b.css("#nodes tbody tr[data-addr]")) == 6, "six nodes")
        roles = dict(zip(b.attrs("#nodes tbody tr[data-addr]", "data-addr"),
                         b.texts("#nodes tbody tr[data-addr] td:nth-child(2)")))
        assert sorted(a for a, r in roles.items() if r == "master") == masters, roles
        assert sorted(roles.values()) == ["master"] * 3 + ["replica"] * 3
        slots = dict(zip(b.attrs("#nodes tbody tr[data-addr]", "data-addr"),
                         b.texts("#nodes tbody tr[data-addr] td:nth-child(11)")))
        assert all(slots[a] not in ("", "\u2014") for a in masters), slots
        b.wait(lambda: len(b.css('#groups tbody tr[data-group]')) == 3, "three groups")
        b.screenshot("fleet-deployment.png")

        # Routing: each filter's slot and master, as CLUSTER KEYSLOT and
        # CLUSTER SLOTS say.
        b.get(url + "#/routing")
        b.wait_text("#routing-total", count(len(everything)) + " filters")
        b.wait(lambda: len(row_names(b, "routing-table")) == PER_PAGE, "a page of routes")
        for name, slot, master in zip(row_names(b, "routing-table"),
                                      b.texts("#routing-table tbody tr td:nth-child(2)"),
                                      b.texts("#routing-table tbody tr td:nth-child(4)")):
            assert (int(slot), master) == (key_slot(name.encode()), owner(name)), name
        b.screenshot("fleet-routing.png")

        # Create: the key's slot's master named before the filter is made.
        b.get(url + "#/create")
        for name in ("placed:one", "{user7}.seen"):
            slot, where = owner_of(nodes, name)
            b.type("#c-name", name)
            b.wait_text("#placement", "slot %d" % slot)
            assert b.text("#placement-node") == where
            b.type("#c-capacity", "1000")
            b.click("#c-submit")
            b.wait_text("#create-result", "Created \u201c%s\u201d on %s" % (name, where))
            assert by_addr[where].client().exists(name) == 1
            by_addr[where].client().execute_command("BF.ADD", name, "in-" + name)
            everything.append(name)

        # Rebalance: the plan, started, followed to the end.
        b.get(url + "#/rebalance")
        b.wait(lambda: len(b.css("#reb-moves tbody tr")) > 0, "a plan with moves", timeout=60)
        # The plan the page was given, which Start makes: another GET of
        # /api/rebalance/plan would make and keep a new one, measured a
        # moment later (used memory moves, so may its slots).
        cells = [b.texts("#reb-moves tbody tr td:nth-child(%d)" % i) for i in (1, 2, 3)]
        plan = {"moves": [{"slot": int(slot), "from": f, "to": t}
                          for slot, f, t in zip(*cells)]}
        assert plan["moves"] and all(m["from"] == heavy for m in plan["moves"]), plan
        before = slot_ranges(nodes[0])
        assert all([o for lo, hi, o in before if lo <= m["slot"] <= hi] == [heavy]
                   for m in plan["moves"]), plan
        b.screenshot("fleet-rebalance.png")
        b.wait(lambda: b.css("#reb-start:not([disabled])"), "Start enabled")
        b.click("#reb-start")
        b.wait_text("#confirm-text", "%d slot moves" % len(plan["moves"]))
        b.click("#confirm-ok")
        b.wait_text("#reb-state", "Finished", timeout=120)
        assert b.errors() == []
    st = c.get("/api/rebalance/status")
    assert st["error"] is None and st["done"] == st["total"] == len(plan["moves"]), st
    # The slots are where the plan put them, on every master's view, and
    # every filter still answers for its item wherever it is now.
    for a in masters:
        after = slot_ranges(by_addr[a])
        for m in plan["moves"]:
            assert [o for lo, hi, o in after if lo <= m["slot"] <= hi] == [m["to"]], (a, m)
    after = slot_ranges(nodes[0])
    pipes = {a: by_addr[a].client().pipeline(transaction=False) for a in masters}
    order = {a: [] for a in masters}
    for k in everything:
        o = owner(k, after)
        pipes[o].execute_command("BF.EXISTS", k, "in-" + k)
        order[o].append(k)
    for a in masters:
        got = pipes[a].execute()
        assert got == [1] * len(order[a]), [k for k, g in zip(order[a], got) if g != 1][:5]
