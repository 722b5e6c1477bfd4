"""The independent checker. It trusts only the campaign's own history (what it sent, what was
answered), what the receiver and the feed follower recorded, and the tables as psql reads them
on the primary; payledger's own verify and audit are run as extra checks, not as evidence.

Classes of requests: `ok` (acknowledged as the contract says), `failed` (a definite refusal,
4xx), `unknown` (no answer, 5xx, or a 2xx that is not the channel's success answer: `odd`).

The history is typed (records.py): records.Delivery for what was sent to a serve, and in the
platform's list records.PlatformNotice, records.SimulatorPayment and records.CampaignError. The
platform's record of the payments it took that only asking it can find (the simulator's
database, as psql reads it): records.QueriedPayment.
"""

from collections import defaultdict

import records

ORDER, PAY, CLOSE, REFUND = ("ORDER_CREATED", "PAYMENT_SUCCEEDED", "PAYMENT_CLOSED",
                             "REFUND_SUCCEEDED")


def event_fp(e):
    if e["event_type"] == ORDER:
        return (e["account_id"], e["amount"], e["currency"])
    if e["event_type"] == CLOSE:
        return ()
    return (e["transaction_id"], e["amount"], e["currency"])


short = records.describe


class Report:
    def __init__(self, tolerate=()):
        self.lost = 0
        self.doubled = 0
        self.skipped = 0
        self.unfound = 0
        self.problems = []          # (category, text)
        self.tolerate = set(tolerate)
        self.tolerated = []         # known problems, reported but not failing the run

    def add(self, category, text, lost=0, doubled=0, skipped=0, unfound=0):
        if category in self.tolerate:
            self.tolerated.append((category, text))
            return
        self.lost += lost
        self.doubled += doubled
        self.skipped += skipped
        self.unfound += unfound
        self.problems.append((category, text))


