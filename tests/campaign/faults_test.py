#!/usr/bin/python3
"""Tests of the fault campaign's schedule and executor, tests/campaign/faults.py (ctest
CampaignFaultsSelfTest; no database, Debian's /usr/bin/python3 and its standard library only).

    /usr/bin/python3 tests/campaign/faults_test.py -v

A seed names a run: the schedule must be the seed's alone, the same on every machine and after
every change of the code that draws it (the digests below were taken before the fault table
replaced the code's if-chain, and still hold). Every kind of the table must hold only known
resources and have an action in the world (world.py World.fault_actions, and for the Patroni
engine patroni_world.py's); faults on one
resource must take turns; a fault that fails must be reported, not swallowed."""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import faults  # noqa: E402


class Schedule(unittest.TestCase):
    def test_a_seed_gives_the_same_schedule_as_before_the_table(self):
        for seed, seconds, count, digest in [(1, 60, 17, "da275fdf2d2b30eb"),
                                             (7, 60, 17, "b4b07683591de495"),
                                             (13, 90, 25, "83fac6293d012bd2"),
                                             (42, 3600, 1028, "b7af7514c0641c92"),
                                             # README.md's one-hour runs.
                                             (2026, 3600, 1028, "14925796c2e61920")]:
            schedule = faults.make_schedule(seed, seconds)
            self.assertEqual(len(schedule), count, seed)
            self.assertEqual(faults.digest(schedule), digest, seed)

    def test_faults_are_numbered_in_start_order_within_the_run(self):
        schedule = faults.make_schedule(3, 600)
        self.assertEqual([f.n for f in schedule], list(range(len(schedule))))
        self.assertEqual(schedule, sorted(schedule, key=lambda f: (f.start, f.kind)))
        self.assertTrue(all(2.0 <= f.start <= 596.0 for f in schedule))

    def test_every_kind_is_drawn_and_holds_known_resources_only(self):
        seen = set()
        for f in faults.make_schedule(42, 3600):
            seen.add(f.kind)
            resources = faults.BY_NAME[f.kind].resources(f)
            self.assertTrue(resources, faults.describe(f))
            self.assertLessEqual(set(resources), set(faults.RESOURCES), faults.describe(f))
        self.assertEqual(seen, set(faults.BY_NAME))

    def test_the_patroni_engine_has_its_own_table_and_the_same_seed_gives_the_same_run(self):
        table = faults.TABLES["patroni"]
        for seed, seconds, count, digest in [(13, 60, 17, "d33396ce531d37f5"),
                                             # README.md's one-hour run on Patroni.
                                             (2026, 3600, 1028, "f850b8ac7d8af52e")]:
            schedule = faults.make_schedule(seed, seconds, table)
            self.assertEqual(len(schedule), count, seed)
            self.assertEqual(faults.digest(schedule), digest, seed)
        seen = set()
        for f in faults.make_schedule(42, 3600, table):
            seen.add(f.kind)
            resources = table.by_name[f.kind].resources(f)
            self.assertTrue(resources, faults.describe(f))
            self.assertLessEqual(set(resources), set(table.resources), faults.describe(f))
        self.assertEqual(seen, set(table.by_name))
        # The hand-made promotion's kinds are not Patroni's, and Patroni's are not drawn in the
        # default engine (whose seeds' schedules the test above holds).
        self.assertNotIn("pg_restart", table.by_name)
        self.assertNotIn("etcd_partition", faults.BY_NAME)

    def test_describe_names_the_kind_and_every_drawn_parameter(self):
        f = faults.Fault(n=3, kind="proxy_slow", start=12.5, link="a", delay=0.05, duration=4.0)
        self.assertEqual(faults.describe(f),
                         "#3   t= 12.50s proxy_slow         delay=0.05 duration=4.0 link=a")


def actions_for_every_kind(action):
    return {kind.name: action for kind in faults.KINDS}


class Executor(unittest.TestCase):
    def test_actions_must_match_the_table(self):
        every = actions_for_every_kind(lambda f: None)
        missing = dict(every)
        del missing["failover"]
        with self.assertRaisesRegex(ValueError, "failover"):
            faults.Executor(missing, [], print, lambda f, e: None)
        with self.assertRaisesRegex(ValueError, "serve_melt"):
            faults.Executor(dict(every, serve_melt=lambda f: None), [], print, lambda f, e: None)

    def test_the_world_has_an_action_for_every_kind(self):
        import world  # No process starts before World.setup.
        the_world = world.World.__new__(world.World)
        faults.Executor(the_world.fault_actions(), [], print, lambda f, e: None)

    def test_the_patroni_world_has_an_action_for_every_kind_of_its_table(self):
        import patroni_world  # No process starts before setup.
        the_world = patroni_world.PatroniWorld.__new__(patroni_world.PatroniWorld)
        table = faults.TABLES["patroni"]
        faults.Executor(the_world.fault_actions(), [], print, lambda f, e: None, table)
        with self.assertRaisesRegex(ValueError, "etcd_partition"):
            faults.Executor(the_world.fault_actions(), [], print, lambda f, e: None)

    def test_faults_on_one_resource_take_turns_and_a_failure_is_reported(self):
        # Two faults on serve0 at once, and one on serve1 that fails.
        schedule = [faults.Fault(n=0, kind="serve_kill", start=0.0, serve=0, down=0.1),
                    faults.Fault(n=1, kind="serve_stop", start=0.0, serve=0, duration=0.1),
                    faults.Fault(n=2, kind="serve_kill", start=0.0, serve=1, down=0.1)]
        lock = threading.Lock()
        inside = []       # the serve0 faults running now
        overlapped = []
        ran = []
        second_in = threading.Event()

        def apply(f):
            if f.serve == 1:
                raise RuntimeError("the serve would not die")
            with lock:
                if inside:
                    overlapped.append(f.n)
                inside.append(f.n)
            if len(ran) == 0:
                # The first waits a while for the second: it arrives only if the lock is broken.
                second_in.wait(0.5)
            else:
                second_in.set()
            with lock:
                inside.remove(f.n)
                ran.append(f.n)

        reported = []
        executor = faults.Executor(actions_for_every_kind(apply), schedule, lambda text: None,
                                   lambda f, error: reported.append((f.n, str(error))))
        now = time.monotonic()
        executor.start(now, now + 30)
        self.assertTrue(executor.join(30))
        self.assertEqual(overlapped, [])
        self.assertEqual(sorted(ran), [0, 1])
        self.assertEqual(reported, [(2, "the serve would not die")])
        self.assertEqual((executor.ran, executor.skipped), (3, 0))


if __name__ == "__main__":
    unittest.main()
