#!/usr/bin/python3
"""Tests of the fault campaign's judge, tests/campaign/checker.py, on small synthetic histories
(ctest CampaignCheckerSelfTest; no database, Debian's /usr/bin/python3 and its standard library
only).

    /usr/bin/python3 tests/campaign/checker_test.py -v

A campaign passes only when the checker finds nothing, so a checker that never reports would
pass every run. Each test here builds a history in the record shapes the campaign produces and
asserts the verdict: the categories that report a problem and the lost, doubled and skipped
counts. The shapes are the campaign's own, not copies of them: the workload's record of every
request is written by Workload._deliver, Workload._to_platform, Workload._to_simulator and
Workload.release_late (tests/campaign/workload.py) with a scripted transport in place of the
network, its answers classed by notices.classify and
notices.outcome_of (tests/campaign/notices.py); the subscriptions' records are the receiver's
Delivery objects (tests/campaign/receiver.py); the ledger's rows, the feed's events and the
follower's pages have the keys World.table, World.read_feed and World.follow
(tests/campaign/world.py) give them. The checker's functions are called in the order and with
the arguments campaign.py's run uses; the platform simulator's record has the shape
World.simulator_record gives it.

The tests were checked by breaking the checker, one check at a time: for each failure kind (an
acknowledged request without its event or with another fingerprint, an event nobody asked for or
only a refused or hostile request asked for, a statement's event without the platform's record,
two events of one key, a feed, a follower and a subscription that skip, go back or show what the
ledger lacks, an unknown request's event, a late 200 or a refused delivery as received, the
receiver's own findings, the filters, a hostile request acknowledged, the projections, the
answers' seqs, odd answers and 500s, the driver's text, the signature window both ways, the
platform's settled facts, a payment the platform holds left unfound or found as another, a
query's payment the platform never took, the simulator's record against its answers,
--tolerate), the check in checker.py was made never to report, or to
accept what it must refuse, and a test of that kind failed each time; restored, they all pass.
"""

import ast
import collections
import json
import os
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checker  # noqa: E402
import receiver  # noqa: E402
import records  # noqa: E402
import workload  # noqa: E402
from workload import CLOSE, ORDER, PAY, REFUND  # noqa: E402


def answer_classifiers():
    """notices.classify and notices.outcome_of, compiled from notices.py's own source: that
    module imports python3-cryptography for its signers, which a test labelled `unit` must not
    need, and these two functions need only json. Answers are thus classed exactly as the
    campaign classes them."""
    path = os.path.join(HERE, "notices.py")
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    wanted = [node for node in tree.body if isinstance(node, ast.FunctionDef)
              and node.name in ("classify", "outcome_of")]
    assert len(wanted) == 2, "notices.py no longer defines classify and outcome_of"
    namespace = {"json": json}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), path, "exec"), namespace)
    return namespace["classify"], namespace["outcome_of"]


CLASSIFY, OUTCOME_OF = answer_classifiers()

SERVE_PORTS = [20001, 20002]
PLATFORM_PORT = 20003
SIMULATOR_PORT = 20004
LINK_PORTS = [15432, 15433]
# What campaign.py gives check_leaks: the driver's words and the campaign's link ports.
LEAK_PATTERNS = ["connection to server", "/pg/sock-"] + ["port %d " % p for p in LINK_PORTS]
# The campaign's two subscriptions (World.write_configs); the receiver's records here carry
# their verdict on the signature already, so no secret is needed.
SUBS = {
    "all": {"path": "/hooks/all", "secrets": [], "timeout": 2, "batch_max": 50},
    "payments": {"path": "/hooks/payments", "secrets": [], "timeout": 2, "batch_max": 7,
                 "event_types": [PAY, REFUND], "accounts": ["acct-1", "acct-3"]},
}
AT = 1_800_000_000   # a step's time of the fact (the workload's st["at"])

CALLBACK = {"generic": "/v1/callbacks/generic", "wechat_v2": "/v1/callbacks/wechat/v2",
            "wechat_v3": "/v1/callbacks/wechat/v3", "alipay": "/v1/callbacks/alipay"}
V2_SUCCESS = (b"<xml><return_code><![CDATA[SUCCESS]]></return_code>"
              b"<return_msg><![CDATA[OK]]></return_msg></xml>")


def path_of(story, op):
    """The path workload.build sends a step to."""
    channel = story["channel"]
    if op in ("create", "create_conflict"):
        return "/v1/orders"
    if op in ("pay_conflict", "refund_conflict"):
        return CALLBACK["generic"]
    if op == "close":
        return CALLBACK["alipay" if channel == "alipay" else "generic"]
    if op == "ignored":
        return CALLBACK[channel if channel in ("wechat_v3", "alipay") else "wechat_v2"]
    return CALLBACK[channel]


# --- answers, as the serves give them (api/openapi.yaml) -----------------------------------------

def ok(path, outcome="appended", seq=None):
    """The channel's success answer."""
    if path == "/v1/orders":
        return (201 if outcome == "appended" else 200), json.dumps({"seq": seq}).encode()
    if path.endswith("/generic"):
        return 200, json.dumps({"code": "SUCCESS", "outcome": outcome, "seq": seq}).encode()
    if path.endswith("/wechat/v2"):
        return 200, V2_SUCCESS
    if path.endswith("/wechat/v3"):
        return 204, b""
    return 200, b"success"


def refusal(status, outcome, seq=None):
    body = {"code": "FAIL", "outcome": outcome, "message": "refused: " + outcome}
    if seq is not None:
        body["seq"] = seq
    return status, json.dumps(body).encode()


NO_ANSWER = (None, b"TimeoutError: timed out")      # what workload.send returns then
UNAVAILABLE = refusal(503, "unavailable")


class Sent:
    """A request as the scripted transport sees it: only its path matters."""

    def __init__(self, path):
        self.path = path
        self.headers = {}
        self.body = b""


class Tokens:
    """The signer's tokens, all the workload reads of it outside the requests it builds."""
    auditor_token = "auditor-token"