def check_ledger(report, entries, platform_entries, events, orders, balances, accounts,
                 queried=()):
    """Every ok delivery has exactly one matching event; no event without a request that asked
    for it (a query's payment: the platform's record of it, `queried`); every key at most one
    event; the projections equal a fold of the client's record."""
    by_key = defaultdict(list)
    for e in events:
        by_key[(e["out_trade_no"], e["event_type"])].append(e)
    askers = defaultdict(list)
    for h in entries:
        if h.event_type:
            askers[(h.asked_out_trade_no, h.event_type)].append(h)
    bill_askers = defaultdict(list)
    for h in platform_entries:
        if isinstance(h, records.PlatformNotice) and h.event_type and h.result == "ok":
            bill_askers[(h.out_trade_no, h.event_type)].append(h)
    query_askers = defaultdict(list)
    for r in queried:
        query_askers[(r.out_trade_no, PAY)].append(r)

    for key, evs in by_key.items():
        if len(evs) > 1:
            report.add("doubled", "%d events for %s: seqs %s" % (len(evs), key,
                                                                 [e["seq"] for e in evs]),
                       doubled=len(evs) - 1)

    # Every acknowledged request: its event is there, once, with its fingerprint.
    for h in entries:
        if h.result != "ok":
            continue
        if h.hostile:
            report.add("hostile", "a hostile request was acknowledged: " + short(h))
            continue
        if not h.event_type:
            continue
        key = (h.asked_out_trade_no, h.event_type)
        evs = by_key.get(key, [])
        fp = tuple(h.fingerprint)
        if evs and h.answer_seq is not None and h.path.endswith("/generic") \
                and h.answer_seq != evs[0]["seq"]:
            report.add("answer", "acknowledged with seq %d, the event is seq %d: %s"
                       % (h.answer_seq, evs[0]["seq"], short(h)))
        if not evs:
            report.add("lost", "acknowledged, no event: " + short(h), lost=1)
        elif event_fp(evs[0]) != fp:
            report.add("lost", "acknowledged, but the event differs (seq %d fp %s): %s"
                       % (evs[0]["seq"], event_fp(evs[0]), short(h)), lost=1)

    # Every event: some request that could have appended it (ok or unknown with the same
    # fingerprint; for a statement's event, the platform's ledger's record of it; for a query's,
    # the record the platform answered from).
    present = {}
    for e in events:
        key = (e["out_trade_no"], e["event_type"])
        fp = event_fp(e)
        if e["source"].endswith("_bill"):
            cands = [h for h in bill_askers.get(key, []) if tuple(h.fingerprint) == fp]
        elif e["source"].endswith("_query"):
            cands = [r for r in query_askers.get(key, []) if tuple(r.fingerprint) == fp]
        else:
            cands = [h for h in askers.get(key, [])
                     if h.result in ("ok", "unknown", "odd") and tuple(h.fingerprint) == fp
                     and not h.hostile]
        if not cands:
            refused = [h for h in askers.get(key, []) if tuple(h.fingerprint) == fp]
            report.add("doubled", "event seq %d %s %s %s source %s: no request that may have "
                       "appended it%s" % (e["seq"], key[0], key[1], fp, e["source"],
                                          "; refused ones: " + "; ".join(short(h) for h in
                                                                        refused[:3])
                                          if refused else ""), doubled=1)
            continue
        present[key] = cands[0]

    # The fold of the client's record: which events exist (proven above) with the values the
    # client itself sent.
    created = {}
    for (otn, et), h in present.items():
        if et == ORDER:
            created[otn] = tuple(h.fingerprint)
    fold_orders = {}
    fold_balances = defaultdict(int)
    for otn, (account, amount, currency) in created.items():
        pay = present.get((otn, PAY))
        refund = present.get((otn, REFUND))
        close = present.get((otn, CLOSE))
        paid_amount = pay.fingerprint[1] if pay else 0
        refunded_amount = refund.fingerprint[1] if refund else 0
        status = ("REFUNDED" if refund and pay else "PAID" if pay else
                  "CLOSED" if close else "WAIT_PAY")
        anomalies = []
        if pay and close:
            anomalies.append("paid_after_close")
        if refund and not pay:
            anomalies.append("refund_without_payment")
        fold_orders[otn] = (account, currency, amount, status, pay.fingerprint[0] if pay else "",
                            paid_amount, refunded_amount, ",".join(sorted(anomalies)))
        fold_balances[(account, currency)] += paid_amount - (refunded_amount if pay else 0)
    for (otn, et), h in present.items():
        if et != ORDER and otn not in created:
            report.add("projection", "event %s %s without its order" % (otn, et))
    live_orders = {o[0]: tuple(o[1:]) for o in orders}
    bad = 0
    for otn in sorted(set(fold_orders) | set(live_orders)):
        if fold_orders.get(otn) != live_orders.get(otn):
            bad += 1
            if bad <= 20:
                report.add("projection", "order %s: fold of the client's record %s, table %s"
                           % (otn, fold_orders.get(otn), live_orders.get(otn)))
    live_balances = {(b[0], b[1]): b[2] for b in balances}
    for key in sorted(set(fold_balances) | set(live_balances)):
        if fold_balances.get(key) != live_balances.get(key):
            report.add("balance", "balance %s:%s: fold of the client's record %s, table %s"
                       % (key[0], key[1], fold_balances.get(key), live_balances.get(key)))
    return present


def check_settled(report, platform_entries, events):
    """Every payment and refund the platform settled (its own ledger acknowledged it) is in the
    ledger after the final reconcile, with the platform's fingerprint: a callback lost for good
    is found by the statement."""
    by_key = {(e["out_trade_no"], e["event_type"]): e for e in events}
    for h in platform_entries:
        if not isinstance(h, records.PlatformNotice) or h.result != "ok" or not h.event_type:
            continue
        if h.event_type not in (PAY, REFUND):
            continue
        e = by_key.get((h.out_trade_no, h.event_type))
        if e is None or event_fp(e) != tuple(h.fingerprint):
            report.add("reconcile", "the platform settled %s %s %s, the ledger has %s"
                       % (h.out_trade_no, h.event_type, list(h.fingerprint),
                          event_fp(e) if e else "nothing"), lost=1)


