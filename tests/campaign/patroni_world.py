"""The fault campaign's second engine (campaign.py --engine patroni; tests/campaign/README.md):
the serves' PostgreSQL is a Patroni cluster (tests/ha/patroni_cluster.py, the settings of
deploy/patroni/patroni-test.json), and every failover is Patroni's decision.

node1 and node2 take turns as leader and synchronous standby (synchronous_mode_strict);
node3 is the serves' read replica (tags nofailover and nosync: never a leader, never the
synchronous standby). One etcd member. The proxy's links: a and b (serves and CLI to node1 and
node2, the multi-host read-write URL), read (to node3), and etcd_nodeN (node N's Patroni to
etcd, with use_proxies, so that a partition of the leader from etcd is a proxy fault). The
faults of faults.PATRONI_KINDS break the cluster as an operator or a machine would; each
waits, before it ends, until the cluster is healthy again. Everything else (the serves, the
simulator, the receiver, the workload, the checker) is world.py's, unchanged."""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "ha"))

import patroni_cluster  # noqa: E402
from proxy import Proxy  # noqa: E402
from world import World, free_port  # noqa: E402

READ_REPLICA = "node3"
CANDIDATES = ("node1", "node2")
# How long a fault waits for the cluster to be healthy again (a leader, the other candidate
# streaming synchronously, the replica streaming): a failover after a kill takes the ttl
# (10 s), a rejoin by pg_rewind a few seconds more; on a loaded 2-core machine, margin.
HEAL_SECONDS = 120


class _On:
    """psql and scalar on a node of the cluster, with the campaign's defaults (the ledger's
    database), as world.py calls them on its nodes. `pick` names the node at each call (it
    may wait, and raises ClusterError when there is none)."""

    def __init__(self, cluster, pick):
        self.cluster, self.pick = cluster, pick

    def psql(self, sql, db="payledger", timeout=60, check=True):
        try:
            name = self.pick()
        except patroni_cluster.ClusterError:
            if check:
                raise
            return None
        return self.cluster.node(name).psql(sql, db=db, timeout=timeout, check=check)

    def scalar(self, sql, db="payledger", check=False, timeout=10):
        rows = self.psql(sql, db=db, timeout=timeout, check=check)
        return rows[0][0] if rows else None


