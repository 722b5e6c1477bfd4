#!/usr/bin/python3
"""Proves tests/ha/patroni_cluster.py: a Patroni cluster (three PostgreSQL 15 nodes, etcd) is
started, and its leader changed every way the harness offers, each time with a row written
(and confirmed by the synchronous standby) just before:

  1. a switchover (POST /switchover),
  2. kill -9 of the leader's postmaster (primary_start_timeout 0: a failover),
  3. kill -9 of the leader's Patroni (its PostgreSQL runs on; the lock expires after the ttl),
     then that Patroni started again,
  4. a manual failover to the synchronous standby (POST /failover),
  5. a clean stop of the synchronous standby, and its start,
  6. a clean stop of etcd's leader member, and its start (with one member, the DCS is gone:
     the primary must stop taking writes; with three, nothing may change).

After each, the row is on the new leader, and the old leader (or the stopped node) is back as
a replica streaming from it, with the row. With a payledger binary (--bin), the payledger
database is created and migrated through the multi-host URL before the first step, and
`payledger migrate` through the same URL finds the schema up to date after the last. Prints how
long each step took, and stops everything, also when a step fails (then the last lines of every
log are printed, and the folder kept unless it lies in PAYLEDGER_TEST_TMPDIR).

Usage: patroni_smoke.py [--bin PAYLEDGER] [--etcd-members 1|3] [--keep]
                        [--ttl S --loop-wait S --retry-timeout S]   (e.g. production's 30 10 10)
Exit 77 (ctest: skipped) when Patroni, etcd or PostgreSQL 15 is not installed, except under CI
(the variable CI set), where that fails.
"""

import argparse
import json
import os
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import patroni_cluster  # noqa: E402
from patroni_cluster import ClusterError, PatroniCluster, holds_for, wait_until  # noqa: E402