def check_queried(report, platform_entries, queried, events, orders):
    """Every order the platform's record holds as paid (`queried`) ends PAID in the ledger, with
    exactly one payment, the platform's: those never notified are found only by asking the
    platform. What the simulator acknowledged taking is in that record, and it acknowledged
    every payment the workload made there (else the rule would hold of nothing)."""
    payments = defaultdict(list)
    for e in events:
        if e["event_type"] == PAY:
            payments[e["out_trade_no"]].append(e)
    status = {o[0]: (o[4], o[5]) for o in orders}
    for r in queried:
        fp = tuple(r.fingerprint)
        evs = payments.get(r.out_trade_no, [])
        if len(evs) == 1 and event_fp(evs[0]) == fp and \
                status.get(r.out_trade_no) == ("PAID", fp[0]):
            continue
        report.add("unfound", "the platform holds %s paid %s; the ledger has %s, the order %s"
                   % (r.out_trade_no, list(fp), ["seq %d %s %s" % (e["seq"], e["source"],
                                                                   list(event_fp(e)))
                                                 for e in evs]
                      or "no payment", status.get(r.out_trade_no, "none")), unfound=1)
    held = {(r.out_trade_no, tuple(r.fingerprint)) for r in queried}
    for h in platform_entries:
        if not isinstance(h, records.SimulatorPayment):
            continue
        if h.result != "ok":
            report.add("campaign", "the simulator did not take a payment: " + short(h))
        elif (h.out_trade_no, tuple(h.fingerprint)) not in held:
            report.add("campaign", "the simulator acknowledged a payment its record lacks: "
                       + short(h))


def check_answers(report, entries, events=None):
    by_seq = {e["seq"]: e for e in events or []}
    for h in entries:
        if h.status == 409 and h.answer_seq is not None and events is not None:
            e = by_seq.get(h.answer_seq)
            if e is None or (e["out_trade_no"], e["event_type"]) != (h.asked_out_trade_no,
                                                                      h.event_type):
                report.add("answer", "a conflict names seq %d, which is %s: %s" % (
                    h.answer_seq, (e["out_trade_no"], e["event_type"]) if e else "no event",
                    short(h)))
        if h.result == "odd":
            report.add("answer", "a 2xx that is not the channel's success answer: " + short(h))
        if h.status == 500:
            report.add("answer", "500 (an invariant broke): " + short(h))


def same_event(seen, e):
    return (seen["out_trade_no"] == e["out_trade_no"] and seen["event_type"] == e["event_type"]
            and seen.get("amount") == e["amount"]
            and seen.get("transaction_id") == e["transaction_id"]
            and seen.get("account_id") == e["account_id"] and seen.get("source") == e["source"])


def check_feed(report, feed, events):
    """The global feed read from 0 at the end equals the table, strictly increasing."""
    prev = 0
    for e in feed:
        if e["seq"] <= prev:
            report.add("feed", "feed not strictly increasing: %d after %d" % (e["seq"], prev),
                       skipped=1)
        prev = e["seq"]
    table = {e["seq"]: e for e in events}
    seen = {e["seq"]: e for e in feed}
    for seq in sorted(set(table) - set(seen))[:20]:
        report.add("feed", "the feed lacks seq %d (%s %s)" % (seq, table[seq]["out_trade_no"],
                                                             table[seq]["event_type"]),
                   skipped=1)
    for seq in sorted(set(seen) - set(table))[:20]:
        report.add("feed", "the feed has seq %d that the table lacks" % seq, skipped=1)
    for seq in sorted(set(seen) & set(table)):
        if not same_event(seen[seq], table[seq]):
            report.add("feed", "feed seq %d differs from the table: %s vs %s"
                       % (seq, seen[seq], table[seq]), skipped=1)