class NoBackOff:
    """The workload's retry back-off (Workload.reactive) drawn as nothing: it paces a platform's
    retries, it does not order anything, and the test waits for nothing."""

    def uniform(self, low, high):
        return 0.0


def api_event(e):
    """An event as GET /v1/events and a subscription's batch carry it."""
    out = dict(e)
    out.update(occurred_at="2027-01-15T08:00:00Z", recorded_at="2027-01-15T08:00:01.5Z",
               receipt_id=e["seq"], data={})
    return out


def delivery(name, events, status=200, at=None):
    """The receiver's record of one POST of a batch (receiver.Receiver._handle)."""
    d = receiver.Delivery()
    d.at = at if at is not None else AT + events[0]["seq"]
    d.name = name
    d.events = [api_event(e) for e in events]
    d.seqs = [e["seq"] for e in events]
    d.webhook_id = "%s:%d-%d" % (name, d.seqs[0], d.seqs[-1])
    d.timestamp = str(int(d.at))
    d.status = status
    d.signature_ok = True
    d.body_len = len(json.dumps(d.events))
    return d


def projections(events):
    """The orders and balances tables as World.table reads them, folded from the ledger's
    events as projections/order_fold.cpp folds them (the first event of a key: the ledger's
    UNIQUE index lets only one exist)."""
    per_order = collections.defaultdict(dict)
    for e in events:
        per_order[e["out_trade_no"]].setdefault(e["event_type"], e)
    orders = []
    balances = collections.defaultdict(int)
    for otn, by_type in sorted(per_order.items()):
        created = by_type.get(ORDER)
        if created is None:
            continue
        pay, close, refund = by_type.get(PAY), by_type.get(CLOSE), by_type.get(REFUND)
        status = ("REFUNDED" if refund and pay else "PAID" if pay else
                  "CLOSED" if close else "WAIT_PAY")
        anomalies = []
        if pay and close:
            anomalies.append("paid_after_close")
        if refund and not pay:
            anomalies.append("refund_without_payment")
        paid = pay["amount"] if pay else 0
        refunded = refund["amount"] if refund else 0
        orders.append((otn, created["account_id"], created["currency"], created["amount"],
                       status, pay["transaction_id"] if pay else "", paid, refunded,
                       ",".join(anomalies)))
        balances[(created["account_id"], created["currency"])] += (paid - refunded
                                                                   if paid else 0)
    return orders, [(a, c, b) for (a, c), b in sorted(balances.items())]


