#!/usr/bin/python3
"""The auditor console in a real browser (docs/api.md#the-auditor-console).

Starts `payledger serve` (the binary of this build tree) on a database of its own on the test
PostgreSQL (PAYLEDGER_TEST_DATABASE_URL), seeds it through the HTTP API — orders, callbacks
whose bodies carry <script>, <img onerror> and <svg onload> payloads (JSON, WeChat Pay v2 XML,
form fields), duplicates, two conflicts, a forgery, a reconciliation with a difference — and
drives headless Chromium (Debian's chromium and chromium-driver, python3-selenium) through the
console: a wrong token and a merchant token, sign-in by keyboard, the order view with every
delivery and its raw body, the payloads staying text, an account, the live feed following an
event appended while the page is open, the receipts filter, reconciliations, the chain's head
(503 without a signing key, then signed), verify for an admin token, exact money, a lost
connection, and the webhook subscriptions (two, posting to a receiver the test runs: one
acknowledges, one answers 410) as an admin and as an auditor sees them, and the platform
queries (docs/query.md: WeChat Pay v2's query and close APIs played by the test): an order's
channel, expiry and query state, a hostile answer staying text, an order closed on the
platform at its expiry with the close's answer among its deliveries, and orders that are not
queried. Every test checks that the browser asked nothing of another origin (Chrome's
performance log) and that no Content-Security-Policy violation was reported. Screenshots go
to the folder given.

Usage: console_browser_test.py PAYLEDGER_BINARY SCREENSHOT_DIR [unittest arguments]
Exit 77 (ctest: skipped) without a database or a browser, except under CI, where it fails.
"""
import datetime
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SKIP = 77
WAIT_SECONDS = 20  # Generous: CI is a loaded 2-core machine.
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

MERCHANT = "merchant-console-test-0001"
AUDITOR = "auditor-console-test-00001"
ADMIN = "admin-console-test-0000001"
SECRET = "generic-console-secret-0001"
WX_APPID = "wx0123456789abcdef"
WX_MCH_ID = "1900000001"
WX_KEY = "0123456789abcdef0123456789abcdef"

# What a body must never do: set this global, open a dialog, or become an element.
XSS_SCRIPT = "<script>window.__xss=1;alert(1)</script>"
XSS_IMG = "<img src=x onerror=\"window.__xss=2;alert(2)\">"
XSS_SVG = "<svg onload=\"window.__xss=3;alert(3)\"></svg>"
PAYLOAD = XSS_SCRIPT + XSS_IMG + XSS_SVG


WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo="

# The first query of an order registered with a channel is due this long after its
# registration (or at its expiry, if that comes first), and each next one this long after the
# last: longer than the whole test, so that an order is asked only when a test makes its query
# due, or when it expires.
QUERY_SECONDS = 3600