def check_follower(report, pages, events):
    """What a reader following the feed during the run saw: never an event that is not in the
    ledger, never a skipped seq below what it had already read."""
    table = {e["seq"]: e for e in events}
    seen = {}
    prev = 0
    for page in pages:
        for e in page["events"]:
            if e["seq"] <= prev:
                report.add("follower", "page after=%d (%s, from %s) returned seq %d after %d"
                           % (page["after"], page["serve"], page["from"], e["seq"], prev),
                           skipped=1)
            prev = max(prev, e["seq"])
            seen[e["seq"]] = (e, page)
    phantoms = 0
    for seq, (e, page) in sorted(seen.items()):
        if seq not in table or not same_event(e, table[seq]):
            phantoms += 1
            if phantoms <= 10:
                report.add("follower", "the follower read seq %d %s %s %s at %.3f (serve %s, "
                           "read from %s) but the ledger has %s"
                           % (seq, e["out_trade_no"], e["event_type"], e.get("amount"),
                              page["at"], page["serve"], page["from"],
                              (table[seq]["out_trade_no"], table[seq]["event_type"],
                               table[seq]["amount"]) if seq in table else "no such seq"),
                           skipped=1)
    if phantoms > 10:
        report.add("follower", "... %d such phantom reads in all" % phantoms,
                   skipped=phantoms - 10)
    top = max(seen) if seen else 0
    missed = [s for s in sorted(table) if s <= top and s not in seen]
    for seq in missed[:10]:
        report.add("follower", "the follower never saw seq %d (%s %s), below the %d it read"
                   % (seq, table[seq]["out_trade_no"], table[seq]["event_type"], top),
                   skipped=1)
    if len(missed) > 10:
        report.add("follower", "... %d skipped in all" % len(missed), skipped=len(missed) - 10)
    return len(seen)


def matches(sub, e):
    if sub.get("event_types") and e["event_type"] not in sub["event_types"]:
        return False
    if sub.get("accounts") and e["account_id"] not in sub["accounts"]:
        return False
    return True


def check_subscriptions(report, subs, deliveries, events):
    """Each subscription's receiver got every matching event at least once, in seq order,
    none skipped, every request correctly signed, nothing that is not in the ledger."""
    table = {e["seq"]: e for e in events}
    for name, sub in subs.items():
        matching = [e["seq"] for e in events if matches(sub, e)]
        index = {s: i for i, s in enumerate(matching)}
        have = set()
        phantom = 0
        for d in deliveries:
            if d.name != name:
                continue
            for p in d.problems:
                report.add("subscription", "%s: delivery %s at %.3f: %s"
                           % (name, d.webhook_id, d.at, p))
            # A "slow" delivery was answered 200 too, after the sender's timeout: usually the
            # sender gave up and sends it again, but a sender that was stopped (SIGSTOP) through
            # its timeout reads the 200 first and rightly moves on. Either way the receiver has
            # the events.
            if d.status not in (200, "slow") or not d.seqs:
                continue
            good = True
            for e in d.events:
                if e["seq"] not in table or not same_event(e, table[e["seq"]]):
                    phantom += 1
                    good = False
                    if phantom <= 10:
                        report.add("subscription", "%s: delivery %s at %.3f carried seq %d %s "
                                   "%s %s, which the ledger %s" % (
                                       name, d.webhook_id, d.at, e["seq"], e["out_trade_no"],
                                       e["event_type"], e.get("amount"),
                                       "has as %s %s %s" % (table[e["seq"]]["out_trade_no"],
                                                            table[e["seq"]]["event_type"],
                                                            table[e["seq"]]["amount"])
                                       if e["seq"] in table else "does not have"), skipped=1)
                elif not matches(sub, e):
                    report.add("subscription", "%s: seq %d does not match the filters"
                               % (name, e["seq"]))
            if not good:
                continue
            first = d.seqs[0]
            pos = index.get(first)
            if pos is None:
                continue
            if matching[pos:pos + len(d.seqs)] != d.seqs:
                report.add("subscription", "%s: delivery %s is not consecutive among the "
                           "matching events" % (name, d.webhook_id), skipped=1)
            missing = [s for s in matching[:pos] if s not in have]
            if missing:
                report.add("subscription", "%s: delivery %s at %.3f starts at %d, but %d "
                           "earlier matching events were never acknowledged (first %d)"
                           % (name, d.webhook_id, d.at, first, len(missing), missing[0]),
                           skipped=len(missing))
                have.update(missing)    # report each gap once
            have.update(d.seqs)
        if phantom > 10:
            report.add("subscription", "%s: %d phantom events in all" % (name, phantom),
                       skipped=phantom - 10)
        never = [s for s in matching if s not in have]
        if never:
            report.add("subscription", "%s: %d matching events never delivered (first %s)"
                       % (name, len(never), never[:5]), skipped=len(never))