class Smoke:
    def __init__(self, cluster, binary):
        self.c = cluster
        self.binary = binary
        self.timings = []   # (step, what, seconds)
        self.rows = []      # labels written, in order

    def note(self, step, what, seconds):
        self.timings.append((step, what, seconds))
        print("  %-34s %-44s %6.1f s" % (step, what, seconds), flush=True)

    def write_row(self, label):
        """Inserts a row on the leader; psql fails on a WARNING, so the commit is one the
        synchronous standby confirmed."""
        self.c.psql("INSERT INTO smoke (label) VALUES ('%s')" % label, db="smoke")
        self.rows.append(label)

    def check_rows(self, node):
        """Every row written so far is on `node` (waits for a replica's replay)."""
        expected = sorted(self.rows)

        def present():
            rows = self.c.nodes[node].psql("SELECT label FROM smoke", db="smoke", check=False)
            return rows is not None and sorted(r[0] for r in rows) == expected
        wait_until("rows %s on %s" % (expected, node), present, 30, pace=0.2,
                   state=lambda: self.c.nodes[node].psql("SELECT label FROM smoke",
                                                         db="smoke", check=False))

    def after_change(self, step, old, new, began, rejoining=None):
        """The checks after a change of leader from `old` to `new`: the rows there, then
        `rejoining` (default: old) back as a replica of `new` with the rows."""
        if old == new:
            raise ClusterError("%s: the leader is still %s" % (step, old))
        self.check_rows(new)
        rejoining = rejoining or old
        self.c.wait_replica_of(rejoining, new, timeout=120)
        self.note(step, "%s rejoined as a replica of %s" % (rejoining, new),
                  time.monotonic() - began)
        self.c.wait_healthy(timeout=90)
        self.check_rows(rejoining)

    def stray_commit(self, orphan, leader):
        """`orphan` lost its Patroni while the leader: its PostgreSQL is still a primary that
        accepts connections, but its synchronous_standby_names names the standby now promoted,
        so a commit there waits and is never acknowledged. Cancelling the wait (as a client's
        timeout would) leaves the commit visible on the orphan with a WARNING, and nowhere
        else; Patroni's pg_rewind removes it when the orphan rejoins (check_rows then)."""
        node = self.c.nodes[orphan]
        if node.in_recovery() is not False:
            raise ClusterError("%s's PostgreSQL is no longer a primary without its Patroni"
                               % orphan)
        proc = node.start_sql("INSERT INTO smoke (label) VALUES ('stray')", db="smoke",
                              application_name="stray")
        try:
            pid = wait_until(
                "the commit on the orphaned primary %s waiting for its synchronous standby"
                % orphan, lambda: node.scalar(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = 'stray' "
                    "AND wait_event = 'SyncRep'"), 20, pace=0.1,
                state=lambda: node.psql("SELECT state, wait_event_type, wait_event FROM "
                                        "pg_stat_activity WHERE application_name = 'stray'",
                                        check=False))
            node.psql("SELECT pg_cancel_backend(%s)" % pid)
            _, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err = err.decode(errors="replace")
        if proc.returncode != 0 or "canceling wait for synchronous replication" not in err:
            raise ClusterError("a commit on the orphaned primary %s: expected the WARNING of a "
                               "cancelled wait for the synchronous standby, got exit %s: %s"
                               % (orphan, proc.returncode, err.strip()))
        if node.scalar("SELECT count(*) FROM smoke WHERE label = 'stray'", db="smoke") != "1":
            raise ClusterError("the cancelled commit is not visible on %s" % orphan)
        if self.c.nodes[leader].scalar("SELECT count(*) FROM smoke WHERE label = 'stray'",
                                       db="smoke") != "0":
            raise ClusterError("the commit on the orphaned primary reached the leader %s"
                               % leader)
        print("  %s's PostgreSQL without its Patroni: still a primary; a commit there waited "
              "for the promoted standby, cancelled: visible there only" % orphan, flush=True)

    def run(self, etcd_members):
        c = self.c
        seconds = c.start(timeout=240)
        self.note("start", "leader %s elected, replicas streaming" % c.leader(), seconds)

        c.create_database("smoke")
        c.psql("CREATE TABLE smoke (id bigserial PRIMARY KEY, label text NOT NULL)", db="smoke")
        if self.binary:
            c.create_database("payledger")
            c.migrate(self.binary)
            tables = c.psql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
                            db="payledger")[0][0]
            print("  payledger migrated through %s: %s tables" % (c.multihost_url(), tables),
                  flush=True)

        # 1. Switchover.
        self.write_row("before-switchover")
        began = time.monotonic()
        old, new, seconds = c.switchover()
        self.note("1 switchover", "%s -> %s writable" % (old, new), seconds)
        self.after_change("1 switchover", old, new, began)

        # 2. kill -9 of the leader's postmaster.
        self.write_row("before-kill-postgres")
        began = time.monotonic()
        old = c.kill_postgres()
        new = c.wait_for_leader(timeout=90, exclude=old)
        self.note("2 kill -9 postgres", "%s -> %s writable" % (old, new),
                  time.monotonic() - began)
        self.after_change("2 kill -9 postgres", old, new, began)

        # 3. kill -9 of the leader's Patroni; its PostgreSQL runs on as an unmanaged primary
        #    until its Patroni is back and demotes it.
        self.write_row("before-kill-patroni")
        began = time.monotonic()
        old = c.kill_patroni()
        new = c.wait_for_leader(timeout=90, exclude=old)
        self.note("3 kill -9 patroni", "%s -> %s writable" % (old, new),
                  time.monotonic() - began)
        self.check_rows(new)
        self.stray_commit(old, new)
        began = time.monotonic()
        c.start_patroni(old)
        self.after_change("3 patroni started again", old, new, began)

        # 4. A manual failover to the synchronous standby.
        self.write_row("before-failover")
        candidate = c.sync_standby()
        old, new, seconds = c.failover(candidate)
        began = time.monotonic() - seconds
        self.note("4 failover (POST /failover)", "%s -> %s writable" % (old, new), seconds)
        self.after_change("4 failover (POST /failover)", old, new, began)

        # 5. The synchronous standby stopped cleanly: the other replica becomes synchronous,
        #    and commits go on.
        leader = c.leader()
        began = time.monotonic()
        stopped = c.stop_sync_standby()
        wait_until("another synchronous standby than %s" % stopped,
                   lambda: c.sync_standbys() and stopped not in c.sync_standbys(), 60,
                   pace=0.2, state=c.describe)
        self.write_row("sync-standby-stopped")
        self.note("5 sync standby stopped", "%s stopped, %s synchronous, a commit"
                  % (stopped, c.sync_standby()), time.monotonic() - began)
        if c.leader() != leader:
            raise ClusterError("stopping the synchronous standby changed the leader")
        began = time.monotonic()
        c.start_sync_standby(stopped)
        c.wait_replica_of(stopped, leader, timeout=120)
        self.note("5 sync standby started", "%s streaming again" % stopped,
                  time.monotonic() - began)
        c.wait_healthy(timeout=90)
        self.check_rows(stopped)

        # 6. etcd's leader member stopped cleanly.
        leader = c.leader()
        self.write_row("before-etcd-stop")
        began = time.monotonic()
        member = c.stop_etcd()
        if etcd_members == 1:
            # No DCS: Patroni cannot renew the leader lock, and demotes its primary after
            # retry_timeout rather than risk a second primary.
            wait_until("%s no longer a writable primary without etcd" % leader,
                       lambda: c.nodes[leader].in_recovery() is not False, 60, pace=0.2,
                       state=c.describe)
            self.note("6 etcd stopped", "%s read-only (no DCS)" % leader,
                      time.monotonic() - began)
            began = time.monotonic()
            c.start_etcd(member)
            new = c.wait_for_leader(timeout=90)
            self.note("6 etcd started", "%s writable again" % new, time.monotonic() - began)
            c.wait_healthy(timeout=90)
        else:
            # Two members of three are a quorum: Patroni's client moves to another member, and
            # the leader keeps renewing its lock. Watched for a whole ttl, then a commit.
            holds_for("%s the leader while etcd%d is stopped" % (leader, member + 1),
                      lambda: c.leader() == leader, c.ttl, pace=0.5, state=c.describe)
            self.write_row("etcd-member-stopped")
            self.note("6 etcd member stopped", "etcd%d stopped; %s the leader for a ttl, a "
                      "commit" % (member + 1, leader), time.monotonic() - began)
            began = time.monotonic()
            c.start_etcd(member)
            self.note("6 etcd member started", "etcd%d healthy again" % (member + 1),
                      time.monotonic() - began)
        new = c.wait_healthy(timeout=90)
        self.check_rows(new)
        self.write_row("last")
        for name in c.nodes:
            self.check_rows(name)

        if self.binary:
            out = c.migrate(self.binary)
            if "schema is up to date" not in out:
                raise ClusterError("payledger migrate after the failovers: %s" % out.strip())
            print("  payledger migrate through the multi-host URL after the failovers: "
                  "schema is up to date", flush=True)


def tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return "(%s)\n" % e


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", help="a payledger binary: migrate through the multi-host URL")
    parser.add_argument("--etcd-members", type=int, choices=(1, 3), default=1)
    parser.add_argument("--keep", action="store_true", help="keep the folder, also on success")
    parser.add_argument("--ttl", type=int, help="instead of deploy/patroni/patroni-test.json's")
    parser.add_argument("--loop-wait", type=int, help="likewise")
    parser.add_argument("--retry-timeout", type=int, help="likewise")
    args = parser.parse_args()

    patroni_cluster.require_programs()
    if args.bin and not os.access(args.bin, os.X_OK):
        print("FAIL: %s is not an executable" % args.bin, file=sys.stderr)
        return 1

    parent = os.environ.get("PAYLEDGER_TEST_TMPDIR") or None
    folder = tempfile.mkdtemp(prefix="patroni-smoke-", dir=parent)
    cluster = PatroniCluster(folder, etcd_members=args.etcd_members, ttl=args.ttl,
                             loop_wait=args.loop_wait, retry_timeout=args.retry_timeout)
    cluster.install_signal_handlers()
    smoke = Smoke(cluster, args.bin)
    ok = False
    began = time.monotonic()
    print("Patroni smoke test in %s (%d etcd member%s; ttl %d, loop_wait %d, retry_timeout %d)"
          % (folder, args.etcd_members, "s" if args.etcd_members > 1 else "", cluster.ttl,
             cluster.loop_wait, cluster.retry_timeout), flush=True)
    try:
        smoke.run(args.etcd_members)
        ok = True
    except Exception:
        traceback.print_exc()
        try:
            print("cluster: " + cluster.describe(), file=sys.stderr)
        except Exception:
            pass
    finally:
        stop_began = time.monotonic()
        cluster.stop()
        stop_seconds = time.monotonic() - stop_began
        if not ok:
            for name in ["etcd%d" % (i + 1) for i in range(args.etcd_members)]:
                print("--- %s.log (last lines)\n%s" % (name, tail(os.path.join(folder,
                                                                          name + ".log"))),
                      file=sys.stderr)
            for node in cluster.nodes.values():
                for log in ("patroni.log", "postgresql.log"):
                    path = os.path.join(node.folder, log)
                    print("--- %s/%s (last lines)\n%s" % (node.name, log, tail(path)),
                          file=sys.stderr)
    print("  %-34s %-44s %6.1f s" % ("stop", "everything stopped", stop_seconds))
    print(json.dumps({"ok": ok, "etcd_members": args.etcd_members, "ttl": cluster.ttl,
                      "loop_wait": cluster.loop_wait, "retry_timeout": cluster.retry_timeout,
                      "total_seconds": round(time.monotonic() - began, 1),
                      "timings": [[s, w, round(t, 2)] for s, w, t in smoke.timings]}))
    return patroni_cluster.finish(ok, folder, args.keep, parent)


if __name__ == "__main__":
    sys.exit(main())