def parse_time(text):
    """Seconds since the epoch of an RFC 3339 UTC time as the API writes it (…Z)."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def skip_or_fail(reason):
    if os.environ.get("CI"):
        print("FAIL: " + reason, file=sys.stderr)
        sys.exit(1)
    print("SKIP: " + reason, file=sys.stderr)
    sys.exit(SKIP)


try:
    from selenium import webdriver
    from selenium.common.exceptions import NoAlertPresentException, TimeoutException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:
    skip_or_fail("python3-selenium is not installed")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url(base, name):
    parts = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def psql(url, sql):
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
                   check=True, stdout=subprocess.DEVNULL)


def shanghai_now():
    return datetime.datetime.now(datetime.timezone(datetime.timedelta(hours=8)))


def wechat_v2_xml(fields):
    """`fields` as WeChat Pay v2 sends them, a notification or an answer: XML with their MD5
    `sign` over the non-empty fields sorted by name and the API key (docs/platforms.md)."""
    text = "&".join("%s=%s" % (k, fields[k]) for k in sorted(fields) if fields[k])
    signed = dict(fields, sign=hashlib.md5((text + "&key=" + WX_KEY).encode()).hexdigest().upper())
    return "<xml>" + "".join(
        "<%s>%s</%s>" % (k, v if v.isdigit() else "<![CDATA[" + v + "]]>", k)
        for k, v in signed.items()) + "</xml>"


class Serve:
    """`payledger serve` on its own config, port and database."""

    def __init__(self, binary, folder, url, query_base):
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.config = os.path.join(folder, "payledger.json")
        self.url = url
        self.query_base = query_base  # Where WeChat Pay v2 is asked about orders (docs/query.md).
        self.extra = {}  # More config sections, written at the next start.
        self.process = None

    def start(self):
        config = {
            "listen": "127.0.0.1:%d" % self.port,
            "database_url": self.url,
            "tokens": {"merchant": [MERCHANT], "auditor": [AUDITOR], "admin": [ADMIN]},
            "generic": {"secret": SECRET},
            "wechat_v2": {"appid": WX_APPID, "mch_id": WX_MCH_ID, "api_key": WX_KEY,
                          "sign_type": "MD5", "query": {"api_base": self.query_base}},
            "query": {"first_after_seconds": QUERY_SECONDS, "schedule_seconds": [QUERY_SECONDS]},
            **self.extra,
        }
        fd = os.open(self.config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(config, f)
        log = open(os.path.join(self.folder, "serve.log"), "ab")
        self.process = subprocess.Popen([self.binary, "serve", "--config", self.config],
                                        stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # Polls readiness: synchronises on /readyz.
            if self.process.poll() is not None:
                raise RuntimeError("serve exited with %d" % self.process.returncode)
            try:
                with urllib.request.urlopen(self.base + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError("serve did not become ready")

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        self.process = None

    def cli(self, *args):
        return subprocess.run([self.binary, *args, "--config", self.config],
                              capture_output=True, text=True)


class Receiver:
    """A webhook receiver on 127.0.0.1: /ok answers 200, /gone 410 (which disables the
    subscription that posts to it). It counts the deliveries each path was sent."""

    def __init__(self):
        self.counts = {}
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.counts[self.path] = receiver.counts.get(self.path, 0) + 1
                self.send_response(410 if self.path == "/gone" else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class WechatV2Platform:
    """WeChat Pay v2's query and close APIs on 127.0.0.1 (docs/query.md#the-requests), which
    `serve` asks about the orders registered with wechat_v2: /pay/orderquery answers the state
    `states` holds for the order (NOTPAY unless set), /pay/closeorder confirms the close with
    `close_fields` added. Every answer is signed with the API key, as WeChat signs it, so that
    payledger reads it. It records each request's path and order in `asked`."""

    ORDER = re.compile(r"<out_trade_no>(?:<!\[CDATA\[)?(.*?)(?:\]\]>)?</out_trade_no>")

    def __init__(self):
        self.states = {}
        self.close_fields = {}
        self.asked = []
        self.lock = threading.Lock()
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                found = platform.ORDER.search(body)
                out_trade_no = found.group(1) if found else ""
                fields = {"return_code": "SUCCESS", "return_msg": "OK", "appid": WX_APPID,
                          "mch_id": WX_MCH_ID, "nonce_str": "Q8Y2CW3EKJ5T9Z1D",
                          "result_code": "SUCCESS"}
                with platform.lock:
                    platform.asked.append((self.path, out_trade_no))
                    if self.path == "/pay/orderquery":
                        fields.update(out_trade_no=out_trade_no,
                                      trade_state=platform.states.get(out_trade_no, "NOTPAY"))
                    else:
                        fields.update(platform.close_fields)
                answer = wechat_v2_xml(fields).encode()
                self.send_response(200 if self.path in ("/pay/orderquery", "/pay/closeorder")
                                   else 404)
                self.send_header("Content-Type", "text/xml; charset=utf-8")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def http(base, method, path, body=None, headers=None):
    """(status, headers, body bytes), for any status."""
    data = body.encode() if isinstance(body, str) else body
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class ConsoleBrowserTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.driver = None
        cls.serve = None
        cls.receiver = None
        cls.platform = None
        cls.db_name = None
        try:
            cls.start()
        except BaseException:
            cls.tearDownClass()  # unittest calls it only after a setUpClass that succeeded.
            raise

    @classmethod
    def start(cls):
        cls.tmp = tempfile.mkdtemp(prefix="console-test-",
                                   dir=os.environ.get("PAYLEDGER_TEST_TMPDIR") or None)
        cls.admin_url = os.environ["PAYLEDGER_TEST_DATABASE_URL"]
        name = "console_test_%d_%d" % (os.getpid(), int(time.time()))
        psql(cls.admin_url, "CREATE DATABASE " + name)
        cls.db_name = name
        cls.platform = WechatV2Platform()
        cls.serve = Serve(BINARY, cls.tmp, database_url(cls.admin_url, cls.db_name),
                          cls.platform.base)
        cls.receiver = Receiver()
        cls.serve.extra = {"subscriptions": [
            {"name": "ledger-sink", "url": cls.receiver.base + "/ok", "secret": WEBHOOK_SECRET,
             "start": "beginning"},
            {"name": "gone-sink", "url": cls.receiver.base + "/gone", "secret": WEBHOOK_SECRET,
             "start": "beginning"},
        ]}
        cls.serve.start()
        cls.base = cls.serve.base
        cls.seed()
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in ["--headless=new", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,1000", "--no-first-run",
                         "--disable-background-networking", "--disable-component-update",
                         "--disable-sync", "--disable-default-apps",
                         "--user-data-dir=" + os.path.join(cls.tmp, "chromium")]:
            options.add_argument(argument)
        if os.geteuid() == 0:
            options.add_argument("--no-sandbox")  # Chromium refuses to run as root otherwise.
        options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
        cls.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        cls.driver.set_page_load_timeout(WAIT_SECONDS * 3)
        cls.wait = WebDriverWait(cls.driver, WAIT_SECONDS)

    @classmethod
    def tearDownClass(cls):
        if cls.driver is not None:
            cls.driver.quit()
        if cls.serve is not None:
            cls.serve.stop()
        if cls.receiver is not None:
            cls.receiver.stop()
        if cls.platform is not None:
            cls.platform.stop()
        if cls.db_name is not None:
            psql(cls.admin_url, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % cls.db_name)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # --- Seeding through the API ---------------------------------------------------------

    @classmethod
    def api(cls, method, path, body=None, token=None, headers=None):
        all_headers = dict(headers or {})
        if token:
            all_headers["Authorization"] = "Bearer " + token
        status, _, data = http(cls.base, method, path, body, all_headers)
        return status, (json.loads(data) if data.startswith(b"{") else data)

    @classmethod
    def create_order(cls, out_trade_no, amount, account="shop-1", **registration):
        """`registration`: the optional fields of POST /v1/orders (channel, expires_at)."""
        return cls.api("POST", "/v1/orders", json.dumps({
            "out_trade_no": out_trade_no, "account_id": account, "amount": amount,
            "currency": "CNY", **registration}), token=MERCHANT)

    @classmethod
    def post_generic(cls, body, secret=SECRET):
        t = str(int(time.time()))
        signature = hmac.new(secret.encode(), (t + "." + body).encode(), hashlib.sha256)
        return cls.api("POST", "/v1/callbacks/generic", body, headers={
            "Payledger-Signature": "t=%s,v1=%s" % (t, signature.hexdigest())})

    @classmethod
    def post_wechat_v2(cls, out_trade_no, amount, attach, paid_at):
        fields = {"appid": WX_APPID, "mch_id": WX_MCH_ID, "nonce_str": "5K8264ILTKCH16CQ",
                  "return_code": "SUCCESS", "result_code": "SUCCESS",
                  "out_trade_no": out_trade_no, "transaction_id": "4200000000202612010001",
                  "total_fee": str(amount), "cash_fee": str(amount), "fee_type": "CNY",
                  "time_end": paid_at.strftime("%Y%m%d%H%M%S"), "trade_type": "JSAPI",
                  "bank_type": "OTHERS", "openid": "oConsoleTest0001", "attach": attach}
        return cls.api("POST", "/v1/callbacks/wechat/v2", wechat_v2_xml(fields),
                       headers={"Content-Type": "text/xml"})

    @classmethod
    def seed(cls):
        def payment(out_trade_no, transaction_id, amount, extra=None):
            body = {"event_type": "PAYMENT_SUCCEEDED", "out_trade_no": out_trade_no,
                    "transaction_id": transaction_id, "amount": amount, "currency": "CNY"}
            body.update(extra or {})
            return json.dumps(body)

        def expect(answer, status):
            if answer[0] != status:
                raise RuntimeError("seeding: expected %d, got %r" % (status, answer))

        expect(cls.create_order("ORD-PAID", 8880), 201)
        hostile = payment("ORD-PAID", "4200001", 8880, {"note": PAYLOAD})
        cls.hostile_body = hostile
        expect(cls.post_generic(hostile), 200)  # appended
        expect(cls.post_generic(hostile), 200)  # duplicate
        expect(cls.post_generic(payment("ORD-PAID", "4200002", 8880, {"note": PAYLOAD})), 409)
        expect(cls.post_generic(payment("ORD-PAID", "4200003", 8880),
                                secret="not-the-secret-0000000"), 401)
        expect(cls.create_order("ORD-CLOSED", 1999), 201)
        expect(cls.post_generic(json.dumps({"event_type": "PAYMENT_CLOSED",
                                            "out_trade_no": "ORD-CLOSED"})), 200)
        expect(cls.post_generic(payment("ORD-CLOSED", "4200009", 1999)), 200)
        expect(cls.create_order("ORD-CLOSED", 2000), 409)  # A second conflict, newer.
        expect(cls.create_order("ORD-WX", 1999, account="shop-2"), 201)
        paid_at = shanghai_now()  # The bill below is that day's, even across midnight.
        expect(cls.post_wechat_v2("ORD-WX", 1999, PAYLOAD, paid_at), 200)
        # A form body that is no callback at all: malformed, stored, names no order.
        cls.form_body = "a=1&name=" + urllib.parse.quote(XSS_SVG) + "&sign=x%2By"
        expect(cls.post_generic(cls.form_body), 400)
        # The platform's statement of the day, one amount altered: a reconciliation that
        # records an amount_mismatch (docs/reconciliation.md#matching).
        day = paid_at.strftime("%Y-%m-%d")
        bill = os.path.join(cls.tmp, "bill.csv")
        made = cls.serve.cli("simulate-bill", "wechat", "--date", day, "--out", bill, "--alter", "1")
        if made.returncode != 0:
            raise RuntimeError("simulate-bill: " + made.stderr)
        ran = cls.serve.cli("reconcile", "wechat", "--bill", bill, "--date", day)
        if ran.returncode != 1 or "amount_mismatch=1" not in ran.stdout:
            raise RuntimeError("reconcile: " + ran.stdout + ran.stderr)

    # --- Browser helpers -----------------------------------------------------------------

    def setUp(self):
        self.driver.get_log("performance")  # What came before belongs to the last test.
        self.driver.get_log("browser")

    def tearDown(self):
        # No request to another origin, ever, and no CSP violation reported. Counted: every
        # network request (http, https, ws, wss), and whatever the console's own pages asked
        # for (Chrome's blank start page loads chrome:// resources of its own).
        foreign = set()
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") != "Network.requestWillBeSent":
                continue
            url = message["params"]["request"]["url"]
            scheme = urllib.parse.urlsplit(url).scheme
            from_console = message["params"].get("documentURL", "").startswith(self.base + "/")
            if ((scheme in ("http", "https", "ws", "wss") or from_console)
                    and scheme != "data" and not url.startswith(self.base + "/")):
                foreign.add(url)
        self.assertEqual(foreign, set(), "requests to another origin")
        violations = [e["message"] for e in self.driver.get_log("browser")
                      if "Content Security Policy" in e["message"] or "Trusted Type" in e["message"]]
        self.assertEqual(violations, [])
        self.assert_no_xss()

    def assert_no_xss(self):
        try:
            alert = self.driver.switch_to.alert
            text = alert.text
            alert.dismiss()
            self.fail("a dialog opened: " + text)
        except NoAlertPresentException:
            pass
        self.assertIsNone(self.driver.execute_script("return window.__xss ?? null"))
        self.assertEqual(self.driver.execute_script(
            "return document.querySelectorAll('#view script, #view img, #view svg, "
            "#view iframe, #view object, #view embed').length"), 0)

    def screenshot(self, name):
        os.makedirs(SCREENSHOTS, exist_ok=True)
        self.driver.save_screenshot(os.path.join(SCREENSHOTS, name + ".png"))

    def tall_screenshot(self, name):
        """The top 1280 × 1800 pixels of the page (README's picture of the order view)."""
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 1280, "height": 1800, "deviceScaleFactor": 1, "mobile": False})
        try:
            self.driver.execute_script("window.scrollTo(0, 0)")
            self.wait.until(lambda d: d.execute_script("return window.innerHeight") == 1800)
            self.screenshot(name)
        finally:
            self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    def open(self, route):
        self.driver.get(self.base + "/console/" + route)

    def go(self, route):
        """Changes the hash within the open page: no reload."""
        self.driver.execute_script("location.hash = arguments[0]", route)

    def heading(self, text):
        self.wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#view h1"), text))

    def find(self, css):
        return self.wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, css)))

    def find_all(self, css):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def view_text(self):
        return self.driver.find_element(By.ID, "view").text

    def sign_in(self, token):
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.refresh()
        field = self.find("form.signin input[name=token]")
        self.wait.until(lambda d: d.switch_to.active_element == field)  # Focused: type at once.
        field.send_keys(token, Keys.ENTER)

    def session_token(self):
        return self.driver.execute_script(
            "return sessionStorage.getItem('payledger.console.token')")

    # --- The tests, in order: each starts where the last one left the browser ---------------

    def test_00_static_files_have_the_policy_type_and_caching(self):
        status, headers, body = http(self.base, "GET", "/console/")
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Type"], "text/html; charset=utf-8")
        csp = headers["Content-Security-Policy"]
        for directive in ["default-src 'none'", "script-src 'self'", "style-src 'self'",
                          "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'",
                          "require-trusted-types-for 'script'"]:
            self.assertIn(directive, csp)
        self.assertNotIn("unsafe", csp)
        self.assertNotIn("http", csp)
        self.assertEqual(headers["X-Content-Type-Options"], "nosniff")
        self.assertEqual(headers["Cache-Control"], "no-cache")
        etag = headers["ETag"]
        self.assertIn(b'<script type="module" src="app.js"></script>', body)
        status, headers, body = http(self.base, "GET", "/console/", headers={"If-None-Match": etag})
        self.assertEqual((status, body), (304, b""))
        status, headers, _ = http(self.base, "GET", "/console/app.js")
        self.assertEqual((status, headers["Content-Type"]), (200, "text/javascript; charset=utf-8"))
        self.assertIn("script-src 'self'", headers["Content-Security-Policy"])
        status, headers, _ = http(self.base, "GET", "/console/console.css")
        self.assertEqual((status, headers["Content-Type"]), (200, "text/css; charset=utf-8"))
        status, headers, _ = http(self.base, "GET", "/console/no-such-file.js")
        self.assertEqual(status, 404)
        self.assertEqual(headers["X-Content-Type-Options"], "nosniff")
        opener = urllib.request.build_opener(NoRedirect)
        with self.assertRaises(urllib.error.HTTPError) as redirect:
            opener.open(self.base + "/console")
        self.assertEqual(redirect.exception.code, 301)
        self.assertEqual(redirect.exception.headers["Location"], "/console/")
        self.assertEqual(http(self.base, "POST", "/console/", "x")[0], 405)

    def test_01_a_wrong_token_and_a_merchant_token_are_explained(self):
        self.open("#/orders/ORD-PAID")
        self.sign_in("wrong-token-0000000000")
        error = self.find(".signin-message .error[data-kind=unauthorized]")
        self.assertIn("Not signed in (401)", error.text)
        self.assertIsNone(self.session_token())
        self.screenshot("signin-wrong-token")
        self.sign_in(MERCHANT)
        error = self.find(".signin-message .error[data-kind=forbidden]")
        self.assertIn("Not allowed (403)", error.text)
        self.assertIn("merchant token", error.text)
        self.assertIsNone(self.session_token())

    def test_02_sign_in_by_keyboard_opens_the_deep_link(self):
        self.open("#/orders/ORD-PAID")
        self.sign_in(AUDITOR)
        self.heading("Order ORD-PAID")
        self.assertEqual(self.session_token(), AUDITOR)
        self.assertNotIn(AUDITOR, self.driver.current_url)
        self.assertTrue(self.driver.current_url.endswith("/console/#/orders/ORD-PAID"))
        self.assertEqual(self.find("#role").text, "auditor token")
        self.assertEqual(len(self.find_all("input[name=token]")), 0)

    def test_03_the_order_view_shows_status_amounts_events_and_every_delivery(self):
        self.go("#/orders/ORD-PAID")
        self.heading("Order ORD-PAID")
        self.assertEqual(self.find("[data-field=status]").text, "PAID")
        self.assertEqual(self.find("[data-field=amount]").text, "¥88.80")
        self.assertEqual(self.find("[data-field=paid_amount]").text, "¥88.80")
        self.assertEqual(self.find("[data-field=refunded_amount]").text, "¥0.00")
        self.assertEqual(self.find("[data-field=transaction_id]").text, "4200001")
        self.assertIn("No anomalies", self.find("[data-field=anomalies]").text)
        _, events = self.api("GET", "/v1/orders/ORD-PAID/events", token=AUDITOR)
        self.assertEqual([li.get_attribute("data-seq") for li in self.find_all("ol.timeline > li")],
                         [str(e["seq"]) for e in events["events"]])
        self.assertIn("PAYMENT_SUCCEEDED", self.find("ol.timeline").text)
        self.tall_screenshot("order")
        # Every delivery, in arrival order, with its outcome.
        _, receipts = self.api("GET", "/v1/orders/ORD-PAID/receipts", token=AUDITOR)
        expected = [(str(r["id"]), r["outcome"]) for r in receipts["receipts"]]
        self.assertEqual([o for _, o in expected],
                         ["appended", "appended", "duplicate", "conflict", "bad_signature"])
        self.wait.until(lambda d: len(self.find_all("article.receipt")) == len(expected))
        self.assertEqual([(a.get_attribute("data-id"), a.get_attribute("data-outcome"))
                          for a in self.find_all("article.receipt")], expected)
        # The payment's body, pretty-printed JSON; the raw bytes one keypress away.
        card = self.find("article.receipt[data-id='%s']" % expected[1][0])
        pretty = card.find_element(By.CSS_SELECTOR, "pre.pretty[data-format=json]")
        self.assertIn('\n  "transaction_id": "4200001",', pretty.get_attribute("textContent"))
        raw = card.find_element(By.CSS_SELECTOR, "details.raw")
        self.assertIsNone(raw.get_attribute("open"))
        summary = raw.find_element(By.TAG_NAME, "summary")
        self.assertIn("%d bytes" % len(self.hostile_body.encode()), summary.text)
        summary.send_keys(Keys.ENTER)
        self.wait.until(lambda d: raw.get_attribute("open") is not None)
        self.assertEqual(raw.find_element(By.CSS_SELECTOR, "pre.raw").get_attribute("textContent"),
                         self.hostile_body)
        self.screenshot("order-raw-body")
        # Phone width: nothing wider than the screen.
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        try:
            self.driver.execute_script("window.scrollTo(0, 0)")
            self.wait.until(lambda d: d.execute_script("return window.innerWidth") == 390)
            self.assertLessEqual(self.driver.execute_script(
                "return document.documentElement.scrollWidth - window.innerWidth"), 0)
            self.screenshot("order-phone")
        finally:
            self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    def test_04_hostile_bodies_stay_text(self):
        self.go("#/orders/ORD-PAID")
        self.heading("Order ORD-PAID")
        self.wait.until(lambda d: len(self.find_all("article.receipt")) == 5)
        text = self.view_text()
        # The payloads appear literally (JSON shows them as sent, quotes escaped).
        self.assertIn('<script>window.__xss=1;alert(1)</script><img src=x onerror=\\"window', text)
        self.assert_no_xss()
        # WeChat Pay v2's XML, pretty-printed, the payload inside its CDATA as text; and the
        # same payload as a kept field of the event.
        self.go("#/orders/ORD-WX")
        self.heading("Order ORD-WX")
        xml = self.find("article.receipt pre.pretty[data-format=xml]").get_attribute("textContent")
        self.assertIn("<xml>\n  <appid><![CDATA[" + WX_APPID + "]]></appid>", xml)
        self.assertIn("\n  <attach><![CDATA[" + PAYLOAD + "]]></attach>\n", xml)
        self.assertIn('"attach": ' + json.dumps(PAYLOAD),
                      self.find("ol.timeline").get_attribute("textContent"))
        self.assert_no_xss()
        # Form fields, decoded, in a table: the value is the payload's text.
        self.go("#/receipts?outcome=malformed")
        self.heading("Deliveries: malformed")
        row = self.find("ol.receipt-feed > li[data-outcome=malformed] details")
        row.find_element(By.TAG_NAME, "summary").click()
        table = self.find("ol.receipt-feed table.form-fields")
        fields = {tr.find_element(By.TAG_NAME, "th").get_attribute("textContent"):
                  tr.find_element(By.TAG_NAME, "td").get_attribute("textContent")
                  for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr")}
        self.assertEqual(fields, {"a": "1", "name": XSS_SVG, "sign": "x+y"})
        self.screenshot("hostile-form-body")

    def test_05_an_order_with_an_anomaly_and_an_unknown_order(self):
        self.go("#/orders/ORD-CLOSED")
        self.heading("Order ORD-CLOSED")
        anomaly = self.find("[data-field=anomalies] [data-anomaly=paid_after_close]")
        self.assertIn("Paid after close", anomaly.text)
        self.go("#/orders/NO-SUCH-ORDER")
        self.heading("Order NO-SUCH-ORDER")
        error = self.find(".error[data-kind=not_found]")
        self.assertIn("Not found (404)", error.text)
        self.wait.until(EC.text_to_be_present_in_element(
            (By.CSS_SELECTOR, ".deliveries .pager"), "No delivery named this order"))
        self.go("#/orders/%3Cscript%3E")
        self.heading("Order <script>")
        self.assertIn("Not an order number", self.find(".error[data-kind=refused]").text)

    def test_06_an_account_shows_exact_balances(self):
        self.go("#/orders/ORD-PAID")
        self.heading("Order ORD-PAID")
        self.find("[data-field=account_id] a").click()  # Keyboard-reachable link to it.
        self.heading("Account shop-1")
        # shop-1: ORD-PAID 8880 + ORD-CLOSED 1999 paid = 10879 fen.
        self.assertEqual(self.find("table.balances [data-currency=CNY]").text, "¥108.79")

    def test_07_the_feed_opens_at_the_newest_and_follows_new_events(self):
        self.go("#/events")
        self.heading("Events")
        self.wait.until(EC.text_to_be_present_in_element_attribute(
            (By.CSS_SELECTOR, ".feed-status"), "data-state", "live"))
        _, newest = self.api("GET", "/v1/events?before=9223372036854775807&limit=1", token=AUDITOR)
        newest_seq = str(newest["events"][0]["seq"])
        self.assertEqual(self.find("ol.feed > li").get_attribute("data-seq"), newest_seq)
        self.driver.execute_script("window.__sameDocument = 'yes'")
        status, order = self.create_order("ORD-LIVE", 12345, account="shop-3")
        self.assertEqual(status, 201)
        row = self.find("ol.feed > li[data-seq='%d']" % order["seq"])
        self.assertIn("ORD-LIVE", row.text)
        self.assertIn("¥123.45", row.text)
        self.assertEqual(self.find_all("ol.feed > li")[0].get_attribute("data-seq"),
                         str(order["seq"]))
        self.assertEqual(self.driver.execute_script("return window.__sameDocument"), "yes")
        self.screenshot("events")

    def test_08_receipts_filtered_by_outcome_newest_first(self):
        self.go("#/receipts?outcome=conflict")
        self.heading("Deliveries: conflict")
        _, conflicts = self.api("GET", "/v1/receipts?outcome=conflict", token=AUDITOR)
        expected = sorted((str(r["id"]) for r in conflicts["receipts"]), key=int, reverse=True)
        self.assertEqual(len(expected), 2)  # ORD-PAID's payment, ORD-CLOSED's second order.
        self.wait.until(lambda d: len(self.find_all("ol.receipt-feed > li")) == len(expected))
        self.assertEqual([li.get_attribute("data-id") for li in self.find_all("ol.receipt-feed > li")],
                         expected)
        self.assertEqual({li.get_attribute("data-outcome")
                          for li in self.find_all("ol.receipt-feed > li")}, {"conflict"})
        self.screenshot("receipts-conflict")
        Select(self.find("select[name=outcome]")).select_by_value("bad_signature")
        self.heading("Deliveries: bad_signature")
        self.assertTrue(self.driver.current_url.endswith("#/receipts?outcome=bad_signature"))
        self.wait.until(lambda d: len(self.find_all("ol.receipt-feed > li")) == 1)
        self.assertEqual(self.find("ol.receipt-feed > li").get_attribute("data-outcome"),
                         "bad_signature")

    def test_09_reconciliations_and_their_differences(self):
        self.go("#/reconciliations")
        self.heading("Reconciliations")
        row = self.find("table.runs tbody tr")
        self.assertIn("DIFFERS", row.text)
        self.assertIn("amount_mismatch 1", row.text)
        row.find_element(By.TAG_NAME, "a").click()
        self.heading("Reconciliation #")
        differences = self.find("table.differences")
        self.assertIn("amount_mismatch", differences.text)
        self.assertIn("ORD-WX", differences.text)

    def test_10_the_chain_head_without_a_signing_key_and_no_verify_for_an_auditor(self):
        self.go("#/chain")
        self.heading("Chain")
        notice = self.find("[data-kind=no-signing-key]")
        self.assertIn("audit.signing_key", notice.text)
        self.assertIn("Running verify needs an admin token", self.view_text())
        self.assertEqual(self.find_all("#run-verify"), [])

    def test_11_an_admin_token_runs_verify(self):
        self.open("#/chain")
        self.driver.find_element(By.ID, "sign-out").click()
        field = self.find("form.signin input[name=token]")
        field.send_keys(ADMIN, Keys.ENTER)
        self.heading("Chain")
        self.assertEqual(self.find("#role").text, "admin token")
        self.find("#run-verify").click()
        result = self.find(".verify-result")
        self.assertEqual(result.get_attribute("data-ok"), "true")
        self.assertIn("orders", result.text)
        self.assertIn("balances", result.text)
        self.screenshot("chain-verify")

    def test_12_money_is_exact_beyond_doubles(self):
        checks = self.driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            Promise.all([import('/console/money.js'), import('/console/json.js')]).then(([m, j]) => {
                const big = j.parseJson('{"balance":9007199254740993,"small":8880}');
                done([m.formatMoney(8880, 'CNY'), m.formatMoney(1, 'CNY'), m.formatMoney(0, 'CNY'),
                      m.formatMoney(-8880, 'CNY'), m.formatMoney(10000000000000, 'CNY'),
                      typeof big.balance, m.formatMoney(big.balance, 'CNY'), typeof big.small,
                      m.formatMoney(1000, 'JPY'), m.formatMoney(88.8, 'CNY')]);
            }, (e) => done(String(e)));
        """)
        self.assertEqual(checks, ["¥88.80", "¥0.01", "¥0.00", "-¥88.80", "¥100,000,000,000.00",
                                  "bigint", "¥90,071,992,547,409.93", "number", "JPY 1,000",
                                  "not an amount: 88.8"])

    def test_13_a_lost_connection_is_shown_and_recovered(self):
        self.go("#/events")
        self.heading("Events")
        self.wait.until(EC.text_to_be_present_in_element_attribute(
            (By.CSS_SELECTOR, ".feed-status"), "data-state", "live"))
        self.serve.stop()
        try:
            self.wait.until(EC.text_to_be_present_in_element_attribute(
                (By.CSS_SELECTOR, ".feed-status"), "data-state", "lost"))
            self.assertIn("Lost connection", self.find(".feed-status").text)
            self.screenshot("events-lost-connection")
            self.go("#/accounts/shop-1")
            self.heading("Account shop-1")
            self.assertIn("Lost connection", self.find(".error[data-kind=offline]").text)
        finally:
            self.serve.start()
        self.find(".error[data-kind=offline] button").click()  # "Try again".
        self.assertEqual(self.find("table.balances [data-currency=CNY]").text, "¥108.79")

    def test_14_the_chain_head_signed(self):
        key = os.path.join(self.tmp, "audit_signing_key.pem")
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key], check=True)
        os.chmod(key, 0o600)
        self.serve.stop()
        self.serve.extra["audit"] = {"signing_key": key}
        self.serve.start()
        self.go("#/chain")
        self.heading("Chain")
        signature = self.find("[data-field=signature]")
        _, head = self.api("GET", "/v1/audit/checkpoint", token=AUDITOR)
        self.assertEqual(self.find("[data-field=key_id]").text, head["key_id"])
        self.assertEqual(self.find("[data-field=receipt_id]").text, "#%d" % head["receipt_id"])
        self.assertGreater(len(signature.text), 80)  # Base64 of 64 bytes.
        kept = self.find(".checkpoint-json pre").get_attribute("textContent")
        self.assertEqual(json.loads(kept)["receipt_id"], head["receipt_id"])
        self.assertEqual(json.loads(kept)["chain"], head["chain"])
        self.screenshot("chain-head")

    def subscriptions_state(self):
        status, body = self.api("GET", "/v1/admin/subscriptions", token=ADMIN)
        self.assertEqual(status, 200)
        return {s["name"]: s for s in body["subscriptions"]}

    def changes_newest_first(self):
        status, body = self.api("GET", "/v1/subscriptions/changes?before=9223372036854775807",
                                token=AUDITOR)
        self.assertEqual(status, 200)
        return [(str(c["id"]), c["why"]) for c in reversed(body["changes"])]

    def shown_subscriptions(self):
        """{name: {state, field: textContent}} of the state table, read in one script: the
        view replaces the table at every refresh, so elements found earlier go stale."""
        return self.driver.execute_script("""
            const out = {};
            for (const tr of document.querySelectorAll('table.subscriptions tbody tr')) {
                const row = {state: tr.dataset.state};
                for (const c of tr.querySelectorAll('[data-field]')) {
                    row[c.dataset.field] = c.textContent;
                }
                out[tr.dataset.name] = row;
            }
            return out;""")

    def shown_changes(self):
        return [(tr.get_attribute("data-id"), tr.get_attribute("data-why"))
                for tr in self.find_all("table.subscription-changes tbody tr")]

    def test_15_subscriptions_for_an_admin_token(self):
        # Both receivers have been tried: one acknowledges everything, one answered 410.
        deadline = time.monotonic() + WAIT_SECONDS
        while True:  # Polls the state until the deliveries settled, within the deadline.
            state = self.subscriptions_state()
            if (state["gone-sink"]["state"] == "disabled" and state["ledger-sink"]["state"] == "active"
                    and state["ledger-sink"]["lag_events"] == 0):
                break
            self.assertLess(time.monotonic(), deadline, "deliveries did not settle: %r" % state)
            time.sleep(0.1)
        self.assertGreater(self.receiver.counts.get("/ok", 0), 0)
        self.assertGreater(self.receiver.counts.get("/gone", 0), 0)
        # The receiver's error text is the server's own ("HTTP 410"); a hostile one in the
        # database must stay text all the same. Nothing attempts a disabled subscription again.
        psql(database_url(self.admin_url, self.db_name),
             "UPDATE subscriptions SET last_error = '%s' WHERE name = 'gone-sink'"
             % PAYLOAD.replace("'", "''"))
        self.open("#/subscriptions")
        self.sign_in(ADMIN)
        self.heading("Subscriptions")
        self.assertEqual(self.find("#nav a[aria-current=page]").get_attribute("data-route"),
                         "subscriptions")
        state = self.subscriptions_state()
        head = state["ledger-sink"]["head"]
        self.assertEqual(state["ledger-sink"]["after"], head)
        self.assertEqual(state["gone-sink"]["after"], 0)
        self.wait.until(lambda d: len(self.shown_subscriptions()) == 2)
        rows = self.shown_subscriptions()
        self.assertEqual(set(rows), {"ledger-sink", "gone-sink"})

        def cell(name, field):
            return rows[name][field]

        self.assertEqual(rows["ledger-sink"]["state"], "active")
        self.assertEqual(cell("ledger-sink", "state"), "active")
        self.assertEqual(cell("ledger-sink", "after"), str(head))
        self.assertEqual(cell("ledger-sink", "head"), str(head))
        self.assertEqual(cell("ledger-sink", "lag_events"), "0")
        self.assertEqual(cell("ledger-sink", "url"), self.receiver.base + "/ok")
        self.assertEqual(rows["gone-sink"]["state"], "disabled")
        self.assertEqual(cell("gone-sink", "state"), "disabled")
        self.assertEqual(cell("gone-sink", "after"), "0")
        self.assertEqual(cell("gone-sink", "head"), str(head))
        self.assertEqual(cell("gone-sink", "lag_events"), str(state["gone-sink"]["lag_events"]))
        self.assertGreater(state["gone-sink"]["lag_events"], 0)
        self.assertEqual(cell("gone-sink", "last_error"), PAYLOAD)
        self.assert_no_xss()
        # The changes, newest first: the 410 that disabled gone-sink.
        self.wait.until(lambda d: len(self.shown_changes()) == len(self.changes_newest_first()))
        self.assertEqual(self.shown_changes(), self.changes_newest_first())
        disabled = self.find("table.subscription-changes tr[data-why='disabled: 410']")
        self.assertIn("gone-sink", disabled.text)
        self.screenshot("subscriptions-admin")
        # Refreshed while open: a new event moves ledger-sink's cursor and the head on the page,
        # and a rewind recorded now appears on top of the changes.
        self.assertEqual(self.create_order("ORD-SUBSCRIBED", 500, account="shop-4")[0], 201)
        self.wait.until(lambda d: int(self.shown_subscriptions()["gone-sink"]["head"]) > head)
        self.wait.until(lambda d: int(self.shown_subscriptions()["ledger-sink"]["after"]) > head)
        status, _ = self.api("POST", "/v1/admin/subscriptions/ledger-sink/rewind",
                             json.dumps({"after": head}), token=ADMIN)
        self.assertEqual(status, 200)
        self.wait.until(lambda d: self.shown_changes()[:1] == [(self.changes_newest_first()[0][0],
                                                                "rewind")])
        self.assertEqual(self.shown_changes(), self.changes_newest_first())
        self.assertEqual([why for _, why in self.shown_changes()], ["rewind", "disabled: 410"])

    def test_16_subscriptions_for_an_auditor_token(self):
        self.sign_in(AUDITOR)
        self.heading("Subscriptions")
        notice = self.find("[data-kind=needs-admin]")
        self.assertIn("needs an admin token", notice.text)
        self.assertEqual(self.find_all("table.subscriptions"), [])
        self.wait.until(lambda d: len(self.shown_changes()) == len(self.changes_newest_first()))
        self.assertEqual(self.shown_changes(), self.changes_newest_first())
        self.assertIn("gone-sink", self.find(
            "table.subscription-changes tr[data-why='disabled: 410']").text)
        self.screenshot("subscriptions-auditor")

    def order_when(self, out_trade_no, done):
        """The order object once `done(order)` holds, waited for as the page is (WAIT_SECONDS)."""
        def ready(_):
            _, order = self.api("GET", "/v1/orders/" + out_trade_no, token=AUDITOR)
            return order if done(order) else False
        return self.wait.until(ready)

    def test_17_an_order_shows_its_channel_expiry_and_platform_queries(self):
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)

        def rfc3339(moment):
            return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

        # An order that expires in seconds: at its expiry payledger asks the platform once more
        # (NOTPAY), then closes it there; its view is checked last, once it is closed. The
        # close's answer carries the payloads, as a body the console must show as text.
        self.platform.close_fields = {"return_msg": PAYLOAD}
        status, _ = self.create_order("ORD-EXPIRING", 2500, account="shop-5", channel="wechat_v2",
                                      expires_at=rfc3339(now + datetime.timedelta(seconds=3)))
        self.assertEqual(status, 201)
        # Registered with WeChat Pay v2, which this serve asks (its config has the channel's
        # query section), expiring in two hours: the schedule's start, nothing asked yet.
        expires = rfc3339(now + datetime.timedelta(hours=2))
        status, created = self.create_order("ORD-QUERIED", 4321, account="shop-5",
                                            channel="wechat_v2", expires_at=expires)
        self.assertEqual(status, 201)
        self.assertEqual(created["query"]["attempts"], 0)
        _, order = self.api("GET", "/v1/orders/ORD-QUERIED", token=AUDITOR)
        self.assertEqual((order["channel"], order["expires_at"]), ("wechat_v2", expires))
        # The answer to the registration computes the first query's time as the schedule's
        # trigger does, from serve's clock; the schedule keeps it on the database's
        # (docs/query.md#the-orders-query-state): the same moment, to the clocks' difference.
        self.assertLess(abs(parse_time(order["query"]["next_at"]) -
                            parse_time(created["query"]["next_at"])), 2.0)
        self.go("#/orders/ORD-QUERIED")
        self.heading("Order ORD-QUERIED")
        self.assertEqual(self.find("[data-field=channel]").text, "wechat_v2")
        self.assertEqual(self.find("[data-field=expires_at] time").get_attribute("datetime"),
                         expires)
        self.assertIn("Platform queries", self.find("section.query-state").text)
        self.assertEqual(self.find("[data-field=query_attempts]").text, "0")
        self.assertEqual(self.find("[data-field=query_last_at]").text, "never")
        self.assertEqual(self.find("[data-field=query_last_answer]").text, "none")
        self.assertEqual(self.find("[data-field=query_next_at] time").get_attribute("datetime"),
                         order["query"]["next_at"])
        self.assertEqual(self.find("[data-field=query_closed_at]").text, "no")
        self.assertEqual(self.find_all("[data-field=not_queried]"), [])
        self.screenshot("order-queries")
        # Without a channel: no platform is asked, and the view says so.
        self.go("#/orders/ORD-PAID")
        self.heading("Order ORD-PAID")
        not_queried = self.find("[data-field=not_queried]").text
        self.assertIn("Not queried", not_queried)
        self.assertIn("without a channel", not_queried)
        self.assertEqual(self.find("[data-field=channel]").text, "none")
        self.assertEqual(self.find("[data-field=expires_at]").text, "none")
        self.assertEqual(self.find_all("[data-field=query_attempts]"), [])
        # With a channel this serve does not ask (its config has no alipay section): not
        # queried either.
        status, created = self.create_order("ORD-NOT-ASKED", 100, account="shop-5",
                                            channel="alipay")
        self.assertEqual((status, created["query"]), (201, None))
        self.go("#/orders/ORD-NOT-ASKED")
        self.heading("Order ORD-NOT-ASKED")
        self.assertEqual(self.find("[data-field=channel]").text, "alipay")
        self.assertIn("not configured to ask alipay", self.find("[data-field=not_queried]").text)
        # An attempt: ORD-QUERIED's query made due now (the schedule's own table; its next step
        # is an hour away), answered with a signed state that is markup. Not final: the answer
        # is the platform's words, shown as text.
        self.platform.states["ORD-QUERIED"] = XSS_IMG
        psql(database_url(self.admin_url, self.db_name),
             "UPDATE order_queries SET next_at = now() WHERE out_trade_no = 'ORD-QUERIED'")
        order = self.order_when("ORD-QUERIED", lambda o: o["query"]["attempts"] == 1)
        self.assertEqual(order["query"]["last_answer"], XSS_IMG)
        self.go("#/orders/ORD-QUERIED")
        self.heading("Order ORD-QUERIED")
        self.assertEqual(self.find("[data-field=status]").text, "WAIT_PAY")
        self.assertEqual(self.find("[data-field=query_attempts]").text, "1")
        self.assertEqual(self.find("[data-field=query_last_answer] code").get_attribute(
            "textContent"), XSS_IMG)
        self.assertEqual(self.find("[data-field=query_last_at] time").get_attribute("datetime"),
                         order["query"]["last_at"])
        self.assertEqual(self.find("[data-field=query_next_at] time").get_attribute("datetime"),
                         order["query"]["next_at"])
        self.assert_no_xss()
        # ORD-EXPIRING, closed on the platform at its expiry: settled, nothing more to ask; the
        # close's answer is a delivery of its own, its XML shown as text.
        order = self.order_when("ORD-EXPIRING", lambda o: o["status"] == "CLOSED"
                                and o["query"]["closed_at"] is not None)
        with self.platform.lock:
            asked = [path for path, n in self.platform.asked if n == "ORD-EXPIRING"]
        self.assertEqual(asked, ["/pay/orderquery", "/pay/closeorder"])
        self.assertEqual((order["query"]["attempts"], order["query"]["last_answer"]), (2, "closed"))
        self.go("#/orders/ORD-EXPIRING")
        self.heading("Order ORD-EXPIRING")
        self.assertEqual(self.find("[data-field=status]").text, "CLOSED")
        self.assertEqual(self.find("[data-field=query_attempts]").text,
                         str(order["query"]["attempts"]))
        self.assertEqual(self.find("[data-field=query_last_answer]").text,
                         order["query"]["last_answer"])
        self.assertEqual(self.find("[data-field=query_closed_at] time").get_attribute("datetime"),
                         order["query"]["closed_at"])
        self.assertIn("settled (CLOSED)", self.find("[data-field=query_next_at]").text)
        self.assertIn("wechat_v2_close", self.find("ol.timeline").text)
        _, receipts = self.api("GET", "/v1/orders/ORD-EXPIRING/receipts", token=AUDITOR)
        self.assertEqual([r["source"] for r in receipts["receipts"]], ["api", "wechat_v2_close"])
        self.wait.until(lambda d: len(self.find_all("article.receipt")) == 2)
        card = self.find("article.receipt[data-id='%s']" % receipts["receipts"][1]["id"])
        self.assertEqual(card.find_element(By.CSS_SELECTOR, "header .source").text,
                         "wechat_v2_close")
        self.assertEqual(card.find_element(By.CSS_SELECTOR, "[data-field=request]").text,
                         "POST /pay/closeorder")
        self.assertEqual(len(self.find_all("article.receipt [data-field=request]")), 1)
        xml = card.find_element(By.CSS_SELECTOR, "pre.pretty[data-format=xml]").get_attribute(
            "textContent")
        self.assertIn("\n  <return_msg><![CDATA[" + PAYLOAD + "]]></return_msg>\n", xml)
        self.assert_no_xss()
        self.screenshot("order-closed-on-the-platform")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    BINARY, SCREENSHOTS = sys.argv[1], sys.argv[2]
    del sys.argv[1:3]
    if not os.environ.get("PAYLEDGER_TEST_DATABASE_URL"):
        skip_or_fail("PAYLEDGER_TEST_DATABASE_URL is not set")
    for program in (CHROMIUM, CHROMEDRIVER):
        if not os.access(program, os.X_OK):
            skip_or_fail(program + " is not installed (Debian: chromium, chromium-driver)")
    unittest.main(verbosity=2)