class PatroniWorld(World):
    """World (world.py) with a Patroni cluster for the serves' PostgreSQL."""

    engine = "patroni"

    def start_databases(self, pg):
        self.link_port = {k: free_port(self.ports) for k in ("a", "b", "read")}
        self.cluster = patroni_cluster.PatroniCluster(
            os.path.join(self.tmp, "patroni"), nodes=3, etcd_members=1,
            tags={READ_REPLICA: {"nofailover": True, "nosync": True}},
            log=lambda text: self.log("patroni: " + text), ports=self.ports)
        self.proxy = Proxy(os.path.join(self.logs, "proxy.log"))
        etcd = ("127.0.0.1", self.cluster.etcd[0]["client"])
        for name in self.cluster.nodes:
            link = "etcd_" + name
            self.link_port[link] = free_port(self.ports)
            self.proxy.add(link, self.link_port[link], etcd)
            self.cluster.etcd_routes[name] = ["127.0.0.1:%d" % self.link_port[link]]
        self.log("PostgreSQL: Patroni's node1 and node2 (leader and synchronous standby), "
                 "node3 the read replica, etcd; platform", echo=True)
        seconds = self.cluster.start()
        self.log("patroni: cluster up in %.1f s: %s" % (seconds, self.cluster.describe()),
                 echo=True)
        leader = self.cluster.wait_healthy(HEAL_SECONDS)
        if leader != "node1":
            # The links are named for their nodes; node3 could never lead, and node1 or node2
            # leads first. Nothing depends on which.
            self.log("patroni: %s leads first" % leader)
        self.cluster.create_database("payledger")
        self.cluster.psql("CREATE ROLE payledger_service LOGIN")
        self.start_platform()
        self.migrate(self.cluster.url(leader))
        for link, name in (("a", "node1"), ("b", "node2"), ("read", READ_REPLICA)):
            self.proxy.add(link, self.link_port[link],
                           ("127.0.0.1", self.cluster.nodes[name].pg_port))
        # The leader as world.py's end reads it: waited for, a moment without one is no error.
        self.primary = _On(self.cluster, lambda: self.cluster.wait_for_leader(60))
        self.replica = _On(self.cluster, lambda: READ_REPLICA)
        self.heal_seconds = {}

    # --- the faults ---------------------------------------------------------------------------
    def fault_actions(self):
        """What applies each kind of faults.PATRONI_KINDS."""
        return {
            "serve_kill": self.fault_serve_kill, "serve_stop": self.fault_serve_stop,
            "serve_skew": self.fault_serve_skew, "proxy_cut": self.fault_proxy_cut,
            "proxy_stall": self.fault_proxy_stall, "proxy_slow": self.fault_proxy_slow,
            "proxy_refuse": self.fault_proxy_refuse, "read_cut": self.fault_read_cut,
            "receiver_down": self.fault_receiver_down, "receiver_slow": self.fault_receiver_slow,
            "receiver_500": self.fault_receiver_500, "receiver_429": self.fault_receiver_429,
            "receiver_410": self.fault_receiver_410,
            "switchover": self.fault_switchover, "failover": self.fault_failover,
            "pg_kill": self.fault_pg_kill, "patroni_kill": self.fault_patroni_kill,
            "standby_stop": self.fault_standby_stop, "replica_stop": self.fault_replica_stop,
            "etcd_stop": self.fault_etcd_stop, "etcd_partition": self.fault_etcd_partition,
        }

    def _healthy(self, what, kind=None):
        """Waits until the cluster is healthy (tests/ha/patroni_cluster.py wait_healthy) and
        returns its leader; a cluster that does not heal fails the fault (the run fails).
        With `kind`, the wait counts as that fault's time to heal (engine_summary)."""
        began = time.monotonic()
        leader = self.cluster.wait_healthy(HEAL_SECONDS)
        seconds = time.monotonic() - began
        self.log("patroni: %s: healthy after %.1f s, leader %s" % (what, seconds, leader))
        if kind is not None:
            self.heal_seconds.setdefault(kind, []).append(seconds)
        return leader

    def engine_summary(self):
        """Per kind of cluster fault: how many healed, and the seconds from the fault's end (a
        kill, a switchover answered, a stopped node started again) until the cluster was
        healthy again: median and maximum."""
        parts = []
        for kind, times in sorted(getattr(self, "heal_seconds", {}).items()):
            times = sorted(times)
            parts.append("%s=%d (median %.1f s, max %.1f s)" % (
                kind, len(times), times[len(times) // 2], times[-1]))
        return ["patroni: healed after " + (", ".join(parts) or "no cluster fault")]

    def fault_switchover(self, f):
        self._healthy("before the switchover")
        old, new, seconds = self.cluster.switchover(timeout=60)
        self.log("patroni: switchover %s -> %s in %.1f s" % (old, new, seconds))
        self._healthy("after the switchover", "switchover")

    def fault_failover(self, f):
        self._healthy("before the failover")
        old, new, seconds = self.cluster.failover(self.cluster.sync_standby(), timeout=60)
        self.log("patroni: failover %s -> %s in %.1f s" % (old, new, seconds))
        self._healthy("after the failover", "failover")

    def fault_pg_kill(self, f):
        self._healthy("before kill -9 of the leader's postgres")
        name = self.cluster.kill_postgres()
        self.log("patroni: the postmaster of %s killed" % name)
        self._healthy("after kill -9 of %s's postgres" % name, "pg_kill")

    def fault_patroni_kill(self, f):
        # Started again only once another node leads, and `down` seconds later: as systemd
        # does with RestartSec above the ttl, which deploy/patroni/README.md asks for. A
        # Patroni 3.0.2 started again on a primary whose lock it still holds keeps
        # synchronous_standby_names = '*' for as long as its synchronous standby streams, so
        # that the read replica (nosync) may confirm commits alone: the first one-hour run on
        # Patroni found that (deploy/patroni/README.md, "The windows that remain").
        self._healthy("before kill -9 of the leader's Patroni")
        name = self.cluster.kill_patroni()
        self.log("patroni: the Patroni of %s killed" % name)
        try:
            new = self.cluster.wait_for_leader(timeout=HEAL_SECONDS, exclude=name)
            self.log("patroni: %s leads; %s's Patroni starts again in %.2f s"
                     % (new, name, f.down))
            time.sleep(f.down)
        finally:
            self.cluster.start_patroni(name)
        self._healthy("after kill -9 of %s's Patroni" % name, "patroni_kill")

    def fault_standby_stop(self, f):
        self._healthy("before the synchronous standby's stop")
        name = self.cluster.sync_standby()
        try:
            self.cluster.stop_node(name)
            self.log("patroni: the synchronous standby %s stopped" % name)
            time.sleep(f.duration)
        finally:
            self._start_patroni_unless_running(name)
        self._healthy("after %s's stop" % name, "standby_stop")

    def fault_replica_stop(self, f):
        self._healthy("before the read replica's stop")
        try:
            self.cluster.stop_node(READ_REPLICA)
            time.sleep(f.duration)
        finally:
            self._start_patroni_unless_running(READ_REPLICA)
        self._healthy("after the read replica's stop", "replica_stop")

    def fault_etcd_stop(self, f):
        self._healthy("before etcd's stop")
        try:
            self.cluster.stop_etcd(0)
            time.sleep(f.duration)
        finally:
            if not self.cluster.etcd[0]["daemon"].running:
                self.cluster.start_etcd(0)
        self._healthy("after etcd's stop", "etcd_stop")

    def fault_etcd_partition(self, f):
        leader = self._healthy("before the leader's partition from etcd")
        link = "etcd_" + leader
        if f.how == "stall":
            self.proxy.stall(link, True)
        else:
            self.proxy.refuse(link, True)
            self.proxy.cut(link)
        self.log("patroni: %s cut from etcd (%s)" % (leader, f.how))
        try:
            time.sleep(f.duration)
        finally:
            self.proxy.heal(link)
        self._healthy("after %s's partition from etcd" % leader, "etcd_partition")

    # --- the end ------------------------------------------------------------------------------
    def _start_patroni_unless_running(self, name):
        if not self.cluster.nodes[name].patroni.running:
            self.cluster.start_patroni(name)

    def heal_databases(self):
        try:
            for i, m in enumerate(self.cluster.etcd):
                if not m["daemon"].running:
                    self.cluster.start_etcd(i)
            for name in self.cluster.nodes:
                self._start_patroni_unless_running(name)
            self._healthy("healing")
        except patroni_cluster.ClusterError as error:
            self.final_problems.append("the Patroni cluster did not heal: %s" % error)

    def stop_databases(self):
        cluster = getattr(self, "cluster", None)
        if cluster is not None:
            cluster.stop()
        if getattr(self, "platform", None) is not None:
            self.platform.stop("fast")
