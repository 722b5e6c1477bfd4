"""The fault campaign's world (tests/campaign/README.md): the clusters, the serves, the platform
simulator, the proxy and the receiver, set up, broken by the faults of faults.py, healed and
stopped. campaign.py runs it."""

import base64
import datetime
import glob
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import notices  # noqa: E402
import records  # noqa: E402
import workload  # noqa: E402
from cluster import Node, wait_until  # noqa: E402
from proxy import Proxy  # noqa: E402
from receiver import Receiver  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def find_faketime():
    """libfaketime's multi-threaded library, wherever Debian's multiarch put it (the package
    `faketime`, installed by scripts/test): /usr/lib/<triplet>/faketime/libfaketimeMT.so.1."""
    # This interpreter's own triplet first (x86_64-linux-gnu, aarch64-linux-gnu): a library of
    # another architecture installed beside it would be ignored by the loader, and the skew with it.
    triplet = sysconfig.get_config_var("MULTIARCH") or ""
    candidates = ["/usr/lib/%s/faketime/libfaketimeMT.so.1" % triplet] if triplet else []
    candidates += sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    candidates.append("/usr/lib/faketime/libfaketimeMT.so.1")
    for path in candidates:
        if os.path.exists(path):
            return path
    raise RuntimeError("libfaketimeMT.so.1 not found: install the package faketime")


WORKERS = 8
# When the serves ask the platform simulator about an order still unpaid (docs/query.md): 2 s
# after its registration, then after each step, at most 10 s apart, so that a payment only the
# query can find is found within the run and the final wait stays short. A serve killed
# mid-query leaves its lease for 3 * timeout_seconds + 5 s, after which the other asks.
QUERY = {"first_after_seconds": 2, "schedule_seconds": [2, 3, 5] + [10] * 29,
         "concurrency": 4, "timeout_seconds": 2}
QUERY_WAIT = 45     # the longest step, a lease left behind, and room: the final wait's bound


def free_port(taken):
    """A TCP port below the kernel's ephemeral range that nothing listens on (a port inside
    the range may be taken meanwhile as the local end of an outgoing connection)."""
    try:
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError):
        low = 32768
    rng = random.Random(os.urandom(8))
    for _ in range(1000):
        port = rng.randrange(max(1024, low - 12000), low)
        if port in taken:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        taken.add(port)
        return port
    raise RuntimeError("no free port")


