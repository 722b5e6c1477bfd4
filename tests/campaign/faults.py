"""The fault schedule, generated from the seed only (random.Random(seed)) and the engine's
fault table, and its executor.

Each fault starts at its time and runs in a thread of its own, so faults overlap. Faults on one
resource take turns (a lock per serve, per proxy link, per subscription; one for PostgreSQL's
primary and standby): a fault that cannot start before the run ends is skipped and says so.
Every fault heals what it did before it ends."""

import dataclasses
import json
import hashlib
import random
import threading
import time

SUBSCRIPTIONS = ("all", "payments")


@dataclasses.dataclass(frozen=True)
class Fault:
    """One fault of the schedule: its number, kind and start (seconds into the run), and the
    parameters its kind draws (None where the kind has none)."""
    n: int
    kind: str
    start: float
    serve: int = None       # serve_*: which of the two serves
    down: float = None      # serve_kill, pg_restart, patroni_kill: seconds down
    duration: float = None  # seconds the fault lasts
    skew: int = None        # serve_skew: seconds the serve's clock is off
    stall: float = None     # failover_in_stall: seconds the standby stalls before the failover
    how: str = None         # replica_cut, read_cut, etcd_partition: "stall" or "refuse"
    link: str = None        # proxy_*: "a", "b" (a serve's database link) or "both"
    delay: float = None     # proxy_slow: seconds added to each forwarded chunk
    sub: str = None         # receiver_*: the subscription

    def params(self):
        """The drawn parameters, by name (those that are set)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("n", "kind", "start") and getattr(self, f.name) is not None}

    def as_dict(self):
        """The form the schedule's digest is taken of (the campaign's first lines print it)."""
        return dict(self.params(), kind=self.kind, start=self.start, n=self.n)


@dataclasses.dataclass(frozen=True)
class FaultKind:
    """A row of the fault table: how often the kind is drawn, what it draws (from the schedule's
    random.Random, in this order), and the resources it holds while it runs."""
    name: str
    weight: int
    draw: object        # rng -> dict of Fault's parameters
    resources: object   # Fault -> list of resource names


def _serve(f):
    return ["serve%d" % f.serve]


def _links(f):
    return ["link_a", "link_b"] if f.link == "both" else ["link_" + f.link]


def _receiver(rng):
    return dict(sub=rng.choice(SUBSCRIPTIONS), duration=round(rng.uniform(1.0, 12.0), 2))


def _skew(rng):
    skew = rng.randint(20, 250) if rng.random() < 0.75 else rng.randint(330, 600)
    return dict(serve=rng.randrange(2), skew=skew * rng.choice((-1, 1)),
                duration=round(rng.uniform(4.0, 15.0), 2))


def _cut(rng):
    return dict(how=rng.choice(("stall", "refuse")), duration=round(rng.uniform(2, 15), 2))


_PG = lambda f: ["pg", "link_repl"]  # noqa: E731 - a table's cell

# The fault table: every kind the campaign can schedule. The world (world.py) implements each
# by name in World.fault_actions, which the Executor checks against this table before it runs.
KINDS = [
    FaultKind("serve_kill", 14,
              lambda rng: dict(serve=rng.randrange(2), down=round(rng.uniform(0.1, 3.0), 2)),
              _serve),
    FaultKind("serve_stop", 10,
              lambda rng: dict(serve=rng.randrange(2), duration=round(rng.uniform(0.5, 6.0), 2)),
              _serve),
    FaultKind("serve_skew", 5, _skew, _serve),
    FaultKind("pg_restart", 6, lambda rng: dict(down=round(rng.uniform(0.2, 4.0), 2)), _PG),
    FaultKind("failover", 5, lambda rng: {}, _PG),
    FaultKind("failover_in_stall", 2, lambda rng: dict(stall=round(rng.uniform(1.0, 4.0), 2)),
              _PG),
    FaultKind("replica_cut", 5, _cut, lambda f: ["link_upstream"]),
    FaultKind("repl_stall", 4, lambda rng: dict(duration=round(rng.uniform(1.0, 13.0), 2)),
              lambda f: ["link_repl"]),
    FaultKind("proxy_cut", 8, lambda rng: dict(link=rng.choice(("a", "b", "both"))), _links),
    FaultKind("proxy_stall", 7,
              lambda rng: dict(link=rng.choice(("a", "b")),
                               duration=round(rng.uniform(0.5, 8.0), 2)),
              _links),
    FaultKind("proxy_slow", 5,
              lambda rng: dict(link=rng.choice(("a", "b")),
                               delay=round(rng.uniform(0.01, 0.3), 3),
                               duration=round(rng.uniform(2.0, 10.0), 2)),
              _links),
    FaultKind("proxy_refuse", 4,
              lambda rng: dict(link=rng.choice(("a", "b")),
                               duration=round(rng.uniform(1.0, 8.0), 2)),
              _links),
    FaultKind("read_cut", 4, _cut, lambda f: ["link_read"]),
    FaultKind("receiver_down", 5, _receiver, lambda f: ["sub_" + f.sub]),
    FaultKind("receiver_slow", 3, _receiver, lambda f: ["sub_" + f.sub]),
    FaultKind("receiver_500", 5, _receiver, lambda f: ["sub_" + f.sub]),
    FaultKind("receiver_429", 4, _receiver, lambda f: ["sub_" + f.sub]),
    FaultKind("receiver_410", 3, _receiver, lambda f: ["sub_" + f.sub]),
]
# Every resource a fault can hold: a lock each (Executor).
RESOURCES = ("serve0", "serve1", "pg", "link_repl", "link_upstream", "link_read", "link_a",
             "link_b", "sub_all", "sub_payments")

# The Patroni engine's table (campaign.py --engine patroni; patroni_world.py): the serves',
# proxy links' and receiver's kinds as above; in place of the hand-made promotion's, what happens
# to a Patroni cluster (tests/ha/patroni_cluster.py). Every failover is Patroni's decision: the
# campaign only breaks things or asks as an operator would. One "pg" lock: each of these waits
# until the cluster is healthy again before it ends.
_CLUSTER = lambda f: ["pg"]  # noqa: E731 - a table's cell
_SHARED = ("serve_kill", "serve_stop", "serve_skew", "proxy_cut", "proxy_stall", "proxy_slow",
           "proxy_refuse", "read_cut", "receiver_down", "receiver_slow", "receiver_500",
           "receiver_429", "receiver_410")
PATRONI_KINDS = [k for k in KINDS if k.name in _SHARED] + [
    # patronictl switchover: the leader hands over to the synchronous standby.
    FaultKind("switchover", 4, lambda rng: {}, _CLUSTER),
    # patronictl failover to the synchronous standby.
    FaultKind("failover", 3, lambda rng: {}, _CLUSTER),
    # kill -9 of the leader's postmaster (primary_start_timeout 0: Patroni fails over).
    FaultKind("pg_kill", 5, lambda rng: {}, _CLUSTER),
    # kill -9 of the leader's Patroni: its PostgreSQL runs on unmanaged, after the ttl another
    # node leads, and `down` seconds after that the Patroni starts again (systemd's RestartSec
    # above the ttl, as deploy/patroni/README.md asks).
    FaultKind("patroni_kill", 3, lambda rng: dict(down=round(rng.uniform(1.0, 20.0), 2)),
              _CLUSTER),
    # The synchronous standby stopped: in strict mode commits wait, none is acknowledged.
    FaultKind("standby_stop", 3, lambda rng: dict(duration=round(rng.uniform(1.0, 10.0), 2)),
              _CLUSTER),
    # The read replica (tags nofailover, nosync) stopped: reads go to the primary.
    FaultKind("replica_stop", 2, lambda rng: dict(duration=round(rng.uniform(1.0, 10.0), 2)),
              _CLUSTER),
    # etcd stopped: no leader lock, so no primary (Patroni demotes) until it is back.
    FaultKind("etcd_stop", 2, lambda rng: dict(duration=round(rng.uniform(1.0, 12.0), 2)),
              _CLUSTER),
    # The leader's Patroni cut from etcd through its proxy link (stalled or refused): it
    # demotes itself, and another node takes the lock once its ttl runs out.
    FaultKind("etcd_partition", 3, lambda rng: dict(how=rng.choice(("stall", "refuse")),
                                                    duration=round(rng.uniform(2.0, 20.0), 2)),
              _CLUSTER),
]
PATRONI_RESOURCES = ("serve0", "serve1", "pg", "link_read", "link_a", "link_b", "sub_all",
                     "sub_payments")


@dataclasses.dataclass(frozen=True)
class Table:
    """A fault table: its kinds, by name, and every resource they can hold."""
    kinds: list
    resources: tuple

    @property
    def by_name(self):
        return {k.name: k for k in self.kinds}


# The engines (campaign.py --engine): how the campaign's PostgreSQL fails over.
TABLES = {"promote": Table(KINDS, RESOURCES),
          "patroni": Table(PATRONI_KINDS, PATRONI_RESOURCES)}
BY_NAME = TABLES["promote"].by_name


def _pick(rng, kinds):
    total = sum(k.weight for k in kinds)
    x = rng.uniform(0, total)
    for k in kinds:
        x -= k.weight
        if x <= 0:
            return k
    return kinds[-1]


def make_schedule(seed, seconds, table=TABLES["promote"]):
    """The faults of a run of `seconds`, from the seed and the table alone, ordered by
    start."""
    rng = random.Random(seed)
    n = max(3, int(seconds / 3.5))
    drawn = []
    last = max(3.0, seconds - 4.0)
    for _ in range(n):
        kind = _pick(rng, table.kinds)
        start = round(rng.uniform(2.0, last), 2)
        drawn.append((start, kind.name, kind.draw(rng)))
    drawn.sort(key=lambda d: (d[0], d[1]))
    return [Fault(n=i, kind=name, start=start, **params)
            for i, (start, name, params) in enumerate(drawn)]


def digest(schedule):
    """What the campaign prints of a schedule: equal digests, equal schedules."""
    return hashlib.sha256(json.dumps([f.as_dict() for f in schedule], sort_keys=True)
                          .encode()).hexdigest()[:16]


def describe(f):
    params = f.params()
    rest = " ".join("%s=%s" % (k, params[k]) for k in sorted(params))
    return "#%-3d t=%6.2fs %-18s %s" % (f.n, f.start, f.kind, rest)


class Executor:
    """Runs the schedule: each fault at its time in a thread of its own, holding its resources'
    locks; `actions` maps every kind of the table to the function that applies it, and
    `on_error(fault, error)` hears of a fault that could not be applied."""

    def __init__(self, actions, schedule, log, on_error, table=TABLES["promote"]):
        self.by_name = table.by_name
        self.resources = table.resources
        missing = sorted(set(self.by_name) - set(actions))
        unknown = sorted(set(actions) - set(self.by_name))
        if missing or unknown:
            raise ValueError("fault actions: missing %s, not in the table %s" % (missing, unknown))
        self.actions = actions
        self.on_error = on_error
        self.schedule = schedule
        self.log = log
        self.locks = {}
        self.threads = []
        self.ran = 0
        self.ran_kinds = {}     # kind: how many of its faults ran
        self.skipped = 0
        self.count_lock = threading.Lock()

    def _lock(self, name):
        return self.locks.setdefault(name, threading.Lock())

    def start(self, t0, end):
        for name in self.resources:
            self._lock(name)
        # The dispatcher: one thread waits for each fault's time (in order), then hands it on.
        t = threading.Thread(target=self._dispatch, args=(t0, end), name="faults", daemon=True)
        t.start()
        self.dispatcher = t

    def _dispatch(self, t0, end):
        for f in self.schedule:
            delay = t0 + f.start - time.monotonic()
            if delay > 0:
                time.sleep(delay)       # the schedule's clock
            t = threading.Thread(target=self._run, args=(f, end), name="fault-%d" % f.n,
                                 daemon=True)
            t.start()
            self.threads.append(t)

    def join(self, timeout):
        self.dispatcher.join(timeout)
        stop = time.monotonic() + timeout
        for t in list(self.threads):
            t.join(max(0.1, stop - time.monotonic()))
        return all(not t.is_alive() for t in self.threads)

    def _run(self, f, end):
        names = sorted(self.by_name[f.kind].resources(f))
        held = []
        try:
            for name in names:
                lock = self._lock(name)
                if not lock.acquire(timeout=max(0.0, end - time.monotonic())):
                    self.log("fault %s: skipped, %s still busy at the end" % (describe(f), name))
                    with self.count_lock:
                        self.skipped += 1
                    return
                held.append(lock)
            started = time.monotonic()
            self.log("fault %s: begins" % describe(f))
            try:
                self.actions[f.kind](f)
                self.log("fault #%d %s: ends after %.2fs" % (f.n, f.kind,
                                                              time.monotonic() - started))
            except Exception as error:  # noqa: BLE001 - reported: the run fails (campaign)
                self.log("fault #%d %s: FAILED to apply: %r" % (f.n, f.kind, error))
                self.on_error(f, error)
            with self.count_lock:
                self.ran += 1
                self.ran_kinds[f.kind] = self.ran_kinds.get(f.kind, 0) + 1
        finally:
            for lock in held:
                lock.release()
