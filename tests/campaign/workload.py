"""The workload: a plan of order stories per worker, generated from the seed only, and the
workers that carry it out against the two serves, recording every request and its answer.

A story is one order's life as the platforms and the merchant tell it: maybe a payment that
arrives before its order, the order (sometimes twice, sometimes with a conflicting twin), a
payment through one channel (duplicates, sometimes sent at once to both serves, sometimes a
conflicting or mismatched one), a close before or after it, a refund (sometimes before the
payment, sometimes a conflicting second one), a notice that records nothing, hostile garbage.
Payments and refunds of the platforms (WeChat Pay v2/v3, Alipay) go first to the platform's
own ledger (a third serve, never faulted), whose daily statement `reconcile` reads; a few of
them never reach the campaign's serves (a callback lost for good).

The platforms' orders are registered with their channel, so that the serves ask the platform
about those still unpaid (docs/query.md), which `payledger simulate-platform` answers from a
record of its own. A few paid orders are paid there (`POST /simulate/pay`) and on the platform's
ledger, and never notified to the serves: only the query (or the statement) can find them
("unnotified"); a few more are notified only once the
query has found them ("late"), and each such notice must be a duplicate.
"""

import hashlib
import http.client
import json
import os
import random
import threading
import time

import records

ACCOUNTS = ["acct-%d" % i for i in range(6)]
CHANNELS = [("generic", 40), ("wechat_v2", 20), ("wechat_v3", 20), ("alipay", 20)]
PLATFORM_CHANNELS = ("wechat_v2", "wechat_v3", "alipay")
# Of the platforms' paid orders whose callback is not lost on its way to the statement: the
# share paid on the simulator (and the platform's ledger) and never notified to the serves, and
# the share notified late.
UNNOTIFIED_SHARE = 0.05
LATE_SHARE = 0.05
# What such a story keeps: nothing that would settle or close the order before the query finds
# its payment (a close, a refund, another payment, a payment before its order).
QUERY_STORY_OPS = ("create", "create_conflict", "pay", "ignored", "hostile")
HOSTILE = ["bad_secret", "float_amount", "stale", "v2_badsign", "v3_serial", "alipay_tamper",
           "garbage", "oversize", "bad_key_order", "zero_amount_order", "unknown_order",
           "v2_mch", "dup_json_key"]

ORDER, PAY, CLOSE, REFUND = ("ORDER_CREATED", "PAYMENT_SUCCEEDED", "PAYMENT_CLOSED",
                             "REFUND_SUCCEEDED")


def weighted(rng, pairs):
    total = sum(w for _, w in pairs)
    x = rng.uniform(0, total)
    for value, w in pairs:
        x -= w
        if x <= 0:
            return value
    return pairs[-1][0]


def digits(rng, n):
    return "".join(rng.choice("0123456789") for _ in range(n))


# --- the plan ----------------------------------------------------------------------------------

