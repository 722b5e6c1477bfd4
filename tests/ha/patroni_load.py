#!/usr/bin/python3
"""payledger under load on a Patroni cluster (tests/ha/patroni_cluster.py), through every change
of leader Patroni makes, checked for exactness after each (deploy/patroni/README.md).

A `payledger serve` reaches the cluster only through the multi-host `read-write` URL and is
never restarted. Four clients register orders and post each order's signed generic payment
callback, as fast as they are answered, for the whole run; a fifth asks `/readyz` every 100 ms.
Every tenth acknowledged callback is delivered again, and must be answered `duplicate`. The
faults, one after another, each while the load runs:

  1. `patronictl switchover`,
  2. `patronictl failover` to the synchronous standby,
  3. kill -9 of the leader's postmaster (a failover: primary_start_timeout 0),
  4. kill -9 of the leader's Patroni: its PostgreSQL runs on as a primary whose commits wait
     for a synchronous standby that is now the leader, until its Patroni is back (as systemd
     would restart it) and demotes it,
  5. both standbys stopped (strict synchronous mode: commits wait, nothing may be
     acknowledged), then started,
  6. etcd stopped (one member: no DCS, the leader demotes itself; no primary), then started.

After each: every delivery answered 2xx so far is on the leader exactly once; every delivery
not answered 2xx (503, no answer) is sent again until it is, and is then exactly once;
payledger follows the new leader within ttl + loop_wait of the cluster having one writable
primary again with a synchronous standby streaming from it (the time to the first callback
sent after that and acknowledged, printed); while the
standbys are stopped nothing is acknowledged and `/readyz` turns 503 (a commit has waited 5 s);
while there is no primary `/readyz` answers 503 and nothing is acknowledged. At the end every node holds every order's two events once, and
`payledger verify` through the multi-host URL passes; no answer was other than 2xx, 503 or none
(a client timeout of 30 s). Prints the figures per fault (time to
follow, answers other than 2xx, in-doubt deliveries found committed on retry) and a JSON line.

Usage: patroni_load.py --bin PAYLEDGER [--keep]
Exit 77 (ctest: skipped) when Patroni, etcd or PostgreSQL 15 is not installed, except under CI
(the variable CI set), where that fails.
"""

import argparse
import hashlib
import hmac
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import patroni_cluster  # noqa: E402
from patroni_cluster import ClusterError, PatroniCluster, wait_until  # noqa: E402

