"""The management console (docs/CONSOLE.md): its JSON API runs the same
commands as RESP clients through the same dispatch and log, and the page
creates, lists, expires and deletes filters in a real browser (Debian's
chromium, headless, through selenium and chromedriver)."""
import atexit
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import MODULE, free_port
from powercut import faults  # noqa: F401 (a fixture)
from test_metrics import basic, get, http_server, wait_for

pytestmark = pytest.mark.skipif(bool(MODULE), reason="bloomeryd's own HTTP listener")

# Where the browser test saves its screenshots: BLOOMERY_SCREENSHOTS=docs
# regenerates the ones README.md shows; by default a scratch directory.
SHOTS = os.environ.get("BLOOMERY_SCREENSHOTS")
if not SHOTS:
    SHOTS = tempfile.mkdtemp(prefix="bloomery-shots-")
    atexit.register(shutil.rmtree, SHOTS, True)


def post(s, path, fields, headers=None, console=True):
    h = {"X-Bloomery-Console": "1"} if console else {}
    h.update(headers or {})
    req = urllib.request.Request(s.http + path, data=urllib.parse.urlencode(fields).encode(),
                                 headers=h, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            return e.code, json.loads(body)
        except ValueError:
            return e.code, body.decode()


def get_json(s, path, headers=None):
    status, _, body = get(s.http + path, headers)
    return status, json.loads(body)


def filters(s, headers=None):
    status, body = get_json(s, "/api/filters?per_page=1000", headers)
    assert status == 200
    return {f["name"]: f for f in body["filters"]}


def test_create_list_expire_delete(start_server):
    s = http_server(start_server)
    c = s.client()
    st, body = post(s, "/api/filters", {"name": "clicks", "capacity": "100000",
                                        "error_rate": "0.001", "expiry": "3600"})
    assert (st, body) == (200, {"reply": "OK"})
    # The same command as a client's: the filter is there, with its TTL.
    info = c.execute_command("BF.INFO", "clicks", "ALL")
    fields = dict(zip(info[::2], info[1::2]))
    assert fields[b"Capacity"] == 100000
    assert 3590 < c.ttl("clicks") <= 3600
    c.execute_command("BF.MADD", "clicks", *["i%d" % i for i in range(1000)])
    f = filters(s)["clicks"]
    assert f["capacity"] == 100000 and f["items"] == 1000
    assert f["fill"] == 0.01 and f["bytes"] == fields[b"Bytes"]
    assert 0 < f["fpr"] < 0.001 and 3590 < f["ttl"] <= 3600
    assert f["layout"] == "prefix" and f["type"] == "Bloom filter"  # BF.RESERVE's default

    # The command's own error, word for word.
    st, body = post(s, "/api/filters", {"name": "clicks", "capacity": "10", "error_rate": "0.1"})
    assert (st, body) == (400, {"error": "ERR item exists"})
    st, body = post(s, "/api/filters", {"name": "x", "capacity": "10", "error_rate": "2"})
    assert st == 400 and body["error"].startswith("ERR")
    st, body = post(s, "/api/filters", {"name": "x"})
    assert st == 400 and "required" in body["error"]

    # Layouts, windows, counting.
    for name, extra in (("c", {"layout": "classic"}), ("n", {"layout": "counting"}),
                        ("p", {"layout": "prefix"}),
                        ("w", {"window": "600", "slices": "3"})):
        st, body = post(s, "/api/filters", dict(name=name, capacity="1000", error_rate="0.01",
                                                **extra))
        assert st == 200, body
    got = filters(s)
    assert got["c"]["layout"] == "classic"
    assert got["n"]["layout"] == "counting"
    assert got["p"]["layout"] == "prefix"
    assert got["w"]["layout"] == "window" and got["w"]["parts"] == 3

    st, body = post(s, "/api/filters/expire", {"name": "c", "seconds": "100"})
    assert (st, body) == (200, {"reply": 1})
    assert 90 < c.ttl("c") <= 100
    st, body = post(s, "/api/filters/delete", {"name": "clicks"})
    assert (st, body) == (200, {"reply": 1})
    assert c.exists("clicks") == 0
    assert "clicks" not in filters(s)
    st, body = post(s, "/api/filters/delete", {"name": "clicks"})
    assert (st, body) == (200, {"reply": 0})

    # Counted by the same dispatch as a client's commands.
    stats = c.info("commandstats")
    assert stats["cmdstat_bf.reserve"]["calls"] == 7
    assert stats["cmdstat_bf.reserve"]["failed_calls"] == 2
    assert stats["cmdstat_del"]["calls"] == 2
    c.close()


def test_binary_names_round_trip(start_server):
    s = http_server(start_server)
    c = s.client()
    name = "caf\u00e9 \"q\" \\ \u2603"
    st, _ = post(s, "/api/filters", {"name": name, "capacity": "100", "error_rate": "0.01"})
    assert st == 200
    assert c.exists(name.encode()) == 1
    assert name in filters(s)
    c.execute_command("BF.ADD", b"raw\xff\x00", "x")
    # Bytes that are not UTF-8 are shown as U+FFFD.
    assert "raw\ufffd\u0000" in filters(s)
    c.close()


def test_calculator_matches_what_is_allocated(start_server):
    s = http_server(start_server)
    c = s.client()
    for layout, extra in (("blocked", {}), ("classic", {}), ("prefix", {}), ("counting", {}),
                          ("window", {"window": "3600", "slices": "6"})):
        q = dict(capacity="1000000", error_rate="0.001", layout=layout, **extra)
        st, calc = get_json(s, "/api/calc?" + urllib.parse.urlencode(q))
        assert st == 200, calc
        assert calc["layout"] == layout
        assert calc["bits_per_key"] == calc["bytes"] * 8 / 1e6
        # Classic filters are sized by RedisBloom's formula, a hair over p.
        assert 0.0001 < calc["expected_fpr"] <= 0.00101
        name = "sz-" + layout
        st, body = post(s, "/api/filters", dict(name=name, **q))
        assert st == 200, body
        assert filters(s)[name]["bytes"] == calc["bytes"]
    st, calc = get_json(s, "/api/calc?capacity=1e6&error_rate=0.01")
    assert st == 200 and calc["layout"] == "prefix"  # what BF.RESERVE would make
    for bad in ("capacity=0&error_rate=0.01", "capacity=10&error_rate=1",
                "capacity=abc&error_rate=0.1", "capacity=10&error_rate=0.1&layout=x",
                "capacity=1.5&error_rate=0.1", "error_rate=0.1"):
        st, body = get_json(s, "/api/calc?" + bad)
        assert st == 400 and body["error"], bad
    c.close()


def test_status(start_server):
    s = http_server(start_server)
    c = s.client()
    c.execute_command("BF.ADD", "k", "x")
    c.execute_command("SAVE")
    st, body = get_json(s, "/api/status")
    assert st == 200
    assert body["keys"] == 1 and body["uptime_s"] >= 0
    assert body["memory"]["used"] > 0
    assert body["persistence"]["log_enabled"] is True
    assert body["persistence"]["changes_since_snapshot"] == 0
    assert abs(body["persistence"]["last_snapshot_s"] - time.time()) < 60
    assert body["replication"] == {"role": "master", "offset": body["replication"]["offset"],
                                   "replicas": []}
    replica = http_server(start_server, "--replicaof", "127.0.0.1 %d" % s.port)

    def listed():
        st, b = get_json(s, "/api/status")
        r = b["replication"]["replicas"]
        return r and r[0]["state"] == "online" and b
    wait_for(listed, "the replica in the master's status")
    rb = wait_for(lambda: (lambda b: b["replication"].get("link_up") and b)(
        get_json(replica, "/api/status")[1]), "the replica's link")
    assert rb["replication"]["role"] == "replica"
    assert rb["replication"]["master_port"] == s.port
    # A replica refuses writes from the console as from any client.
    st, body = post(replica, "/api/filters", {"name": "z", "capacity": "10",
                                              "error_rate": "0.1"})
    assert st == 400 and body["error"].startswith("READONLY")
    c.close()


def test_no_answer_before_the_log_is_durable(faults, start_server):
    """Under appendfsync always a change from the console is answered only
    once its log record is synced, as a client's: with the log's sync held,
    no answer comes, and a power cut then loses the unanswered change; once
    answered, a change survives one."""
    port = free_port()
    s = start_server("--appendfsync", "always", "--http-port", port, **faults.server_kw())
    s.http = "http://127.0.0.1:%d" % port
    # The Redis port accepts before the HTTP listener is up: refusals are "not yet".
    wait_for(lambda: get(s.http + "/api/status")[0] == 200, "the HTTP listener",
             ignore=(OSError,))
    st, _ = post(s, "/api/filters", {"name": "kept", "capacity": "100", "error_rate": "0.01"})
    assert st == 200
    before = faults.blocked_count()
    faults.set(fsync="block", match="/log/")
    answers = []
    t = threading.Thread(target=lambda: answers.append(post_or_error(s, {
        "name": "unsynced", "capacity": "100", "error_rate": "0.01"})))
    t.start()
    faults.wait_blocked(before)
    # The record is written and its sync held: the request must still wait.
    t.join(timeout=1)
    assert t.is_alive() and not answers
    faults.crash(s)
    t.join(timeout=60)
    assert answers and answers[0][0] != 200, answers
    faults.set()
    again = start_server(**faults.server_kw())
    c = again.client()
    assert c.exists("kept") == 1
    assert c.exists("unsynced") == 0
    c.close()


def replica_server(start_server, master):
    """A replica of master, once it has loaded the master's data: its keys
    are listed before the load ends, and until then it answers LOADING."""
    replica = http_server(start_server, "--replicaof", "127.0.0.1 %d" % master.port)
    rc = replica.client()
    wait_for(lambda: rc.info("replication").get("master_link_status") == "up",
             "the replica's link")
    rc.close()
    return replica


def post_or_error(s, fields):
    try:
        return post(s, "/api/filters", fields)
    except OSError as e:  # the server was killed while the request waited
        return (None, str(e))


def test_protection(start_server):
    s = http_server(start_server, "--requirepass", "pw")
    assert get(s.http + "/")[0] == 401
    assert get(s.http + "/api/filters")[0] == 401
    st, _ = post(s, "/api/filters", {"name": "a", "capacity": "10", "error_rate": "0.1"})
    assert st == 401
    st, body = post(s, "/api/filters", {"name": "a", "capacity": "10", "error_rate": "0.1"},
                    headers=basic("pw"))
    assert (st, body) == (200, {"reply": "OK"})
    # A page of another site cannot add the header: its posts are refused.
    st, _ = post(s, "/api/filters/delete", {"name": "a"}, headers=basic("pw"), console=False)
    assert st == 403
    assert "a" in filters(s, basic("pw"))
    # Not a form: refused.
    req = urllib.request.Request(s.http + "/api/filters/delete", data=b'{"name":"a"}',
                                 headers={**basic("pw"), "X-Bloomery-Console": "1",
                                          "Content-Type": "application/json"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 415
    st, _ = post(s, "/api/filters", {"name": "x" * 5000, "capacity": "10", "error_rate": "0.1"},
                 headers=basic("pw"))
    assert st == 413


def test_page_and_assets(start_server):
    s = http_server(start_server)
    st, hdrs, body = get(s.http + "/")
    assert st == 200 and hdrs["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in hdrs["Content-Security-Policy"]
    for path in ("/console.js", "/console.css"):
        st, _, asset = get(s.http + path)
        assert st == 200 and path.encode() in body
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "console",
                               path[1:]), "rb") as f:
            assert asset == f.read()


# ---- in a browser ----

def browser():
    try:
        from selenium import webdriver
    except ImportError:
        return None
    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        return None
    profile = tempfile.mkdtemp(prefix="bloomery-chromium-")
    atexit.register(shutil.rmtree, profile, True)
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1280,1400", "--user-data-dir=" + profile):
        opts.add_argument(a)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver")) \
        if hasattr(webdriver, "ChromeService") else None
    from selenium.webdriver.chrome.service import Service
    return webdriver.Chrome(service=service or Service(shutil.which("chromedriver")),
                            options=opts)


def history(s, name):
    st, body = get_json(s, "/api/history?" + urllib.parse.urlencode({"name": name}))
    assert st == 200
    return body


def test_history_is_kept_by_the_server(start_server):
    """The chart's samples come from the server: a page opened later shows
    what happened before, with each sample's fill and FPR as /api/filters
    had them; a filter that is gone loses its history."""
    s = http_server(start_server, "--console-sample-interval", 1)
    c = s.client()
    c.execute_command("BF.RESERVE", "clicks", 0.01, 1000)
    c.execute_command("BF.RESERVE", "other", 0.01, 1000)
    assert history(s, "nothing")["samples"] == []
    h = wait_for(lambda: history(s, "clicks")["samples"] or None, "a first sample")
    assert h[-1][1] == 0
    c.execute_command("BF.MADD", "clicks", *["c%d" % i for i in range(500)])
    card = c.execute_command("BF.CARD", "clicks")
    got = wait_for(lambda: (lambda v: v if v[-1][1] > 0 else None)(history(s, "clicks")["samples"]),
                   "a sample after the adds")
    t, fill, fpr = got[-1]
    assert fill == card / 1000
    assert fpr == filters(s)["clicks"]["fpr"] and 0 < fpr < 0.01
    assert all(a[0] < b[0] for a, b in zip(got, got[1:]))
    assert [p[1] for p in got][:len(h)] == [0] * len(h)
    body = history(s, "clicks")
    assert body["interval_s"] == 1 and body["now_ms"] >= got[-1][0]
    # Sampling goes on at the interval CONFIG SET gives it.
    c.config_set("console-sample-interval", 3600)
    assert c.config_get("console-sample-interval") == {"console-sample-interval": "3600"}
    c.config_set("console-sample-interval", 1)
    c.delete("clicks")
    wait_for(lambda: history(s, "clicks")["samples"] == [], "the deleted filter's history to go")
    assert history(s, "other")["samples"]


def chromium(width=1280, height=800):
    """A Browser of tests/console/browser.py, or None where there is none."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "console"))
    import browser as b
    return b.Browser(width, height) if b.available() else None


LONG = "aa:" + "a-very-long-key-name-" * 12 + "end"


def test_console_in_chromium(start_server):
    b = chromium()
    if b is None:
        pytest.skip("chromium, chromedriver or python3-selenium is not installed")
    from selenium.webdriver.support.ui import Select
    drv = b.driver
    s = http_server(start_server, "--console-sample-interval", 1, "--metrics-max-key-series", 100)
    c = s.client()
    c.execute_command("BF.RESERVE", "logins:24h", 0.001, 50000, "WINDOW", 86400)
    c.execute_command("BF.RESERVE", "emails", 0.01, 20000)
    c.execute_command("BF.MADD", "emails", *["e%d" % i for i in range(15000)])
    c.execute_command("CF.RESERVE", "sessions", 10000)
    c.execute_command("BF.RESERVE", LONG, 0.01, 1000)
    c.expire("emails", 7 * 86400)
    p = c.pipeline(transaction=False)
    for i in range(120):  # past metrics-max-key-series, and past a page
        p.execute_command("BF.RESERVE", "x-bulk:%03d" % i, 0.01, 1000 + 97 * i)
        p.execute_command("BF.INSERT", "x-bulk:%03d" % i, "ITEMS",
                          *["i%d" % k for k in range((i * 379) % 1200 + 1)])
        if i % 4 == 1:
            p.expire("x-bulk:%03d" % i, 3600 * (i % 30 + 1))
    p.execute()
    try:
        b.get(s.http + "/")
        row = lambda name: b.css('tr[data-name="%s"]' % name)  # noqa: E731
        b.wait(lambda: row("emails"), "the emails row")
        card = c.execute_command("BF.CARD", "emails")  # a few adds were false positives
        # Read by waits: the table is drawn again every 10 s, and a cell
        # found just before that is stale when read.
        b.wait(lambda: b.text('tr[data-name="emails"] td.items') == "{:,}".format(card),
               "the emails row's item count")
        status = b.text("#status-list")
        assert "master" in status and "Uptime" in status
        b.wait_text("#filters-total", "124 filters")
        assert b.text("#page-info") == "page 1 of 3"
        assert len(b.css("#filter-table tbody tr")) == 50
        # A long name is cut, not wrapped: its row is as high as the others,
        # the whole name in its title.
        heights = drv.execute_script(
            "return [...document.querySelectorAll('#filter-table tbody tr')]"
            ".map(r => r.getBoundingClientRect().height)")
        assert max(heights) == min(heights), heights
        long_cell = 'tr[data-name="%s"] td.name' % LONG
        b.wait(lambda: b.css(long_cell)[0].get_attribute("title") == LONG,
               "the long name in its title")
        width = drv.execute_script("return document.documentElement.scrollWidth")
        assert width <= 1280, width

        # Search: the server's glob, any text anywhere in the name.
        b.css("#search")[0].send_keys("x-bulk:11")
        b.wait_text("#filters-total", "10 filters match")
        b.wait(lambda: [r.get_attribute("data-name") for r in b.css("#filter-table tbody tr")]
               == ["x-bulk:%03d" % i for i in range(110, 120)], "the matching rows")
        assert b.text("#page-info") == "page 1 of 1"
        assert b.screenshot("console.png", SHOTS)
        search = b.css("#search")[0]
        search.clear()
        search.send_keys("x-bulk:119")  # past metrics-max-key-series
        b.wait(lambda: [r.get_attribute("data-name") for r in b.css("#filter-table tbody tr")]
               == ["x-bulk:119"], "the last filter")
        drv.execute_script("var s = document.getElementById('search'); s.value = '';"
                           "s.dispatchEvent(new Event('input'))")
        b.wait_text("#filters-total", "124 filters")

        # Sort: a click on a header sorts by it, a second the other way.
        def first_rows():
            return [r.get_attribute("data-name") for r in b.css("#filter-table tbody tr")][:3]
        by_cap = sorted(filters(s).values(), key=lambda f: (f["capacity"], f["name"]))
        b.click('th[data-sort="capacity"]')
        b.wait(lambda: first_rows() == [f["name"] for f in by_cap[:3]], "capacity ascending")
        b.click('th[data-sort="capacity"]')
        b.wait(lambda: first_rows() == [f["name"] for f in by_cap[::-1][:3]],
               "capacity descending")
        assert "\u25bc" in b.text('th[data-sort="capacity"]')
        # Pages.
        b.click("#page-next")
        b.wait_text("#page-info", "page 2 of 3")
        b.wait(lambda: first_rows() == [f["name"] for f in by_cap[::-1][50:53]], "page 2")
        Select(b.css("#per-page")[0]).select_by_value("100")
        b.wait_text("#page-info", "page 1 of 2")
        b.click('th[data-sort="name"]')
        b.wait(lambda: first_rows()[0] == LONG, "name ascending")

        # The sizing calculator answers before anything is created, and only
        # the latest question counts: the answers to the earlier ones are held
        # back until the classic layout's has come, so they arrive after it.
        drv.execute_script("""
            const orig = window.fetch;
            let release;
            const classicAnswered = new Promise((r) => { release = r; });
            window.heldCalcs = 0;
            window.fetch = async (url, opts) => {
              const u = String(url);
              if (!u.includes("/api/calc")) return orig(url, opts);
              if (u.includes("layout=classic")) {
                const r = await orig(url, opts);
                release();
                return r;
              }
              window.heldCalcs++;
              await classicAnswered;
              return orig(url, opts);
            };""")
        b.css("#f-name")[0].send_keys("signups")
        cap = b.css("#f-capacity")[0]
        cap.clear()
        cap.send_keys("2000000")
        err = b.css("#f-error")[0]
        err.clear()
        err.send_keys("0.001")
        b.wait(lambda: drv.execute_script("return window.heldCalcs") > 0, "a question held back")
        Select(b.css("#f-layout")[0]).select_by_value("classic")
        b.css("#f-expiry")[0].send_keys("86400")
        q = urllib.parse.urlencode({"capacity": 2000000, "error_rate": 0.001,
                                    "layout": "classic"})
        calc = json.loads(get(s.http + "/api/calc?" + q)[2])
        b.wait_text("#sizing", "%.2f bits per key" % calc["bits_per_key"])
        assert "classic" in b.text("#sizing")
        assert c.exists("signups") == 0
        b.click("#f-submit")
        b.wait(lambda: row("signups"), "the new row")
        assert c.type("signups") == b"MBbloom--"
        assert 86000 < c.ttl("signups") <= 86400
        c.execute_command("BF.MADD", "signups", *["s%d" % i for i in range(1000)])

        # A row opens its filter's view, at the top of the page.
        b.click('tr[data-name="emails"] td.items')
        b.wait_css("#filter-view")
        assert drv.execute_script("return location.hash") == "#/filter/emails"
        assert not b.css("#filters")[0].is_displayed()
        assert drv.execute_script("return window.scrollY") == 0
        b.wait_text("#view-name", "emails")
        b.wait(lambda: "{:,}".format(card) in b.text("#view-stats"), "the filter's figures")
        # The server's samples, taken before the page asked for them.
        b.wait(lambda: b.css("#chart circle.fill"), "the chart's samples")
        # Check, then add items.
        b.css("#check-items")[0].send_keys("e1\ne2\nnever-added")
        b.click("#check-submit")
        b.wait(lambda: [x.text for x in b.css("#check-results td.answer")]
               == ["maybe present", "maybe present", "not present"], "the check's answers")
        b.css("#add-items")[0].send_keys("new-1\ne1")
        b.click("#add-submit")
        b.wait(lambda: [x.text for x in b.css("#add-results td.answer")]
               == ["added", "already there"], "the add's answers")
        assert c.execute_command("BF.EXISTS", "emails", "new-1") == 1
        assert b.screenshot("console-filter.png", SHOTS)
        # Persist: the TTL goes.
        assert c.ttl("emails") > 0
        b.click("#view-actions button.persist")
        b.wait(lambda: c.ttl("emails") == -1, "the TTL removed")
        b.wait(lambda: "none" in b.text('[data-field="TTL"]'), "TTL none shown")
        b.wait_gone("#view-actions button.persist")
        # Read-only: a badge, and no add form; checks still offered.
        b.click("#view-actions button.readonly")
        b.wait_css("#ro-badge")
        b.wait_gone("#add-form")
        assert c.execute_command("BF.CONFIG", "emails", "READONLY") == b"yes"
        b.wait(lambda: b.css("#check-form")[0].is_displayed(), "the check form")
        b.click("#view-actions button.readonly")
        b.wait_css("#add-form")
        b.wait_gone("#ro-badge")
        assert c.execute_command("BF.CONFIG", "emails", "READONLY") == b"no"
        b.click("#back")
        b.wait_css("#filter-table")
        b.wait(lambda: row("signups"), "the table again")

        # Delete, after a confirmation; cancelling keeps the filter.
        b.click('tr[data-name="signups"] button.delete')
        dialog = b.css("#confirm")[0]
        b.wait(lambda: dialog.is_displayed(), "the dialog")
        assert "signups" in b.text("#confirm-text")
        b.click("#confirm-cancel")
        b.wait(lambda: not dialog.is_displayed(), "the dialog closed")
        assert c.exists("signups") == 1
        b.click('tr[data-name="signups"] button.delete')
        b.wait(lambda: dialog.is_displayed(), "the dialog")
        b.click("#confirm-ok")
        b.wait(lambda: not row("signups"), "the row gone")
        assert c.exists("signups") == 0

        # Expire: the dialog asks for the seconds.
        b.click('tr[data-name="sessions"] button.expire')
        b.wait(lambda: dialog.is_displayed(), "the dialog")
        secs = b.css("#confirm-seconds")[0]
        secs.clear()
        secs.send_keys("500")
        b.click("#confirm-ok")
        b.wait(lambda: 0 < c.ttl("sessions") <= 500, "the expiry")
        assert not b.errors()

        # A user who may not write sees no control that writes.
        b.wait(lambda: b.css("#create")[0].is_displayed(), "the create form")
        c.execute_command("ACL", "SETUSER", "default", "-@write")
        drv.refresh()
        b.wait(lambda: row("emails"), "the emails row")
        assert not b.css("#filter-table button")
        assert not b.css("#create")[0].is_displayed()
        b.click('tr[data-name="emails"] td.items')
        b.wait_css("#check-form")
        assert not b.css("#add-form")[0].is_displayed()
        assert not b.css("#view-actions button")
    finally:
        b.close()
        c.close()


def test_console_on_a_replica_offers_no_writes(start_server):
    b = chromium()
    if b is None:
        pytest.skip("chromium, chromedriver or python3-selenium is not installed")
    s = http_server(start_server)
    c = s.client()
    c.execute_command("BF.RESERVE", "emails", 0.01, 1000)
    c.execute_command("BF.ADD", "emails", "a")
    c.expire("emails", 5000)
    replica = replica_server(start_server, s)
    assert filters(replica).get("emails")
    try:
        b.get(replica.http + "/")
        b.wait_css('tr[data-name="emails"]')
        b.wait_text("#filters-note", "replica")
        assert not b.css("#filter-table button")
        assert not b.css("#create")[0].is_displayed()
        b.click('tr[data-name="emails"] td.name')
        b.wait_css("#check-form")
        b.wait(lambda: "1" in b.text('[data-field="Items"]'), "the filter's figures")
        assert not b.css("#add-form")[0].is_displayed()
        assert not b.css("#view-actions button")
        b.css("#check-items")[0].send_keys("a\nb")
        b.click("#check-submit")
        b.wait(lambda: [x.text for x in b.css("#check-results td.answer")]
               == ["maybe present", "not present"], "the check's answers")
        assert not b.errors()
    finally:
        b.close()
        c.close()


def test_console_opened_with_credentials_in_the_url(start_server):
    """A page opened as http://user:pass@host/ keeps the credentials in its
    base URL, where fetch() refuses any URL that carries them: the console
    must still load its data. And a capacity in exponent form, which the
    sizing calculator accepts, must create the filter too (BF.RESERVE wants
    digits)."""
    drv = browser()
    if drv is None:
        pytest.skip("chromium, chromedriver or python3-selenium is not installed")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    s = http_server(start_server, "--requirepass", "pw")
    c = s.client(password="pw")
    c.execute_command("BF.RESERVE", "emails", 0.01, 20000)
    try:
        wait = WebDriverWait(drv, 30, poll_frequency=0.05)
        drv.get(s.http.replace("http://", "http://default:pw@") + "/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-name="emails"]'))
        drv.find_element(By.ID, "f-name").send_keys("big")
        cap = drv.find_element(By.ID, "f-capacity")
        cap.clear()
        cap.send_keys("1e6")
        wait.until(lambda d: "bits per key" in d.find_element(By.ID, "sizing").text)
        drv.find_element(By.ID, "f-submit").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-name="big"]'))
        info = c.execute_command("BF.INFO", "big", "CAPACITY")
        assert info == [1000000]
        logs = [e for e in drv.get_log("browser") if e["level"] == "SEVERE"]
        assert not logs, logs
    finally:
        drv.quit()
        c.close()


# ---- search, sort and paging; the filter's own actions ----

def page(s, headers=None, **q):
    st, body = get_json(s, "/api/filters?" + urllib.parse.urlencode(q), headers)
    assert st == 200, body
    return body


def many_filters(c, n=400):
    """n filters of every family with varied capacities, items, layouts and
    TTLs (absolute expiry times, so equal TTLs are exactly equal), named in
    groups: g0:0000 .. g3:0399, the last ones sorting past any first page."""
    base = int(time.time() * 1000) + 3600 * 1000
    p = c.pipeline(transaction=False)
    names = []
    for i in range(n):
        name = "g%d:%04d" % (i % 4, i)
        names.append(name)
        if i % 10 == 3:
            p.execute_command("CF.RESERVE", name, 64 + (i % 5) * 64)
        elif i % 10 == 7:
            p.execute_command("BF.RESERVE", name, 0.01, 100 + (i * 37) % 900, "LAYOUT",
                              "classic")
        else:
            p.execute_command("BF.RESERVE", name, 0.01, 100 + (i * 53) % 900)
        if i % 3 and i % 11:
            add = "CF.INSERT" if i % 10 == 3 else "BF.INSERT"
            p.execute_command(add, name, "ITEMS", *["%s-%d" % (name, k) for k in range(i % 11)])
        if i % 5 == 0:
            p.pexpireat(name, base + (i % 7) * 1000000)
    p.execute()
    return sorted(names)


def all_rows(s, headers=None, **q):
    rows, n = [], 1
    while True:
        body = page(s, headers, page=n, **q)
        rows += body["filters"]
        if n * body["per_page"] >= body["total"]:
            return body["total"], rows
        n += 1


def test_paging_reaches_every_filter(start_server):
    s = http_server(start_server, "--metrics-max-key-series", 100)
    c = s.client()
    names = many_filters(c)
    # No parameters: today's answer, the first metrics-max-key-series
    # filters in key order, with the total and page added.
    body = page(s)
    assert [f["name"] for f in body["filters"]] == names[:100]
    assert body["truncated"] is True and body["total"] == 400
    assert (body["page"], body["per_page"]) == (1, 100)
    # Pages of 37: every filter once, in key order.
    total, rows = all_rows(s, per_page=37)
    assert total == 400 and [f["name"] for f in rows] == names
    last = page(s, page=11, per_page=37)
    assert len(last["filters"]) == 400 - 370 and last["truncated"] is True
    assert page(s, page=12, per_page=37)["filters"] == []
    assert page(s, page=10 ** 14, per_page=1000)["filters"] == []
    # A filter past metrics-max-key-series is reachable, its FPR read.
    beyond = page(s, match=names[-1])["filters"]
    assert [f["name"] for f in beyond] == [names[-1]]
    assert beyond[0]["fpr"] is not None
    assert page(s, page=400, per_page=1)["filters"][0]["name"] == names[-1]
    assert not page(s, per_page=1000)["truncated"]


def test_match_is_a_glob_on_the_name(start_server):
    s = http_server(start_server)
    c = s.client()
    names = many_filters(c)
    for pat in ("g1:*", "g?:001*", "g[02]:03*", "*:0399", "g3:0\\3*", "nothing*", "*"):
        import fnmatch
        want = [n for n in names if fnmatch.fnmatchcase(n, pat.replace("\\3", "3"))]
        total, rows = all_rows(s, match=pat, per_page=50)
        assert total == len(want) and [f["name"] for f in rows] == want, pat
    c.execute_command("BF.ADD", "star*name", "x")
    assert [f["name"] for f in page(s, match="star\\*name")["filters"]] == ["star*name"]
    # Not a filter: not counted.
    c.execute_command("PFADD", "g1:plain", "x")
    assert page(s, match="g1:*")["total"] == 100


def sort_key(col):
    if col == "ttl":
        return lambda f: float("inf") if f["ttl"] < 0 else f["ttl"]
    if col == "fpr":
        return lambda f: -1 if f["fpr"] is None else f["fpr"]
    return lambda f: f[col]


def test_sort_by_every_column(start_server):
    s = http_server(start_server)
    c = s.client()
    many_filters(c)
    _, rows = all_rows(s, per_page=1000)
    for col in ("name", "type", "layout", "capacity", "items", "fill", "fpr", "bytes", "parts",
                "ttl"):
        for order in ("asc", "desc"):
            # Ties are by name, ascending or descending with the column.
            want = sorted(rows, key=lambda f: (sort_key(col)(f), f["name"]),
                          reverse=order == "desc")
            total, got = all_rows(s, sort=col, order=order, per_page=64)
            assert total == 400
            assert [f["name"] for f in got] == [f["name"] for f in want], (col, order)
    # "memory" is the bytes column.
    names = lambda b: [f["name"] for f in b["filters"]]  # noqa: E731
    assert names(page(s, sort="memory", order="desc", per_page=50)) == \
        names(page(s, sort="bytes", order="desc", per_page=50))
    for bad in ("sort=bogus", "order=up", "page=0", "page=x", "page=-1", "per_page=0",
                "per_page=1001", "per_page=1e2"):
        st, body = get_json(s, "/api/filters?" + bad)
        assert st == 400 and body["error"], bad


def test_sort_by_fpr_is_bounded(start_server):
    """Sorting by FPR reads every matching filter's bits: more than a page's
    bound of them is refused, a match that narrows them is answered."""
    s = http_server(start_server)
    c = s.client()
    p = c.pipeline(transaction=False)
    for i in range(1001):
        p.execute_command("BF.RESERVE", "f%04d" % i, 0.01, 100)
    p.execute()
    st, body = get_json(s, "/api/filters?sort=fpr")
    assert st == 400 and "narrow" in body["error"], body
    assert page(s, sort="fpr", match="f0*")["total"] == 1000


def test_check_add_persist_and_read_only(start_server):
    s = http_server(start_server)
    c = s.client()
    c.execute_command("BF.RESERVE", "bf", 0.001, 1000)
    c.execute_command("CF.RESERVE", "cf", 1000)
    c.expire("bf", 1000)
    # No filter: not created.
    st, body = post(s, "/api/filters/add", {"name": "missing", "items": "a"})
    assert (st, body) == (400, {"error": "ERR not found"})
    assert c.exists("missing") == 0
    for name in ("bf", "cf"):
        st, body = post(s, "/api/filters/check", {"name": name, "items": "a\nb\r\n\nc\n"})
        assert (st, body) == (200, {"reply": [0, 0, 0]}), name
        st, body = post(s, "/api/filters/add", {"name": name, "items": "a\r\nb\n"})
        assert (st, body) == (200, {"reply": [1, 1]}), name
        st, body = post(s, "/api/filters/check", {"name": name, "items": "a\nb\nc"})
        assert (st, body) == (200, {"reply": [1, 1, 0]}), name
    assert c.execute_command("BF.EXISTS", "bf", "b") == 1
    assert c.execute_command("CF.EXISTS", "cf", "a") == 1
    assert post(s, "/api/filters/add", {"name": "bf", "items": "a"}) == (200, {"reply": [0]})
    st, body = post(s, "/api/filters/check", {"name": "bf", "items": "\n\n"})
    assert st == 400 and "items" in body["error"]
    c.execute_command("PFADD", "str", "x")
    st, body = post(s, "/api/filters/add", {"name": "str", "items": "a"})
    assert st == 400 and body["error"].startswith("WRONGTYPE")
    # Items up to the body's size, each a line.
    many = ["item-%05d" % i for i in range(4000)]
    st, body = post(s, "/api/filters/add", {"name": "cf", "items": "\n".join(many)})
    assert st == 200 and len(body["reply"]) == 4000

    # Persist removes the TTL.
    assert page(s, match="bf")["filters"][0]["ttl"] > 0
    assert post(s, "/api/filters/persist", {"name": "bf"}) == (200, {"reply": 1})
    assert c.ttl("bf") == -1 and page(s, match="bf")["filters"][0]["ttl"] == -1
    assert post(s, "/api/filters/persist", {"name": "bf"}) == (200, {"reply": 0})

    # Read-only: adds refused, checks answered; shown in the row.
    assert post(s, "/api/filters/readonly", {"name": "bf", "readonly": "yes"}) == \
        (200, {"reply": "OK"})
    row = page(s, match="bf")["filters"][0]
    assert row["read_only"] is True and row["can"]["add"] is False
    assert row["can"]["check"] is True and row["can"]["readonly"] is True
    st, body = post(s, "/api/filters/add", {"name": "bf", "items": "z"})
    assert st == 400 and "read-only" in body["error"], body
    assert post(s, "/api/filters/check", {"name": "bf", "items": "a\nz"}) == \
        (200, {"reply": [1, 0]})
    assert c.execute_command("BF.CONFIG", "bf", "READONLY") == b"yes"
    assert post(s, "/api/filters/readonly", {"name": "bf", "readonly": "no"})[0] == 200
    assert page(s, match="bf")["filters"][0]["read_only"] is False
    assert post(s, "/api/filters/add", {"name": "bf", "items": "z"}) == (200, {"reply": [1]})
    st, body = post(s, "/api/filters/readonly", {"name": "bf", "readonly": "maybe"})
    assert st == 400 and "yes or no" in body["error"]
    c.close()


def test_replica_offers_and_takes_no_writes(start_server):
    s = http_server(start_server)
    c = s.client()
    c.execute_command("BF.RESERVE", "bf", 0.01, 1000)
    c.execute_command("BF.ADD", "bf", "a")
    c.expire("bf", 5000)
    replica = replica_server(start_server, s)
    assert page(replica)["total"] == 1
    body = page(replica)
    assert body["role"] == "replica"
    assert not any(body["can"].values()), body["can"]
    row = body["filters"][0]
    assert row["can"] == {"delete": False, "expire": False, "persist": False, "check": True,
                          "add": False, "readonly": False}
    for path, fields in (("/api/filters", {"name": "x", "capacity": 10, "error_rate": 0.1}),
                         ("/api/filters/delete", {"name": "bf"}),
                         ("/api/filters/expire", {"name": "bf", "seconds": 5}),
                         ("/api/filters/persist", {"name": "bf"}),
                         ("/api/filters/readonly", {"name": "bf", "readonly": "yes"}),
                         ("/api/filters/add", {"name": "bf", "items": "b"})):
        st, body = post(replica, path, fields)
        assert st == 400 and body["error"].startswith("READONLY"), (path, body)
    # Checks are reads: answered.
    assert post(replica, "/api/filters/check", {"name": "bf", "items": "a\nb"}) == \
        (200, {"reply": [1, 0]})
    rc = replica.client()
    assert rc.exists("x") == 0 and rc.execute_command("BF.EXISTS", "bf", "b") == 0
    assert rc.ttl("bf") > 4000
    assert c.exists("bf") == 1 and c.execute_command("BF.CONFIG", "bf", "READONLY") == b"no"
    rc.close()
    c.close()