def make_story(rng, seed, w, i):
    otn = "K%d-%d-%d" % (seed, w, i)
    channel = weighted(rng, CHANNELS)
    currency = "CNY" if channel == "alipay" or rng.random() < 0.85 else "USD"
    amount = rng.randint(1, 500000)
    story = {"otn": otn, "account": rng.choice(ACCOUNTS), "amount": amount,
             "currency": currency, "channel": channel,
             "txid": {"generic": "GW" + digits(rng, 20), "wechat_v2": "4200" + digits(rng, 24),
                      "wechat_v3": "4200" + digits(rng, 24),
                      "alipay": "2024" + digits(rng, 24)}[channel],
             "refund_id": {"generic": "GWR" + digits(rng, 20),
                           "wechat_v2": "5030" + digits(rng, 24),
                           "wechat_v3": "5030" + digits(rng, 24),
                           "alipay": "R" + digits(rng, 20)}[channel],
             "refund_amount": rng.randint(1, amount)}
    platform = channel in PLATFORM_CHANNELS
    steps = []

    def step(op, **kw):
        d = {"op": op, "copies": 1, "burst": False, "platform": False, "lost": False,
             "serve": rng.randrange(2)}
        d.update(kw)
        steps.append(d)

    paid = rng.random() < 0.78
    lost = platform and paid and rng.random() < 0.06
    if paid and not lost and rng.random() < 0.07:
        step("early_pay")                        # before its order: unknown_order, then again
    step("create", copies=1 if rng.random() < 0.8 else rng.randint(2, 3),
         burst=rng.random() < 0.15, platform=platform)
    if rng.random() < 0.08:
        step("create_conflict")
    refund = paid and rng.random() < 0.3
    refund_first = refund and rng.random() < 0.15
    close = rng.random() < 0.15
    close_first = close and rng.random() < 0.5
    if close and close_first:
        step("close")
    if refund and refund_first:
        step("refund", platform=platform, copies=rng.randint(1, 2))
    if paid:
        step("pay", copies=1 if rng.random() < 0.6 else rng.randint(2, 4),
             burst=rng.random() < 0.2, platform=platform, lost=lost)
        if channel == "generic" and rng.random() < 0.12:
            step("pay_conflict")
        if rng.random() < 0.05:
            step("pay_mismatch")
    elif rng.random() < 0.03:
        step("refund", platform=platform)        # a refund for an order never paid
        refund = False
    if close and not close_first:
        step("close")
    if refund and not refund_first:
        step("refund", platform=platform, copies=1 if rng.random() < 0.7 else 2,
             burst=rng.random() < 0.2)
    if refund and channel == "generic" and rng.random() < 0.1:
        step("refund_conflict")
    if rng.random() < 0.05:
        step("ignored")
    if rng.random() < 0.12:
        step("hostile", kind=rng.choice(HOSTILE),
             noise=rng.randint(1, 1 << 30))
    for d in steps:
        d["pause"] = rng.uniform(0, 0.02)
    if platform and paid and not lost:
        # Drawn apart from `rng`, so that every other story stays as the seed made it.
        x = random.Random("%s/query" % otn).random()
        query = ("unnotified" if x < UNNOTIFIED_SHARE else
                 "late" if x < UNNOTIFIED_SHARE + LATE_SHARE else None)
        if query:
            steps = [d for d in steps if d["op"] in QUERY_STORY_OPS]
            for d in steps:
                if d["op"] == "pay":
                    # Paid on the simulator, and on the platform's ledger, whose statement
                    # reconcile reads (a payment found by a query is reconciled as any other),
                    # but never notified to the serves.
                    d.update(query=query)
    story["steps"] = steps
    return story


def worker_plan(seed, w):
    """The worker's operations, in order: (story, step index), stories interleaved three at
    a time. Infinite; deterministic for (seed, w)."""
    rng = random.Random("%d/worker/%d" % (seed, w))
    active = []
    i = 0
    while True:
        while len(active) < 3:
            active.append([make_story(rng, seed, w, i), 0])
            i += 1
        k = rng.randrange(len(active))
        story, at = active[k]
        yield story, at
        active[k][1] += 1
        if active[k][1] == len(story["steps"]):
            active.pop(k)


def plan_digest(seed, workers, ops=300):
    h = hashlib.sha256()
    for w in range(workers):
        gen = worker_plan(seed, w)
        for _ in range(ops):
            story, at = next(gen)
            h.update(json.dumps([w, story["otn"], story["steps"][at], story["amount"],
                                 story["txid"]], sort_keys=True).encode())
    return h.hexdigest()[:16]


# --- expectations: which event a request asks for -----------------------------------------------

def fp_of(event_type, account=None, txid=None, amount=None, currency=None):
    if event_type == ORDER:
        return (account, amount, currency)
    if event_type == CLOSE:
        return ()
    return (txid, amount, currency)


def asks(story, op, hostile=None):
    """(event_type, fingerprint) the request asks for, or None."""
    s = story
    if op == "create":
        return ORDER, fp_of(ORDER, s["account"], amount=s["amount"], currency=s["currency"])
    if op == "create_conflict":
        return ORDER, fp_of(ORDER, s["account"], amount=s["amount"] + 1, currency=s["currency"])
    if op in ("pay", "early_pay"):
        return PAY, fp_of(PAY, txid=s["txid"], amount=s["amount"], currency=s["currency"])
    if op == "pay_conflict":
        return PAY, fp_of(PAY, txid=s["txid"] + "X", amount=s["amount"], currency=s["currency"])
    if op == "pay_mismatch":
        return PAY, fp_of(PAY, txid=s["txid"], amount=s["amount"] + 1, currency=s["currency"])
    if op == "close":
        return CLOSE, ()
    if op == "refund":
        return REFUND, fp_of(REFUND, txid=s["refund_id"], amount=s["refund_amount"],
                             currency=s["currency"])
    if op == "refund_conflict":
        other = s["refund_amount"] % s["amount"] + 1
        if other == s["refund_amount"]:
            other = s["refund_amount"] + 1 if s["refund_amount"] < s["amount"] else 1
        return REFUND, fp_of(REFUND, txid=s["refund_id"] + "Y", amount=other,
                             currency=s["currency"])
    return None


