"""The fault schedule, generated from the seed only (random.Random(seed)), and its executor.

Each fault starts at its time and runs in a thread of its own, so faults overlap. Faults on one
resource take turns (a lock per serve, per proxy link, per subscription; one for PostgreSQL's
primary and standby): a fault that cannot start before the run ends is skipped and says so.
Every fault heals what it did before it ends."""

import random
import threading
import time

# kind, weight
KINDS = [
    ("serve_kill", 14), ("serve_stop", 10), ("serve_skew", 5),
    ("pg_restart", 6), ("failover", 5), ("failover_in_stall", 2),
    ("replica_cut", 5), ("repl_stall", 4),
    ("proxy_cut", 8), ("proxy_stall", 7), ("proxy_slow", 5), ("proxy_refuse", 4),
    ("read_cut", 4),
    ("receiver_down", 5), ("receiver_slow", 3), ("receiver_500", 5), ("receiver_429", 4),
    ("receiver_410", 3),
]
SUBSCRIPTIONS = ("all", "payments")


def _pick(rng):
    total = sum(w for _, w in KINDS)
    x = rng.uniform(0, total)
    for kind, w in KINDS:
        x -= w
        if x <= 0:
            return kind
    return KINDS[-1][0]


def make_schedule(seed, seconds):
    rng = random.Random(seed)
    n = max(3, int(seconds / 3.5))
    faults = []
    last = max(3.0, seconds - 4.0)
    for i in range(n):
        kind = _pick(rng)
        start = round(rng.uniform(2.0, last), 2)
        f = {"kind": kind, "start": start}
        if kind == "serve_kill":
            f.update(serve=rng.randrange(2), down=round(rng.uniform(0.1, 3.0), 2))
        elif kind == "serve_stop":
            f.update(serve=rng.randrange(2), duration=round(rng.uniform(0.5, 6.0), 2))
        elif kind == "serve_skew":
            skew = rng.randint(20, 250) if rng.random() < 0.75 else rng.randint(330, 600)
            f.update(serve=rng.randrange(2), skew=skew * rng.choice((-1, 1)),
                     duration=round(rng.uniform(4.0, 15.0), 2))
        elif kind == "pg_restart":
            f.update(down=round(rng.uniform(0.2, 4.0), 2))
        elif kind == "failover":
            pass
        elif kind == "failover_in_stall":
            f.update(stall=round(rng.uniform(1.0, 4.0), 2))
        elif kind in ("replica_cut", "read_cut"):
            f.update(how=rng.choice(("stall", "refuse")), duration=round(rng.uniform(2, 15), 2))
        elif kind == "repl_stall":
            f.update(duration=round(rng.uniform(1.0, 13.0), 2))
        elif kind == "proxy_cut":
            f.update(link=rng.choice(("a", "b", "both")))
        elif kind == "proxy_stall":
            f.update(link=rng.choice(("a", "b")), duration=round(rng.uniform(0.5, 8.0), 2))
        elif kind == "proxy_slow":
            f.update(link=rng.choice(("a", "b")), delay=round(rng.uniform(0.01, 0.3), 3),
                     duration=round(rng.uniform(2.0, 10.0), 2))
        elif kind == "proxy_refuse":
            f.update(link=rng.choice(("a", "b")), duration=round(rng.uniform(1.0, 8.0), 2))
        elif kind.startswith("receiver_"):
            f.update(sub=rng.choice(SUBSCRIPTIONS), duration=round(rng.uniform(1.0, 12.0), 2))
        faults.append(f)
    faults.sort(key=lambda f: (f["start"], f["kind"]))
    for i, f in enumerate(faults):
        f["n"] = i
    return faults


def describe(f):
    rest = " ".join("%s=%s" % (k, f[k]) for k in sorted(f) if k not in ("kind", "start", "n"))
    return "#%-3d t=%6.2fs %-18s %s" % (f["n"], f["start"], f["kind"], rest)


class Executor:
    def __init__(self, world, schedule, log):
        self.world = world
        self.schedule = schedule
        self.log = log
        self.locks = {}
        self.threads = []
        self.ran = 0
        self.skipped = 0
        self.count_lock = threading.Lock()

    def _lock(self, name):
        return self.locks.setdefault(name, threading.Lock())

    def _resources(self, f):
        kind = f["kind"]
        if kind.startswith("serve_"):
            return ["serve%d" % f["serve"]]
        if kind in ("pg_restart", "failover", "failover_in_stall"):
            return ["pg", "link_repl"]
        if kind == "repl_stall":
            return ["link_repl"]
        if kind == "replica_cut":
            return ["link_upstream"]
        if kind == "read_cut":
            return ["link_read"]
        if kind.startswith("proxy_"):
            return ["link_a", "link_b"] if f["link"] == "both" else ["link_" + f["link"]]
        if kind.startswith("receiver_"):
            return ["sub_" + f["sub"]]
        return []

    def start(self, t0, end):
        for name in ("serve0", "serve1", "pg", "link_repl", "link_upstream", "link_read",
                     "link_a", "link_b", "sub_all", "sub_payments"):
            self._lock(name)
        # The dispatcher: one thread waits for each fault's time (in order), then hands it on.
        t = threading.Thread(target=self._dispatch, args=(t0, end), name="faults", daemon=True)
        t.start()
        self.dispatcher = t

    def _dispatch(self, t0, end):
        for f in self.schedule:
            delay = t0 + f["start"] - time.monotonic()
            if delay > 0:
                time.sleep(delay)       # the schedule's clock
            t = threading.Thread(target=self._run, args=(f, end), name="fault-%d" % f["n"],
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
        names = sorted(self._resources(f))
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
                getattr(self.world, "fault_" + f["kind"])(f)
                self.log("fault #%d %s: ends after %.2fs" % (f["n"], f["kind"],
                                                              time.monotonic() - started))
            except Exception as error:
                self.log("fault #%d %s: FAILED to apply: %r" % (f["n"], f["kind"], error))
                self.world.note_fault_error(f, error)
            with self.count_lock:
                self.ran += 1
        finally:
            for lock in held:
                lock.release()
