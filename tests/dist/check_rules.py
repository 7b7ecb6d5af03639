#!/usr/bin/python3
"""dist/prometheus/bloomery.rules.yml: `promtool check rules` accepts it,
`promtool test rules` passes its unit tests (bloomery.rules.test.yml), and
the tests can fail: for every alert, a copy of the rules with the alert
broken must fail them. And every query of dist/grafana/bloomery-dashboard.json,
its Grafana variables given values, is PromQL that promtool parses (as
recording rules). tests/server/test_dashboards.py checks that the metrics
they name are exported. Each alert is broken three ways: it never fires
(its firing case fails), it has no `for:` (its "for not elapsed" case
fails), and its threshold is moved ten times lower for `>`, ten times
higher for `<` (its below-threshold case fails).

Exit 77 (skipped) without promtool (Debian's prometheus package).
Usage: check_rules.py SOURCE_DIR
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

PROMTOOL = shutil.which("promtool")
THRESHOLD = re.compile(r"([<>])\s*([0-9.]+)(?![0-9.])")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def promtool(*args, cwd=None):
    p = subprocess.run([PROMTOOL] + list(args), capture_output=True, text=True, cwd=cwd,
                       timeout=120)
    return p.returncode, p.stdout + p.stderr


def write(path, data):
    with open(path, "w") as f:
        yaml.safe_dump(data, f, sort_keys=False)


def own_cases(tests, name):
    """The unit tests of alert `name` alone: a broken alert must fail its own."""
    out = copy.deepcopy(tests)
    out["rule_files"] = ["rules.yml"]
    out["tests"] = []
    for case in tests["tests"]:
        mine = [t for t in case.get("alert_rule_test", []) if t["alertname"] == name]
        if mine:
            out["tests"].append({**case, "alert_rule_test": mine})
    return out


def passing(files, cwd):
    """{test file: whether it passed} from one promtool run over all of them
    (one process: each start costs a fraction of a second)."""
    _, out = promtool("test", "rules", *files, cwd=cwd)
    got = {}
    for part in out.split("Unit Testing:")[1:]:
        lines = part.strip().splitlines()
        got[lines[0].strip()] = len(lines) > 1 and lines[1].strip() == "SUCCESS"
    return got


# Grafana's variables, as a panel's query has them filled in.
GRAFANA_VARS = [("$__rate_interval", "1m"), ("$__interval", "1m"), ("$topn", "10"),
                ("$job", "bloomery"), ("$instance", ".+")]


def dashboard_queries(path):
    with open(path) as f:
        dash = json.load(f)
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                out.append((p["title"], t["expr"]))
            walk(p.get("panels", []))
    walk(dash["panels"])
    return out


def check_dashboard(path, work):
    queries = dashboard_queries(path)
    check(len(queries) > 40, "the dashboard has its queries (%d)" % len(queries))
    rules = []
    for i, (title, expr) in enumerate(queries):
        for var, val in GRAFANA_VARS:
            expr = expr.replace(var, val)
        check("$" not in expr, "%r: every variable filled in: %s" % (title, expr))
        rules.append({"record": "dashboard:query_%d" % i, "expr": expr})
    f = os.path.join(work, "dashboard.rules.yml")
    write(f, {"groups": [{"name": "dashboard", "rules": rules}]})
    rc, out = promtool("check", "rules", f)
    check(rc == 0, "every dashboard query parses\n" + out)


def moved(expr):
    """expr with its first numeric threshold moved so that the cases
    below it cross it; None when it has none that moves."""
    m = THRESHOLD.search(expr)
    if not m:
        return None
    op, num = m.group(1), float(m.group(2))
    new = num / 10 if op == ">" else num * 10
    if new == num:
        return None
    return expr[:m.start(2)] + repr(new) + expr[m.end(2):]


def main(src):
    if not PROMTOOL:
        print("promtool (Debian's prometheus package) is not installed: skipped")
        return 77
    d = os.path.join(src, "dist", "prometheus")
    rules_path = os.path.join(d, "bloomery.rules.yml")
    tests_path = os.path.join(d, "bloomery.rules.test.yml")
    rc, out = promtool("check", "rules", rules_path)
    check(rc == 0, "promtool check rules\n" + out)
    rc, out = promtool("test", "rules", tests_path)
    check(rc == 0, "promtool test rules\n" + out)

    with open(rules_path) as f:
        rules = yaml.safe_load(f)
    with open(tests_path) as f:
        tests = yaml.safe_load(f)
    tested = {t["alertname"] for case in tests["tests"] for t in case.get("alert_rule_test", [])}
    work = tempfile.mkdtemp(prefix="bloomery-rules-")
    try:
        check_dashboard(os.path.join(src, "dist", "grafana", "bloomery-dashboard.json"), work)
        runs = {}  # test file: what it checks, whether it must pass
        for gi, group in enumerate(rules["groups"]):
            for ri, rule in enumerate(group["rules"]):
                name = rule["alert"]
                check(name in tested, "%s has unit tests" % name)
                breaks = {"intact": {}, "never firing": {"expr": "vector(1) < 0"}}
                if rule.get("for") not in (None, "0s", "0m"):
                    breaks["without its for:"] = {"for": "0s"}
                expr = moved(rule["expr"])
                if expr:
                    breaks["with its threshold moved"] = {"expr": expr}
                for how, change in breaks.items():
                    d = "%s-%d" % (name, len(runs))
                    os.mkdir(os.path.join(work, d))
                    broken = copy.deepcopy(rules)
                    broken["groups"][gi]["rules"][ri].update(change)
                    write(os.path.join(work, d, "rules.yml"), broken)
                    write(os.path.join(work, d, "test.yml"), own_cases(tests, name))
                    runs[os.path.join(d, "test.yml")] = (name, how, how == "intact")
        got = passing(list(runs), work)
        for f, (name, how, must_pass) in runs.items():
            if must_pass:
                check(got.get(f) is True, "%s passes its own tests" % name)
            else:
                check(got.get(f) is False, "%s broken (%s): its tests fail" % (name, how))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