EXPECT_FAILED = ("create_conflict", "pay_conflict", "pay_mismatch", "refund_conflict",
                 "hostile", "early_pay")


# --- building the requests -----------------------------------------------------------------------

def build(signer, story, st, now):
    """(request, asks, hostile?) for the step, built at `now`; the platform's time of the
    fact is the step's first execution (st['at'])."""
    s = story
    op = st["op"]
    at = st["at"]
    ch = s["channel"]
    if op in ("create", "create_conflict"):
        amount = s["amount"] + (1 if op == "create_conflict" else 0)
        return signer.order(s["otn"], s["account"], amount, s["currency"],
                            ch if ch in PLATFORM_CHANNELS else None)
    if op in ("pay", "early_pay", "pay_conflict", "pay_mismatch"):
        _, (txid, amount, cur) = asks(s, op)
        if op in ("pay_conflict",) or ch == "generic":
            return signer.generic_raw(signer.generic_body(PAY, s["otn"], txid, amount, cur, at),
                                      now)
        if ch == "wechat_v2":
            return signer.v2_payment(s["otn"], txid, amount, cur, at)
        if ch == "wechat_v3":
            return signer.v3_payment(s["otn"], txid, amount, cur, at, now)
        return signer.alipay_payment(s["otn"], txid, amount, at)
    if op == "close":
        if ch == "alipay":
            return signer.alipay_close(s["otn"], s["txid"], s["amount"], at)
        return signer.generic_raw(signer.generic_body(CLOSE, s["otn"], at=at), now)
    if op in ("refund", "refund_conflict"):
        _, (rid, ramount, cur) = asks(s, op)
        if op == "refund_conflict" or ch == "generic":
            return signer.generic_raw(signer.generic_body(REFUND, s["otn"], rid, ramount, cur,
                                                          at), now)
        if ch == "wechat_v2":
            return signer.v2_refund(s["otn"], rid, s["txid"], s["amount"], ramount, at)
        if ch == "wechat_v3":
            return signer.v3_refund(s["otn"], rid, s["txid"], s["amount"], ramount, at, now)
        return signer.alipay_refund(s["otn"], s["txid"], rid, s["amount"], ramount, at)
    if op == "ignored":
        if ch == "wechat_v3":
            return signer.v3_refund(s["otn"], s["refund_id"], s["txid"], s["amount"],
                                    s["refund_amount"], at, now, status="CLOSED")
        if ch == "alipay":
            return signer.alipay_payment(s["otn"], s["txid"], s["amount"], at,
                                         status="WAIT_BUYER_PAY")
        return signer.v2_payment(s["otn"], s["txid"], s["amount"], s["currency"], at,
                                 result="FAIL")
    raise ValueError(op)


