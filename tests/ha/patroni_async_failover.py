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
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import patroni_cluster  # noqa: E402
from patroni_cluster import ClusterError, wait_until  # noqa: E402


def walsender_pid(leader, standby):
    """The pid of `leader`'s WAL sender to `standby`, or None."""
    value = leader.scalar("SELECT pid FROM pg_stat_replication WHERE application_name = '%s'"
                          % standby)
    return int(value) if value else None


def count(node, label):
    """How many rows `label` has on `node` ("0", "1"), waiting for an answer."""
    return wait_until("a count on %s" % node.name,
                      lambda: node.scalar("SELECT count(*) FROM t WHERE label = '%s'" % label,
                                          db="demo"), 30)


def commit_then_lose_the_leader(c, leader, holder, starved):
    """The leader's WAL sender to `starved` stopped (SIGSTOP: what it had written already would
    otherwise still arrive), a row 'acknowledged' committed on the leader (psql raises on a
    WARNING: no cancelled wait), seen on `holder` and not on `starved`; then the leader's
    machine lost: kill -9 of its Patroni, its postmaster, and the stopped WAL sender."""
    sender = wait_until("the WAL sender of %s to %s" % (leader, starved),
                        lambda: walsender_pid(c.nodes[leader], starved), 30)
    os.kill(sender, signal.SIGSTOP)
    try:
        c.psql("INSERT INTO t VALUES ('acknowledged')", db="demo")
        wait_until("the acknowledged row on %s" % holder,
                   lambda: count(c.nodes[holder], "acknowledged") == "1", 30)
        if count(c.nodes[starved], "acknowledged") != "0":
            raise ClusterError("%s got the row despite SIGSTOP" % starved)
        print("'acknowledged' committed, on %s, not on %s" % (holder, starved))
        c.kill_patroni(leader)
        c.kill_postgres(leader)
    finally:
        os.kill(sender, signal.SIGKILL)   # stopped: it dies without sending anything more
    print("%s lost (kill -9 of its Patroni, its postmaster, its WAL sender to %s)"
          % (leader, starved))


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

    commit_then_lose_the_leader(c, leader, holder=sync, starved=other)

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
    return patroni_cluster.demonstrate("patroni-async-failover-", run)


if __name__ == "__main__":
    sys.exit(main())
