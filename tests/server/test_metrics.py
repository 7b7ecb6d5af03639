"""bloomeryd's HTTP listener: /metrics in Prometheus's text format
(docs/CONSOLE.md), checked by promtool, scraped by Debian's prometheus, and
Debian's prometheus-redis-exporter reading bloomeryd without errors."""
import base64
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import MODULE, QUICK, free_port, wait_for

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomeryd's own HTTP listener")

PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
EXPORTER = shutil.which("prometheus-redis-exporter")


def get(url, headers=None, timeout=30):
    """(status, headers, body) of a GET; HTTP errors are answers too."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def basic(password, user="default"):
    tok = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    return {"Authorization": "Basic " + tok}


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')


def parse(text):
    """{(name, frozenset(labels)): value} of the samples; every line must be
    a comment or a sample."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        key = (m.group(1), labels)
        assert key not in out, "duplicate series %r" % line
        out[key] = float(m.group(4))
    return out


def value(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


def promtool_check(text):
    if not PROMTOOL:
        pytest.skip("promtool (Debian's prometheus) is not installed")
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(),
                       capture_output=True, timeout=60)
    # promtool exits 1 for lint advice as well as errors; errors are lines
    # starting with "error".
    out = (p.stdout + p.stderr).decode()
    assert "error" not in out.lower(), out
    return out


def http_server(start_server, *args):
    port = free_port()
    s = start_server("--http-port", port, *args)
    s.http = "http://127.0.0.1:%d" % port
    wait_for(lambda: connectable(port), "the HTTP listener")
    return s


def connectable(port, host="127.0.0.1"):
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def scrape(s, headers=None):
    status, hdrs, body = get(s.http + "/metrics", headers)
    assert status == 200, (status, body)
    assert hdrs["Content-Type"].startswith("text/plain; version=0.0.4")
    return body.decode()


def test_off_by_default(server, r):
    assert r.config_get("http-port") == {"http-port": "0"}
    assert r.config_get("http-bind") == {"http-bind": "127.0.0.1"}
    assert "HTTP" not in server.output()


def test_filters_commands_and_state(start_server):
    s = http_server(start_server)
    c = s.client()
    c.execute_command("BF.RESERVE", "bf", 0.01, 1000)
    # The count is of adds answered 1 (a false positive answers 0).
    added = sum(c.execute_command("BF.MADD", "bf", *["x%d" % i for i in range(500)]))
    assert 495 <= added <= 500
    c.execute_command("BF.RESERVE", "cnt", 0.01, 1000, "COUNTING")
    c.execute_command("BF.ADD", "cnt", "a")
    c.execute_command("BF.RESERVE", "win", 0.01, 1000, "WINDOW", 3600, "SLICES", 4)
    c.execute_command("BF.ADD", "win", "a")
    c.execute_command("CF.RESERVE", "cf", 1000)
    c.execute_command("CF.ADD", "cf", "a")
    c.execute_command("PFADD", "hll", "a")
    c.expire("bf", 1000)
    with pytest.raises(Exception):
        c.execute_command("BF.ADD", "hll", "x")  # WRONGTYPE: a failed call
    text = scrape(s)
    promtool_check(text)
    m = parse(text)

    assert value(m, "bloomery_filter_capacity", key="bf") == 1000
    assert value(m, "bloomery_filter_items", key="bf") == added
    assert value(m, "bloomery_filter_fill_ratio", key="bf") == added / 1000
    assert value(m, "bloomery_filter_parts", key="bf") == 1
    info = c.execute_command("BF.INFO", "bf", "ALL")
    fields = dict(zip(info[::2], info[1::2]))
    assert value(m, "bloomery_filter_bytes", key="bf") == fields[b"Bytes"]
    fpr = value(m, "bloomery_filter_fpr_estimate", key="bf")
    assert 0 < fpr < 0.01
    assert abs(fpr - float(fields[b"Estimated FPR"])) < 1e-12
    assert 990 < value(m, "bloomery_filter_ttl_seconds", key="bf") <= 1000
    assert value(m, "bloomery_filter_ttl_seconds", key="cnt") == -1
    assert value(m, "bloomery_filter_info", key="cnt", type="counting filter",
                 layout="counting") == 1
    assert value(m, "bloomery_filter_items", key="cnt") == 1
    assert value(m, "bloomery_filter_parts", key="win") == 4
    assert value(m, "bloomery_filter_items", key="win") == 1
    assert value(m, "bloomery_filter_items", key="cf") == 1
    assert value(m, "bloomery_filter_info", key="cf", type="cuckoo filter", layout="cuckoo") == 1
    # Not a filter: counted by type, no per-key series.
    assert not [k for k in m if dict(k[1]).get("key") == "hll"]
    assert value(m, "bloomery_keys_by_type", type="HyperLogLog") == 1
    assert value(m, "bloomery_keys", ) == 5
    assert value(m, "bloomery_filter_series_truncated") == 0

    # Commands: calls, failures and a histogram whose count is the calls.
    assert value(m, "bloomery_command_calls_total", cmd="bf.reserve") == 3
    assert value(m, "bloomery_command_failed_total", cmd="bf.add") == 1
    calls = value(m, "bloomery_command_calls_total", cmd="bf.add")
    assert calls == 3
    assert value(m, "bloomery_command_duration_seconds_count", cmd="bf.add") == calls
    assert value(m, "bloomery_command_duration_seconds_bucket", cmd="bf.add", le="+Inf") == calls
    buckets = sorted((float(dict(k[1])["le"]), v) for k, v in m.items()
                     if k[0] == "bloomery_command_duration_seconds_bucket" and
                     dict(k[1])["cmd"] == "bf.add" and dict(k[1])["le"] != "+Inf")
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)

    # Connections, memory, persistence, replication.
    assert value(m, "bloomery_connected_clients") >= 1
    assert value(m, "bloomery_memory_used_bytes") > value(m, "bloomery_filter_bytes", key="bf")
    assert value(m, "bloomery_log_enabled") == 1
    assert value(m, "bloomery_log_write_ok") == 1
    assert value(m, "bloomery_changes_since_last_snapshot") > 0
    assert value(m, "bloomery_replication_role", role="master") == 1
    assert value(m, "bloomery_connected_replicas") == 0
    c.execute_command("SAVE")
    m = parse(scrape(s))
    assert value(m, "bloomery_changes_since_last_snapshot") == 0
    assert abs(value(m, "bloomery_snapshot_last_success_timestamp_seconds") - time.time()) < 60
    assert abs(value(m, "bloomery_log_last_fsync_timestamp_seconds") - time.time()) < 60
    c.close()


