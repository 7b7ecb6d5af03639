"""A headless browser for the console suites (Debian's chromium and
chromedriver, driven by python3-selenium).

    from browser import Browser, available

    if not available():
        pytest.skip("chromium, chromedriver or python3-selenium is not installed")
    with Browser() as b:
        b.get("http://127.0.0.1:%d/#/filters" % port)
        row = b.wait_css('tr[data-name="emails"]')
        b.wait_text("#filters-total", "10,000 filters")
        b.screenshot("filters.png")          # under $BLOOMERY_SCREENSHOTS or a scratch dir

Every wait polls its condition (the DOM as it is now) until it holds or the
timeout passes, then fails with what it waited for and what the page showed;
nothing sleeps for a fixed time. The window is 1400x900, so screenshots and
layouts are the same from run to run. Each browser gets a profile directory
of its own, removed at close. errors() returns the console's SEVERE messages
(a script error, a violation of the page's CSP), which a
test should find empty.
"""
import atexit
import os
import shutil
import tempfile
import time

WIDTH, HEIGHT = 1400, 900

# Where screenshots go: BLOOMERY_SCREENSHOTS, else a scratch directory
# removed at exit.
SHOTS = os.environ.get("BLOOMERY_SCREENSHOTS")
if not SHOTS:
    SHOTS = tempfile.mkdtemp(prefix="bloomery-shots-")
    atexit.register(shutil.rmtree, SHOTS, True)


def available():
    """Whether a browser can be started here."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return False
    return bool(shutil.which("chromium") and shutil.which("chromedriver"))


class Browser:
    """A headless chromium. Closed by close() or at the end of a with."""

    def __init__(self, width=WIDTH, height=HEIGHT):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        self.profile = tempfile.mkdtemp(prefix="bloomery-chromium-")
        opts = webdriver.ChromeOptions()
        opts.binary_location = shutil.which("chromium")
        for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                  "--window-size=%d,%d" % (width, height), "--user-data-dir=" + self.profile):
            opts.add_argument(a)
        # The browser's console messages, for errors().
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        try:
            self.driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")),
                                           options=opts)
        except Exception:
            shutil.rmtree(self.profile, True)
            raise
        # --window-size is the window's outer size: grow it by what the
        # window's frame takes, so the page itself is width x height.
        inner = self.driver.execute_script("return [window.innerWidth, window.innerHeight]")
        if inner != [width, height]:
            self.driver.set_window_size(2 * width - inner[0], 2 * height - inner[1])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, True)

    def get(self, url):
        self.driver.get(url)

    def css(self, selector):
        """The elements matching selector now (possibly none)."""
        from selenium.webdriver.common.by import By
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def wait(self, cond, what, timeout=30, poll=0.05):
        """Poll cond() until it returns something true, which is returned.
        Exceptions count as not yet (an element replaced while it was read).
        Fails after timeout seconds with what and the page's visible text."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                v = cond()
                if v:
                    return v
            except Exception as e:  # noqa: BLE001 (a DOM in motion)
                last = e
            if time.monotonic() > deadline:
                body = self.text("body")[:2000]
                raise AssertionError("timed out after %ss waiting for %s%s\npage text:\n%s" % (
                    timeout, what, " (last error: %r)" % last if last else "", body))
            time.sleep(poll)

    def wait_css(self, selector, timeout=30, visible=True):
        """The first element matching selector, once there is one (and it is
        displayed, unless visible=False)."""
        def found():
            for e in self.css(selector):
                if not visible or e.is_displayed():
                    return e
            return None
        return self.wait(found, "an element %s%s" % (selector, " shown" if visible else ""),
                         timeout)

    def click(self, selector, timeout=30):
        """Clicks the first displayed element matching selector, found afresh
        until the click lands: a page that re-renders may replace the
        element between finding it and clicking it (a stale element, retried
        like any other exception of wait)."""
        def clicked():
            for e in self.css(selector):
                if e.is_displayed():
                    e.click()
                    return True
            return False
        return self.wait(clicked, "a click on " + selector, timeout)

    def text(self, selector):
        """The visible text of the first element matching selector ('' when none)."""
        found = self.css(selector)
        return found[0].text if found else ""

    def type(self, selector, text, clear=True):
        """Types text into the displayed element matching selector (as keys,
        so the page's input handlers run)."""
        e = self.wait_css(selector)
        if clear:
            e.clear()
        e.send_keys(text)

    def texts(self, selector):
        """The text of every element matching selector, read in one script
        (a table of 500 rows read cell by cell would take seconds)."""
        return self.driver.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map((e) => e.textContent)",
            selector)

    def attrs(self, selector, name):
        """The attribute name of every element matching selector."""
        return self.driver.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map((e) => "
            "e.getAttribute(arguments[1]))", selector, name)

    def wait_text(self, selector, text, timeout=30):
        """Until the element matching selector shows text (a substring);
        returns its whole text."""
        seen = []

        def shows():
            seen[:] = [self.text(selector)]
            return text in seen[0] and seen[0]
        try:
            return self.wait(shows, "%r in %s" % (text, selector), timeout)
        except AssertionError as e:
            raise AssertionError("%s\n%s last showed: %r" % (e, selector, seen[:1])) from None

    def wait_gone(self, selector, timeout=30):
        """Until no displayed element matches selector."""
        self.wait(lambda: not any(e.is_displayed() for e in self.css(selector)),
                  "no element %s shown" % selector, timeout)

    def screenshot(self, name, directory=None, top=False):
        """Saves the window as PNG (scrolled to the page's top first when
        top); returns the file's path."""
        if top:
            self.driver.execute_script("window.scrollTo(0, 0)")
        d = directory or SHOTS
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, name)
        if not self.driver.save_screenshot(path):
            raise AssertionError("could not save the screenshot " + path)
        return path

    def errors(self, network=False):
        """The SEVERE messages of the browser's console since the last call:
        script errors, CSP violations; with network=True also the requests
        answered 4xx/5xx, which chromium logs as errors too (a test that
        provokes a refusal expects those)."""
        return [e for e in self.driver.get_log("browser") if e["level"] == "SEVERE"
                and (network or e.get("source") != "network")]
