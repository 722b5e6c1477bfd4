#!/usr/bin/python3
"""The window deploy/patroni/README.md names last ("a manual failover to an asynchronous node
while the leader is down"), shown on tests/ha/patroni_cluster.py's cluster: Patroni 3.0.2
promotes the candidate of a POST /failover when the leader is gone, whether or not it is the
synchronous standby, and a commit the synchronous standby confirmed is lost.

  1. The leader's WAL sender to the asynchronous standby is stopped (SIGSTOP): that standby
     receives nothing more (stopping its receiver instead would not do: what the sender had
     already written would wait in the socket, and arrive).
  2. A row is committed on the leader: the synchronous standby confirms it (no WARNING).
  3. The leader's machine is lost: kill -9 of its Patroni, its postmaster, then the stopped
     WAL sender.
  4. POST /failover {"candidate": <the asynchronous standby>} to the synchronous standby.
  5. Once the candidate is the leader: the row is not there. The synchronous standby, which
     had it, follows the new leader after pg_rewind, and has lost it too.

Exit 0 when the loss happened as described (the README's row holds), 1 when it did not (Patroni
refused or promoted the synchronous standby: the README's row is wrong for this version), 77
without Patroni or etcd (CI: 1). Not part of ctest: it shows Patroni's behaviour, not
payledger's. Usage: patroni_async_failover.py [--keep]
"""

import os
import shutil
import signal
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import patroni_cluster  # noqa: E402
from patroni_cluster import ClusterError, PatroniCluster, wait_until  # noqa: E402


def walsender_pid(leader, standby):
    """The pid of `leader`'s WAL sender to `standby`, or None."""
    value = leader.scalar("SELECT pid FROM pg_stat_replication WHERE application_name = '%s'"
                          % standby)
    return int(value) if value else None


def count(node, label):
    return node.scalar("SELECT count(*) FROM t WHERE label = '%s'" % label, db="demo")


def run(c):
    c.start(timeout=240)
    c.create_database("demo")
    c.psql("CREATE TABLE t (label text)", db="demo")
    c.psql("INSERT INTO t VALUES ('before')", db="demo")
    leader = c.wait_healthy()
    sync = c.sync_standby()
    other = next(n for n in c.nodes if n not in (leader, sync))
    for name in (sync, other):
        c.wait_replica_of(name, leader)
    wait_until("the row 'before' on %s" % other,
               lambda: count(c.nodes[other], "before") == "1", 30)
    print("leader %s, synchronous standby %s, asynchronous standby %s" % (leader, sync, other))

    sender = wait_until("the WAL sender of %s to %s" % (leader, other),
                        lambda: walsender_pid(c.nodes[leader], other), 30)
    os.kill(sender, signal.SIGSTOP)
    try:
        c.psql("INSERT INTO t VALUES ('acknowledged')", db="demo")   # raises on a WARNING
        wait_until("the acknowledged row on the synchronous standby %s" % sync,
                   lambda: count(c.nodes[sync], "acknowledged") == "1", 30)
        if count(c.nodes[other], "acknowledged") != "0":
            raise ClusterError("the asynchronous standby got the row despite SIGSTOP")
        print("'acknowledged' committed, confirmed by %s, not on %s" % (sync, other))
        c.kill_patroni(leader)
        c.kill_postgres(leader)
    finally:
        os.kill(sender, signal.SIGKILL)   # stopped: it dies without sending anything more
    print("%s lost (kill -9 of its Patroni, its postmaster, its WAL sender to %s)"
          % (leader, other))

    began = time.monotonic()
    status, answer = c.nodes[sync].rest("POST", "/failover", {"candidate": other}, timeout=60)
    print("POST /failover {candidate: %s} to %s: %s %s" % (other, sync, status, answer))
    new = c.wait_for_leader(timeout=90, exclude=leader)
    print("new leader %s after %.1f s" % (new, time.monotonic() - began))
    if new != other:
        print("RESULT: Patroni promoted %s, not the asynchronous candidate: no loss" % new)
        return False
    lost_on_new = count(c.nodes[new], "acknowledged") == "0"
    c.wait_replica_of(sync, new, timeout=120)
    lost_on_sync = count(c.nodes[sync], "acknowledged") == "0"
    print("'acknowledged' on the new leader %s: %s; on %s after it rejoined: %s" % (
        new, "missing" if lost_on_new else "present", sync,
        "missing" if lost_on_sync else "present"))
    if lost_on_new and lost_on_sync:
        print("RESULT: an acknowledged commit was lost by a manual failover to the "
              "asynchronous standby")
        return True
    return False


def main():
    if patroni_cluster.missing_programs():
        if os.environ.get("CI"):
            return 1
        print("SKIP: not installed: %s" % ", ".join(patroni_cluster.missing_programs()))
        return 77
    folder = tempfile.mkdtemp(prefix="patroni-async-failover-",
                              dir=os.environ.get("PAYLEDGER_TEST_TMPDIR") or None)
    cluster = PatroniCluster(folder)
    cluster.install_signal_handlers()
    ok = False
    try:
        ok = run(cluster)
    except Exception:
        traceback.print_exc()
        print("cluster: " + cluster.describe(), file=sys.stderr)
    finally:
        cluster.stop()
    if ok and "--keep" not in sys.argv:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        print("kept: " + folder, file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
