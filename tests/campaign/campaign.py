"""payledger's fault campaign: a seeded, reproducible run of a randomized workload against two
`payledger serve` processes on PostgreSQL with a synchronous standby and a read replica, under a
schedule of overlapping faults, followed by an independent check. tests/campaign/run builds the
binary and starts this; tests/campaign/README.md says what it does and how to read its output.

The parts: world.py (what runs and how it is broken), faults.py (the fault table and its
schedule), workload.py (the requests), checker.py (every judgment); here only the run's order.
"""

import argparse
import os
import shutil
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checker  # noqa: E402
import faults  # noqa: E402
import notices  # noqa: E402
import workload  # noqa: E402
import world as world_module  # noqa: E402
from cluster import wait_until  # noqa: E402

CATEGORIES = ("lost", "doubled", "unfound", "hostile", "projection", "balance", "answer", "leak",
              "feed", "follower", "subscription", "reconcile", "operations", "campaign")


def run(world):
    """The run: the schedule and the plan said, the world set up, the load, the faults, the
    operator and the follower for the run's seconds, then the world healed and the end's
    waits; every judgment by checker.py. Returns the exit code (0: PASS)."""
    table = faults.TABLES[world.engine]
    schedule = faults.make_schedule(world.seed, world.seconds, table)
    world.say("campaign seed=%d seconds=%d engine=%s tmp=%s" % (world.seed, world.seconds,
                                                               world.engine, world.tmp))
    world.say("workload plan: %d workers, plan digest %s" % (
        world_module.WORKERS, workload.plan_digest(world.seed, world_module.WORKERS)))
    world.say("fault schedule (%d faults, digest %s):" % (len(schedule),
                                                           faults.digest(schedule)))
    for f in schedule:
        world.say("  " + faults.describe(f))
    world.final_problems = []
    world.history = workload.History(os.path.join(world.logs, "history.jsonl"))
    world.setup()
    world.log("setup done: serves on %s, platform on %d, receiver on %d" % (
        world.serve_ports, world.platform_port, world.receiver_port), echo=True)

    start = time.monotonic()
    deadline = start + world.seconds
    load = workload.Workload(world.seed, world_module.WORKERS, world.signer, world.serve_ports,
                             world.platform_port, world.history, deadline,
                             classify=notices.classify, outcome_of=notices.outcome_of,
                             simulator_port=world.simulator_port)
    executor = faults.Executor(world.fault_actions(), schedule, world.log,
                               world.note_fault_error, table)
    follower = threading.Thread(target=world.follow, name="follower", daemon=True)
    ops = threading.Thread(target=world.ops_loop, args=(deadline,), name="ops", daemon=True)
    follower.start()
    load.start()
    executor.start(start, deadline)
    ops.start()
    time.sleep(max(0.0, deadline - time.monotonic()))   # the run's length
    world.log("time is up: waiting for the workers, the faults and the commands", echo=True)
    world.ops_stop.set()
    load.join(90)
    # A fault that is still running must end before the world heals: on Patroni one can take
    # minutes (its waits for a healthy cluster, patroni_world.py).
    if not executor.join(420):
        world.final_problems.append("faults still running 420 s after the run's end")
    ops.join(400)

    world.heal()
    todo, done = load.settle(time.monotonic() + 120)
    world.log("settled %d of %d steps left without a definite answer" % (done, todo),
             echo=True)
    # The payments only the query can find, then the notices held until it found them
    # (those still without a definite answer once more).
    world.await_queries()
    unsent = load.finish_late()
    late_todo, late_done = load.settle(time.monotonic() + 60)
    todo, done = todo + late_todo, done + late_done
    for platform in ("wechat", "alipay"):
        world.reconcile(platform, 999, final=True)
    world.await_subscriptions()
    world.await_replica()
    events, orders, balances = world.table()
    top = events[-1]["seq"] if events else 0
    wait_until(lambda: (world.follower_pages[-1]["events"][-1]["seq"]
                        if world.follower_pages else 0) >= top, 20, 0.2)
    world.follower_stop.set()
    follower.join(15)
    feed = world.read_feed(top)

    # payledger's own tools, at the end.
    code, out, err = world.cli(["verify"])
    if code != 0:
        world.final_problems.append("verify exited %s:\n%s%s" % (code, out, err))
    code, out, err = world.cli(["audit", "--platform-signatures"], timeout=600)
    if code != 0:
        world.final_problems.append("audit exited %s:\n%s%s" % (code, out, err))
    for path in world.checkpoints:
        code, out, err = world.cli(["audit", "--checkpoint", path, "--public-key",
                                   world.public_key], timeout=600)
        if code != 0:
            world.final_problems.append("audit --checkpoint %s exited %s:\n%s%s"
                                       % (os.path.basename(path), code, out, err))

    report = checker.Report(world.args.tolerate)
    entries = world.history.entries
    checker.check_answers(report, entries, events)
    checker.check_window(report, entries, [s.lives for s in world.serves])
    checker.check_readyz(report, world.readyz_leaks)
    checker.check_read_from(report, world.follower_pages)
    checker.check_leaks(report, entries, ["connection to server", "/pg/sock-"] +
                        ['port %d ' % p for p in world.link_port.values()])
    queried = world.simulator_record()
    checker.check_ledger(report, entries, world.history.platform, events, orders, balances,
                         workload.ACCOUNTS, queried)
    checker.check_feed(report, feed, events)
    followed = checker.check_follower(report, world.follower_pages, events)
    checker.check_subscriptions(report, world.subs, world.receiver.snapshot(), events)
    # Every payment and refund the platform settled is in the ledger after the final
    # reconcile (a callback lost for good is found by the statement).
    checker.check_settled(report, world.history.platform, events)
    # Every payment the platform took is found, those it never notified by the query.
    checker.check_queried(report, world.history.platform, queried, events, orders)
    checker.check_operations(report, world.violations_live + world.final_problems)
    checker.check_campaign(report, [(faults.describe(f), error) for f, error in world.fault_errors],
                           world.history.platform)

    counts = {"ok": 0, "failed": 0, "unknown": 0}
    for h in entries:
        counts["unknown" if h.result in ("unknown", "odd") else h.result] += 1
    world.say("")
    world.say("events=%d orders=%d checkpoints=%d follower_pages=%d (%d events) "
             "receiver_requests=%d faults_ran=%d skipped=%d settled=%d/%d" % (
                 len(events), len(orders), len(world.checkpoints), len(world.follower_pages),
                 followed, len(world.receiver.snapshot()), executor.ran, executor.skipped,
                 done, todo))
    outcomes = {}
    for h in entries:
        k = "%s:%s" % (h.result, h.outcome or h.status)
        outcomes[k] = outcomes.get(k, 0) + 1
    sources = {}
    for e in events:
        if e["source"].endswith(("_query", "_close")):
            sources[e["source"]] = sources.get(e["source"], 0) + 1
    asked = world.primary.psql("SELECT count(*) FILTER (WHERE attempts > 0), "
                              "coalesce(sum(attempts), 0) FROM order_queries", check=False)
    world.say("queries: orders_asked=%s attempts=%s platform_record=%d found=%s "
             "late_notices=%d never_sent=%d" % (
                 asked[0][0] if asked else "?", asked[0][1] if asked else "?",
                 len(queried),
                 ",".join("%s:%d" % kv for kv in sorted(sources.items())) or "0",
                 len({h.out_trade_no for h in entries if h.query == "late"}), len(unsent)))
    world.say("answers: " + " ".join("%s=%d" % kv for kv in sorted(outcomes.items())))
    world.say("operator: " + " ".join("%s:%s=%d" % (k[0], k[1], v)
                                     for k, v in sorted(world.op_counts.items())))
    kinds = {}
    for f in schedule:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    world.say("faults: " + " ".join("%s=%d" % kv for kv in sorted(kinds.items())))
    world.say("faults ran: " + " ".join("%s=%d" % kv
                                        for kv in sorted(executor.ran_kinds.items())))
    for line in world.engine_summary():
        world.say(line)
    passed = not report.problems
    if report.tolerated:
        world.say("")
        world.say("TOLERATED (--tolerate %s; not failing the run) (%d):"
                 % (",".join(sorted(report.tolerate)), len(report.tolerated)))
        for category, text in report.tolerated[:50]:
            world.say("  [%s] %s" % (category, text))
    if not passed:
        world.say("")
        world.say("FAILURES (%d):" % len(report.problems))
        for category, text in report.problems[:200]:
            world.say("  [%s] %s" % (category, text))
    world.shutdown()
    keep = world.args.keep or not passed
    if keep:
        world.say("logs and data kept in %s (history: logs/history.jsonl)" % world.tmp)
    else:
        shutil.rmtree(world.tmp, ignore_errors=True)
    world.say("campaign seed=%d faults=%d deliveries=%d ok=%d failed=%d unknown=%d lost=%d "
             "doubled=%d skipped=%d unfound=%d %s" % (
                 world.seed, len(schedule), len(entries), counts["ok"], counts["failed"],
                 counts["unknown"], report.lost, report.doubled, report.skipped,
                 report.unfound, "PASS" if passed else "FAIL"))
    return 0 if passed else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--seconds", type=int, required=True)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--bin", required=True, help="the payledger binary")
    parser.add_argument("--tmp", default=os.environ.get("TMPDIR", "/tmp"))
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--engine", choices=sorted(faults.TABLES), default="promote",
                        help="what fails the PostgreSQL over: promote (a standby promoted by "
                        "hand, world.py) or patroni (a Patroni cluster, patroni_world.py)")
    parser.add_argument("--tolerate", action="append", default=[], metavar="CATEGORY",
                        help="report the problems of this category without failing the run "
                        "(a known product bug); repeatable: " + ", ".join(CATEGORIES))
    args = parser.parse_args()
    for category in args.tolerate:
        if category not in CATEGORIES:
            parser.error("--tolerate: one of " + ", ".join(CATEGORIES))
    if args.seconds < 5:
        parser.error("--seconds: at least 5")
    if args.engine == "patroni":
        import patroni_world
        patroni_world.patroni_cluster.require_programs()   # else exit 77: ctest's skip
        campaign = patroni_world.PatroniWorld(args)
    else:
        campaign = world_module.World(args)
    try:
        return run(campaign)
    except BaseException:
        campaign.say("the campaign itself failed:\n" + traceback.format_exc())
        try:
            campaign.shutdown()
        except Exception:  # noqa: BLE001 - the run has failed already; say why it cannot stop
            campaign.say("the shutdown failed too:\n" + traceback.format_exc())
        campaign.say("logs and data kept in %s" % campaign.tmp)
        campaign.say("campaign seed=%d faults=0 deliveries=0 ok=0 failed=0 unknown=0 lost=0 "
                     "doubled=0 skipped=0 unfound=0 FAIL" % args.seed)
        return 1


if __name__ == "__main__":
    sys.exit(main())