def build_hostile(signer, story, st, now):
    """(request, asks) for a hostile step: every one must be refused (4xx)."""
    s = story
    kind = st["kind"]
    noise = st["noise"]
    otn, amount, cur = s["otn"], s["amount"], s["currency"]
    from notices import Request
    if kind == "bad_secret":
        fp = (s["txid"], amount + 7, cur)
        body = signer.generic_body(PAY, otn, fp[0], fp[1], cur, st["at"])
        return signer.generic_raw(body, now, secret="wrong-secret-0123456789abcdef"), (PAY, fp)
    if kind == "float_amount":
        body = ('{"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"%s","transaction_id":"F%d",'
                '"amount":%d.0,"currency":"%s"}' % (otn, noise, amount, cur))
        return signer.generic_raw(body, now), (PAY, ("F%d" % noise, amount, cur))
    if kind == "dup_json_key":
        body = ('{"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"%s","transaction_id":"D%d",'
                '"amount":%d,"amount":%d,"currency":"%s"}' % (otn, noise, amount, amount, cur))
        return signer.generic_raw(body, now), (PAY, ("D%d" % noise, amount, cur))
    if kind == "stale":
        fp = ("S%d" % noise, amount, cur)
        body = signer.generic_body(PAY, otn, fp[0], amount, cur, st["at"])
        return signer.generic_raw(body, now - 1000), (PAY, fp)
    if kind == "v2_badsign":
        fp = ("4299%d" % noise, amount + 3, cur)
        return signer.v2_payment(otn, fp[0], fp[1], cur, st["at"],
                                 api_key="0" * 32), (PAY, fp)
    if kind == "v2_mch":
        fp = ("4298%d" % noise, amount, cur)
        return signer.v2_payment(otn, fp[0], amount, cur, st["at"],
                                 mch_id="1999999999"), (PAY, fp)
    if kind == "v3_serial":
        fp = ("4297%d" % noise, amount + 5, cur)
        return signer.v3_payment(otn, fp[0], fp[1], cur, st["at"], now,
                                 serial="DEADBEEF00"), (PAY, fp)
    if kind == "alipay_tamper":
        fp = ("2099%d" % noise, amount * 10, "CNY")
        return signer.alipay_payment(otn, fp[0], amount, st["at"], tamper=True), (PAY, fp)
    if kind == "garbage":
        rng = random.Random(noise)
        path = rng.choice(["/v1/callbacks/generic", "/v1/callbacks/wechat/v2",
                           "/v1/callbacks/wechat/v3", "/v1/callbacks/alipay", "/v1/orders"])
        body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 400)))
        headers = {"Content-Type": "application/octet-stream"}
        if path == "/v1/orders":
            headers["Authorization"] = "Bearer " + signer.merchant_token
        return Request(path, headers, body), None
    if kind == "oversize":
        body = signer.generic_body(PAY, otn, "O%d" % noise, amount, cur)[:-1] + \
            ',"pad":"' + "x" * 70000 + '"}'
        return signer.generic_raw(body, now), (PAY, ("O%d" % noise, amount, cur))
    if kind == "bad_key_order":
        return signer.order("bad key!%d" % noise, s["account"], amount, cur), None
    if kind == "zero_amount_order":
        return signer.order("Z" + otn, s["account"], 0, cur), \
            (ORDER, (s["account"], 0, cur), "Z" + otn)
    if kind == "unknown_order":
        fp = ("N%d" % noise, amount, cur)
        body = signer.generic_body(PAY, "NX" + otn, fp[0], amount, cur, st["at"])
        return signer.generic_raw(body, now), (PAY, fp, "NX" + otn)
    raise ValueError(kind)


class JsonRequest:
    """A request to the platform simulator: path, headers, body bytes (as notices.Request)."""

    def __init__(self, path, value):
        self.path = path
        self.headers = {"Content-Type": "application/json"}
        self.body = json.dumps(value, separators=(",", ":")).encode()


def simulator_payment(story):
    """`POST /simulate/pay` (docs/query.md): the platform takes the story's payment, with the
    payment number, amount and currency its notice would carry, and never notifies it."""
    s = story
    return JsonRequest("/simulate/pay", {"channel": s["channel"], "out_trade_no": s["otn"],
                                         "amount": s["amount"], "currency": s["currency"],
                                         "transaction_id": s["txid"]})


# --- sending -----------------------------------------------------------------------------------

def send(port, req, timeout):
    """(status, body) or (None, error text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", req.path, body=req.body, headers=req.headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except Exception as error:  # a timeout, a reset, a refusal: no answer
        return None, ("%s: %s" % (type(error).__name__, error)).encode()
    finally:
        conn.close()


def order_status(port, otn, token, timeout=3):
    """The order's status as a serve shows it (GET /v1/orders/{out_trade_no}), or None."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/v1/orders/" + otn, headers={"Authorization": "Bearer " + token})
        resp = conn.getresponse()
        body = resp.read()
        return json.loads(body).get("status") if resp.status == 200 else None
    except Exception:  # a fault: not known now
        return None
    finally:
        conn.close()


class History:
    def __init__(self, path):
        self.lock = threading.Lock()
        self.entries = []
        self.platform = []      # what the platform's ledger and the simulator acknowledged
        self.file = open(path, "a", buffering=1)

    def add(self, record, platform=False):
        """Appends a records.Record: to `platform` (what the platform took, a campaign error),
        else to `entries` (what was sent to a serve)."""
        with self.lock:
            record.id = len(self.entries) + len(self.platform)
            (self.platform if platform else self.entries).append(record)
            self.file.write(json.dumps(record.as_json(), sort_keys=True) + "\n")

    def close(self):
        self.file.close()