def http_call(port, method, path, token=None, body=None, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {}
        if token:
            headers["Authorization"] = "Bearer " + token
        if body is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(body)
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read(), dict(resp.getheaders())
    except Exception as error:
        return None, str(error).encode(), {}
    finally:
        conn.close()


class Serve:
    def __init__(self, name, binary, config_path, port, log_path, command=("serve",)):
        self.name = name
        self.command = list(command)
        self.binary = binary
        self.config = config_path
        self.port = port
        self.log_path = log_path
        self.proc = None
        self.skew = 0
        self.stopped = False
        self.starts = 0
        self.lives = []     # [wall clock start, wall clock end or None, clock skew]

    def start(self, skew=0):
        env = dict(os.environ)
        env.pop("PAYLEDGER_DATABASE_URL", None)
        env.pop("PAYLEDGER_LISTEN", None)
        if skew:
            # libfaketime preloaded into serve itself (the `faketime` program would fork, and
            # a SIGKILL would then miss serve); the monotonic clock stays true.
            env.update(LD_PRELOAD=find_faketime(), FAKETIME="%+d" % skew,
                       FAKETIME_DONT_FAKE_MONOTONIC="1", FAKETIME_NO_CACHE="1")
        log = open(self.log_path, "ab")
        log.write(("\n=== campaign: start %s%s at %.3f\n" % (
            self.name, " with the clock skewed %+d s" % skew if skew else "", time.time()))
            .encode())
        log.flush()
        self.proc = subprocess.Popen([self.binary] + self.command + ["--config", self.config],
                                     stdout=log, stderr=log, env=env, start_new_session=True)
        log.close()
        self.lives.append([time.time(), None, skew])
        self.skew = skew
        self.stopped = False
        self.starts += 1
        ok = wait_until(lambda: self.proc.poll() is not None or self.answers(), 60, 0.05)
        if self.proc.poll() is not None:
            raise RuntimeError("%s exited at start with %s (log %s)" % (self.name,
                                                                        self.proc.returncode,
                                                                        self.log_path))
        return ok

    def answers(self):
        return http_call(self.port, "GET", "/healthz", timeout=2)[0] == 200

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.lives and self.lives[-1][1] is None:
            self.lives[-1][1] = time.time()
        self.stopped = False

    def pause(self):
        if self.alive():
            os.kill(self.proc.pid, signal.SIGSTOP)
            self.stopped = True

    def resume(self):
        if self.alive():
            os.kill(self.proc.pid, signal.SIGCONT)
        self.stopped = False

    def terminate(self):
        if not self.alive():
            return None
        if self.stopped:
            self.resume()
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return "killed after 60 s"


class Simulator(Serve):
    """`payledger simulate-platform` (docs/query.md): the platforms' query and close APIs,
    answered from a record of its own, and `POST /simulate/pay`. Never faulted."""

    def __init__(self, binary, config_path, port, log_path):
        super().__init__("simulator", binary, config_path, port, log_path,
                         ["simulate-platform", "--listen", "127.0.0.1:%d" % port])

    def answers(self):
        return http_call(self.port, "GET", "/", timeout=2)[0] is not None


class World:
    """The campaign's world: PostgreSQL (primary, synchronous standby, read replica, the
    platform's own), the two serves, the platform simulator, the proxy, the webhook receiver;
    their configuration and start (setup), the faults that break them (fault_actions), what
    observes them while the run goes on (ops_loop, follow) and at its end (heal, await_*,
    table, read_feed), and their stop (shutdown). campaign.py's run orchestrates it. The
    engine (campaign.py --engine) names the fault table (faults.TABLES); patroni_world.py's
    PatroniWorld replaces the PostgreSQL parts (start_databases, the faults, heal_databases,
    stop_databases)."""

    engine = "promote"

    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.seconds = args.seconds
        self.binary = args.bin
        self.tmp = tempfile.mkdtemp(prefix="payledger-campaign.", dir=args.tmp)
        os.chmod(self.tmp, 0o755)
        self.logs = os.path.join(self.tmp, "logs")
        os.makedirs(self.logs)
        os.chmod(self.logs, 0o755)
        self.out = open(os.path.join(self.logs, "campaign.log"), "a", buffering=1)
        self.log_lock = threading.Lock()
        self.t0 = time.monotonic()
        self.ports = set()
        self.fault_errors = []
        self.violations_live = []      # found while running (verify/audit exit 1, …)
        self.checkpoints = []
        self.cli_results = []
        self.follower_pages = []
        self.readyz_leaks = []
        self.far_attempts = set()
        self.kill_after = 1.0
        self.op_counts = {}
        self.follower_stop = threading.Event()
        self.ops_stop = threading.Event()
        self.primary = None
        self.standby = None
        self.serves = []
        self.proxy = None
        self.receiver = None
        self.platform_serve = None
        self.simulator = None

    # --- output ---------------------------------------------------------------------------
    def log(self, text, echo=False):
        line = "[%7.2f %s] %s" % (time.monotonic() - self.t0,
                                  time.strftime("%H:%M:%S", time.gmtime()) +
                                  ".%03d" % (time.time() % 1 * 1000), text)
        with self.log_lock:
            self.out.write(line + "\n")
            if echo or self.args.verbose:
                print(line, flush=True)

    def say(self, text):
        print(text, flush=True)
        with self.log_lock:
            self.out.write(text + "\n")

    def note_fault_error(self, f, error):
        self.fault_errors.append((f, repr(error)))

    def engine_summary(self):
        """Lines on the engine's own figures, printed before the counts (none here)."""
        return []

    # --- the configuration ------------------------------------------------------------------
    def write_configs(self):
        cfg_dir = os.path.join(self.tmp, "cfg")
        os.makedirs(cfg_dir)
        os.chmod(cfg_dir, 0o700)
        env = dict(os.environ, PAYLEDGER_DATABASE_URL="placeholder",
                   PAYLEDGER_SIMULATOR_LISTEN="127.0.0.1:%d" % self.simulator_port)
        text = subprocess.run(["bash", os.path.join(ROOT, "scripts/lib/dev_config.sh"), cfg_dir],
                              env=env, check=True, capture_output=True).stdout
        base = json.loads(text)
        base["query"] = QUERY       # the channels' query sections ask the simulator
        self.base_config = base
        secret = lambda: "whsec_" + base64.b64encode(os.urandom(32)).decode()  # noqa: E731
        self.subs = {
            "all": {"path": "/hooks/all", "secrets": [secret()], "timeout": 2, "batch_max": 50},
            "payments": {"path": "/hooks/payments", "secrets": [secret(), secret()],
                         "timeout": 2, "batch_max": 7,
                         "event_types": ["PAYMENT_SUCCEEDED", "REFUND_SUCCEEDED"],
                         "accounts": ["acct-1", "acct-3"]},
        }
        subs = []
        for name, s in self.subs.items():
            entry = {"name": name, "url": "http://127.0.0.1:%d%s" % (self.receiver_port,
                                                                   s["path"]),
                     "secret": s["secrets"] if len(s["secrets"]) > 1 else s["secrets"][0],
                     "batch_max": s["batch_max"], "timeout_seconds": s["timeout"]}
            for k in ("event_types", "accounts"):
                if k in s:
                    entry[k] = s[k]
            subs.append(entry)
        hosts = "127.0.0.1:%d,127.0.0.1:%d" % (self.link_port["a"], self.link_port["b"])
        self.serve_db_url = ("postgresql://payledger_service@%s/payledger?"
                             "target_session_attrs=read-write&connect_timeout=5" % hosts)
        self.owner_db_url = ("postgresql://postgres@%s/payledger?"
                             "target_session_attrs=read-write&connect_timeout=5" % hosts)
        self.read_db_url = ("postgresql://payledger_service@127.0.0.1:%d/payledger?"
                            "connect_timeout=5" % self.link_port["read"])

        def dump(path, config):
            with open(path, "w") as f:
                json.dump(config, f, indent=2)
            os.chmod(path, 0o600)
            return path

        self.serve_configs = []
        for i, port in enumerate(self.serve_ports):
            c = dict(base, listen="127.0.0.1:%d" % port, database_url=self.serve_db_url,
                     read_database_url=self.read_db_url, read_max_lag_seconds=5,
                     limits={"unverified_per_peer_per_minute": 6000}, subscriptions=subs)
            self.serve_configs.append(dump(os.path.join(cfg_dir, "serve%d.json" % i), c))
        self.cli_config = dump(os.path.join(cfg_dir, "cli.json"),
                               dict(base, database_url=self.owner_db_url))
        # The platform's ledger asks nobody: it stands for the platform.
        unasked = {k: ({kk: vv for kk, vv in v.items() if kk != "query"}
                       if k in workload.PLATFORM_CHANNELS else v)
                   for k, v in base.items() if k != "query"}
        self.platform_config = dump(os.path.join(cfg_dir, "platform.json"), dict(
            unasked, listen="127.0.0.1:%d" % self.platform_port,
            database_url=self.platform.url(), limits={"unverified_per_peer_per_minute": 6000}))
        self.simulator_config = dump(os.path.join(cfg_dir, "simulator.json"), dict(
            base, database_url=self.platform.url("simulator")))
        self.public_key = os.path.join(cfg_dir, "audit.pub")
        with open(self.public_key, "w") as f:
            f.write(self.cli(["checkpoint", "--public-key"], timeout=30, quiet=True)[1])
        self.signer = notices.Signer(base)

    # --- processes ----------------------------------------------------------------------------
    def cli(self, argv, timeout=180, config=None, quiet=False, kill_after=None):
        """Runs `payledger ARGV --config cli.json`: (exit status, stdout, stderr); with
        kill_after, SIGKILLs it after that many seconds (status "killed")."""
        cmd = [self.binary] + argv + ["--config", config or self.cli_config]
        env = dict(os.environ)
        env.pop("PAYLEDGER_DATABASE_URL", None)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            out, err = p.communicate(timeout=kill_after if kill_after else timeout)
            code = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            code = "killed" if kill_after else "timeout"
        out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        if not quiet:
            with open(os.path.join(self.logs, "cli.log"), "a") as f:
                f.write("[%7.2f] $ %s\nexit %s\n%s%s\n" % (time.monotonic() - self.t0,
                                                          " ".join(argv), code, out, err))
        return code, out, err

    def setup(self):
        taken = self.ports
        self.serve_ports = [free_port(taken), free_port(taken)]
        self.platform_port = free_port(taken)
        self.simulator_port = free_port(taken)
        self.receiver_port = free_port(taken)
        pg = os.path.join(self.tmp, "pg")
        os.makedirs(pg)
        os.chmod(pg, 0o755)
        self.platform = Node("platform", os.path.join(pg, "p"), free_port(taken), self.logs,
                             os.path.join(pg, "sock-p"))
        self.start_databases(pg)
        self.start_processes()

    def start_platform(self):
        """The platform's own cluster (unfaulted), with the databases of its ledger and of
        the simulator's record."""
        p = self.platform
        p.init()
        p.write_node_conf(sync_names=False)
        p.start()
        p.psql("CREATE DATABASE payledger", db="postgres")
        p.psql("CREATE DATABASE simulator", db="postgres")     # the simulator's record

    def migrate(self, ledger_url):
        """`migrate` of the ledger the serves use (with --grant payledger_service), of the
        platform's and of the simulator's record, the three at once: the simulator's record
        must not lengthen setup."""
        p = self.platform
        migrations = []
        for url in (ledger_url, p.url(), p.url("simulator")):
            env = dict(os.environ, PAYLEDGER_DATABASE_URL=url)
            args = ["migrate"] + (["--grant", "payledger_service"] if url == ledger_url else [])
            migrations.append((url, subprocess.Popen([self.binary] + args, env=env,
                                                     stdout=subprocess.PIPE,
                                                     stderr=subprocess.STDOUT)))
        for url, proc in migrations:
            out = proc.communicate(timeout=300)[0]
            if proc.returncode != 0:
                raise RuntimeError("migrate %s exited %s: %s" % (url, proc.returncode,
                                                                 out.decode()[-500:]))

    def start_databases(self, pg):
        """The engine's part of setup: the serves' PostgreSQL (here a primary, its synchronous
        standby and a read replica, promoted by hand), the platform's, and the proxy's links
        (link_port: a and b to the nodes, read to the replica)."""
        taken = self.ports
        self.link_port = {k: free_port(taken) for k in ("a", "b", "repl", "upstream", "read")}
        a = Node("node_a", os.path.join(pg, "a"), free_port(taken), self.logs,
                 os.path.join(pg, "sock-a"))
        b = Node("node_b", os.path.join(pg, "b"), free_port(taken), self.logs,
                 os.path.join(pg, "sock-b"))
        r = Node("replica", os.path.join(pg, "r"), free_port(taken), self.logs,
                 os.path.join(pg, "sock-r"))
        self.nodes = {"node_a": a, "node_b": b}
        self.replica = r
        self.log("PostgreSQL: primary node_a, synchronous standby node_b, replica, platform",
                 echo=True)
        a.init()
        a.write_node_conf(sync_names=False)
        a.start()
        a.psql("CREATE DATABASE payledger", db="postgres")
        a.psql("CREATE ROLE payledger_service LOGIN", db="postgres")
        self.start_platform()
        self.migrate(a.url())
        self.primary, self.standby = a, b
        self.proxy = Proxy(os.path.join(self.logs, "proxy.log"))
        self.proxy.add("a", self.link_port["a"], a.socket)
        self.proxy.add("b", self.link_port["b"], b.socket)
        self.proxy.add("repl", self.link_port["repl"], a.socket)
        self.proxy.add("upstream", self.link_port["upstream"], a.socket)
        self.proxy.add("read", self.link_port["read"], r.socket)
        b.base_backup_from(a)
        b.upstream = ("127.0.0.1", self.link_port["repl"])
        b.write_node_conf(sync_names=True)
        b.start()
        r.base_backup_from(a)
        r.upstream = ("127.0.0.1", self.link_port["upstream"])
        r.write_node_conf(sync_names=False)
        r.start()
        a.write_node_conf(sync_names=True)
        a.reload()
        if not self.await_sync(a, b, 60):
            raise RuntimeError("the standby never streamed synchronously")

    def start_processes(self):
        """The rest of setup, whatever the engine: the configurations, the receiver, the
        platform's ledger, the simulator and the two serves, each ready."""
        self.write_configs()
        self.receiver = Receiver(self.receiver_port, self.subs,
                                 os.path.join(self.logs, "receiver.log"))
        self.platform_serve = Serve("platform", self.binary, self.platform_config,
                                    self.platform_port, os.path.join(self.logs, "platform.log"))
        self.platform_serve.start()
        self.simulator = Simulator(self.binary, self.simulator_config, self.simulator_port,
                                   os.path.join(self.logs, "simulator.log"))
        if not self.simulator.start():
            raise RuntimeError("the simulator never answered")
        for i, port in enumerate(self.serve_ports):
            s = Serve("serve%d" % i, self.binary, self.serve_configs[i], port,
                      os.path.join(self.logs, "serve%d.log" % i))
            s.start()
            self.serves.append(s)
        for s in self.serves + [self.platform_serve]:
            if not wait_until(lambda: http_call(s.port, "GET", "/readyz")[0] == 200, 60):
                raise RuntimeError("%s never ready" % s.name)

    def await_sync(self, primary, standby, timeout):
        q = ("SELECT sync_state FROM pg_stat_replication WHERE application_name = '%s' "
             "AND state = 'streaming'" % standby.name)
        return wait_until(lambda: primary.scalar(q, db="postgres") == "sync", timeout, 0.2)

    def replica_streams(self, timeout):
        """The replica receives the current primary's timeline and has replayed what the
        primary had flushed when asked (a replica left on the old primary's timeline, past
        the point where the new one forked, connects and is refused over and over: its
        walsender's state alone says nothing)."""
        p = self.primary.psql("SELECT timeline_id, pg_current_wal_flush_lsn() - '0/0'::pg_lsn "
                              "FROM pg_control_checkpoint()", db="postgres", check=False)
        if not p:
            return False
        tli, lsn = p[0][0], float(p[0][1])
        q = ("SELECT (SELECT received_tli FROM pg_stat_wal_receiver WHERE status = "
             "'streaming'), pg_last_wal_replay_lsn() - '0/0'::pg_lsn")

        def follows():
            r = self.replica.psql(q, db="postgres", check=False)
            return bool(r) and r[0][0] == tli and r[0][1] != "" and float(r[0][1]) >= lsn
        return wait_until(follows, timeout, 0.2)

    # --- the faults ---------------------------------------------------------------------------
    def fault_actions(self):
        """What applies each kind of the fault table (faults.KINDS), which faults.Executor checks
        against the table before the run starts."""
        return {
            "serve_kill": self.fault_serve_kill, "serve_stop": self.fault_serve_stop,
            "serve_skew": self.fault_serve_skew, "pg_restart": self.fault_pg_restart,
            "failover": self.fault_failover, "failover_in_stall": self.fault_failover_in_stall,
            "replica_cut": self.fault_replica_cut, "read_cut": self.fault_read_cut,
            "repl_stall": self.fault_repl_stall, "proxy_cut": self.fault_proxy_cut,
            "proxy_stall": self.fault_proxy_stall, "proxy_slow": self.fault_proxy_slow,
            "proxy_refuse": self.fault_proxy_refuse, "receiver_down": self.fault_receiver_down,
            "receiver_slow": self.fault_receiver_slow, "receiver_500": self.fault_receiver_500,
            "receiver_429": self.fault_receiver_429, "receiver_410": self.fault_receiver_410,
        }

    def fault_serve_kill(self, f):
        s = self.serves[f.serve]
        s.kill()
        time.sleep(f.down)
        s.start()

    def fault_serve_stop(self, f):
        s = self.serves[f.serve]
        s.pause()
        time.sleep(f.duration)
        s.resume()

    def fault_serve_skew(self, f):
        s = self.serves[f.serve]
        s.kill()
        s.start(skew=f.skew)
        time.sleep(f.duration)
        s.kill()
        s.start()

    def fault_pg_restart(self, f):
        node = self.primary
        node.stop("immediate")
        time.sleep(f.down)
        node.start()

    def fault_failover(self, f):
        self.failover()

    def fault_failover_in_stall(self, f):
        # The standby stops receiving; commits wait for it (visible on the primary already);
        # then the primary dies and the standby, still the synchronous one, is promoted.
        self.proxy.stall("repl", True)
        try:
            time.sleep(f.stall)
            self.failover(stalled=True)
        finally:
            self.proxy.stall("repl", False)

    def failover(self, stalled=False):
        old, new = self.primary, self.standby
        if not stalled and not self.await_sync(old, new, 15):
            self.log("failover: skipped, %s is not a synchronous standby now" % new.name)
            return
        old.stop("immediate")
        new.promote()
        if not wait_until(lambda: new.in_recovery() is False, 60, 0.1):
            raise RuntimeError("%s did not leave recovery" % new.name)
        self.primary, self.standby = new, old
        # pg_rewind reads the source's timeline from its control file, which the promotion's
        # end-of-recovery checkpoint updates only when it completes: force it.
        new.psql("CHECKPOINT", db="postgres", check=False)
        self.log("failover: %s promoted" % new.name, echo=self.args.verbose)
        self.proxy.retarget("repl", new.socket)
        self.proxy.retarget("upstream", new.socket)
        self.proxy.stall("repl", False)
        self.rejoin(old, new)
        if not self.replica_streams(20):
            self.log("failover: the replica does not follow %s: rebuilding it" % new.name)
            self.rebuild_replica()

    def rejoin(self, node, primary, was_standby=False):
        # A standby stops cleanly (pg_rewind takes one shut down in recovery); an old primary
        # that died is recovered by pg_rewind itself.
        node.stop("fast" if was_standby else "immediate")
        node.upstream = ("127.0.0.1", self.link_port["repl"])
        if node.rewind_from(primary):
            how = "pg_rewind"
        else:
            node.base_backup_from(primary)
            how = "a fresh base backup"
        node.write_node_conf(sync_names=True)
        node.start()
        ok = self.await_sync(primary, node, 45)
        self.log("%s rejoined as the standby by %s%s" % (node.name, how,
                                                         "" if ok else ", NOT streaming"))
        return ok

    def rebuild_replica(self):
        r = self.replica
        r.stop("fast")
        if not r.rewind_from(self.primary):
            r.base_backup_from(self.primary)
        r.write_node_conf(sync_names=False)
        r.start()
        ok = self.replica_streams(60)
        self.log("replica rebuilt from %s%s" % (self.primary.name, "" if ok else
                                                 ", NOT streaming"))

    def fault_replica_cut(self, f):
        self._link_fault("upstream", f)

    def fault_read_cut(self, f):
        self._link_fault("read", f)

    def _link_fault(self, link, f):
        if f.how == "stall":
            self.proxy.stall(link, True)
            time.sleep(f.duration)
            self.proxy.stall(link, False)
        else:
            self.proxy.refuse(link, True)
            self.proxy.cut(link)
            time.sleep(f.duration)
            self.proxy.refuse(link, False)

    def fault_repl_stall(self, f):
        self.proxy.stall("repl", True)
        time.sleep(f.duration)
        self.proxy.stall("repl", False)

    def _links(self, f):
        return ["a", "b"] if f.link == "both" else [f.link]

    def fault_proxy_cut(self, f):
        for link in self._links(f):
            self.proxy.cut(link)

    def fault_proxy_stall(self, f):
        self.proxy.stall(f.link, True)
        time.sleep(f.duration)
        self.proxy.stall(f.link, False)

    def fault_proxy_slow(self, f):
        self.proxy.slow(f.link, f.delay)
        time.sleep(f.duration)
        self.proxy.slow(f.link, 0.0)

    def fault_proxy_refuse(self, f):
        self.proxy.refuse(f.link, True)
        time.sleep(f.duration)
        self.proxy.refuse(f.link, False)

    def fault_receiver_down(self, f):
        self.receiver.take_down()
        time.sleep(f.duration)
        self.receiver.up()

    def _receiver_mode(self, f, mode):
        self.receiver.set_mode(f.sub, mode)
        time.sleep(f.duration)
        self.receiver.set_mode(f.sub, "ok")

    def fault_receiver_slow(self, f):
        self._receiver_mode(f, "slow")

    def fault_receiver_500(self, f):
        self._receiver_mode(f, "500")

    def fault_receiver_429(self, f):
        self._receiver_mode(f, "429")

    def fault_receiver_410(self, f):
        self.receiver.set_mode(f.sub, "410")
        disabled = wait_until(lambda: self.sub_state(f.sub) == "disabled", f.duration,
                              0.2)
        self.receiver.set_mode(f.sub, "ok")
        if disabled:
            self.enable(f.sub)

    def admin(self, method, path, body=None, attempts=60):
        for attempt in range(attempts):
            s = self.serves[attempt % 2]
            status, data, _ = http_call(s.port, method, path, self.signer.admin_token, body,
                                        timeout=5)
            if status == 200:
                return json.loads(data)
            time.sleep(0.5)
        return None

    def sub_state(self, name):
        state = self.admin("GET", "/v1/admin/subscriptions", attempts=4)
        if state is None:
            return None
        for s in state["subscriptions"]:
            if s["name"] == name:
                return s["state"]
        return None

    def enable(self, name):
        answer = self.admin("POST", "/v1/admin/subscriptions/%s/enable" % name, {})
        self.log("subscription %s enabled: %s" % (name, answer and answer.get("state")))
        return answer

    # --- the operator's commands during the run ---------------------------------------------
    def ops_loop(self, deadline):
        rng = random.Random("%d/ops" % self.seed)
        n = 0
        while not self.ops_stop.is_set():
            gap = rng.uniform(1.5, 5.0)
            op = workload.weighted(rng, [("verify", 3), ("audit", 2), ("checkpoint", 3),
                                         ("rebuild", 1), ("rebuild_killed", 1),
                                         ("reconcile", 2)])
            platform = rng.choice(("wechat", "alipay"))
            self.kill_after = round(rng.uniform(0.05, 1.5), 2)
            if self.ops_stop.wait(gap) or time.monotonic() >= deadline:
                return
            n += 1
            self.run_op(op, platform, n)

    def run_op(self, op, platform, n, final=False):
        if op == "verify":
            code, out, err = self.cli(["verify"])
            if code == 1:
                self.violations_live.append("verify exited 1 during the run:\n" + out + err)
        elif op == "audit":
            code, out, err = self.cli(["audit"])
            if code == 1:
                self.violations_live.append("audit exited 1 during the run:\n" + out + err)
        elif op == "checkpoint":
            code, out, err = self.cli(["checkpoint"])
            if code == 0:
                try:
                    json.loads(out)
                    path = os.path.join(self.logs, "checkpoint-%03d.json" % n)
                    with open(path, "w") as f:
                        f.write(out)
                    self.checkpoints.append(path)
                except ValueError:
                    self.violations_live.append("checkpoint printed no JSON: %r" % out[:200])
        elif op == "rebuild":
            code, out, err = self.cli(["rebuild"], timeout=300)
            if code == 1:
                self.violations_live.append("rebuild exited 1 during the run:\n" + out + err)
        elif op == "rebuild_killed":
            # SIGKILLed part way: the projections stay whole (verify, here and at the end).
            code, out, err = self.cli(["rebuild"], timeout=300, kill_after=self.kill_after)
            if code == 1:
                self.violations_live.append("rebuild exited 1 during the run:\n" + out + err)
            vcode, vout, verr = self.cli(["verify"])
            if vcode == 1:
                self.violations_live.append("verify exited 1 right after a rebuild was killed "
                                            "after %.2f s:\n%s%s" % (self.kill_after, vout,
                                                                     verr))
        elif op == "reconcile":
            return self.reconcile(platform, n, final)
        self.log("op %s: exit %s" % (op, code))
        self.op_counts[(op, str(code))] = self.op_counts.get((op, str(code)), 0) + 1
        return code

    def bill_dates(self):
        ats = [e.t0 for e in self.history.platform if isinstance(e, records.PlatformNotice)]
        if not ats:
            ats = [time.time()]
        days = set()
        for t in (min(ats) - 5, max(ats) + 5, time.time()):
            days.add(time.strftime("%Y-%m-%d", time.gmtime(t + notices.SHANGHAI)))
        return sorted(days)

    def reconcile(self, platform, n, final=False):
        codes = []
        for day in self.bill_dates():
            bill = os.path.join(self.logs, "bill-%s-%s-%03d%s" % (
                platform, day, n, ".csv.gz" if platform == "wechat" else ".zip"))
            code, out, err = self.cli(["simulate-bill", platform, "--date", day, "--out", bill],
                                      config=self.platform_config)
            if code != 0:
                self.violations_live.append("simulate-bill on the platform's ledger exited %s: "
                                            "%s" % (code, err[-300:]))
                continue
            code, out, err = self.cli(["reconcile", platform, "--bill", bill, "--date", day,
                                       "--apply"], timeout=300)
            codes.append(code)
            if not final:
                key = ("reconcile", str(code))
                self.op_counts[key] = self.op_counts.get(key, 0) + 1
            self.log("op reconcile %s %s: exit %s: %s" % (platform, day, code,
                                                         out.split("\n")[0]))
            if final and code != 0:
                self.final_problems.append("the final reconcile %s %s exited %s:\n%s%s"
                                           % (platform, day, code, out[:3000], err[-500:]))
        return codes

    # --- a reader following the feed -----------------------------------------------------------
    def follow(self):
        after = 0
        i = 0
        while not self.follower_stop.is_set():
            s = self.serves[i % 2]
            i += 1
            if i % 8 == 0:
                status, data, _ = http_call(s.port, "GET", "/readyz", timeout=3)
                text = data.decode("utf-8", "replace")
                if status == 503 and any(p in text for p in (
                        ["connection to server", "/pg/sock-", "postgres@"] +
                        ["%d" % p for p in self.link_port.values()])):
                    self.readyz_leaks.append(text[:300])
            at = time.time()
            status, data, headers = http_call(s.port, "GET", "/v1/events?after=%d&limit=1000"
                                              "&wait=2" % after, self.signer.auditor_token,
                                              timeout=8)
            if status != 200:
                self.follower_stop.wait(0.2)
                continue
            page = json.loads(data)
            events = page["events"]
            src = headers.get("Payledger-Read-From") or headers.get("payledger-read-from")
            if events:
                self.follower_pages.append({"after": after, "serve": s.name, "from": src,
                                            "at": at, "events": events})
                after = max(after, events[-1]["seq"])
            if page.get("next_after", after) < after:
                self.log("follower: next_after %s below after %d" % (page.get("next_after"),
                                                                     after))

    # --- the end ------------------------------------------------------------------------------
    def heal(self):
        self.log("healing everything", echo=True)
        for link in self.link_port:
            self.proxy.heal(link)
        self.receiver.up()
        for name in self.subs:
            self.receiver.set_mode(name, "ok")
        self.heal_databases()
        for s in self.serves:
            if s.stopped:
                s.resume()
            if not s.alive() or s.skew:
                s.kill()
                s.start()
        for s in self.serves:
            if not wait_until(lambda: http_call(s.port, "GET", "/readyz")[0] == 200, 60):
                self.final_problems.append("%s not ready 60 s after healing" % s.name)

    def heal_databases(self):
        """The engine's part of healing: every node running, the standby synchronous, the
        replica following the primary."""
        self.proxy.retarget("repl", self.primary.socket)
        self.proxy.retarget("upstream", self.primary.socket)
        if not self.primary.running():
            self.primary.start()
        if not self.standby.running():
            self.standby.start()
        if not self.await_sync(self.primary, self.standby, 30):
            self.rejoin(self.standby, self.primary, was_standby=True)
        if not self.replica.running():
            self.replica.start()
        if not self.replica_streams(30):
            self.rebuild_replica()

    def await_subscriptions(self):
        for name in self.subs:
            if self.sub_state(name) == "disabled":
                self.enable(name)
        head = int(self.primary.scalar("SELECT coalesce(max(seq), 0) FROM ledger_events") or 0)
        start = time.monotonic()
        limit = 120.0
        while True:
            state = self.admin("GET", "/v1/admin/subscriptions")
            pending = []
            if state:
                for s in state["subscriptions"]:
                    if s["lag_events"] != 0 or s["state"] != "active":
                        pending.append(s)
                        nxt = s.get("next_attempt_at")
                        if nxt:
                            try:
                                t = datetime.datetime.fromisoformat(nxt.replace("Z", "+00:00"))
                                wait = t.timestamp() - time.time() + 30
                                if wait - 30 > 360 and s["name"] not in self.far_attempts:
                                    # Back-off is at most 300 s (+20 % jitter), by anyone's
                                    # clock that is right.
                                    self.far_attempts.add(s["name"])
                                    self.final_problems.append(
                                        "subscription %s: next attempt %.0f s from now (%s), "
                                        "beyond the 300 s back-off: %s" % (
                                            s["name"], wait - 30, nxt, json.dumps(s)))
                                limit = min(max(limit, time.monotonic() - start + wait), 400)
                            except ValueError:
                                text = ("subscription %s: next_attempt_at %r is no RFC 3339 "
                                        "time" % (s["name"], nxt))
                                if text not in self.final_problems:
                                    self.final_problems.append(text)
            if state and not pending:
                self.log("subscriptions caught up (head %d) in %.1f s" %
                         (head, time.monotonic() - start), echo=True)
                return True
            if time.monotonic() - start > limit:
                self.final_problems.append("subscriptions not caught up after %.0f s: %s"
                                           % (limit, json.dumps(pending)))
                return False
            time.sleep(0.5)

    def simulator_record(self):
        """The payments the simulator's record holds (all of them paid there alone)."""
        rows = self.platform.psql("SELECT out_trade_no, transaction_id, amount, currency FROM "
                                  "ledger_events WHERE event_type = 'PAYMENT_SUCCEEDED' "
                                  "ORDER BY seq", db="simulator", timeout=60)
        return [records.QueriedPayment(out_trade_no=r[0], fingerprint=(r[1], int(r[2]), r[3]))
                for r in rows]

    def await_queries(self):
        """Waits (bounded) until every order the simulator holds paid is PAID in the ledger:
        its query schedule must have run."""
        want = sorted({r.out_trade_no for r in self.simulator_record()})
        start = time.monotonic()
        left = want
        while left:
            rows = self.primary.psql("SELECT out_trade_no FROM orders WHERE status = 'PAID' "
                                     "AND out_trade_no IN (%s)" % ",".join(
                                         "'%s'" % otn for otn in left), check=False)
            if rows is not None:
                left = sorted(set(left) - {r[0] for r in rows})
            if not left or time.monotonic() - start > QUERY_WAIT:
                break
            time.sleep(0.5)
        self.log("queries: %d of the %d orders paid on the platform alone found, %.1f s after "
                 "the settle%s" % (len(want) - len(left), len(want), time.monotonic() - start,
                                   "; not: %s" % left[:10] if left else ""), echo=True)

    def await_replica(self):
        q_primary = "SELECT pg_current_wal_flush_lsn() - '0/0'::pg_lsn"
        target = float(self.primary.scalar(q_primary, db="postgres") or 0)
        q = "SELECT pg_last_wal_replay_lsn() - '0/0'::pg_lsn"
        ok = wait_until(lambda: float(self.replica.scalar(q, db="postgres") or -1) >= target,
                        60, 0.2)
        if not ok:
            self.final_problems.append("the replica did not replay the primary's WAL in 60 s")

    def table(self):
        rows = self.primary.psql(
            "SELECT seq, out_trade_no, event_type, source, account_id, amount, currency, "
            "transaction_id FROM ledger_events ORDER BY seq", timeout=300)
        events = []
        for r in rows:
            events.append({"seq": int(r[0]), "out_trade_no": r[1], "event_type": r[2],
                           "source": r[3], "account_id": r[4],
                           "amount": int(r[5]) if r[5] != "" else None,
                           "currency": r[6] or None, "transaction_id": r[7] or None})
        orders = [(r[0], r[1], r[2], int(r[3]), r[4], r[5], int(r[6]), int(r[7]), r[8])
                  for r in self.primary.psql(
                      "SELECT out_trade_no, account_id, currency, amount, status, "
                      "coalesce(transaction_id, ''), paid_amount, refunded_amount, "
                      "array_to_string(anomalies, ',') FROM orders", timeout=300)]
        balances = [(r[0], r[1], int(r[2])) for r in self.primary.psql(
            "SELECT account_id, currency, balance FROM balances", timeout=300)]
        return events, orders, balances

    def read_feed(self, top):
        # The replica may still be a moment behind: the feed must reach the table's head.
        deadline = time.monotonic() + 30
        while True:
            feed, after, ok = [], 0, True
            while True:
                status, data, _ = http_call(self.serves[0].port, "GET",
                                            "/v1/events?after=%d&limit=1000" % after,
                                            self.signer.auditor_token, timeout=30)
                if status != 200:
                    ok = False
                    break
                page = json.loads(data)
                if not page["events"]:
                    break
                feed.extend(page["events"])
                after = page["next_after"]
            if ok and (feed[-1]["seq"] if feed else 0) >= top or time.monotonic() > deadline:
                return feed
            time.sleep(0.5)

    def shutdown(self):
        for s in self.serves + [x for x in (self.platform_serve, self.simulator) if x]:
            try:
                code = s.terminate()
                if code not in (None, 0):
                    self.log("%s exited %s on SIGTERM" % (s.name, code))
            except Exception as error:  # noqa: BLE001 - stop the others all the same
                self.log("stopping %s failed: %r" % (s.name, error))
        if self.receiver:
            self.receiver.stop()
        self.stop_databases()
        if self.proxy:
            self.proxy.stop()
        if getattr(self, "history", None):
            self.history.close()

    def stop_databases(self):
        """The engine's part of shutdown: every PostgreSQL it started, whatever its state."""
        for node in list(getattr(self, "nodes", {}).values()) + [
                getattr(self, "replica", None), getattr(self, "platform", None)]:
            if node is not None:
                node.stop("fast")