def check_leaks(report, entries, patterns):
    """No answer tells a caller where the database is: host, port, socket, user (a /readyz
    answer may say only that it is unreachable, never the driver's text; a callback's answer,
    to a caller that may hold no key at all, no more)."""
    leaks = [h for h in entries if h.answer and h.status
             and any(p in h.answer for p in patterns)]
    if not leaks:
        return
    paths = sorted({h.path for h in leaks})
    report.add("leak", "%d answers (%s) carry the database driver's text, e.g. %s"
               % (len(leaks), ", ".join(paths), short(leaks[0])))


def check_window(report, entries, lives):
    """A signed timestamp is accepted within 300 s of the serve's clock, in either direction:
    a genuine generic or WeChat Pay v3 request (signed at the true time) answered by a serve
    whose clock was skewed by less than 290 s is never bad_signature, and by more than 310 s
    never acknowledged. The answering process is the one alive during the whole request."""
    wrong = []
    for h in entries:
        if h.hostile or h.status is None:
            continue
        if not (h.path.endswith("/generic") or h.path.endswith("/wechat/v3")):
            continue
        alive = [life for life in lives[h.serve]
                 if life[0] <= h.t0 and (life[1] is None or life[1] >= h.t1)]
        if len(alive) != 1:
            continue
        skew = abs(alive[0][2])
        if h.status == 401 and skew < 290:
            wrong.append("refused as bad_signature by a serve skewed %+d s: %s"
                         % (alive[0][2], short(h)))
        elif h.result == "ok" and skew > 310:
            wrong.append("acknowledged by a serve skewed %+d s: %s" % (alive[0][2], short(h)))
    for text in wrong[:10]:
        report.add("answer", "signature window: " + text)
    if len(wrong) > 10:
        report.add("answer", "signature window: %d such answers in all" % len(wrong))


def check_readyz(report, probes):
    """/readyz never says more than whether serve is ready: a probe whose answer carried the
    driver's text (World.follow records it) is a leak."""
    for probe in probes[:3]:
        report.add("leak", "/readyz answered %s" % probe)
    if len(probes) > 3:
        report.add("leak", "/readyz: %d such answers in all" % len(probes))


def check_read_from(report, pages):
    """Every feed page says where it was read: Payledger-Read-From `primary` or
    `replica; lag=<seconds>`."""
    missing = [p for p in pages if not p["from"] or not (
        p["from"] == "primary" or p["from"].startswith("replica; lag="))]
    if missing:
        report.add("answer", "%d feed pages without a valid Payledger-Read-From (first: %s)"
                   % (len(missing), missing[0]["from"]))


def check_operations(report, problems):
    """What the operator's commands found (verify, audit, checkpoint, rebuild, reconcile exiting
    1 or printing nothing), during the run and at its end, and the end's waits that ran out."""
    for text in problems:
        report.add("operations", text)


def check_campaign(report, fault_errors, platform_entries):
    """A campaign that could not do what it meant proves nothing: a fault that could not be
    applied, given as (its description, the error), and the workload's own errors fail it."""
    for described, error in fault_errors:
        report.add("campaign", "fault %s could not be applied: %s" % (described, error))
    errors = [h for h in platform_entries if isinstance(h, records.CampaignError)]
    for h in errors[:5]:
        report.add("campaign", "workload error: %s" % h)
    if len(errors) > 5:
        report.add("campaign", "%d workload errors in all" % len(errors))
