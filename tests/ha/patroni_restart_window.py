#!/usr/bin/python3
"""The window deploy/patroni/README.md names "Patroni restarted on the primary within the ttl",
shown on tests/ha/patroni_cluster.py's cluster with a read replica tagged nosync and nofailover
(as the fault campaign's Patroni engine has, tests/campaign/patroni_world.py, whose first
one-hour run found it): Patroni 3.0.2, started again on the primary while it still holds the
lock, keeps synchronous_standby_names = '*', and a commit that only the read replica confirmed
is lost by the failover to the synchronous standby that Patroni's /sync key names.

  0. The read replica's WAL sender made the leader's first (the synchronous standby stopped,
     the replica's sender ended so that it reconnects, the standby started again): under '*'
     PostgreSQL lets the first connected of the standbys confirm (the lowest slot of its WAL
     sender array), and that is what this shows.
  1. kill -9 of the leader's Patroni, started again at once (Debian's unit: 100 ms): it finds
     the lock still its own and leads on; synchronous_standby_names is '*' and stays '*', and
     pg_stat_replication shows the read replica as the synchronous standby.
  2. The leader's WAL sender to the synchronous standby is stopped (SIGSTOP).
  3. A row is committed on the leader: acknowledged (no WARNING), though the synchronous
     standby has not received it: the read replica confirmed it.
  4. The leader's machine is lost: kill -9 of its Patroni, its postmaster, the WAL sender.
  5. Patroni promotes the synchronous standby on its own: the row is not there.

Exit 0 when it happened as described (the README's row holds for this Patroni), 1 when it did
not (the row is wrong for this version: say so there), 77 without Patroni or etcd (CI: 1). Not
part of ctest: it shows Patroni's behaviour, not payledger's.
Usage: patroni_restart_window.py [--keep]
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import patroni_cluster  # noqa: E402
from patroni_async_failover import (commit_then_lose_the_leader, count,  # noqa: E402
                                    walsender_pid)
from patroni_cluster import ClusterError, holds_for, wait_until  # noqa: E402

REPLICA = "node3"


def synchronous(leader):
    """The standbys the leader's pg_stat_replication shows as synchronous."""
    rows = leader.psql("SELECT application_name FROM pg_stat_replication "
                       "WHERE sync_state = 'sync'", check=False) or []
    return sorted(r[0] for r in rows)


def run(c):
    c.start(timeout=240)
    c.create_database("demo")
    c.psql("CREATE TABLE t (label text)", db="demo")
    leader = c.wait_healthy()
    sync = c.sync_standby()
    if REPLICA in (leader, sync):
        raise ClusterError("%s (nosync, nofailover) is the leader or the synchronous standby"
                           % REPLICA)
    names = c.nodes[leader].scalar("SHOW synchronous_standby_names")
    print("leader %s, synchronous standby %s (synchronous_standby_names %s), read replica %s"
          % (leader, sync, names, REPLICA))

    c.stop_node(sync)
    replica_sender = walsender_pid(c.nodes[leader], REPLICA)
    c.nodes[leader].psql("SELECT pg_terminate_backend(%d)" % replica_sender)
    wait_until("%s streaming again from %s" % (REPLICA, leader),
               lambda: (walsender_pid(c.nodes[leader], REPLICA) not in (None, replica_sender)
                        and c.replication(leader).get(REPLICA, ("",))[0] == "streaming"), 60)
    c.start_node(sync)
    if c.wait_healthy(120) != leader or c.sync_standby() != sync:
        raise ClusterError("the roles changed: " + c.describe())
    print("%s's WAL sender is now the leader's first, %s's the second" % (REPLICA, sync))

    c.kill_patroni(leader)
    c.start_patroni(leader)
    wait_until("%s's Patroni leading again" % leader, lambda: c.leader() == leader, c.ttl * 3,
               pace=0.2, state=c.describe)
    wait_until("synchronous_standby_names '*' on %s" % leader,
               lambda: c.nodes[leader].scalar("SHOW synchronous_standby_names") == "*", 30)
    # Three times the ttl: long past any loop of Patroni's that would set the name again.
    holds_for("synchronous_standby_names '*' while %s streams and /sync names it" % sync,
              lambda: (c.nodes[leader].scalar("SHOW synchronous_standby_names") == "*" and
                       c.sync_standbys() == [sync] and
                       c.replication(leader).get(sync, ("",))[0] == "streaming"),
              c.ttl * 3, state=c.describe)
    print("%s's Patroni killed and started again at once: it leads on, and for %d s "
          "synchronous_standby_names stayed '*' while %s streamed and /sync named it"
          % (leader, c.ttl * 3, sync))
    confirming = synchronous(c.nodes[leader])
    print("pg_stat_replication's synchronous standby: %s" % ", ".join(confirming))
    if confirming != [REPLICA]:
        raise ClusterError("PostgreSQL does not wait for %s alone under '*': %s"
                           % (REPLICA, confirming))

    commit_then_lose_the_leader(c, leader, holder=REPLICA, starved=sync)

    began = time.monotonic()
    new = c.wait_for_leader(timeout=90, exclude=leader)
    print("new leader %s after %.1f s, chosen by Patroni" % (new, time.monotonic() - began))
    if new != sync:
        print("RESULT: Patroni promoted %s, not the synchronous standby" % new)
        return False
    if count(c.nodes[new], "acknowledged") != "0":
        print("RESULT: the acknowledged row is on %s: no loss" % new)
        return False
    print("RESULT: a commit acknowledged while synchronous_standby_names was '*' was lost by "
          "Patroni's failover to its synchronous standby")
    return True


def main():
    return patroni_cluster.demonstrate("patroni-restart-window-", run,
                                       tags={REPLICA: {"nofailover": True, "nosync": True}})


if __name__ == "__main__":
    sys.exit(main())
