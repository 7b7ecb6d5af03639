"""The alerting rules (dist/prometheus/bloomery.rules.yml) and the Grafana
dashboard (dist/grafana/bloomery-dashboard.json) name only series bloomeryd
exports: every metric name in every rule expression, panel query and
template variable query is in the /metrics of a real master and its
replica holding filters of every type (docs/CONSOLE.md, "Alerts and
dashboards"). Debian's prometheus, scraping them with the rules loaded,
evaluates every rule without error and raises none, and answers every
dashboard query with data. The log's write-error counter the rules alert
on counts an injected fsync failure."""
import json
import os
import re
import shutil
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request

import pytest
import yaml

from conftest import MODULE, free_port, wait_for
from powercut import faults  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomeryd's own HTTP listener")

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RULES = os.path.join(ROOT, "dist", "prometheus", "bloomery.rules.yml")
DASHBOARD = os.path.join(ROOT, "dist", "grafana", "bloomery-dashboard.json")
PROMETHEUS = shutil.which("prometheus")

# Series Prometheus makes itself for every target.
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
            "group_left", "group_right", "inf", "nan", "atan2"}

# ---- PromQL: the metric names an expression reads ----

STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
GRAFANA_VAR = re.compile(r"\$\{[^}]*\}|\$\w+")
RANGE = re.compile(r"\[[^\]]*\]")
MATCHERS = re.compile(r"\{[^}]*\}")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
IDENT = re.compile(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")


def metric_names(expr):
    """The metric names in a PromQL expression: identifiers that are not
    functions or aggregations (followed by "("), keywords, label names (in
    matchers and by/on clauses, removed first) or numbers and durations."""
    e = STRING.sub('""', expr)
    e = GRAFANA_VAR.sub("", e)
    e = RANGE.sub("", e)
    e = MATCHERS.sub("", e)
    e = GROUPING.sub("", e)
    names = set()
    for m in IDENT.finditer(e):
        name, call = m.group(1), m.group(2)
        if call or name.lower() in KEYWORDS:
            continue
        names.add(name)
    return names


def label_values_query(q):
    """The series query of Grafana's label_values(query, label); None for
    label_values(label), which names no metric."""
    m = re.match(r"\s*label_values\((.*),\s*[a-zA-Z_]\w*\s*\)\s*$", q, re.S)
    if m:
        return m.group(1)
    if re.match(r"\s*label_values\(\s*[a-zA-Z_]\w*\s*\)\s*$", q):
        return None
    return q


def rule_expressions(rules):
    return [("rule " + r.get("alert", r.get("record", "?")), r["expr"])
            for g in rules["groups"] for r in g["rules"]]


def dashboard_expressions(dash):
    out = []

    def panels(ps):
        for p in ps:
            yield p
            yield from panels(p.get("panels", []))
    for p in panels(dash["panels"]):
        for t in p.get("targets", []):
            out.append(("panel %r" % p["title"], t["expr"]))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            q = label_values_query(q)
            if q is not None:
                out.append(("variable %s" % v["name"], q))
    return out


def unknown_names(expressions, exported):
    """[(where, name)] of every metric an expression reads that is not
    exported; an expression that reads none is reported too (a parser that
    lost its names would otherwise pass anything)."""
    bad = []
    for where, expr in expressions:
        names = metric_names(expr)
        if not names:
            bad.append((where, "no metric found in %r" % expr))
        bad += [(where, n) for n in sorted(names - exported - PROMETHEUS_OWN)]
    return bad


def load():
    with open(RULES) as f:
        rules = yaml.safe_load(f)
    with open(DASHBOARD) as f:
        dash = json.load(f)
    return rules, dash


# ---- a master, a replica, filters of every type ----

def http_server(start_server, *args):
    port = free_port()
    s = start_server("--http-port", port, *args)
    s.http = "http://127.0.0.1:%d" % port
    wait_for(lambda: connectable(port), "the HTTP listener")
    return s


def connectable(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def scrape(s):
    with urllib.request.urlopen(s.http + "/metrics", timeout=30) as resp:
        assert resp.status == 200
        return resp.read().decode()


SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$")


def samples(text):
    """{(name, labels text): value} of the page's samples."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            m = SAMPLE.match(line)
            assert m, line
            out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def names(text):
    return {name for name, _ in samples(text)}


def cluster(start_server):
    """A master with filters of every type and a replica that caught up;
    maxmemory and min-replicas-to-write set, so that the series compared
    with them are drawn."""
    master = http_server(start_server, "--appendonly", "yes", "--maxmemory", "1gb")
    c = master.client()
    c.execute_command("BF.RESERVE", "bf", 0.01, 1000)
    c.execute_command("BF.MADD", "bf", *range(100))
    c.execute_command("BF.RESERVE", "classic", 0.01, 1000, "LAYOUT", "CLASSIC")
    c.execute_command("BF.ADD", "classic", "a")
    c.execute_command("BF.RESERVE", "cnt", 0.01, 1000, "COUNTING")
    c.execute_command("BF.ADD", "cnt", "a")
    c.execute_command("BF.RESERVE", "win", 0.01, 1000, "WINDOW", 3600, "SLICES", 4)
    c.execute_command("BF.ADD", "win", "a")
    c.execute_command("CF.RESERVE", "cf", 1000)
    c.execute_command("CF.ADD", "cf", "a")
    c.execute_command("BF.EXISTS", "bf", 1)
    c.execute_command("PFADD", "hll", "a")
    with pytest.raises(Exception):
        c.execute_command("BF.ADD", "hll", "x")  # WRONGTYPE: an error reply
    replica = http_server(start_server, "--appendonly", "yes",
                          "--replicaof", "127.0.0.1 %d" % master.port)
    rc = replica.client()
    offset = c.info("replication")["master_repl_offset"]
    wait_for(lambda: rc.info("replication").get("master_link_status") == "up" and
             rc.info("replication")["slave_repl_offset"] >= offset, "the replica to catch up")
    # The master's per-replica series appear once the replica is online.
    wait_for(lambda: "bloomery_replica_lag_records" in names(scrape(master)),
             "the master to list its replica")
    c.config_set("min-replicas-to-write", 1)
    c.close()
    rc.close()
    return master, replica


def exported_names(start_server):
    master, replica = cluster(start_server)
    m, r = scrape(master), scrape(replica)
    assert samples(r)[("bloomery_master_link_up", "")] == 1
    assert samples(m)[("bloomery_connected_replicas", "")] == 1
    assert samples(m)[("bloomery_min_replicas_to_write", "")] == 1
    return names(m) | names(r)


def test_rules_and_dashboard_name_only_exported_series(start_server):
    rules, dash = load()
    exported = exported_names(start_server)
    exprs = rule_expressions(rules) + dashboard_expressions(dash)
    assert len(exprs) > 50
    bad = unknown_names(exprs, exported)
    assert not bad, "not exported by bloomeryd:\n" + "\n".join("%s: %s" % b for b in bad)


def test_the_check_catches_a_series_that_does_not_exist():
    """The same check over a copy whose one query, one rule and one
    variable name a series bloomeryd does not have."""
    rules, dash = load()
    exported = set()
    for _, expr in rule_expressions(rules) + dashboard_expressions(dash):
        exported |= metric_names(expr)
    assert unknown_names(rule_expressions(rules) + dashboard_expressions(dash), exported) == []
    dash["panels"][-1]["targets"][0]["expr"] = \
        'topk(5, rate(bloomery_filter_adds_total{job="$job"}[$__rate_interval]))'
    rules["groups"][0]["rules"][0]["expr"] = "bloomery_memory_free_bytes < 1e6 and up == 1"
    dash["templating"]["list"][-1] = {"name": "v", "type": "query",
                                      "query": 'label_values(bloomery_nodes{job="$job"}, x)'}
    bad = unknown_names(rule_expressions(rules) + dashboard_expressions(dash), exported)
    assert sorted(n for _, n in bad) == ["bloomery_filter_adds_total", "bloomery_memory_free_bytes",
                                         "bloomery_nodes"]


@pytest.mark.parametrize("expr, want", [
    ('sum by (instance, cmd) (rate(a_total{job="x",k=~"a{1}"}[5m])) / on(instance) b',
     {"a_total", "b"}),
    ("histogram_quantile(0.99, sum by (le) (rate(h_bucket[$__rate_interval])))", {"h_bucket"}),
    ("topk($topn, x / y) > bool 1e3 unless ignoring(k) group_left(z) w offset 5m", {"x", "y", "w"}),
    ("time() - ts_seconds", {"ts_seconds"}),
    ("vector(1)", set()),
])
def test_metric_names(expr, want):
    assert metric_names(expr) == want


def test_dashboard_variables_and_data_source():
    _, dash = load()
    assert dash["schemaVersion"] >= 36
    vars_ = {v["name"]: v for v in dash["templating"]["list"]}
    assert vars_["datasource"]["type"] == "datasource"
    assert vars_["datasource"]["query"] == "prometheus"
    assert vars_["instance"]["type"] == "query"
    ids = set()
    for p in dash["panels"]:
        assert p["id"] not in ids
        ids.add(p["id"])
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            for t in p["targets"]:
                assert 'instance=~"$instance"' in t["expr"], (p["title"], t["expr"])


# Grafana's variables, as a panel's query has them filled in.
GRAFANA_VARS = [("$__rate_interval", "1m"), ("$topn", "10"), ("$job", "bloomery"),
                ("$instance", ".+")]


def api_get(api, path, **params):
    url = api + path + ("?" + urllib.parse.urlencode(params) if params else "")
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        if e.code == 503:
            return {}  # starting: "Service Unavailable"
        return json.loads(body)


@pytest.mark.skipif(PROMETHEUS is None, reason="Debian's prometheus is not installed")
def test_prometheus_runs_the_rules_and_every_query_answers(start_server, tmp_path):
    """Debian's prometheus scraping a healthy master and replica with the
    rules loaded: every rule evaluates without error and none is pending or
    firing, and every dashboard query answers with data (a label value
    that matches nothing or a vector match that fails shows here, not in
    the unit tests' made-up series)."""
    master, replica = cluster(start_server)
    conf = tmp_path / "prometheus.yml"
    conf.write_text("""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ['%s']
scrape_configs:
  - job_name: bloomery
    static_configs:
      - targets: ['%s', '%s']
""" % (os.path.abspath(RULES), master.http[len("http://"):], replica.http[len("http://"):]))
    port = free_port()
    log = open(tmp_path / "log", "w+")
    p = subprocess.Popen([PROMETHEUS, "--config.file", str(conf), "--storage.tsdb.path",
                          str(tmp_path / "tsdb"), "--web.listen-address", "127.0.0.1:%d" % port],
                         stdout=log, stderr=subprocess.STDOUT)
    api = "http://127.0.0.1:%d/api/v1/" % port
    try:
        def scraped():
            # Three scrapes of each node at least: rates have two samples.
            r = api_get(api, "query", query='min(count_over_time(up{job="bloomery"}[1m])) >= 3 '
                        'and min(up{job="bloomery"}) == 1 and count(up{job="bloomery"}) == 2')
            return r.get("data", {}).get("result")
        wait_for(scraped, "prometheus to scrape both nodes", timeout=90, ignore=(OSError,))

        def rules():
            groups = api_get(api, "rules").get("data", {}).get("groups", [])
            rs = [r for g in groups for r in g["rules"]]
            # Evaluated at least once since the scrapes above.
            return rs if rs and all(not r["lastEvaluation"].startswith("0001") for r in rs) \
                else None
        rs = wait_for(rules, "the rules evaluated", ignore=(OSError,))
        assert len(rs) == len(rule_expressions(load()[0]))
        for r in rs:
            assert r["health"] == "ok", (r["name"], r.get("lastError"))
            assert r["state"] == "inactive", (r["name"], r["alerts"])

        _, dash = load()
        empty = []
        for where, expr in dashboard_expressions(dash):
            for var, val in GRAFANA_VARS:
                expr = expr.replace(var, val)
            if expr.lstrip().startswith("label_values"):
                continue
            r = api_get(api, "query", query=expr)
            assert r["status"] == "success", (where, expr, r)
            if not r["data"]["result"]:
                empty.append((where, expr))
        assert not empty, "no data:\n" + "\n".join("%s: %s" % e for e in empty)
    finally:
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.seek(0)
        out = log.read()
        log.close()
    assert "level=error" not in out, out


def test_log_write_errors_are_counted(faults, start_server):  # noqa: F811
    """An fsync of the log failing under everysec: /metrics shows the log
    not writable, then writable again once the disk is back, and the error
    counted in bloomery_log_write_errors_total either way (the alert for
    errors repaired between two scrapes reads it)."""
    f = faults
    port = free_port()
    s = start_server("--appendfsync", "everysec", "--http-port", port, **f.server_kw())
    s.http = "http://127.0.0.1:%d" % port
    wait_for(lambda: connectable(port), "the HTTP listener")
    c = s.client()
    c.execute_command("BF.ADD", "k", "before")
    before = samples(scrape(s))
    assert before[("bloomery_log_write_errors_total", "")] == 0
    assert before[("bloomery_log_write_ok", "")] == 1
    f.set(fsync="eio", match="/log/")
    try:
        c.execute_command("BF.ADD", "k", "during")
    except Exception:
        pass  # refused when the fault already showed
    wait_for(lambda: samples(scrape(s))[("bloomery_log_write_ok", "")] == 0, "the log to fail")
    assert samples(scrape(s))[("bloomery_log_write_errors_total", "")] >= 1
    f.set()
    wait_for(lambda: samples(scrape(s))[("bloomery_log_write_ok", "")] == 1, "the log repaired")
    assert samples(scrape(s))[("bloomery_log_write_errors_total", "")] >= 1
    c.close()