class World:
    """One synthetic campaign: what the workload sent and was answered (recorded by the
    workload's own code), the ledger's events, and the views of them that the checker compares
    with the record. Each view is derived from the events when judged, unless a test passes its
    own."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.history = workload.History(os.path.join(self.tmp.name, "history.jsonl"))
        self.load = workload.Workload(7, 1, None, SERVE_PORTS, PLATFORM_PORT, self.history, 0,
                                      classify=CLASSIFY, outcome_of=OUTCOME_OF,
                                      simulator_port=SIMULATOR_PORT)
        self.load.reactive = NoBackOff()
        self.load.signer = Tokens()
        self.queried = []       # the simulator's record (World.simulator_record)
        self.events = []
        self.next_seq = 1
        self.script = []
        self.payments_batches = None

    def close(self):
        self.history.close()
        self.tmp.cleanup()

    # --- the workload's side ------------------------------------------------------------------
    def story(self, otn, channel, account, amount, currency="CNY", refund_amount=None):
        s = {"otn": otn, "account": account, "amount": amount, "currency": currency,
             "channel": channel, "txid": "TX" + otn, "refund_id": "RF" + otn,
             "refund_amount": refund_amount or amount // 2, "steps": []}
        self.load.stories[otn] = s
        return s

    def step(self, story, op, platform=False, lost=False, hostile=None, path=None, asks=None,
             query=None):
        """Adds a step to the story (as workload.make_story does); its index. A hostile step
        names the path and the event that workload.build_hostile would give it."""
        st = {"op": op, "copies": 1, "burst": False, "platform": platform, "lost": lost,
              "serve": 0, "pause": 0.0, "at": AT}
        if query:
            st["query"] = query
        if hostile:
            st.update(kind=hostile, noise=1, test_path=path, test_asks=asks)
        story["steps"].append(st)
        return len(story["steps"]) - 1

    def _transport(self, port, req, timeout):
        assert self.script, "the workload sent more requests than the test scripted"
        want_port, answer = self.script.pop(0)
        assert port in want_port, "sent to port %d, scripted for %s" % (port, want_port)
        return answer

    def _build(self, signer, story, st, now):
        return Sent(path_of(story, st["op"]))

    def _build_hostile(self, signer, story, st, now):
        return Sent(st["test_path"]), st["test_asks"]

    def _run(self, answers, ports, call):
        self.script = [(ports, a) for a in answers]
        with mock.patch.object(workload, "send", self._transport), \
                mock.patch.object(workload, "build", self._build), \
                mock.patch.object(workload, "build_hostile", self._build_hostile):
            call()
        assert not self.script, "the workload stopped before the scripted answers: %s" % (
            self.script,)

    def send(self, story, k, *answers, copy=0, settle=False):
        """Copy `copy` of the story's step k, sent as Workload.run_step sends it (serve
        (st["serve"] + copy) % 2, the other serve on each retry), the serves answering
        `answers` in turn: the workload retries after each answer that is neither ok nor failed,
        and every script must end where the workload stops."""
        serve = (story["steps"][k]["serve"] + copy) % 2
        self._run(answers, SERVE_PORTS, lambda: self.load._deliver(
            -1 if settle else 0, story, k, copy, serve, settle))

    def settle_on_platform(self, story, k):
        """The platform's own ledger acknowledges the step (Workload._to_platform)."""
        st = story["steps"][k]
        self._run([ok(path_of(story, st["op"]), seq=1)], [PLATFORM_PORT],
                  lambda: self.load._to_platform(story, st))

    def pay_on_simulator(self, story, k):
        """The story's payment step run by the workload (Workload.run_step): the simulator
        takes the payment and keeps it in its record; no notice is sent (a late one is held)."""
        self._run([(200, json.dumps({"out_trade_no": story["otn"], "transaction_id":
                                     story["txid"], "outcome": "appended"}).encode())],
                  [SIMULATOR_PORT], lambda: self.load.run_step(0, story, k))
        self.queried.append(records.QueriedPayment(
            out_trade_no=story["otn"],
            fingerprint=(story["txid"], story["amount"], story["currency"])))

    def release_late(self, *answers, status="PAID"):
        """Workload.release_late with the serves showing the held notices' orders as `status`;
        a notice released is sent, the serves answering `answers`."""
        with mock.patch.object(workload, "order_status", lambda port, otn, token: status):
            self._run(answers, SERVE_PORTS, self.load.release_late)

    @property
    def entries(self):
        return self.history.entries

    @property
    def platform(self):
        return self.history.platform

    def record(self, otn, op, copy=0):
        """The workload's records of a step's copy, every attempt."""
        return [h for h in self.entries if h.out_trade_no == otn and h.op == op
                and h.copy == copy]

    # --- the ledger's side --------------------------------------------------------------------
    def append(self, story, event_type, source, **changed):
        """Appends the event the story asks for, as World.table reads it; `changed` alters
        fields (a fingerprint nobody asked for)."""
        s = story
        e = {"seq": self.next_seq, "out_trade_no": s["otn"], "event_type": event_type,
             "source": source, "account_id": s["account"], "amount": None, "currency": None,
             "transaction_id": None}
        if event_type == ORDER:
            e.update(amount=s["amount"], currency=s["currency"])
        elif event_type == PAY:
            e.update(amount=s["amount"], currency=s["currency"], transaction_id=s["txid"])
        elif event_type == REFUND:
            e.update(amount=s["refund_amount"], currency=s["currency"],
                     transaction_id=s["refund_id"])
        e.update(changed)
        self.next_seq += 1
        self.events.append(e)
        return e["seq"]

    def event(self, otn, event_type):
        [e] = [e for e in self.events if (e["out_trade_no"], e["event_type"]) == (otn,
                                                                                   event_type)]
        return e

    def drop(self, otn, event_type):
        self.events.remove(self.event(otn, event_type))

    # --- the views ----------------------------------------------------------------------------
    def feed(self):
        return [api_event(e) for e in self.events]

    def pages(self):
        """The follower's pages (World.follow): three events a page, the serves in turn."""
        pages, after = [], 0
        for i in range(0, len(self.events), 3):
            events = [api_event(e) for e in self.events[i:i + 3]]
            pages.append({"after": after, "serve": "serve%d" % (i // 3 % 2),
                          "from": "primary" if i % 2 == 0 else "replica; lag=0.2",
                          "at": float(AT + i), "events": events})
            after = events[-1]["seq"]
        return pages

    def deliveries(self):
        """The receiver's records. `all` in batches of four, the first answered 500 before its
        200 and the second 429 before its 200; `payments` as listed in payments_batches (by
        default one batch per two matching events), its second batch answered only `slow`: 200
        after the sender's timeout, a sender stopped through that timeout reading it and moving
        on (tests/campaign/README.md)."""
        out = []
        events = self.events
        for i in range(0, len(events), 4):
            batch = events[i:i + 4]
            if i == 0:
                out.append(delivery("all", batch, 500))
            if i == 4:
                out.append(delivery("all", batch, 429))
            out.append(delivery("all", batch))
        matching = [e for e in events if checker.matches(SUBS["payments"], e)]
        batches = self.payments_batches or [matching[i:i + 2]
                                            for i in range(0, len(matching), 2)]
        for n, batch in enumerate(batches):
            out.append(delivery("payments", batch, "slow" if n == 1 else 200))
        return out

    def judge(self, feed=None, pages=None, deliveries=None, orders=None, balances=None,
              lives=None, tolerate=()):
        """The checker's functions as campaign.py's run calls them, on this world."""
        events = self.events
        tables = projections(events)
        orders = tables[0] if orders is None else orders
        balances = tables[1] if balances is None else balances
        report = checker.Report(tolerate)
        checker.check_answers(report, self.entries, events)
        checker.check_window(report, self.entries, lives or [[[0.0, None, 0]], [[0.0, None, 0]]])
        checker.check_leaks(report, self.entries, LEAK_PATTERNS)
        checker.check_ledger(report, self.entries, self.platform, events, orders, balances,
                             workload.ACCOUNTS, self.queried)
        checker.check_feed(report, self.feed() if feed is None else feed, events)
        checker.check_follower(report, self.pages() if pages is None else pages, events)
        checker.check_subscriptions(report, SUBS,
                                    self.deliveries() if deliveries is None else deliveries,
                                    events)
        checker.check_settled(report, self.platform, events)
        checker.check_queried(report, self.platform, self.queried, events, orders)
        return report


def clean_world():
    """A consistent campaign: duplicates sent one after another, a registration and a payment
    answered only on a retry, a payment lost for good on its way from the platform and found by
    the statement, refusals of a conflicting twin, a conflicting and a mismatched payment, a
    payment before its order, a notice that records nothing, hostile requests refused, a payment
    that never got an answer although it took effect, a payment only the platform's record
    holds found by the query, another found by the query before its late notice (a duplicate);
    the ledger, the feed, the follower and the receiver agree with all of it."""
    w = World()
    gen = CALLBACK["generic"]

    # A: generic; the registration and the refund sent twice, the payment twice, then a
    # conflicting payment (409 naming the payment).
    a = w.story("K7-0-0", "generic", "acct-1", 12800, refund_amount=5000)
    k = w.step(a, "create")
    seq = w.append(a, ORDER, "api")
    w.send(a, k, ok("/v1/orders", "appended", seq))
    w.send(a, k, ok("/v1/orders", "duplicate", seq), copy=1)
    k = w.step(a, "pay")
    pay_seq = w.append(a, PAY, "generic")
    w.send(a, k, ok(gen, "appended", pay_seq))
    w.send(a, k, ok(gen, "duplicate", pay_seq), copy=1)
    k = w.step(a, "pay_conflict")
    w.send(a, k, refusal(409, "conflict", pay_seq))
    k = w.step(a, "refund")
    seq = w.append(a, REFUND, "generic")
    w.send(a, k, ok(gen, "appended", seq))
    w.send(a, k, ok(gen, "duplicate", seq), copy=1)

    # B: WeChat Pay v2 through the platform; the registration answered 503 first, the payment
    # not at all first; each retry on the other serve acknowledged.
    b = w.story("K7-0-1", "wechat_v2", "acct-3", 9900)
    k = w.step(b, "create", platform=True)
    w.settle_on_platform(b, k)
    seq = w.append(b, ORDER, "api")
    w.send(b, k, UNAVAILABLE, ok("/v1/orders", "appended", seq))
    k = w.step(b, "pay", platform=True)
    w.settle_on_platform(b, k)
    w.append(b, PAY, "wechat_v2")
    w.send(b, k, NO_ANSWER, ok(CALLBACK["wechat_v2"]))

    # C: Alipay; the platform settled the payment, its callback never reached the serves, the
    # final reconcile appended it from the statement.
    c = w.story("K7-0-2", "alipay", "acct-1", 30000)
    k = w.step(c, "create", platform=True)
    w.settle_on_platform(c, k)
    seq = w.append(c, ORDER, "api")
    w.send(c, k, ok("/v1/orders", "appended", seq))
    k = w.step(c, "pay", platform=True, lost=True)
    w.settle_on_platform(c, k)
    w.append(c, PAY, "alipay_bill")

    # D: generic in USD, closed unpaid; its conflicting twin refused, naming the order.
    d = w.story("K7-0-3", "generic", "acct-2", 500, currency="USD")
    k = w.step(d, "create")
    order_seq = w.append(d, ORDER, "api")
    w.send(d, k, ok("/v1/orders", "appended", order_seq))
    k = w.step(d, "create_conflict")
    w.send(d, k, refusal(409, "conflict", order_seq))
    k = w.step(d, "close")
    seq = w.append(d, CLOSE, "generic")
    w.send(d, k, ok(gen, "appended", seq))

    # E: WeChat Pay v3; the payment first sent before its order (unknown_order), a notice that
    # records nothing, two hostile requests refused.
    e = w.story("K7-0-4", "wechat_v3", "acct-3", 777)
    k = w.step(e, "early_pay")
    w.send(e, k, refusal(404, "unknown_order"))
    k = w.step(e, "create", platform=True)
    w.settle_on_platform(e, k)
    seq = w.append(e, ORDER, "api")
    w.send(e, k, ok("/v1/orders", "appended", seq))
    k = w.step(e, "pay", platform=True)
    w.settle_on_platform(e, k)
    w.append(e, PAY, "wechat_v3")
    w.send(e, k, ok(CALLBACK["wechat_v3"]))
    k = w.step(e, "ignored")
    w.send(e, k, ok(CALLBACK["wechat_v3"]))
    k = w.step(e, "hostile", hostile="bad_secret", path=gen,
               asks=(PAY, (e["txid"], e["amount"] + 7, e["currency"])))
    w.send(e, k, refusal(401, "bad_signature"))
    k = w.step(e, "hostile", hostile="garbage", path="/v1/orders", asks=None)
    w.send(e, k, refusal(400, "malformed"))

    # F: generic, paid once: the subject of the lost and doubled cases.
    f = w.story("K7-0-5", "generic", "acct-4", 4200)
    k = w.step(f, "create")
    seq = w.append(f, ORDER, "api")
    w.send(f, k, ok("/v1/orders", "appended", seq))
    k = w.step(f, "pay")
    seq = w.append(f, PAY, "generic")
    w.send(f, k, ok(gen, "appended", seq))

    # G: generic; a payment of the wrong amount refused as a mismatch.
    g = w.story("K7-0-6", "generic", "acct-1", 100)
    k = w.step(g, "create")
    seq = w.append(g, ORDER, "api")
    w.send(g, k, ok("/v1/orders", "appended", seq))
    k = w.step(g, "pay_mismatch")
    w.send(g, k, refusal(422, "mismatch"))

    # U: generic; the payment never answered (no answer, 503, no answer, 503) although it took
    # effect.
    u = w.story("K7-0-7", "generic", "acct-5", 2500)
    k = w.step(u, "create")
    seq = w.append(u, ORDER, "api")
    w.send(u, k, ok("/v1/orders", "appended", seq))
    k = w.step(u, "pay")
    w.append(u, PAY, "generic")
    w.send(u, k, NO_ANSWER, UNAVAILABLE, NO_ANSWER, UNAVAILABLE)

    # Q: WeChat Pay v3, paid on the platform alone and never notified; the query found it.
    q = w.story("K7-0-8", "wechat_v3", "acct-2", 6600)
    k = w.step(q, "create", platform=True)
    w.settle_on_platform(q, k)
    seq = w.append(q, ORDER, "api")
    w.send(q, k, ok("/v1/orders", "appended", seq))
    k = w.step(q, "pay", query="unnotified")
    w.pay_on_simulator(q, k)
    w.append(q, PAY, "wechat_v3_query")

    # L: Alipay, paid on the platform alone; its notice held until the order showed PAID (the
    # query's payment), then sent: a duplicate, acknowledged.
    n = w.story("K7-0-9", "alipay", "acct-5", 1200)
    k = w.step(n, "create", platform=True)
    w.settle_on_platform(n, k)
    seq = w.append(n, ORDER, "api")
    w.send(n, k, ok("/v1/orders", "appended", seq))
    k = w.step(n, "pay", query="late")
    w.pay_on_simulator(n, k)
    w.release_late(status="WAIT_PAY")       # not found yet: held, nothing sent
    w.append(n, PAY, "alipay_query")
    w.release_late(ok(CALLBACK["alipay"]))
    return w


class CheckerTest(unittest.TestCase):
    def setUp(self):
        self.w = clean_world()
        self.addCleanup(self.w.close)

    def assertVerdict(self, report, lost=0, doubled=0, skipped=0, categories=(), unfound=0):
        listing = "\n".join("  [%s] %s" % p for p in report.problems)
        self.assertEqual(
            (report.lost, report.doubled, report.skipped, report.unfound,
             sorted({category for category, _ in report.problems})),
            (lost, doubled, skipped, unfound, sorted(categories)),
            "lost, doubled, skipped, unfound, categories; the problems:\n" + listing)

    def assertProblem(self, report, category, fragment):
        texts = [text for c, text in report.problems if c == category]
        self.assertTrue(any(fragment in text for text in texts),
                        "no [%s] problem with %r among %s" % (category, fragment, texts))

    # --- the baseline ------------------------------------------------------------------------
    def test_a_consistent_history_passes(self):
        """The property that makes every other test mean something: a history in which every
        kind of request and answer occurs and the ledger agrees with it draws no problem."""
        w = self.w
        classes = collections.Counter(h.result for h in w.entries)
        self.assertEqual(set(classes), {"ok", "failed", "unknown"})
        self.assertIn("slow", [d.status for d in w.deliveries()])
        self.assertVerdict(w.judge())

    # --- lost ------------------------------------------------------------------------------------
    def test_an_acknowledged_payment_missing_from_the_ledger_is_lost(self):
        self.w.drop("K7-0-5", PAY)
        report = self.w.judge()
        self.assertVerdict(report, lost=1, categories=["lost"])
        self.assertProblem(report, "lost", "acknowledged, no event: ")
        self.assertProblem(report, "lost", "out_trade_no=K7-0-5 op=pay")

    def test_every_acknowledged_copy_of_a_missing_event_counts_as_lost(self):
        """The refund was acknowledged twice (two copies): two acknowledged requests lost."""
        self.w.drop("K7-0-0", REFUND)
        self.assertVerdict(self.w.judge(), lost=2, categories=["lost"])

    def test_an_acknowledged_payment_whose_event_differs_is_lost_and_the_event_doubled(self):
        """The ledger holds the key with an amount nobody sent: the acknowledged payment is
        lost, the event is one nobody asked for, and the projections differ from the fold of
        what the client sent."""
        self.w.event("K7-0-5", PAY)["amount"] = 4201
        report = self.w.judge()
        self.assertVerdict(report, lost=1, doubled=1,
                           categories=["lost", "doubled", "projection", "balance"])
        self.assertProblem(report, "lost", "acknowledged, but the event differs")

    def test_a_payment_the_platform_settled_missing_after_the_reconcile_is_lost(self):
        """The callback was lost for good and the statement's event is missing too."""
        self.w.drop("K7-0-2", PAY)
        report = self.w.judge()
        self.assertVerdict(report, lost=1, categories=["reconcile"])
        self.assertProblem(report, "reconcile", "the platform settled K7-0-2 PAYMENT_SUCCEEDED")

    # --- doubled ---------------------------------------------------------------------------------
    def test_an_event_nobody_asked_for_is_doubled(self):
        """A payment of the closed order D that no request carried; the table folds it, the
        client's record does not."""
        d = self.w.load.stories["K7-0-3"]
        self.w.append(d, PAY, "generic")
        report = self.w.judge()
        self.assertVerdict(report, doubled=1, categories=["doubled", "projection", "balance"])
        self.assertProblem(report, "doubled", "no request that may have appended it")

    def test_an_event_only_a_refused_request_asked_for_is_doubled(self):
        """G's mismatched payment was refused (422), yet the ledger holds it."""
        g = self.w.load.stories["K7-0-6"]
        self.w.append(g, PAY, "generic", amount=g["amount"] + 1)
        report = self.w.judge()
        self.assertVerdict(report, doubled=1, categories=["doubled", "projection", "balance"])
        self.assertProblem(report, "doubled", "refused ones: ")

    def test_an_event_only_a_hostile_request_asked_for_is_doubled(self):
        """A stale payment for G (hostile: its signed time 1000 s old) got no answer, yet the
        ledger holds it: a hostile request never explains an event, answered or not."""
        g = self.w.load.stories["K7-0-6"]
        k = self.w.step(g, "hostile", hostile="stale", path=CALLBACK["generic"],
                        asks=(PAY, ("S1", g["amount"], g["currency"])))
        self.w.send(g, k, NO_ANSWER)
        self.w.append(g, PAY, "generic", transaction_id="S1")
        report = self.w.judge()
        self.assertVerdict(report, doubled=1, categories=["doubled", "projection", "balance"])
        self.assertProblem(report, "doubled", "no request that may have appended it")

    def test_two_events_for_one_key_are_doubled(self):
        """F's payment twice, identical but for its seq (what the ledger's UNIQUE index rules
        out); the projection keeps one."""
        f = self.w.load.stories["K7-0-5"]
        self.w.append(f, PAY, "generic")
        report = self.w.judge()
        self.assertVerdict(report, doubled=1, categories=["doubled"])
        self.assertProblem(report, "doubled", "2 events for ('K7-0-5', 'PAYMENT_SUCCEEDED')")

    def test_a_statement_event_without_the_platforms_record_is_doubled(self):
        """An event with source alipay_bill needs the platform's own record of the payment."""
        w = self.w
        w.platform[:] = [h for h in w.platform if (h.out_trade_no, h.op) != ("K7-0-2", "pay")]
        report = w.judge()
        self.assertVerdict(report, doubled=1, categories=["doubled", "projection", "balance"])
        self.assertProblem(report, "doubled", "source alipay_bill")

    # --- unfound: what only asking the platform finds -------------------------------------------
    def test_payments_only_the_platform_holds_found_by_the_query_pass(self):
        """Q was never notified and L only after the query: the query's payments, justified by
        the platform's record, and L's late notice acknowledged as the duplicate it is."""
        w = self.w
        self.assertEqual([h.op for h in w.entries if h.out_trade_no == "K7-0-8"], ["create"])
        [late] = w.record("K7-0-9", "pay")
        self.assertEqual((late.query, late.result), ("late", "ok"))
        self.assertEqual([h.query for h in w.platform if isinstance(h, records.SimulatorPayment)],
                         ["unnotified", "late"])
        self.assertEqual(w.event("K7-0-8", PAY)["source"], "wechat_v3_query")
        self.assertVerdict(w.judge())

    def test_a_payment_only_the_platform_holds_left_unpaid_is_unfound(self):
        """The query never found Q's payment: nothing else could have, and the order stays
        WAIT_PAY in the ledger and in the fold alike. Only this rule sees it."""
        self.w.drop("K7-0-8", PAY)
        report = self.w.judge()
        self.assertVerdict(report, unfound=1, categories=["unfound"])
        self.assertProblem(report, "unfound", "the platform holds K7-0-8 paid")
        self.assertProblem(report, "unfound", "no payment")

    def test_a_query_that_records_another_payment_is_unfound_and_doubled(self):
        """The query appended Q's payment with an amount the platform does not hold."""
        self.w.event("K7-0-8", PAY)["amount"] = 6601
        report = self.w.judge()
        self.assertVerdict(report, unfound=1, doubled=1,
                           categories=["unfound", "doubled", "projection", "balance"])
        self.assertProblem(report, "doubled", "source wechat_v3_query")

    def test_an_order_not_paid_in_the_table_is_unfound(self):
        """The payment event is there, the orders table still shows Q unpaid."""
        w = self.w
        orders = [o if o[0] != "K7-0-8" else o[:4] + ("WAIT_PAY", "", 0) + o[7:]
                  for o in projections(w.events)[0]]
        report = w.judge(orders=orders)
        self.assertVerdict(report, unfound=1, categories=["unfound", "projection"])
        self.assertProblem(report, "unfound", "('WAIT_PAY', '')")

    def test_a_late_notice_that_appended_a_second_payment_is_doubled_and_unfound(self):
        """L's late notice was not taken as the duplicate it is: two payments of one order."""
        self.w.append(self.w.load.stories["K7-0-9"], PAY, "alipay")
        report = self.w.judge()
        self.assertVerdict(report, unfound=1, doubled=1, categories=["unfound", "doubled"])

    def test_a_query_payment_the_platform_never_took_is_doubled(self):
        """A payment for the closed order D from a query: no platform record holds it."""
        self.w.append(self.w.load.stories["K7-0-3"], PAY, "wechat_v2_query")
        report = self.w.judge()
        self.assertVerdict(report, doubled=1, categories=["doubled", "projection", "balance"])
        self.assertProblem(report, "doubled", "source wechat_v2_query")

    def test_a_payment_the_simulator_acknowledged_but_does_not_hold_is_reported(self):
        """The simulator answered 200 for Q, its record lacks it: the campaign's own fault (Q's
        payment, then, nobody can explain)."""
        w = self.w
        w.queried[:] = [r for r in w.queried if r.out_trade_no != "K7-0-8"]
        report = w.judge()
        self.assertProblem(report, "campaign", "the simulator acknowledged a payment its "
                           "record lacks: ")
        self.assertVerdict(report, doubled=1,
                           categories=["campaign", "doubled", "projection", "balance"])

    def test_a_payment_the_simulator_refused_is_reported(self):
        """The simulator refused the payment the workload made there (a 400): the rule would
        hold of nothing, so the run fails as the campaign's own fault."""
        w = self.w
        q = w.story("K7-0-10", "wechat_v2", "acct-4", 300)
        k = w.step(q, "pay", query="unnotified")
        w._run([(400, b'{"error":"amount: must be an integer"}')], [SIMULATOR_PORT],
               lambda: w.load.run_step(0, q, k))
        report = w.judge()
        self.assertVerdict(report, categories=["campaign"])
        self.assertProblem(report, "campaign", "the simulator did not take a payment: ")

    # --- unknown ---------------------------------------------------------------------------------
    def test_an_unknown_payment_that_took_effect_is_neither_lost_nor_doubled(self):
        """U's payment never got an answer and is in the ledger (the clean history)."""
        self.assertTrue(all(h.result == "unknown" for h in self.w.record("K7-0-7", "pay")))
        self.w.event("K7-0-7", PAY)
        self.assertVerdict(self.w.judge())

    def test_an_unknown_payment_that_did_not_take_effect_is_neither_lost_nor_doubled(self):
        self.w.drop("K7-0-7", PAY)
        self.assertVerdict(self.w.judge())

    def test_an_unknown_answer_retried_by_the_settle_phase_and_acknowledged_is_held_to_it(self):
        """Once the settle phase's resend is acknowledged, the event must be there."""
        u = self.w.load.stories["K7-0-7"]
        self.w.send(u, 1, ok(CALLBACK["generic"], "duplicate", self.w.event("K7-0-7", PAY)
                              ["seq"]), settle=True)
        self.assertVerdict(self.w.judge())
        self.w.drop("K7-0-7", PAY)
        self.assertVerdict(self.w.judge(), lost=1, categories=["lost"])

    # --- skipped: the feed -----------------------------------------------------------------------
    def test_a_feed_that_skips_an_event_counts_it_skipped(self):
        feed = [e for e in self.w.feed() if e["seq"] != self.w.event("K7-0-3", CLOSE)["seq"]]
        report = self.w.judge(feed=feed)
        self.assertVerdict(report, skipped=1, categories=["feed"])
        self.assertProblem(report, "feed", "the feed lacks seq")

    def test_a_feed_that_shows_an_event_the_ledger_lacks_counts_it_skipped(self):
        phantom = dict(self.w.feed()[-1], seq=self.w.next_seq, out_trade_no="K7-9-9")
        report = self.w.judge(feed=self.w.feed() + [phantom])
        self.assertVerdict(report, skipped=1, categories=["feed"])
        self.assertProblem(report, "feed", "that the table lacks")

    def test_a_feed_out_of_order_or_unlike_the_table_counts_skipped(self):
        feed = self.w.feed()
        feed[3], feed[4] = feed[4], feed[3]
        self.assertVerdict(self.w.judge(feed=feed), skipped=1, categories=["feed"])
        feed = self.w.feed()
        feed[5]["amount"] += 1
        report = self.w.judge(feed=feed)
        self.assertVerdict(report, skipped=1, categories=["feed"])
        self.assertProblem(report, "feed", "differs from the table")

    # --- skipped: the follower -------------------------------------------------------------------
    def test_a_follower_that_skips_a_seq_counts_it_skipped(self):
        pages = self.w.pages()
        del pages[1]["events"][1]
        report = self.w.judge(pages=pages)
        self.assertVerdict(report, skipped=1, categories=["follower"])
        self.assertProblem(report, "follower", "the follower never saw seq")

    def test_a_follower_shown_an_event_a_failover_took_back_counts_it_skipped(self):
        """The follower read a seq as one event and the ledger has another one there (the seq
        given again after a failover, tests/campaign/README.md#what-it-found)."""
        pages = self.w.pages()
        pages[2]["events"][0].update(out_trade_no="K7-9-9", amount=1)
        report = self.w.judge(pages=pages)
        self.assertVerdict(report, skipped=1, categories=["follower"])
        self.assertProblem(report, "follower", "but the ledger has ('")

    def test_a_follower_shown_an_event_beyond_the_ledger_counts_it_skipped(self):
        pages = self.w.pages()
        phantom = dict(pages[-1]["events"][-1], seq=self.w.next_seq, out_trade_no="K7-9-9")
        pages.append({"after": pages[-1]["events"][-1]["seq"], "serve": "serve0",
                      "from": "primary", "at": float(AT + 99), "events": [phantom]})
        report = self.w.judge(pages=pages)
        self.assertVerdict(report, skipped=1, categories=["follower"])
        self.assertProblem(report, "follower", "no such seq")

    def test_a_follower_page_going_back_counts_skipped(self):
        pages = self.w.pages()
        pages[2]["events"].insert(0, pages[1]["events"][-1])
        report = self.w.judge(pages=pages)
        self.assertVerdict(report, skipped=1, categories=["follower"])
        self.assertProblem(report, "follower", "returned seq")

    # --- skipped: the subscriptions --------------------------------------------------------------
    def payments_matching(self):
        return [e for e in self.w.events if checker.matches(SUBS["payments"], e)]

    def test_a_subscription_that_skips_an_event_between_batches_counts_it_skipped(self):
        m = self.payments_matching()
        self.assertEqual(len(m), 5)
        self.w.payments_batches = [m[0:2], m[3:5]]      # m[2] never sent
        report = self.w.judge()
        self.assertVerdict(report, skipped=1, categories=["subscription"])
        self.assertProblem(report, "subscription", "1 earlier matching events were never "
                           "acknowledged (first %d)" % m[2]["seq"])

    def test_a_delivery_the_receiver_refused_is_not_received(self):
        """The sender moved on after a 500: the events of that batch were never received."""
        deliveries = [d for d in self.w.deliveries()
                      if not (d.name == "all" and d.status == 200 and d.seqs[0] == 1)]
        report = self.w.judge(deliveries=deliveries)
        self.assertVerdict(report, skipped=4, categories=["subscription"])

    def test_a_late_200_counts_as_received(self):
        """The `slow` batch of the clean history is the only delivery of its events; answered
        500 instead, they are never received."""
        deliveries = self.w.deliveries()
        [slow] = [d for d in deliveries if d.status == "slow"]
        slow.status = 500
        report = self.w.judge(deliveries=deliveries)
        self.assertVerdict(report, skipped=len(slow.seqs), categories=["subscription"])

    def test_a_subscription_that_never_delivers_its_last_events_counts_them_skipped(self):
        deliveries = self.w.deliveries()
        last = [d for d in deliveries if d.name == "all"][-1]
        deliveries.remove(last)
        report = self.w.judge(deliveries=deliveries)
        self.assertVerdict(report, skipped=len(last.seqs), categories=["subscription"])
        self.assertProblem(report, "subscription", "matching events never delivered")

    def test_a_batch_that_skips_an_event_inside_it_is_reported(self):
        """A batch whose seqs are not consecutive among the matching events. (The skipped
        event counts once as such and once more as never delivered.)"""
        m = self.payments_matching()
        self.w.payments_batches = [m[0:2], m[2:3], [m[3]] + [m[4]]]
        self.assertVerdict(self.w.judge())
        self.w.payments_batches = [m[0:2], [m[2], m[4]]]
        report = self.w.judge()
        self.assertProblem(report, "subscription", "is not consecutive among the matching")
        self.assertEqual((report.lost, report.doubled), (0, 0))
        self.assertGreaterEqual(report.skipped, 1)

    def test_a_delivery_of_an_event_the_ledger_lacks_counts_skipped(self):
        deliveries = self.w.deliveries()
        phantom = dict(self.w.events[-1], seq=self.w.next_seq, out_trade_no="K7-9-9")
        deliveries.append(delivery("all", [phantom]))
        report = self.w.judge(deliveries=deliveries)
        self.assertVerdict(report, skipped=1, categories=["subscription"])
        self.assertProblem(report, "subscription", "which the ledger does not have")

    def test_the_receivers_own_findings_and_a_filter_breach_are_reported(self):
        """A signature that does not verify (the receiver's own check) and an order sent to the
        payments subscription fail the run without counting an event."""
        deliveries = self.w.deliveries()
        deliveries[0].problems.append("signature does not verify: ['v1,AAAA']")
        deliveries.append(delivery("payments", [self.w.event("K7-0-0", ORDER)]))
        report = self.w.judge(deliveries=deliveries)
        self.assertVerdict(report, categories=["subscription"])
        self.assertProblem(report, "subscription", "signature does not verify")
        self.assertProblem(report, "subscription", "does not match the filters")

    # --- hostile, projections, answers, leaks, the signature window -------------------------------
    def test_a_hostile_request_acknowledged_is_reported(self):
        e = self.w.load.stories["K7-0-4"]
        k = self.w.step(e, "hostile", hostile="float_amount", path=CALLBACK["generic"],
                        asks=(PAY, ("F1", e["amount"], e["currency"])))
        self.w.send(e, k, ok(CALLBACK["generic"], "appended", 99))
        report = self.w.judge()
        self.assertVerdict(report, categories=["hostile"])
        self.assertProblem(report, "hostile", "hostile=float_amount")

    def test_projections_must_equal_the_fold_of_the_clients_record(self):
        orders, balances = projections(self.w.events)
        wrong = [o[:4] + ("PAID",) + o[5:] if o[0] == "K7-0-3" else o for o in orders]
        report = self.w.judge(orders=wrong)
        self.assertVerdict(report, categories=["projection"])
        self.assertProblem(report, "projection", "order K7-0-3")
        self.assertVerdict(self.w.judge(orders=orders[1:]), categories=["projection"])
        wrong = [(a, c, b + 1 if a == "acct-4" else b) for a, c, b in balances]
        report = self.w.judge(balances=wrong)
        self.assertVerdict(report, categories=["balance"])
        self.assertProblem(report, "balance", "balance acct-4:CNY")

    def test_a_generic_answer_naming_another_seq_is_reported(self):
        f = self.w.load.stories["K7-0-5"]
        self.w.send(f, 1, ok(CALLBACK["generic"], "duplicate", 1), copy=1)
        report = self.w.judge()
        self.assertVerdict(report, categories=["answer"])
        self.assertProblem(report, "answer", "acknowledged with seq 1, the event is seq")

    def test_a_conflict_naming_an_event_of_another_key_is_reported(self):
        a = self.w.load.stories["K7-0-0"]
        self.w.send(a, 2, refusal(409, "conflict", self.w.event("K7-0-3", CLOSE)["seq"]),
                    copy=1)
        report = self.w.judge()
        self.assertVerdict(report, categories=["answer"])
        self.assertProblem(report, "answer", "a conflict names seq")

    def test_an_odd_success_and_a_500_are_reported(self):
        """A 2xx that is not the channel's success answer, and a 500 (an invariant broke), each
        followed by the retry's acknowledgement."""
        f = self.w.load.stories["K7-0-5"]
        seq = self.w.event("K7-0-5", PAY)["seq"]
        self.w.send(f, 1, (200, b'{"code":"FAIL"}'), (500, b'{"code":"FAIL"}'),
                    ok(CALLBACK["generic"], "duplicate", seq), copy=1)
        self.assertEqual([h.result for h in self.w.record("K7-0-5", "pay", copy=1)],
                         ["odd", "unknown", "ok"])
        report = self.w.judge()
        self.assertVerdict(report, categories=["answer"])
        self.assertProblem(report, "answer", "a 2xx that is not the channel's success answer")
        self.assertProblem(report, "answer", "500 (an invariant broke)")

    def test_an_answer_with_the_drivers_text_is_a_leak(self):
        f = self.w.load.stories["K7-0-5"]
        seq = self.w.event("K7-0-5", PAY)["seq"]
        text = ('{"code":"FAIL","outcome":"unavailable","message":"connection to server at '
                '\\"127.0.0.1\\", port 15432 failed"}').encode()
        self.w.send(f, 1, (503, text), ok(CALLBACK["generic"], "duplicate", seq), copy=1)
        report = self.w.judge()
        self.assertVerdict(report, categories=["leak"])
        self.assertProblem(report, "leak", "1 answers (/v1/callbacks/generic)")

    def test_the_signature_window_holds_both_ways(self):
        """A genuine generic request refused as bad_signature by a serve with a true clock, and
        one acknowledged by a serve skewed beyond 300 s."""
        f = self.w.load.stories["K7-0-5"]
        self.w.send(f, 1, refusal(401, "bad_signature"), copy=1)
        report = self.w.judge()
        self.assertVerdict(report, categories=["answer"])
        self.assertProblem(report, "answer", "refused as bad_signature by a serve skewed +0 s")
        f_pay = self.w.record("K7-0-5", "pay")[0]
        lives = [[[0.0, None, 0]], [[0.0, None, 0]]]
        lives[f_pay.serve] = [[0.0, None, 400]]
        report = self.w.judge(lives=lives)
        self.assertProblem(report, "answer", "acknowledged by a serve skewed +400 s")

    def test_a_tolerated_category_is_reported_without_counting(self):
        """--tolerate lost: the problem is listed as tolerated and the run does not fail."""
        self.w.drop("K7-0-5", PAY)
        report = self.w.judge(tolerate=["lost"])
        self.assertVerdict(report)
        self.assertEqual([c for c, _ in report.tolerated], ["lost"])



class RunChecksTest(unittest.TestCase):
    """The judgments campaign.py's run hands to the checker besides the history: /readyz
    probes, the follower's Read-From headers, the operator's findings, the campaign's own
    errors."""

    def categories(self, report):
        return [category for category, _ in report.problems]

    def test_a_readyz_answer_with_the_drivers_text_is_a_leak(self):
        report = checker.Report()
        checker.check_readyz(report, [])
        self.assertEqual(report.problems, [])
        checker.check_readyz(report, ["503 connection to server at /pg/sock-a failed"] * 5)
        self.assertEqual(self.categories(report), ["leak"] * 4)
        self.assertIn("5 such answers", report.problems[-1][1])

    def test_a_feed_page_must_say_where_it_was_read(self):
        report = checker.Report()
        checker.check_read_from(report, [{"from": "primary"}, {"from": "replica; lag=0.120"}])
        self.assertEqual(report.problems, [])
        for wrong in ("", None, "replica", "standby; lag=0"):
            report = checker.Report()
            checker.check_read_from(report, [{"from": "primary"}, {"from": wrong}])
            self.assertEqual(self.categories(report), ["answer"], wrong)

    def test_the_operators_findings_fail_the_run(self):
        report = checker.Report()
        checker.check_operations(report, ["verify exited 1 during the run:\n..."])
        self.assertEqual(self.categories(report), ["operations"])

    def test_a_fault_not_applied_or_a_workload_error_fails_the_run(self):
        report = checker.Report()
        checker.check_campaign(report, [], [records.PlatformNotice(out_trade_no="K1", op="pay")])
        self.assertEqual(report.problems, [])
        checker.check_campaign(report, [("#3 t=4.00s serve_kill serve=0", "OSError()")],
                               [records.CampaignError(out_trade_no="K1", error="boom")])
        self.assertEqual(self.categories(report), ["campaign", "campaign"])
        self.assertIn("serve_kill", report.problems[0][1])


if __name__ == "__main__":
    unittest.main()
