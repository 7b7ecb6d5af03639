"""How long the filter table's API takes over many filters, reported (-s
shows it), never asserted: timings depend on the machine. The answers'
contents are checked. bench/console/api measures 100,000 filters across
six nodes and the nodes' CPU (docs/BENCHMARKS.md, "Fleet console")."""
import time

import pytest

from consolehelp import QUICK, bloomeryd, wait_for

N = 2000 if QUICK else 20000


@pytest.mark.report
def test_filters_api_report(procs):
    nodes = [procs.start(bloomeryd(), "node") for _ in range(2)]
    for i, n in enumerate(nodes):
        p = n.client().pipeline(transaction=False)
        for k in range(i, N, len(nodes)):
            p.execute_command("BF.MADD", "f:%06d" % k, *["i%d" % j for j in range(1 + k % 5)])
        p.execute()
    c = procs.console(sum((["--node", n.addr] for n in nodes), []))
    wait_for(lambda: c.get("/api/filters", per_page=1)["total"] == N, "the whole index")
    report = []
    for what, fields in (("first page", {}),
                         ("search", {"match": "f:00*"}),
                         ("sort by items, descending", {"sort": "items", "order": "desc"}),
                         ("last page", {"page": N // 50})):
        t0 = time.perf_counter()
        got = c.get("/api/filters", **fields)
        report.append("%s: %.1f ms" % (what, (time.perf_counter() - t0) * 1000))
        assert len(got["filters"]) == 50
    assert c.get("/api/filters", match="f:00*")["total"] == min(N, 10000)
    print("\n%d filters on 2 nodes: %s" % (N, "; ".join(report)))
