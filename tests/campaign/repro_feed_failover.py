"""A deterministic reproducer for what the campaign found with --seed 9: a reader of the global
feed (or a subscription's receiver) sees an event that a failover then loses, and the promoted
standby gives its seq to another event, which that reader then never sees.

    /usr/bin/python3 tests/campaign/repro_feed_failover.py --bin PATH [--keep]

The same topology as the campaign (tests/campaign/README.md): a primary with a synchronous
standby, whose replication link is stalled; a payment is committed on the primary and waits
for the standby (its delivery is answered 503 later, as it should) while a reader polls the
feed; the primary dies, the standby, still the synchronous one, is promoted; a new order takes
the same seq, and the reader goes on until it has read it (from the replica, which may still
hold the dead primary's WAL, or from the primary). Exit 1 when the feed, or a subscription,
showed an event that the ledger does not have (the bug), 0 when it did not.
"""

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from world import World, http_call  # noqa: E402
from cluster import wait_until  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--reads", choices=("replica", "primary"), default="replica",
                        help="primary: the replica made unreachable first, so that the feed "
                        "is read from the primary")
    args = parser.parse_args()
    ns = argparse.Namespace(seed=0, seconds=5, bin=args.bin, keep=args.keep,
                            tmp=os.environ.get("TMPDIR", "/tmp"), verbose=True, tolerate=[])
    c = World(ns)
    c.final_problems = []
    import workload
    c.history = workload.History(os.path.join(c.logs, "history.jsonl"))
    found = False
    try:
        c.setup()
        s = c.signer
        port = c.serve_ports[0]

        def post(req):
            conn_status = workload.send(port, req, 30)
            return conn_status

        status, body = post(s.order("R-1", "acct-1", 100, "CNY"))
        print("order R-1:", status, body.decode())
        seq0 = json.loads(body)["seq"]
        if args.reads == "primary":
            c.proxy.refuse("read", True)
            c.proxy.cut("read")
            wait_until(lambda: http_call(port, "GET", "/v1/events", s.auditor_token)[2]
                       .get("Payledger-Read-From") == "primary", 20, 0.2)
            print("the replica is unreachable: reads come from the primary")
        c.proxy.stall("repl", True)
        print("the synchronous standby's link stalled")
        answer = {}

        def pay():
            req = s.generic_raw(s.generic_body("PAYMENT_SUCCEEDED", "R-1", "TX-R-1", 100,
                                               "CNY"))
            answer["r"] = post(req)
        t = threading.Thread(target=pay)
        t.start()
        seen = {}
        stop = threading.Event()

        def read_feed():
            st, data, headers = http_call(port, "GET", "/v1/events?after=%d" % seq0,
                                          s.auditor_token)
            if st == 200:
                for e in json.loads(data)["events"]:
                    seen.setdefault(e["seq"], (e, headers.get("Payledger-Read-From")))

        def follow():  # A reader of the feed for the whole story, before and after the failover.
            while not stop.is_set():
                try:
                    read_feed()
                except Exception:  # noqa: BLE001 - no answer: the next read tries again.
                    pass
                stop.wait(0.05)
        reader = threading.Thread(target=follow)
        reader.start()

        def shown(event_type):
            return any(e["event_type"] == event_type for e, _ in list(seen.values()))
        if wait_until(lambda: shown("PAYMENT_SUCCEEDED"), 5, 0.05):
            print("the feed shows the payment while it waits for the standby")
        else:
            print("the feed does not show the payment while it waits for the standby")
        c.failover(stalled=True)
        print("the primary died; the standby was promoted")
        t.join()
        print("the payment's delivery was answered:", answer["r"][0], answer["r"][1][:120])
        status, body = (None, b"")
        for _ in range(100):
            status, body = post(s.order("R-2", "acct-1", 200, "CNY"))
            if status in (200, 201):
                break
            time.sleep(0.2)
        print("order R-2 on the promoted primary:", status, body.decode()[:200])
        # The reader goes on until it has read R-2 (from the replica, which may still hold the
        # old primary's WAL, or the primary).
        if not wait_until(lambda: shown("ORDER_CREATED"), 60, 0.1):
            print("the feed never showed R-2")
            found = True
        stop.set()
        reader.join()
        for seq, (e, src) in sorted(seen.items()):
            print("the feed (read from %s) showed seq %d %s %s %s" % (
                src, seq, e["out_trade_no"], e["event_type"], e["amount"]))
        rows = c.primary.psql("SELECT seq, out_trade_no, event_type FROM ledger_events "
                              "WHERE seq > %d ORDER BY seq" % seq0)
        print("the ledger after seq %d: %s" % (seq0, rows))
        table = {int(r[0]): (r[1], r[2]) for r in rows}
        for seq, (e, src) in sorted(seen.items()):
            now = table.get(seq)
            if now != (e["out_trade_no"], e["event_type"]):
                found = True
                print("BUG: a reader saw seq %d as %s %s; the ledger now has %s there: a reader "
                      "that continued with after=%d never sees it" % (
                          seq, e["out_trade_no"], e["event_type"], now, seq))
        receiver = [d for d in c.receiver.snapshot() if d.status == 200]
        for d in receiver:
            for e in d.events:
                if table.get(e["seq"]) not in (None, (e["out_trade_no"], e["event_type"])) or (
                        e["seq"] not in table and e["seq"] > seq0):
                    found = True
                    print("BUG: subscription %s received seq %d as %s %s; the ledger has %s"
                          % (d.name, e["seq"], e["out_trade_no"], e["event_type"],
                             table.get(e["seq"])))
        return 1 if found else 0
    finally:
        c.shutdown()
        if args.keep or found:
            print("kept", c.tmp)
        else:
            import shutil
            shutil.rmtree(c.tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