class Workload:
    def __init__(self, seed, workers, signer, serve_ports, platform_port, history, deadline,
                 timeout=12.0, classify=None, outcome_of=None, simulator_port=None):
        self.seed = seed
        self.workers = workers
        self.signer = signer
        self.ports = serve_ports
        self.platform_port = platform_port
        self.simulator_port = simulator_port
        self.history = history
        self.deadline = deadline
        self.timeout = timeout
        self.classify = classify
        self.outcome_of = outcome_of
        self.stories = {}           # otn -> story (those started)
        self.lock = threading.Lock()
        self.threads = []
        self.reactive = random.Random(os.urandom(8))   # retries' pauses: not part of the plan
        self.late = []      # (story, step index): notices held until the query finds the payment
        self.late_stop = threading.Event()
        self.late_thread = None

    def start(self):
        for w in range(self.workers):
            t = threading.Thread(target=self._work, args=(w,), name="worker-%d" % w,
                                 daemon=True)
            t.start()
            self.threads.append(t)
        self.late_thread = threading.Thread(target=self._late_loop, name="late", daemon=True)
        self.late_thread.start()

    def join(self, timeout):
        end = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.1, end - time.monotonic()))
        return all(not t.is_alive() for t in self.threads)

    def _work(self, w):
        for story, k in worker_plan(self.seed, w):
            if time.monotonic() >= self.deadline:
                return
            with self.lock:
                self.stories.setdefault(story["otn"], story)
            st = story["steps"][k]
            time.sleep(st["pause"])     # pacing of the plan, not a synchronisation
            try:
                self.run_step(w, story, k)
            except Exception as error:  # a bug in the campaign: say it, keep going
                self.history.add(records.CampaignError(
                    worker=w, out_trade_no=story["otn"], step=k, error=repr(error)),
                    platform=True)

    # --- one step ----------------------------------------------------------------------------
    def run_step(self, w, story, k, settle=False):
        st = story["steps"][k]
        if "at" not in st:
            st["at"] = int(time.time())
        op = st["op"]
        if op == "create_conflict" and not any(
                "ok" in x.get("results", ()) for x in story["steps"] if x["op"] == "create"):
            # The conflicting twin only after the order is known registered: were the order's
            # own registration still without an answer (503, a timeout), the twin would be the
            # first the ledger hears of, register its amount, and the platform's payment of
            # the true amount would be a mismatch, rightly refused and reported by reconcile.
            return
        if st["platform"] and not settle and not st.get("platform_done"):
            self._to_platform(story, st)
        if st["lost"]:
            return
        query = st.get("query")
        if query and not settle and not st.get("simulator_done"):
            self._to_simulator(story, st)
        if query == "unnotified":
            return
        if query == "late" and not st.get("released"):
            if not settle:
                with self.lock:
                    self.late.append((story, k))
            return
        copies = 1 if settle else st["copies"]
        if st["burst"] and not settle:
            threads = [threading.Thread(target=self._deliver,
                                        args=(w, story, k, c, (st["serve"] + c) % 2, settle))
                       for c in range(copies)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            for c in range(copies):
                self._deliver(w, story, k, c, (st["serve"] + c) % 2, settle)
        del op

    def _to_platform(self, story, st):
        req = build(self.signer, story, st, time.time())
        for attempt in range(10):
            t0 = time.time()
            status, body = send(self.platform_port, req, 20)
            klass = self.classify(req.path, status, body)
            if klass == "ok" or klass == "failed":
                break
            time.sleep(0.5)
        want = asks(story, st["op"])
        self.history.add(records.PlatformNotice(
            out_trade_no=story["otn"], op=st["op"], channel=story["channel"], status=status,
            result=klass, t0=t0, event_type=want[0] if want else None,
            fingerprint=tuple(want[1]) if want else None,
            body=body[:200].decode("utf-8", "replace")), platform=True)
        st["platform_done"] = True

    def _to_simulator(self, story, st):
        req = simulator_payment(story)
        for attempt in range(10):
            t0 = time.time()
            status, body = send(self.simulator_port, req, 20)
            klass = ("ok" if status == 200 else "failed" if status and 400 <= status < 500
                     else "unknown")
            if klass != "unknown":
                break
            time.sleep(0.5)
        self.history.add(records.SimulatorPayment(
            out_trade_no=story["otn"], op=st["op"], channel=story["channel"], query=st["query"],
            status=status, result=klass, t0=t0, event_type=PAY,
            fingerprint=tuple(asks(story, "pay")[1]),
            body=body[:200].decode("utf-8", "replace")), platform=True)
        st["simulator_done"] = True

    # --- the notices held until the query has found their payment ----------------------------
    def _late_loop(self):
        while not self.late_stop.wait(1.0):
            self.release_late()

    def release_late(self):
        """Sends each held notice whose order a serve shows PAID: nothing but the query can
        have paid it, so the notice must be a duplicate. One still unpaid stays held."""
        with self.lock:
            held = list(self.late)
        for n, (story, k) in enumerate(held):
            status = order_status(self.ports[n % 2], story["otn"], self.signer.auditor_token)
            if status != "PAID":
                continue
            with self.lock:
                self.late.remove((story, k))
            story["steps"][k]["released"] = time.time()
            self.run_step(-2, story, k)

    def finish_late(self):
        """Stops the late thread; sends what the query has found meanwhile. (story, step
        index) of the notices never sent: their payment was never found."""
        self.late_stop.set()
        if self.late_thread:
            self.late_thread.join(120)
        self.release_late()
        with self.lock:
            return list(self.late)

    def _deliver(self, w, story, k, copy, serve, settle):
        st = story["steps"][k]
        op = st["op"]
        attempts = 6 if settle else (1 if op == "hostile" else 4)
        cached = None
        for attempt in range(attempts):
            now = time.time()
            if op == "hostile":
                req, want = build_hostile(self.signer, story, st, now)
            else:
                if cached is None or (cached[1] < now - 120):
                    cached = (build(self.signer, story, st, now), now)
                req = cached[0]
                if story["channel"] == "wechat_v3" or req.path.endswith("/generic"):
                    req = build(self.signer, story, st, now)   # their signed time has a window
                want = asks(story, op)
            t0 = time.time()
            status, body = send(self.ports[serve], req, self.timeout)
            t1 = time.time()
            klass = self.classify(req.path, status, body)
            entry = records.Delivery(
                worker=w, out_trade_no=story["otn"], step=k, op=op, copy=copy, attempt=attempt,
                serve=serve, path=req.path,
                channel="api" if req.path == "/v1/orders" else story["channel"],
                status=status, result=klass, t0=t0, t1=t1,
                outcome=self.outcome_of(req.path, status, body) if status else None,
                event_type=want[0] if want else None,
                fingerprint=tuple(want[1]) if want else None,
                asked_out_trade_no=want[2] if want and len(want) > 2 else story["otn"],
                settle=settle, hostile=st["kind"] if op == "hostile" else None,
                query=st.get("query") or None)
            if status is not None and (req.path.endswith("/generic") or
                                       req.path == "/v1/orders"):
                try:
                    answer = json.loads(body)
                    if isinstance(answer, dict) and isinstance(answer.get("seq"), int):
                        entry.answer_seq = answer["seq"]
                except ValueError:
                    pass  # Not JSON: no seq to keep; checker.check_answers judges the answer.
            if klass != "ok" or status is None:
                entry.answer = body[:300].decode("utf-8", "replace")
            self.history.add(entry)
            st.setdefault("results", []).append(klass)
            if klass in ("ok", "failed"):
                return klass
            serve = 1 - serve
            time.sleep(self.reactive.uniform(0.1, 0.6))   # a platform's retry back-off
        return "unknown"

    # --- after the faults: what never got a definite answer, once more ------------------------
    def settle(self, deadline):
        todo = []
        with self.lock:
            stories = list(self.stories.values())
        for story in stories:
            for k, st in enumerate(story["steps"]):
                results = st.get("results")
                if not results or st["op"] in EXPECT_FAILED:
                    continue
                if "ok" in results or "failed" in results:
                    continue
                todo.append((story, k))
        todo.sort(key=lambda x: (x[0]["steps"][x[1]]["op"] != "create", x[0]["otn"], x[1]))
        done = 0
        for story, k in todo:
            if time.monotonic() >= deadline:
                break
            self.run_step(-1, story, k, settle=True)
            done += 1
        return len(todo), done