def test_key_names_become_valid_labels(start_server):
    s = http_server(start_server)
    c = s.client()
    odd = b'a"b\\c\nd%e\xff'
    c.execute_command("BF.ADD", odd, "x")
    text = scrape(s)
    promtool_check(text)
    m = parse(text)
    assert value(m, "bloomery_filter_items", key="a%22b%5Cc%0Ad%25e%FF") == 1
    c.close()


def test_per_key_series_are_bounded(start_server):
    s = http_server(start_server, "--metrics-max-key-series", 3)
    c = s.client()
    for i in range(10):
        c.execute_command("BF.ADD", "f%d" % i, "x")
    m = parse(scrape(s))
    assert len([k for k in m if k[0] == "bloomery_filter_items"]) == 3
    assert value(m, "bloomery_filter_series_truncated") == 1
    # The first in key order, whatever order the keyspace's scan meets them
    # in: among 500 keys that scan order is all but never the names'.
    c.execute_command("BF.MADD", "g", "x")
    p = c.pipeline(transaction=False)
    for i in range(500):
        p.execute_command("BF.ADD", "h%03d" % i, "x")
    p.execute()
    m = parse(scrape(s))
    assert sorted(dict(k[1])["key"] for k in m if k[0] == "bloomery_filter_items") \
        == ["f0", "f1", "f2"]
    c.config_set("metrics-max-key-series", 200)
    m = parse(scrape(s))
    assert sorted(dict(k[1])["key"] for k in m if k[0] == "bloomery_filter_items") \
        == sorted(["f%d" % i for i in range(10)] + ["g"] + ["h%03d" % i for i in range(189)])
    for i in range(500):
        p.delete("h%03d" % i)
    p.delete("g")
    p.execute()
    c.config_set("metrics-max-key-series", 100)
    m = parse(scrape(s))
    assert len([k for k in m if k[0] == "bloomery_filter_items"]) == 10
    assert value(m, "bloomery_filter_series_truncated") == 0
    c.close()