MERCHANT_TOKEN = "patroni-load-merchant-token"
GENERIC_SECRET = "patroni-load-generic-secret-0123456789"
AMOUNT = 100  # fen, every order
CLIENTS = 4
CLIENT_TIMEOUT = 30.0  # s: a request unanswered for longer counts as not answered


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    """`payledger serve` on a free port, its database the cluster's multi-host URL."""

    def __init__(self, binary, folder, database_url):
        self.port = free_port()
        self.config = os.path.join(folder, "serve.json")
        self.log = os.path.join(folder, "serve.log")
        fd = os.open(self.config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"listen": "127.0.0.1:%d" % self.port, "database_url": database_url,
                       "tokens": {"merchant": [MERCHANT_TOKEN]},
                       "generic": {"secret": GENERIC_SECRET}}, f)
        with open(self.log, "ab") as out:
            self.proc = patroni_cluster.spawn([binary, "serve", "--config", self.config],
                                              stdout=out, stderr=out,
                                              preexec_fn=patroni_cluster._die_with_parent)
        wait_until("payledger serve ready on port %d" % self.port,
                   lambda: self.get("/readyz")[0] == 200, 60, pace=0.1)

    def get(self, path, timeout=3.0):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        except (OSError, http.client.HTTPException) as e:
            return None, str(e).encode()
        finally:
            conn.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Client:
    """One keep-alive connection; a request that fails or times out reconnects."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def post(self, path, body, headers):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                                   timeout=CLIENT_TIMEOUT)
        try:
            self.conn.request("POST", path, body=body, headers=headers)
            resp = self.conn.getresponse()
            return resp.status, resp.read()
        except (OSError, http.client.HTTPException) as e:
            self.conn.close()
            self.conn = None
            return None, str(e).encode()


def order_request(otn):
    body = json.dumps({"out_trade_no": otn, "account_id": "shop-1", "amount": AMOUNT,
                       "currency": "CNY"}, separators=(",", ":"))
    return "/v1/orders", body, {"Authorization": "Bearer " + MERCHANT_TOKEN,
                                "Content-Type": "application/json"}


def payment_request(otn):
    body = json.dumps({"event_type": "PAYMENT_SUCCEEDED", "out_trade_no": otn,
                       "transaction_id": "TX" + otn, "amount": AMOUNT, "currency": "CNY"},
                      separators=(",", ":")).encode()
    t = str(int(time.time()))  # signed when sent: a retry is signed again
    mac = hmac.new(GENERIC_SECRET.encode(), t.encode() + b"." + body, hashlib.sha256).hexdigest()
    return "/v1/callbacks/generic", body, {"Content-Type": "application/json",
                                           "Payledger-Signature": "t=%s,v1=%s" % (t, mac)}


def outcome(body):
    try:
        value = json.loads(body)
        return value.get("outcome") if isinstance(value, dict) else None
    except ValueError:
        return None


class Load:
    """The clients. Each order: registered (retried until 201 or 200), then its payment callback
    posted once; a callback not answered 2xx is left pending, sent again by settle()."""

    def __init__(self, port):
        self.port = port
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.paused = threading.Event()
        self.acked = {}       # otn -> (answered at, outcome) for callbacks answered 2xx
        self.pending = []     # otns whose callback was not answered 2xx
        self.registered = set()
        self.duplicates = 0   # callbacks delivered again and answered duplicate
        self.wrong = []       # answers no fault may explain
        self.not_2xx = {}     # status (None: no answer) -> count, callbacks and registrations
        self.ack_times = []   # (request sent at, answered at) of every callback answered 2xx
        self.threads = [threading.Thread(target=self._work, args=(w,), daemon=True)
                        for w in range(CLIENTS)]
        self.readyz = []      # (asked at, status)
        self.readyz_thread = threading.Thread(target=self._probe, daemon=True)

    def start(self):
        for t in self.threads:
            t.start()
        self.readyz_thread.start()

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(CLIENT_TIMEOUT + 10)
        self.readyz_thread.join(10)

    def _count(self, status):
        with self.lock:
            self.not_2xx[status] = self.not_2xx.get(status, 0) + 1

    def _work(self, w):
        client = Client(self.port)
        i = 0
        while not self.stop_flag.is_set():
            if self.paused.is_set():
                time.sleep(0.05)  # settle() is checking; the pace, not a synchronisation
                continue
            i += 1
            otn = "HA-%d-%07d" % (w, i)
            while not self.stop_flag.is_set():
                status, _ = client.post(*order_request(otn))
                if status in (200, 201):
                    with self.lock:
                        self.registered.add(otn)
                    break
                self._count(status)
                time.sleep(0.05)  # no primary yet: the pace of a client retrying
            else:
                return
            sent = time.monotonic()
            status, body = client.post(*payment_request(otn))
            answered = time.monotonic()
            with self.lock:
                if status is not None and 200 <= status < 300:
                    self.acked[otn] = (answered, outcome(body))
                    self.ack_times.append((sent, answered))
                else:
                    self.pending.append(otn)
                    self.not_2xx[status] = self.not_2xx.get(status, 0) + 1
            if i % 10 == 0 and status is not None and 200 <= status < 300:
                # Every tenth acknowledged callback delivered again, as the platforms do: a
                # duplicate (or, in a fault, not answered: then sent again by settle()).
                status, body = client.post(*payment_request(otn))
                with self.lock:
                    if status is not None and 200 <= status < 300:
                        self.duplicates += 1
                        if outcome(body) != "duplicate":
                            self.wrong.append("%s delivered again: %s %s"
                                              % (otn, status, body[:200]))
                    else:
                        self.pending.append(otn)
                        self.not_2xx[status] = self.not_2xx.get(status, 0) + 1

    def _probe(self):
        conn = None
        while not self.stop_flag.is_set():
            asked = time.monotonic()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/readyz")
                resp = conn.getresponse()
                resp.read()
                status = resp.status
            except (OSError, http.client.HTTPException):
                status = None
                if conn is not None:
                    conn.close()
                conn = None
            with self.lock:
                self.readyz.append((asked, status))
            time.sleep(0.1)  # the probe's period

    def readyz_since(self, t, status):
        with self.lock:
            return any(asked >= t and s == status for asked, s in self.readyz)

    def snapshot(self):
        with self.lock:
            return dict(self.acked), list(self.pending), set(self.registered), \
                list(self.ack_times), dict(self.not_2xx)

    def acks_between(self, begin, end):
        """Callbacks answered 2xx whose request was sent at or after `begin` and answered
        before `end`."""
        with self.lock:
            return [a for s, a in self.ack_times if s >= begin and a < end]

    def first_ack_sent_after(self, t, timeout):
        """Waits for a callback sent after `t` to be answered 2xx; its answer time."""
        def found():
            with self.lock:
                later = [a for s, a in self.ack_times if s >= t]
            return min(later) if later else None
        return wait_until("a callback sent after the cluster had one primary acknowledged",
                          found, timeout, pace=0.05)


class Run:
    def __init__(self, cluster, binary, folder):
        self.c = cluster
        self.binary = binary
        self.folder = folder
        self.serve = None
        self.load = None
        self.figures = []
        self.checked_pending = 0

    def say(self, text):
        print("  " + text, flush=True)

    def writable_primaries(self):
        return [n.name for n in self.c.nodes.values() if n.in_recovery() is False]

    def wait_one_primary(self, timeout=120, exclude=None):
        """Waits until exactly one node accepts writes, Patroni's leader, not `exclude`;
        returns (its name, the time it was seen)."""
        def one():
            primaries = self.writable_primaries()
            leader = self.c.leader()
            if len(primaries) == 1 and primaries[0] == leader and leader != exclude:
                return leader
            return None
        name = wait_until("one writable primary, Patroni's leader%s"
                          % (", not " + exclude if exclude else ""), one, timeout, pace=0.1,
                          state=self.c.describe)
        return name, time.monotonic()

    def events_on(self, node):
        """{(otn, event_type): count} of the run's events on `node`."""
        rows = self.c.nodes[node].psql(
            "SELECT out_trade_no, event_type, count(*) FROM ledger_events "
            "WHERE out_trade_no LIKE 'HA-%' GROUP BY 1, 2", db="payledger", timeout=60)
        return {(r[0], r[1]): int(r[2]) for r in rows}

    def settle(self, step, leader):
        """The checks after a change: every callback acknowledged so far on `leader` once;
        every one not acknowledged sent again until it is, then once too."""
        self.load.paused.set()
        try:
            acked, pending, registered, _, _ = self.load.snapshot()
            events = self.events_on(leader)
            missing = [o for o in acked if events.get((o, "PAYMENT_SUCCEEDED"), 0) != 1]
            if missing:
                raise ClusterError("%s: %d acknowledged callbacks not on the leader %s exactly "
                                   "once, e.g. %s (counts %s)"
                                   % (step, len(missing), leader, missing[:5],
                                      [events.get((o, "PAYMENT_SUCCEEDED"), 0)
                                       for o in missing[:5]]))
            unregistered = [o for o in registered if events.get((o, "ORDER_CREATED"), 0) != 1]
            if unregistered:
                raise ClusterError("%s: %d registered orders not on the leader %s exactly once, "
                                   "e.g. %s" % (step, len(unregistered), leader,
                                                unregistered[:5]))
            client = Client(self.serve.port)
            retried = {"appended": 0, "duplicate": 0, "again": 0}
            for otn in pending[self.checked_pending:]:
                deadline = time.monotonic() + 60
                while True:
                    status, body = client.post(*payment_request(otn))
                    if status is not None and 200 <= status < 300:
                        break
                    if time.monotonic() > deadline:
                        raise ClusterError("%s: the callback of %s was not acknowledged on "
                                           "retry within 60 s: %s %s"
                                           % (step, otn, status, body[:200]))
                    time.sleep(0.1)  # the pace of a platform's retry
                kind = outcome(body)
                if otn in acked:
                    # A delivery again of an acknowledged callback: a duplicate, whatever the
                    # fault did to the answer of its second delivery.
                    if kind != "duplicate":
                        raise ClusterError("%s: %s was acknowledged, and its delivery again "
                                           "answered %s %s" % (step, otn, status, body[:200]))
                    retried["again"] += 1
                    continue
                if kind not in retried:
                    raise ClusterError("%s: the retry of %s answered %s %s"
                                       % (step, otn, status, body[:200]))
                retried[kind] += 1
                with self.load.lock:
                    self.load.acked[otn] = (time.monotonic(), "retried " + kind)
            self.checked_pending = len(pending)
            events = self.events_on(leader)
            for otn in pending:
                if events.get((otn, "PAYMENT_SUCCEEDED"), 0) != 1:
                    raise ClusterError("%s: %s's payment is on the leader %d times after its "
                                       "retry" % (step, otn,
                                                  events.get((otn, "PAYMENT_SUCCEEDED"), 0)))
            return len(acked), retried
        finally:
            self.load.paused.clear()

    def record(self, step, began, one_primary_at, leader, extra=""):
        """Time to follow, and the settle checks."""
        budget = self.c.ttl + self.c.loop_wait
        # Strict synchronous mode: a commit completes once a standby streams from the new
        # primary as its synchronous one (after a kill, the third node re-pointed, or the old
        # primary rewound). payledger's time to follow is counted from then.
        wait_until("a synchronous standby streaming from %s" % leader,
                   lambda: ("streaming", "sync") in self.c.replication(leader).values(), 120,
                   pace=0.05, state=self.c.describe)
        committable_at = max(one_primary_at, time.monotonic())
        followed_at = self.load.first_ack_sent_after(committable_at, budget + 30)
        follow = followed_at - committable_at
        _, _, _, ack_times, not_2xx = self.load.snapshot()
        before = [a for _, a in ack_times if a < began]
        gap = followed_at - (max(before) if before else began)
        acked, retried = self.settle(step, leader)
        figure = {"step": step, "leader": leader,
                  "one_primary_after_s": round(one_primary_at - began, 2),
                  "sync_standby_after_s": round(committable_at - began, 2),
                  "followed_after_s": round(follow, 2),
                  "no_ack_for_s": round(gap, 2), "acked_so_far": acked,
                  "retried_appended": retried["appended"],
                  "retried_duplicate": retried["duplicate"],
                  "delivered_again_duplicate": retried["again"],
                  "not_2xx_so_far": {str(k): v for k, v in not_2xx.items()}}
        self.figures.append(figure)
        self.say("%-30s leader %s; one primary after %5.1f s, with a synchronous standby after "
                 "%5.1f s, payledger followed %4.1f s later (no callback acknowledged for "
                 "%4.1f s); not acknowledged, then on retry: %d appended, %d duplicate (in "
                 "doubt, committed)%s"
                 % (step, leader, one_primary_at - began, committable_at - began, follow, gap,
                    retried["appended"], retried["duplicate"], extra))
        if retried["again"]:
            self.say("%-30s %d deliveries again of acknowledged callbacks not answered in the "
                     "fault: duplicate on retry" % ("", retried["again"]))
        if follow > budget:
            raise ClusterError("%s: payledger followed the new leader after %.1f s, more than "
                               "ttl + loop_wait (%d s)" % (step, follow, budget))

    def steady(self, seconds=2.0):
        """Lets the load run, and proves it is acknowledged, before the next fault."""
        t = time.monotonic()
        self.load.first_ack_sent_after(t, 60)
        time.sleep(seconds)  # load between faults, not a synchronisation

    def run(self):
        c = self.c
        seconds = c.start(timeout=240)
        self.say("cluster: leader %s elected in %.1f s" % (c.leader(), seconds))
        c.create_database("payledger")
        c.migrate(self.binary)
        self.serve = Serve(self.binary, self.folder, c.multihost_url())
        self.load = Load(self.serve.port)
        self.load.start()
        self.steady()

        # 1. patronictl switchover.
        began = time.monotonic()
        old = c.leader()
        c.patronictl("switchover", "--leader", old, "--force")
        new, at = self.wait_one_primary(exclude=old)
        self.record("1 patronictl switchover", began, at, new)
        c.wait_healthy(timeout=120)
        self.steady()

        # 2. patronictl failover to the synchronous standby.
        began = time.monotonic()
        old = c.leader()
        candidate = c.sync_standby()
        c.patronictl("failover", "--candidate", candidate, "--force")
        new, at = self.wait_one_primary(exclude=old)
        if new != candidate:
            raise ClusterError("failover went to %s, not %s" % (new, candidate))
        self.record("2 patronictl failover", began, at, new)
        c.wait_healthy(timeout=120)
        self.steady()

        # 3. kill -9 of the leader's postmaster.
        began = time.monotonic()
        old = c.kill_postgres()
        new, at = self.wait_one_primary(exclude=old)
        self.record("3 kill -9 postgres", began, at, new)
        c.wait_replica_of(old, new, timeout=120)
        c.wait_healthy(timeout=120)
        self.steady()

        # 4. kill -9 of the leader's Patroni; it is started again once another node leads.
        began = time.monotonic()
        old = c.kill_patroni()
        new = c.wait_for_leader(timeout=90, exclude=old)
        c.start_patroni(old)
        new, at = self.wait_one_primary(exclude=old)
        self.record("4 kill -9 patroni", began, at, new,
                    "; %s's Patroni started again %.1f s after the kill"
                    % (old, time.monotonic() - began))
        c.wait_replica_of(old, new, timeout=120)
        c.wait_healthy(timeout=120)
        self.steady()

        # 5. Both standbys stopped: strict synchronous mode, commits wait.
        leader = c.leader()
        standbys = [n for n in c.nodes if n != leader]
        began = time.monotonic()
        for name in standbys:
            c.stop_node(name)
        stopped_at = time.monotonic()
        # The database answers, but writes cannot end: readiness says so once a commit has
        # waited 5 s (App::kWriteStalledAfter).
        wait_until("/readyz 503 while commits wait for a standby",
                   lambda: self.load.readyz_since(stopped_at, 503), 30, pace=0.1)
        stalled_after = time.monotonic() - stopped_at
        time.sleep(max(0.0, c.ttl - stalled_after))  # the window watched: a ttl, no standby
        window_end = time.monotonic()
        acks = self.load.acks_between(stopped_at, window_end)
        if acks:
            raise ClusterError("5: %d callbacks acknowledged while no standby ran" % len(acks))
        for name in standbys:
            c.start_node(name)
        # Commits go on once a standby is synchronous again: followed from then.
        wait_until("a synchronous standby again", lambda: c.sync_standbys(), 120, pace=0.1,
                   state=c.describe)
        at = time.monotonic()
        self.record("5 both standbys stopped", began, at, leader,
                    "; nothing acknowledged in the %.1f s with no standby, /readyz 503 "
                    "after %.1f s" % (window_end - stopped_at, stalled_after))
        leader_now = leader
        for name in standbys:
            c.wait_replica_of(name, leader_now, timeout=120)
        c.wait_healthy(timeout=120)
        self.steady()

        # 6. etcd stopped: no DCS, the leader demotes itself; no primary until it is back.
        leader = c.leader()
        began = time.monotonic()
        member = c.stop_etcd()
        wait_until("%s no longer a writable primary without etcd" % leader,
                   lambda: not self.writable_primaries(), 60, pace=0.1, state=c.describe)
        demoted_at = time.monotonic()
        wait_until("/readyz 503 while there is no primary",
                   lambda: self.load.readyz_since(demoted_at, 503), 30, pace=0.1)
        time.sleep(c.loop_wait + 1)  # the window watched beyond the first 503
        window_end = time.monotonic()
        acks = self.load.acks_between(demoted_at, window_end)
        if acks:
            raise ClusterError("6: %d callbacks acknowledged with no primary" % len(acks))
        c.start_etcd(member)
        leader_now, at = self.wait_one_primary()
        self.record("6 etcd stopped", began, at, leader_now,
                    "; no primary for %.1f s: /readyz 503, nothing acknowledged"
                    % (at - demoted_at))
        c.wait_healthy(timeout=120)
        self.steady()

        # The end: every order's two events once on every node, and verify passes.
        self.load.stop()
        leader = c.leader()
        self.settle("end", leader)
        acked, pending, registered, _, _ = self.load.snapshot()
        expected = {}
        for otn in registered:
            expected[(otn, "ORDER_CREATED")] = 1
        for otn in acked:
            expected[(otn, "PAYMENT_SUCCEEDED")] = 1
        for name in c.nodes:
            def same(name=name):
                return self.events_on(name) == expected
            wait_until("every event once on %s" % name, same, 60, pace=0.5)
        env = dict(os.environ, PAYLEDGER_DATABASE_URL=c.multihost_url())
        proc = subprocess.run([self.binary, "verify"], env=env, capture_output=True,
                              timeout=300)
        if proc.returncode != 0:
            raise ClusterError("payledger verify exited %d: %s" % (
                proc.returncode, (proc.stdout + proc.stderr).decode(errors="replace")))
        if self.load.wrong:
            raise ClusterError("%d wrong answers, e.g. %s" % (len(self.load.wrong),
                                                               self.load.wrong[:3]))
        _, _, _, _, not_2xx = self.load.snapshot()
        if set(not_2xx) - {503, None}:
            # In a fault a delivery is in doubt or refused for want of a primary: 503, or no
            # answer within the client's timeout. Anything else is a bug.
            raise ClusterError("answers other than 2xx and 503: %s" % not_2xx)
        status, _ = self.serve.get("/readyz")
        self.say("end: %d orders registered, %d paid, %d callbacks delivered again answered "
                 "duplicate; answers not 2xx: %s; each event once on all three nodes; payledger "
                 "verify passed; /readyz %s; serve never restarted (pid %d)"
                 % (len(registered), len(acked), self.load.duplicates,
                    {str(k): v for k, v in not_2xx.items()}, status, self.serve.proc.pid))
        if self.serve.proc.poll() is not None:
            raise ClusterError("payledger serve exited")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True, help="the payledger binary")
    parser.add_argument("--keep", action="store_true", help="keep the folder, also on success")
    args = parser.parse_args()
    patroni_cluster.require_programs()
    parent = os.environ.get("PAYLEDGER_TEST_TMPDIR") or None
    folder = tempfile.mkdtemp(prefix="patroni-load-", dir=parent)
    cluster = PatroniCluster(folder)
    cluster.install_signal_handlers()
    run = Run(cluster, os.path.abspath(args.bin), folder)
    print("payledger on Patroni under load, in %s (ttl %d, loop_wait %d, retry_timeout %d)"
          % (folder, cluster.ttl, cluster.loop_wait, cluster.retry_timeout), flush=True)
    ok = False
    began = time.monotonic()
    try:
        run.run()
        ok = True
    except Exception:
        traceback.print_exc()
        try:
            print("cluster: " + cluster.describe(), file=sys.stderr)
        except Exception as e:  # the cluster may be what failed
            print("cluster: (%s)" % e, file=sys.stderr)
    finally:
        if run.load is not None:
            run.load.stop()
        if run.serve is not None:
            run.serve.stop()
            if not ok:
                with open(run.serve.log, errors="replace") as f:
                    print("--- serve.log (last lines)\n" + "".join(f.readlines()[-40:]),
                          file=sys.stderr)
        cluster.stop()
    print(json.dumps({"ok": ok, "ttl": cluster.ttl, "loop_wait": cluster.loop_wait,
                      "total_seconds": round(time.monotonic() - began, 1),
                      "figures": run.figures}))
    return patroni_cluster.finish(ok, folder, args.keep, parent)


if __name__ == "__main__":
    sys.exit(main())