def test_requirepass_protects_it(start_server):
    s = http_server(start_server, "--requirepass", "s3cret")
    status, hdrs, _ = get(s.http + "/metrics")
    assert status == 401
    assert "Basic" in hdrs["WWW-Authenticate"]
    assert get(s.http + "/metrics", basic("wrong"))[0] == 401
    assert get(s.http + "/metrics", {"Authorization": "Bearer wrong"})[0] == 401
    assert get(s.http + "/", basic("wrong"))[0] == 401
    assert scrape(s, basic("s3cret")).startswith("# HELP")
    assert scrape(s, {"Authorization": "Bearer s3cret"}).startswith("# HELP")


def test_unknown_paths_and_methods(start_server):
    s = http_server(start_server)
    assert get(s.http + "/nope")[0] == 404
    req = urllib.request.Request(s.http + "/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 405


def non_loopback_address():
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.connect(("192.0.2.1", 9))  # no packet is sent
            addr = u.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


def test_listens_on_loopback_unless_configured(start_server):
    addr = non_loopback_address()
    if addr is None:
        pytest.skip("no non-loopback IPv4 address")
    port = free_port()
    s = start_server("--http-port", port)
    wait_for(lambda: connectable(port), "the HTTP listener")
    assert not connectable(port, addr)
    assert "open to other hosts" not in s.output()
    port2 = free_port()
    s2 = start_server("--http-port", port2, "--http-bind", "0.0.0.0")
    wait_for(lambda: connectable(port2, addr), "the HTTP listener on every address")
    # Open without a password: said in the log (written once the listener is up).
    wait_for(lambda: "open to other hosts and no requirepass" in s2.output(), "the warning")


def test_replication_state(start_server):
    master = http_server(start_server)
    replica = http_server(start_server, "--replicaof", "127.0.0.1 %d" % master.port)
    mc = master.client()
    mc.execute_command("BF.ADD", "k", "a")

    def replica_listed():
        m = parse(scrape(master))
        lags = [(k, v) for k, v in m.items() if k[0] == "bloomery_replica_lag_records"]
        return m if lags and lags[0][1] == 0 and value(m, "bloomery_connected_replicas") == 1 \
            else None
    m = wait_for(replica_listed, "the master to list an acknowledged replica")
    lag = [k for k in m if k[0] == "bloomery_replica_lag_seconds"]
    assert dict(lag[0][1])["state"] == "online"
    rm = wait_for(lambda: (lambda m: m if value(m, "bloomery_master_link_up") == 1 else None)(
        parse(scrape(replica))), "the replica's link")
    assert value(rm, "bloomery_replication_role", role="replica") == 1
    assert value(rm, "bloomery_filter_items", key="k") == 1
    mc.close()


def run_tool(cmd, log):
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def stop_tool(p):
    p.terminate()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


@pytest.mark.skipif(PROMETHEUS is None, reason="Debian's prometheus is not installed")
def test_prometheus_scrapes_metrics(start_server):
    s = http_server(start_server, "--requirepass", "s3cret")
    c = s.client(password="s3cret")
    c.execute_command("BF.RESERVE", "seen", 0.01, 1000)
    c.execute_command("BF.MADD", "seen", "a", "b", "c")
    work = tempfile.mkdtemp(prefix="bloomery-prom-")
    conf = os.path.join(work, "prometheus.yml")
    with open(conf, "w") as f:
        f.write("""global:
  scrape_interval: 1s
scrape_configs:
  - job_name: bloomery
    scrape_interval: 1s
    basic_auth:
      username: default
      password: s3cret
    static_configs:
      - targets: ['%s']
""" % s.http[len("http://"):])
    port = free_port()
    log = open(os.path.join(work, "log"), "w+")
    p = run_tool([PROMETHEUS, "--config.file", conf, "--storage.tsdb.path",
                  os.path.join(work, "tsdb"), "--web.listen-address", "127.0.0.1:%d" % port],
                 log)
    api = "http://127.0.0.1:%d/api/v1/" % port
    try:
        def target_up():
            try:
                st, _, body = get(api + "targets", timeout=5)
            except OSError:
                return None
            if st != 200:
                return None
            targets = json.loads(body)["data"]["activeTargets"]
            return targets and targets[0]["health"] == "up" and targets[0]
        t = wait_for(target_up, "prometheus to scrape bloomeryd", timeout=90)
        assert t["lastError"] == ""

        def items():
            q = urllib.parse.quote('bloomery_filter_items{key="seen"}')
            st, _, body = get(api + "query?query=" + q, timeout=5)
            res = json.loads(body)["data"]["result"] if st == 200 else []
            return res and res[0]["value"][1]
        assert wait_for(items, "the filter's items in prometheus") == "3"
    finally:
        stop_tool(p)
        log.seek(0)
        out = log.read()
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    assert "level=error" not in out, out
    c.close()


@pytest.mark.skipif(EXPORTER is None, reason="prometheus-redis-exporter is not installed")
def test_redis_exporter_reads_bloomeryd(start_server):
    s = start_server("--requirepass", "s3cret")
    c = s.client(password="s3cret")
    c.execute_command("BF.ADD", "k", "a")
    port = free_port()
    work = tempfile.mkdtemp(prefix="bloomery-exporter-")
    log = open(os.path.join(work, "log"), "w+")
    p = run_tool([EXPORTER, "--redis.addr", "redis://127.0.0.1:%d" % s.port,
                  "--redis.password", "s3cret", "--include-system-metrics",
                  "--web.listen-address", "127.0.0.1:%d" % port], log)
    try:
        def scraped():
            try:
                st, _, body = get("http://127.0.0.1:%d/metrics" % port, timeout=10)
            except OSError:
                return None
            return st == 200 and body.decode()
        text = wait_for(scraped, "the exporter's metrics")
        m = parse("\n".join(l for l in text.splitlines() if l.startswith("redis_")))
        assert value(m, "redis_up") == 1
        assert value(m, "redis_exporter_last_scrape_error", err="") == 0
        assert value(m, "redis_connected_clients") >= 1
        assert value(m, "redis_db_keys", db="db0") == 1
        # A second scrape: errors of commands are logged once, on the first.
        text = wait_for(scraped, "the exporter's metrics again")
    finally:
        stop_tool(p)
        log.seek(0)
        out = log.read()
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    assert "level=error" not in out and "level=warn" not in out, out
    # bloomeryd answered every command the exporter sent.
    assert c.info("stats")["total_error_replies"] == 0
    c.close()


def test_scrapes_while_filters_change(start_server):
    """Scrapes and console reads while other clients create, fill, rotate
    and delete filters: every page is valid and the server (under ASan in
    the sanitizer run) stops cleanly."""
    import threading
    s = http_server(start_server, "--threads", 2)
    stop = threading.Event()
    errors = []

    def churn(i):
        c = s.client()
        n = 0
        try:
            while not stop.is_set():
                k = "churn%d-%d" % (i, n % 8)
                c.delete(k)
                if n % 3 == 0:
                    c.execute_command("BF.RESERVE", k, 0.01, 1000, "WINDOW", 2, "SLICES", 2)
                elif n % 3 == 1:
                    c.execute_command("CF.RESERVE", k, 1000)
                    c.execute_command("CF.ADD", k, "x")
                else:
                    c.execute_command("BF.RESERVE", k, 0.01, 100, "EXPANSION", 2)
                c.execute_command("BF.MADD", k, *["i%d" % j for j in range(300)]) \
                    if n % 3 != 1 else None
                n += 1
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=churn, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        deadline = time.time() + (3 if QUICK else 8)
        scrapes = 0
        while time.time() < deadline:
            parse(scrape(s))
            st, _, body = get(s.http + "/api/filters")
            assert st == 200
            json.loads(body)
            scrapes += 1
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert scrapes > 5


def test_exact_store_series(start_server):
    """No exact series until exact filters are used; then the store's
    figures follow the adds and lookups, and promtool accepts them."""
    s = http_server(start_server, "--exact-buffer-keys", 100)
    r = s.client()
    assert not any(k[0].startswith("bloomery_exact_") for k in parse(scrape(s)))
    r.execute_command("BF.RESERVE", "x", 0.5, 10000, "EXACT")
    names = ["i%d" % i for i in range(1000)]
    assert r.execute_command("BF.MADD", "x", *names) == [1] * 1000
    assert r.execute_command("BF.MADD", "x", *names[:10]) == [0] * 10
    text = scrape(s)
    promtool_check(text)
    m = parse(text)
    assert value(m, "bloomery_exact_store_up") == 1
    assert value(m, "bloomery_exact_filters") == 1
    assert value(m, "bloomery_exact_store_periods") == 1
    assert value(m, "bloomery_exact_store_puts_total") == 1000
    # The ten duplicates were confirmed in the store, and with error rate
    # 0.5 some of the new items were asked about too.
    assert value(m, "bloomery_exact_store_lookups_total") >= 10
    wait_for(lambda: value(parse(scrape(s)), "bloomery_exact_store_disk_bytes") > 0,
             "table files written by the flusher")
