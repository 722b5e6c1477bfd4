#!/usr/bin/python3
"""A Patroni-managed PostgreSQL 15 cluster on loopback, for tests (deploy/patroni/README.md).

Given a folder, PatroniCluster starts there one etcd member (or three) and three PostgreSQL
nodes, each managed by a Patroni of its own: synchronous_mode and synchronous_mode_strict on,
primary_start_timeout 0, use_pg_rewind, and a short ttl/loop_wait/retry_timeout so that a
failover takes seconds (deploy/patroni/patroni-test.json, filled in per node). Every node has
its own PostgreSQL port, REST API port and unix socket folder.

    with PatroniCluster(folder) as cluster:      # stops everything on the way out
        cluster.start()                          # a leader, two streaming replicas, one sync
        # PatroniCluster(folder, tags={"node3": {"nosync": True}}): Patroni tags per node
        cluster.create_database("payledger")
        cluster.migrate("/path/to/payledger")
        url = cluster.multihost_url()            # what payledger's database_url would be
        old, new, seconds = cluster.switchover()
        cluster.kill_postgres()                  # kill -9 of the leader's postmaster
        cluster.wait_for_leader(exclude=old)

Standard library only (Debian's /usr/bin/python3); the programs are Debian's: patroni 3.0,
etcd 3.4 (Patroni speaks to it through `etcd3:`, etcd's v3 API; no --enable-v2 needed), and
PostgreSQL 15's server and psql. As root, Patroni and PostgreSQL run as the `postgres` user
(PostgreSQL refuses root; scripts/lib/common.sh's _pg_as does the same), so the folder given
must be reachable by `postgres`: it is made 0755, every node's own folder is postgres's.

The folder is the caller's: the harness removes nothing (etcdN/, etcdN.log, reaper.log; per node
nodeN/data, nodeN/sock, nodeN/patroni.yml, nodeN/patroni.log, nodeN/postgresql.log). Nothing
outlives the harness: stop() ends every Patroni (which stops its PostgreSQL), then any
PostgreSQL left running (a node whose Patroni was killed), then etcd. It runs from __exit__,
from atexit, and on SIGTERM/SIGINT/SIGHUP when install_signal_handlers() was called; and every
process the harness starts gets SIGTERM from the kernel should the harness itself die
(PR_SET_PDEATHSIG), on which Patroni stops its PostgreSQL; a reaper process (--reaper,
started with the cluster, in a session of its own) then ends whatever is still left once
Patroni is gone, so even a SIGKILLed test leaves nothing behind. stop() itself ends, last,
anything of the folder still running. Every wait is bounded and polls; a wait that runs out raises
ClusterError naming what did not happen and the last state seen (describe()).

PatroniCluster(folder, etcd_members=1|3, ttl=, loop_wait=, retry_timeout=,
primary_start_timeout=) — the timings default to patroni-test.json's:
  start(), stop(), install_signal_handlers()
  leader(), wait_for_leader(timeout, exclude=), leader_port(), wait_healthy(timeout),
  wait_replica_of(name, leader), sync_standby(), sync_standbys(), cluster_status(),
  replication(leader), describe()
  multihost_url(db, user), url(name, db), psql(sql, node=, db=), create_database(name),
  migrate(binary, db=, grant=, url=)
  patronictl(*args), switchover(candidate=), failover(candidate), kill_postgres(name=),
  kill_patroni(name=),
  start_patroni(name), stop_node(name), start_node(name), stop_sync_standby(),
  start_sync_standby(name)
  etcd_leader(), stop_etcd(i=), start_etcd(i), etcd_healthy(i)
Functions for the scripts: missing_programs(), require_programs() (exit 77 without them, 1 under
CI), finish(ok, folder, keep, parent), wait_until(), holds_for().
cluster.nodes[name] (Node): pg_port, rest_port, sock, data, url(), psql(), run_sql(),
start_sql(), scalar(), in_recovery(), postmaster_pid(), rest(method, path, body).

Also a command: `patroni_cluster.py FOLDER` starts a cluster, prints its URLs, and runs until
Ctrl-C (for trying things by hand).
"""

import atexit
import ctypes
import json
import os
import queue
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request

PG_BIN = "/usr/lib/postgresql/15/bin"
PATRONI = "/usr/bin/patroni"
PATRONICTL = "/usr/bin/patronictl"
ETCD = "/usr/bin/etcd"
PSQL = "/usr/bin/psql"
SCOPE = "payledger"


# The settings the tests use (deploy/patroni/README.md), with placeholders per node.
TEST_SETTINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy",
                             "patroni", "patroni-test.json")


def _strings(value):
    """Every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


class ClusterError(RuntimeError):
    """Something the harness waited for did not happen (the message says what)."""


def missing_programs():
    """The programs the harness needs that are not installed (empty when all are)."""
    needed = [PATRONI, PATRONICTL, ETCD, PSQL, PG_BIN + "/postgres", PG_BIN + "/pg_ctl",
              PG_BIN + "/pg_rewind"]
    return [p for p in needed if not os.access(p, os.X_OK)]


SKIP = 77  # ctest's SKIP_RETURN_CODE for the scripts that use this harness


def require_programs():
    """Exits 77 (ctest: skipped) when Patroni, etcd or PostgreSQL 15 is not installed, except
    under CI (the variable CI set), where that fails (exit 1)."""
    missing = missing_programs()
    if not missing:
        return
    reason = ("not installed: %s (apt-get install patroni etcd-server postgresql-15)"
              % ", ".join(missing))
    if os.environ.get("CI"):
        print("FAIL: " + reason, file=sys.stderr)
        sys.exit(1)
    print("SKIP: " + reason, file=sys.stderr)
    sys.exit(SKIP)


def finish(ok, folder, keep, parent):
    """The end of a script's run: its folder removed when it passed (unless `keep`), else kept
    and named unless it lies in the caller's `parent` (PAYLEDGER_TEST_TMPDIR); PASS or FAIL
    printed. Returns the exit code."""
    if ok and not keep:
        shutil.rmtree(folder, ignore_errors=True)
    elif parent is None:
        print("kept: %s" % folder, file=sys.stderr)
    print("PASS" if ok else "FAIL", flush=True)
    return 0 if ok else 1


def demonstrate(prefix, run, **cluster_options):
    """main() of a script that shows a window of Patroni's on a cluster of its own (for
    deploy/patroni/README.md, not in ctest): `run(cluster)` answers whether it happened as
    described. Exit 0 when it did, 1 when it did not or something failed (the folder kept and
    named), 77 without Patroni or etcd (CI: 1). --keep keeps the folder either way."""
    if missing_programs():
        if os.environ.get("CI"):
            return 1
        print("SKIP: not installed: %s" % ", ".join(missing_programs()))
        return SKIP
    folder = tempfile.mkdtemp(prefix=prefix,
                              dir=os.environ.get("PAYLEDGER_TEST_TMPDIR") or None)
    cluster = PatroniCluster(folder, **cluster_options)
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


def wait_until(what, condition, timeout, pace=0.1, state=None):
    """Polls `condition` until it answers something true, and returns that. After `timeout`
    seconds raises ClusterError("<what> did not happen within N s; last seen: <state()>")."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            seen = ""
            if state is not None:
                try:
                    seen = "; last seen: %s" % (state(),)
                except Exception as e:  # The state is for the message only.
                    seen = "; state unavailable: %s" % e
            raise ClusterError("%s did not happen within %.0f s%s" % (what, timeout, seen))
        time.sleep(pace)


def holds_for(what, condition, seconds, pace=0.25, state=None):
    """Polls `condition` for `seconds`: an observation that something does not change (not a
    wait for something to happen). Raises ClusterError at the first poll it is false."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not condition():
            seen = ""
            if state is not None:
                try:
                    seen = "; seen: %s" % (state(),)
                except Exception as e:
                    seen = "; state unavailable: %s" % e
            raise ClusterError("%s stopped holding%s" % (what, seen))
        time.sleep(pace)


# --- Processes ------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # Not Linux/glibc: no parent-death signal, the atexit and __exit__ paths remain.
    _libc = None


def _die_with_parent():
    """In the child, after it changed user (a change of user clears the setting): SIGTERM
    when the harness's process dies, however it dies. Only for a child forked by spawn()."""
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class _Spawner:
    """The one thread every daemon of the harness is started from. PR_SET_PDEATHSIG fires when
    the thread that forked the child ends, not the process (prctl(2)): a daemon started from a
    short-lived thread (a fault of the campaign, tests/campaign/patroni_world.py) would get
    SIGTERM as soon as that thread returned. This thread lives as long as the process."""

    def __init__(self):
        self._lock = threading.Lock()
        self._jobs = queue.Queue()
        self._thread = None

    def run(self, start):
        """Calls `start` (which forks) on the spawner's thread and returns what it returns."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="spawner", daemon=True)
                self._thread.start()
        done = queue.Queue(1)
        self._jobs.put((start, done))
        try:
            ok, value = done.get(timeout=60)
        except queue.Empty:
            raise ClusterError("no process started within 60 s (the spawner's thread is stuck)")
        if not ok:
            raise value
        return value

    def _loop(self):
        while True:
            start, done = self._jobs.get()
            try:
                done.put((True, start()))
            except BaseException as error:  # noqa: BLE001 - raised again in the caller's thread
                done.put((False, error))


_spawner = _Spawner()


def spawn(*args, **kwargs):
    """subprocess.Popen(*args, **kwargs), forked from the spawner's thread (_Spawner): for a
    child whose preexec_fn is _die_with_parent."""
    return _spawner.run(lambda: subprocess.Popen(*args, **kwargs))


def _as_postgres():
    """Popen arguments that run the child as `postgres` when we are root."""
    if os.geteuid() != 0:
        return {}
    return {"user": "postgres", "group": "postgres", "extra_groups": []}


def _chown_postgres(path):
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


def _alive(pid):
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# The programs the harness starts, directly or through Patroni.
_PROGRAMS = {"patroni", "etcd", "postgres", "pg_ctl", "pg_rewind", "pg_basebackup", "initdb"}


def _processes_of(folder):
    """{pid: argv} of the harness's programs (_PROGRAMS; Patroni is python running
    /usr/bin/patroni) whose command line names a path inside `folder`, a fresh temporary one:
    the etcd members, the Patroni processes, the postmasters, a pg_rewind or pg_basebackup."""
    prefix = folder.rstrip("/") + "/"
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        names = {os.path.basename(a) for a in argv[:2]}
        if names & _PROGRAMS and any(prefix in arg for arg in argv) and _alive(int(entry)):
            found[int(entry)] = argv
    return found


def _end_processes_of(folder, say):
    """Ends every process of `folder` (_processes_of) whatever state it is in: Patroni first
    (SIGKILL: it must not start its PostgreSQL again), then each postmaster (SIGQUIT, an
    immediate shutdown that ends its backends; SIGKILL after 10 s), then the rest (etcd,
    pg_rewind, pg_basebackup: SIGKILL). Returns how many it found."""
    procs = _processes_of(folder)
    if not procs:
        return 0
    say("ending what is left in %s: %s" % (folder, ", ".join(
        "%d %s" % (pid, " ".join(argv[:2])) for pid, argv in sorted(procs.items()))))

    for pid, argv in procs.items():
        if _is_patroni(argv):
            _kill(pid, signal.SIGKILL)
    postmasters = [pid for pid, argv in procs.items()
                   if os.path.basename(argv[0]) == "postgres"]
    for pid in postmasters:
        _kill(pid, signal.SIGQUIT)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in postmasters) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in list(_processes_of(folder)):
        _kill(pid, signal.SIGKILL)
    return len(procs)


def _is_patroni(argv):
    return any(os.path.basename(a) == "patroni" for a in argv[:2])


def _kill(pid, signum):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _reaper(folder):
    """`patroni_cluster.py --reaper FOLDER`: started by PatroniCluster.start() in a session of
    its own, it waits for its stdin to close. The harness writes "stopped" there at the end of
    stop(); stdin closed without it means the harness died without stopping the cluster (a
    SIGKILL). Its processes then got SIGTERM (PR_SET_PDEATHSIG), on which Patroni stops its
    PostgreSQL, except one it was just starting (seen: a former primary being restarted as a
    replica outlived its Patroni). Once every Patroni has exited (30 s at most), and 10 s more
    for a PostgreSQL shutdown under way, it ends whatever is left."""
    said = sys.stdin.buffer.read()
    if said.strip() == b"stopped":
        return 0
    def say(text):
        print("[patroni_cluster reaper] " + text, file=sys.stderr, flush=True)
    say("the harness died without stopping the cluster in %s" % folder)
    deadline = time.monotonic() + 30
    while (time.monotonic() < deadline and
           any(_is_patroni(argv) for argv in _processes_of(folder).values())):
        time.sleep(0.5)
    deadline = time.monotonic() + 10
    while _processes_of(folder) and time.monotonic() < deadline:
        time.sleep(0.5)
    _end_processes_of(folder, say)
    return 0


def _free_port(taken):
    """A loopback TCP port nobody listens on, below the kernel's ephemeral range (as
    scripts/lib/common.sh's payledger_free_port: a port in that range can be taken meanwhile
    as the local end of some outgoing connection)."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError):
        pass
    first, span = (low - 12000, 12000) if low > 22000 else (10000, max(low - 10000, 100))
    for _ in range(200):
        port = first + random.randrange(span)
        if port in taken:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        return port
    raise ClusterError("no free TCP port found on 127.0.0.1")


def _http(method, url, body=None, timeout=3.0):
    """(status, parsed JSON or text) of one request; (None, error text) when unreachable."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    except (OSError, urllib.error.URLError) as e:  # refused, reset, timed out
        return None, str(e)
    text = raw.decode(errors="replace")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


class _Daemon:
    """One long-running program (an etcd member, a Patroni), its output appended to `log`."""

    def __init__(self, name, argv, log, as_postgres=False, env=None):
        self.name, self.argv, self.log = name, argv, log
        self.as_postgres, self.env = as_postgres, env
        self.proc = None

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self):
        return self.proc.pid if self.running else None

    def start(self):
        if self.running:
            raise ClusterError("%s is already running (pid %d)" % (self.name, self.proc.pid))
        with open(self.log, "ab") as out:
            out.write(("--- %s: %s\n" % (time.strftime("%H:%M:%S"), " ".join(self.argv))).encode())
            out.flush()
            # A session of its own: a Ctrl-C to the test's terminal does not reach it, stop()
            # ends it in order. cwd /: postgres may not enter the caller's folder.
            self.proc = spawn(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                              stderr=subprocess.STDOUT, cwd="/", env=self.env,
                              start_new_session=True, preexec_fn=_die_with_parent,
                              **(_as_postgres() if self.as_postgres else {}))

    def signal(self, signum):
        if self.running:
            self.proc.send_signal(signum)

    def wait(self, timeout):
        """True when it has exited within `timeout` seconds."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self, timeout):
        """SIGTERM, then SIGKILL after `timeout` seconds. True when SIGTERM sufficed."""
        if not self.running:
            return True
        self.signal(signal.SIGTERM)
        if self.wait(timeout):
            return True
        self.kill()
        return False

    def kill(self):
        if self.running:
            self.proc.kill()
            self.proc.wait(timeout=30)


# --- The cluster ----------------------------------------------------------------------------

class Node:
    """One PostgreSQL node and its Patroni. Its folder (postgres's) holds data/, sock/,
    patroni.yml, patroni.log and postgresql.log; `pgpass` is Patroni's scratch file."""

    def __init__(self, cluster, name, folder, pg_port, rest_port):
        self.cluster, self.name, self.folder = cluster, name, folder
        self.pg_port, self.rest_port = pg_port, rest_port
        self.data = os.path.join(folder, "data")
        self.sock = os.path.join(folder, "sock")
        self.config = os.path.join(folder, "patroni.yml")
        self.patroni = _Daemon("patroni " + name, [PATRONI, self.config],
                               os.path.join(folder, "patroni.log"), as_postgres=True,
                               env=dict(os.environ, HOME=folder, PGCONNECT_TIMEOUT="5"))

    @property
    def api(self):
        return "http://127.0.0.1:%d" % self.rest_port

    def rest(self, method, path, body=None, timeout=3.0):
        return _http(method, self.api + path, body, timeout)

    def postmaster_pid(self):
        """The pid in data/postmaster.pid when that process runs, else None."""
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                pid = int(f.readline().strip())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def url(self, db="postgres", user="postgres"):
        """A libpq URL through this node's unix socket."""
        return "postgresql://%s@/%s?host=%s&port=%d" % (user, db, self.sock, self.pg_port)

    def run_sql(self, sql, db="postgres", timeout=30):
        """psql -At -c `sql` as superuser through the unix socket: (exit code, rows as lists
        of strings, stderr). Exit code None when psql got no answer within `timeout`."""
        try:
            proc = subprocess.run([PSQL, "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                                   "-h", self.sock, "-p", str(self.pg_port), "-U", "postgres",
                                   "-d", db, "-c", sql], capture_output=True, timeout=timeout,
                                  env=dict(os.environ, PGCONNECT_TIMEOUT="3"))
        except subprocess.TimeoutExpired:
            return None, [], "no answer within %d s" % timeout
        rows = [line.split("\t") for line in proc.stdout.decode().split("\n") if line != ""]
        return proc.returncode, rows, proc.stderr.decode(errors="replace").strip()

    def start_sql(self, sql, db="postgres", application_name="harness"):
        """psql -c `sql` in the background (a Popen: communicate() for its output), connected
        as `application_name`, for a statement that is to wait (pg_stat_activity shows it)."""
        return subprocess.Popen([PSQL, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                                 "-d", "host=%s port=%d user=postgres dbname=%s "
                                 "application_name=%s" % (self.sock, self.pg_port, db,
                                                          application_name),
                                 "-c", sql], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=dict(os.environ, PGCONNECT_TIMEOUT="3"))

    def psql(self, sql, db="postgres", timeout=30, check=True):
        """The rows of `sql` (run_sql); None when it failed and not `check`. A WARNING (such
        as a commit whose wait for the synchronous standby was cancelled) is an error too."""
        code, rows, err = self.run_sql(sql, db=db, timeout=timeout)
        if code != 0 or "WARNING" in err:
            if check:
                raise ClusterError("psql on %s (%s): %s" % (self.name, sql, err or
                                                            "exit %s" % code))
            return None
        return rows

    def scalar(self, sql, db="postgres", timeout=5):
        """The first column of the first row, or None (no row, or it failed)."""
        rows = self.psql(sql, db=db, timeout=timeout, check=False)
        return rows[0][0] if rows else None

    def in_recovery(self):
        """True (a standby), False (a primary), or None (unreachable)."""
        value = self.scalar("SELECT pg_is_in_recovery()")
        return None if value is None else value == "t"


class PatroniCluster:
    """Three Patroni nodes (node1..node3) and one or three etcd members under `folder`."""

    def __init__(self, folder, nodes=3, etcd_members=1, ttl=None, loop_wait=None,
                 retry_timeout=None, primary_start_timeout=None, log=None, tags=None,
                 ports=None):
        """`tags` ({node name: {tag: value}}) sets Patroni tags of a node, such as a read
        replica's nofailover and nosync. `ports`, a set of ports the caller has taken but may
        not have bound yet, is where the cluster's own are added (and never picked twice).
        After construction, `etcd_routes[name]` may name the addresses a node's Patroni reaches
        etcd by (a fault proxy's, to partition it)."""
        if etcd_members not in (1, 3):
            raise ValueError("etcd_members is 1 or 3")
        with open(TEST_SETTINGS) as f:
            dcs = json.load(f)["bootstrap"]["dcs"]
        # The timings of patroni-test.json unless given.
        ttl = dcs["ttl"] if ttl is None else ttl
        loop_wait = dcs["loop_wait"] if loop_wait is None else loop_wait
        retry_timeout = dcs["retry_timeout"] if retry_timeout is None else retry_timeout
        if primary_start_timeout is None:
            primary_start_timeout = dcs["primary_start_timeout"]
        if loop_wait + 2 * retry_timeout > ttl:
            # Patroni's rule for these three: the leader must be able to retry the DCS within
            # the ttl, or it loses the lock while still serving.
            raise ValueError("loop_wait + 2 * retry_timeout must not exceed ttl")
        self.folder = os.path.abspath(folder)
        self.ttl, self.loop_wait, self.retry_timeout = ttl, loop_wait, retry_timeout
        self.primary_start_timeout = primary_start_timeout
        self.say = log or (lambda text: print("[patroni_cluster] " + text, file=sys.stderr,
                                              flush=True))
        os.makedirs(self.folder, exist_ok=True)
        os.chmod(self.folder, 0o755)  # postgres must reach its nodes' folders
        self._ports = ports if ports is not None else set()
        self.etcd = []
        for i in range(etcd_members):
            client, peer = _free_port(self._ports), _free_port(self._ports)
            self.etcd.append({"name": "etcd%d" % (i + 1), "client": client, "peer": peer,
                              "data": os.path.join(self.folder, "etcd%d" % (i + 1))})
        cluster_spec = ",".join("%s=http://127.0.0.1:%d" % (m["name"], m["peer"])
                                for m in self.etcd)
        for m in self.etcd:
            m["daemon"] = _Daemon(m["name"], [
                ETCD, "--name", m["name"], "--data-dir", m["data"],
                "--listen-client-urls", "http://127.0.0.1:%d" % m["client"],
                "--advertise-client-urls", "http://127.0.0.1:%d" % m["client"],
                "--listen-peer-urls", "http://127.0.0.1:%d" % m["peer"],
                "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % m["peer"],
                "--initial-cluster", cluster_spec, "--initial-cluster-state", "new",
                "--initial-cluster-token", "payledger-test-%d" % os.getpid(),
                # Twice etcd's defaults (100 ms, 1 s): the test machine is a loaded 2-core one,
                # and a member that misses heartbeats starts needless elections.
                "--heartbeat-interval", "200", "--election-timeout", "2000",
                "--log-level", "warn", "--logger", "zap"],
                os.path.join(self.folder, m["name"] + ".log"))
        self.tags = tags or {}
        self.etcd_routes = {}
        self.nodes = {}
        for i in range(nodes):
            name = "node%d" % (i + 1)
            folder = os.path.join(self.folder, name)
            self.nodes[name] = Node(self, name, folder, _free_port(self._ports),
                                    _free_port(self._ports))
        self._stopped = True
        self._reaper = None   # the process that cleans up should the harness die (_reaper)
        atexit.register(self.stop)

    # --- Context manager, signals -----------------------------------------------------------

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def install_signal_handlers(self):
        """SIGTERM, SIGINT and SIGHUP raise SystemExit(128 + signal), so that `finally`,
        __exit__ and atexit run and stop the cluster (ctest's timeout, scripts/test)."""
        def handler(signum, _frame):
            raise SystemExit(128 + signum)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, handler)

    # --- Configuration ----------------------------------------------------------------------

    def etcd_hosts(self):
        return ["127.0.0.1:%d" % m["client"] for m in self.etcd]

    def _node_config(self, node):
        """Patroni's configuration for `node`: deploy/patroni/patroni-test.json (the settings
        the tests use, documented in deploy/patroni/README.md) with this node's name, ports
        and paths in place of its "<...>" placeholders, and the timings this cluster was made
        with. Written as JSON, which Patroni reads as the YAML it is."""
        with open(TEST_SETTINGS) as f:
            config = json.load(f)
        config["name"] = node.name
        rest = "127.0.0.1:%d" % node.rest_port
        config["restapi"].update(listen=rest, connect_address=rest)
        config["etcd3"]["hosts"] = self.etcd_routes.get(node.name) or self.etcd_hosts()
        if node.name in self.etcd_routes:
            # The hosts are proxies: without this Patroni asks etcd for its members and
            # connects to their advertised addresses, around the proxy.
            config["etcd3"]["use_proxies"] = True
        config["tags"].update(self.tags.get(node.name, {}))
        dcs = config["bootstrap"]["dcs"]
        dcs.update(ttl=self.ttl, loop_wait=self.loop_wait, retry_timeout=self.retry_timeout,
                   primary_start_timeout=self.primary_start_timeout)
        pg = config["postgresql"]
        address = "127.0.0.1:%d" % node.pg_port
        pg.update(listen=address, connect_address=address, data_dir=node.data,
                  pgpass=os.path.join(node.folder, "pgpass"))
        pg["parameters"].update(unix_socket_directories=node.sock, log_directory=node.folder)
        left = [v for v in _strings(config) if v.startswith("<")]
        if left:
            raise ClusterError("%s: placeholders the harness does not fill: %s"
                               % (TEST_SETTINGS, ", ".join(left)))
        return config

    def _prepare(self):
        for m in self.etcd:
            os.makedirs(m["data"], mode=0o700, exist_ok=True)
        for node in self.nodes.values():
            for path in (node.folder, node.sock):
                os.makedirs(path, exist_ok=True)
                _chown_postgres(path)
            os.chmod(node.folder, 0o755)
            os.chmod(node.sock, 0o755)
            with open(node.config, "w") as f:
                json.dump(self._node_config(node), f, indent=2)
            os.chmod(node.config, 0o644)

    # --- Starting and stopping --------------------------------------------------------------

    def start(self, timeout=180):
        """Starts etcd and the three nodes, and waits until the cluster is healthy
        (wait_healthy). Returns the seconds that took: the first leader's election and
        bootstrap, and the replicas' base backups."""
        missing = missing_programs()
        if missing:
            raise ClusterError("not installed: " + ", ".join(missing))
        self._stopped = False
        began = time.monotonic()
        self._prepare()
        if self._reaper is None:
            with open(os.path.join(self.folder, "reaper.log"), "ab") as out:
                self._reaper = subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__), "--reaper", self.folder],
                    stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, cwd="/",
                    start_new_session=True)
        for m in self.etcd:
            m["daemon"].start()
        wait_until("etcd answering on %s" % ", ".join(self.etcd_hosts()),
                   lambda: all(self.etcd_healthy(i) for i in range(len(self.etcd))), 60,
                   pace=0.2, state=lambda: self._daemon_exits())
        for node in self.nodes.values():
            node.patroni.start()
        self.wait_healthy(timeout=max(timeout - (time.monotonic() - began), 30))
        seconds = time.monotonic() - began
        self.say("cluster up in %.1f s: leader %s, sync standby %s"
                 % (seconds, self.leader(), ",".join(self.sync_standbys())))
        return seconds

    def stop(self):
        """Stops everything, whatever state it is in; never raises. Patroni first (each stops
        its PostgreSQL), then any PostgreSQL still running (its Patroni was killed), then etcd."""
        if self._stopped:
            return
        self._stopped = True
        try:
            for node in self.nodes.values():
                node.patroni.signal(signal.SIGTERM)
            for node in self.nodes.values():
                if not node.patroni.wait(60):
                    self.say("patroni %s did not stop within 60 s of SIGTERM: killed" % node.name)
                    node.patroni.kill()
        except Exception as e:
            self.say("stopping Patroni: %s" % e)
        for node in self.nodes.values():
            try:
                self._stop_orphan_postgres(node)
            except Exception as e:
                self.say("stopping PostgreSQL of %s: %s" % (node.name, e))
        for m in self.etcd:
            try:
                if not m["daemon"].stop(30):
                    self.say("%s did not stop within 30 s of SIGTERM: killed" % m["name"])
            except Exception as e:
                self.say("stopping %s: %s" % (m["name"], e))
        try:
            _end_processes_of(self.folder, self.say)   # nothing, unless something went wrong
        except Exception as e:
            self.say("ending what was left: %s" % e)
        if self._reaper is not None:
            try:
                self._reaper.communicate(b"stopped\n", timeout=10)
            except Exception as e:
                self.say("the reaper: %s" % e)
                self._reaper.kill()
            self._reaper = None

    def _stop_orphan_postgres(self, node):
        """A PostgreSQL whose Patroni is gone: pg_ctl stop -m fast, then -m immediate, then
        SIGKILL of the postmaster (its backends end when they see it gone)."""
        pid = node.postmaster_pid()
        if pid is None or node.patroni.running:
            return
        for mode in ("fast", "immediate"):
            try:
                subprocess.run([PG_BIN + "/pg_ctl", "-D", node.data, "-m", mode, "-w", "-t",
                                "20", "stop"], cwd="/", capture_output=True, timeout=40,
                               **_as_postgres())
            except subprocess.TimeoutExpired:
                pass
            if not _alive(pid):
                return
        os.kill(pid, signal.SIGKILL)

    def _daemon_exits(self):
        """Which started programs have exited, and how (for error messages)."""
        gone = []
        for d in [m["daemon"] for m in self.etcd] + [n.patroni for n in self.nodes.values()]:
            if d.proc is not None and d.proc.poll() is not None:
                gone.append("%s exited %d (see %s)" % (d.name, d.proc.returncode, d.log))
        return "; ".join(gone) or "every started process runs"

    # --- State ------------------------------------------------------------------------------

    def node(self, name):
        try:
            return self.nodes[name]
        except KeyError:
            raise ClusterError("no node named %r (nodes: %s)" % (name, ", ".join(self.nodes)))

    def cluster_status(self, prefer=None):
        """Patroni's view of the cluster (GET /cluster) from the first node that answers,
        `prefer` first: {"members": [{"name", "role", "state", "timeline", "lag", ...}]}.
        None when no Patroni answers."""
        order = list(self.nodes.values())
        if prefer is not None:
            order.sort(key=lambda n: n.name != prefer)
        for node in order:
            if not node.patroni.running:
                continue
            status, body = node.rest("GET", "/cluster")
            if status == 200 and isinstance(body, dict):
                return body
        return None

    def describe(self):
        """One line on every node: Patroni's role and state, and what PostgreSQL says."""
        status = self.cluster_status() or {"members": []}
        roles = {m["name"]: "%s/%s" % (m.get("role"), m.get("state")) for m in status["members"]}
        parts = []
        for node in self.nodes.values():
            recovery = node.in_recovery() if node.postmaster_pid() else None
            pg = {None: "pg down" if not node.postmaster_pid() else "pg unreachable",
                  True: "pg standby", False: "pg primary"}[recovery]
            parts.append("%s: patroni %s, %s, %s" % (
                node.name, "up" if node.patroni.running else "down",
                roles.get(node.name, "not a member"), pg))
        return "; ".join(parts)

    def leader(self):
        """The node whose Patroni holds the leader lock and whose PostgreSQL is a writable
        primary (GET /primary answers 200 there), or None."""
        for node in self.nodes.values():
            if not node.patroni.running:
                continue
            status, _ = node.rest("GET", "/primary", timeout=2)
            if status == 200 and node.in_recovery() is False:
                return node.name
        return None

    def wait_for_leader(self, timeout=60, exclude=None):
        """Waits for a leader (one other than `exclude`, if given) and returns its name."""
        def found():
            name = self.leader()
            return name if name is not None and name != exclude else None
        what = "a leader" + (" other than %s" % exclude if exclude else "")
        return wait_until(what, found, timeout, pace=0.2, state=self.describe)

    def leader_port(self):
        """The PostgreSQL port of the current leader (raises when there is none)."""
        name = self.leader()
        if name is None:
            raise ClusterError("no leader now: " + self.describe())
        return self.nodes[name].pg_port

    def sync_standbys(self):
        """The nodes Patroni lists as synchronous standbys (its /sync key), per GET /cluster."""
        status = self.cluster_status() or {"members": []}
        return [m["name"] for m in status["members"] if m.get("role") == "sync_standby"]

    def sync_standby(self):
        """The one synchronous standby (synchronous_node_count 1); raises when there is none."""
        names = self.sync_standbys()
        if len(names) != 1:
            raise ClusterError("expected one synchronous standby, Patroni lists %s: %s"
                               % (names or "none", self.describe()))
        return names[0]

    def replication(self, leader):
        """{application_name: (state, sync_state)} of the standbys streaming from `leader`."""
        rows = self.nodes[leader].psql("SELECT application_name, state, sync_state "
                                       "FROM pg_stat_replication", check=False) or []
        return {r[0]: (r[1], r[2]) for r in rows}

    def _healthy(self):
        leader = self.leader()
        if leader is None:
            return None
        streams = self.replication(leader)
        others = [n for n in self.nodes if n != leader]
        if not all(streams.get(n, ("",))[0] == "streaming" for n in others):
            return None
        sync = [n for n, (_, sync_state) in streams.items() if sync_state == "sync"]
        status = self.cluster_status(prefer=leader) or {"members": []}
        states = {m["name"]: m.get("state") for m in status["members"]}
        if not all(states.get(n) in ("running", "streaming") for n in self.nodes):
            return None   # Patroni's own view lags PostgreSQL's: "starting", "stopped", ...
        listed = [m["name"] for m in status["members"] if m.get("role") == "sync_standby"]
        if not sync or sorted(sync) != sorted(listed):
            return None
        if self.nodes[leader].scalar("SHOW synchronous_standby_names") in (None, "*"):
            # '*': PostgreSQL lets whichever standby connected first confirm, which may or may
            # not be the one Patroni lists (deploy/patroni/README.md, the windows that remain).
            return None
        return leader

    def wait_healthy(self, timeout=90):
        """Waits until there is a leader, every other node streams from it, Patroni reports
        every member running, the standby PostgreSQL confirms synchronously is the one Patroni
        lists as synchronous, and synchronous_standby_names names it (not '*', under which
        any standby may confirm). Returns the leader."""
        return wait_until("a healthy cluster (a leader, every other node streaming from it, "
                          "one synchronous standby)", self._healthy, timeout, pace=0.25,
                          state=self.describe)

    def wait_replica_of(self, name, leader, timeout=90):
        """Waits until `name` is a standby (in recovery) streaming from `leader`."""
        def ok():
            return (self.nodes[name].in_recovery() is True and
                    self.replication(leader).get(name, ("",))[0] == "streaming")
        wait_until("%s streaming from %s as a replica" % (name, leader), ok, timeout, pace=0.25,
                   state=self.describe)

    # --- Connections --------------------------------------------------------------------------

    def multihost_url(self, db="payledger", user="postgres"):
        """Every node's address in one libpq URL (TCP on loopback, trust), libpq keeping the
        first that accepts writes: what payledger's database_url is on Patroni."""
        hosts = ",".join("127.0.0.1:%d" % n.pg_port for n in self.nodes.values())
        return "postgresql://%s@%s/%s?target_session_attrs=read-write" % (user, hosts, db)

    def url(self, name=None, db="payledger", user="postgres"):
        """A libpq URL through the unix socket of node `name` (default: the leader)."""
        return self.node(name or self._leader_or_raise()).url(db=db, user=user)

    def _leader_or_raise(self):
        name = self.leader()
        if name is None:
            raise ClusterError("no leader now: " + self.describe())
        return name

    def psql(self, sql, node=None, db="postgres", timeout=30):
        """Runs `sql` as the superuser on `node` (default: the leader); returns its rows.
        Raises on an error or a WARNING (a commit not confirmed by the synchronous standby)."""
        return self.node(node or self._leader_or_raise()).psql(sql, db=db, timeout=timeout)

    def create_database(self, name="payledger", owner=None, timeout=60):
        """CREATE DATABASE on the leader, unless it exists, and waits until every running node
        has replayed it. Until then a multi-host URL fails outright when it names such a
        replica first: libpq tries the next host after a refused connection or "the database
        system is starting up", not after "database does not exist" (deploy/patroni/README.md).
        """
        leader = self._leader_or_raise()
        query = "SELECT 1 FROM pg_database WHERE datname = '%s'" % name
        if not self.psql(query, leader):
            self.psql("CREATE DATABASE %s%s" % (name, " OWNER " + owner if owner else ""), leader)
        wait_until("database %s replayed on every running node" % name,
                   lambda: all(n.scalar(query) == "1" for n in self.nodes.values()
                               if n.postmaster_pid() is not None), timeout, pace=0.1,
                   state=self.describe)

    def migrate(self, binary, db="payledger", grant=None, url=None, timeout=120):
        """`payledger migrate` (with --grant ROLE when given) through the multi-host URL, as
        payledger itself would reach the leader, or through `url` (e.g. url(leader)). Returns
        its output; raises when it fails."""
        env = dict(os.environ, PAYLEDGER_DATABASE_URL=url or self.multihost_url(db=db))
        argv = [binary, "migrate"] + (["--grant", grant] if grant else [])
        proc = subprocess.run(argv, env=env, capture_output=True, timeout=timeout)
        out = (proc.stdout + proc.stderr).decode(errors="replace")
        if proc.returncode != 0:
            raise ClusterError("%s exited %d: %s" % (" ".join(argv), proc.returncode, out.strip()))
        return out

    # --- Actions ------------------------------------------------------------------------------

    def patronictl(self, *args, timeout=120):
        """`patronictl -c <a node's patroni.yml> ARGS` (the operator's command: switchover,
        failover, list...), with this cluster's scope. Returns its output; raises when it
        exits other than 0."""
        argv = [PATRONICTL, "-c", next(iter(self.nodes.values())).config] + list(args)
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, cwd="/",
                              env=dict(os.environ, HOME=self.folder))
        out = (proc.stdout + proc.stderr).decode(errors="replace")
        if proc.returncode != 0:
            raise ClusterError("%s exited %d: %s" % (" ".join(argv), proc.returncode,
                                                     out.strip()))
        return out

    def switchover(self, candidate=None, timeout=90):
        """A planned switchover through the leader's REST API (POST /switchover; what
        `patronictl switchover` does). Without `candidate` Patroni picks the synchronous
        standby. Waits until another node is a writable leader; returns (old, new, seconds)."""
        old = self._leader_or_raise()
        body = {"leader": old}
        if candidate:
            body["candidate"] = candidate
        began = time.monotonic()
        status, answer = self.nodes[old].rest("POST", "/switchover", body, timeout=timeout)
        if status != 200:
            raise ClusterError("POST /switchover %s answered %s: %s" % (body, status, answer))
        new = self.wait_for_leader(timeout, exclude=old)
        if candidate and new != candidate:
            raise ClusterError("switchover went to %s, not to %s" % (new, candidate))
        return old, new, time.monotonic() - began

    def failover(self, candidate, timeout=90):
        """A manual failover to `candidate` (POST /failover; `patronictl failover`). Patroni
        refuses it while the leader is healthy and `candidate` is not the synchronous standby.
        Waits until `candidate` is a writable leader; returns (old, new, seconds)."""
        old = self.leader()
        body = {"candidate": candidate}
        asked = next((n for n in self.nodes.values() if n.patroni.running and n.name != old),
                     None) or self.node(candidate)
        began = time.monotonic()
        status, answer = asked.rest("POST", "/failover", body, timeout=timeout)
        if status != 200:
            raise ClusterError("POST /failover %s answered %s: %s" % (body, status, answer))
        wait_until("%s the leader after the failover" % candidate,
                   lambda: self.leader() == candidate, timeout, pace=0.2, state=self.describe)
        return old, candidate, time.monotonic() - began

    def kill_postgres(self, name=None):
        """kill -9 of the postmaster of `name` (default: the leader). Returns the node's name."""
        name = name or self._leader_or_raise()
        pid = self.node(name).postmaster_pid()
        if pid is None:
            raise ClusterError("%s has no running postmaster to kill" % name)
        os.kill(pid, signal.SIGKILL)
        wait_until("the postmaster of %s (pid %d) gone after SIGKILL" % (name, pid),
                   lambda: not _alive(pid), 10, pace=0.05)
        return name

    def kill_patroni(self, name=None):
        """kill -9 of the Patroni of `name` (default: the leader). Its PostgreSQL runs on,
        unmanaged: still a primary if it was the leader. start_patroni brings it back."""
        name = name or self._leader_or_raise()
        node = self.node(name)
        if not node.patroni.running:
            raise ClusterError("patroni %s is not running" % name)
        node.patroni.kill()
        return name

    def start_patroni(self, name):
        """Starts the Patroni of `name` again (after kill_patroni or stop_node). It adopts a
        PostgreSQL still running there, or starts it; a former primary is rewound and
        rejoins as a replica."""
        self.node(name).patroni.start()

    def stop_node(self, name, timeout=60):
        """A clean stop of node `name`: SIGTERM to its Patroni, which stops its PostgreSQL
        (fast mode) and leaves the cluster. Waits for both; kills after `timeout`."""
        node = self.node(name)
        if not node.patroni.stop(timeout):
            self.say("patroni %s did not stop within %d s of SIGTERM: killed" % (name, timeout))
        wait_until("PostgreSQL of %s stopped along with its Patroni" % name,
                   lambda: node.postmaster_pid() is None, timeout, pace=0.1)

    def start_node(self, name):
        """Starts node `name` again (its Patroni, which starts its PostgreSQL)."""
        self.start_patroni(name)

    def stop_sync_standby(self, timeout=60):
        """Stops the current synchronous standby (stop_node); returns its name."""
        name = self.sync_standby()
        self.stop_node(name, timeout)
        return name

    def start_sync_standby(self, name):
        """Starts again the node stop_sync_standby stopped."""
        self.start_node(name)

    # --- etcd ---------------------------------------------------------------------------------

    def etcd_status(self, i):
        """etcd's maintenance status of member i (0-based), or None when it does not answer."""
        status, body = _http("POST", "http://127.0.0.1:%d/v3/maintenance/status"
                             % self.etcd[i]["client"], {}, timeout=2)
        return body if status == 200 and isinstance(body, dict) else None

    def etcd_healthy(self, i):
        status, body = _http("GET", "http://127.0.0.1:%d/health" % self.etcd[i]["client"],
                             timeout=2)
        return status == 200 and isinstance(body, dict) and body.get("health") == "true"

    def etcd_leader(self):
        """The index of etcd's raft leader, or None when no member knows one."""
        for i, m in enumerate(self.etcd):
            if not m["daemon"].running:
                continue
            body = self.etcd_status(i)
            if body and body.get("leader") and body.get("header", {}).get("member_id"):
                if body["leader"] == body["header"]["member_id"]:
                    return i
        return None

    def stop_etcd(self, i=None, timeout=30):
        """A clean stop (SIGTERM) of etcd member i (default: the raft leader). Returns i."""
        if i is None:
            found = wait_until("an etcd leader", lambda: (self.etcd_leader(),)
                               if self.etcd_leader() is not None else None, 20, pace=0.2,
                               state=self._daemon_exits)
            i = found[0]
        self.etcd[i]["daemon"].stop(timeout)
        return i

    def start_etcd(self, i, timeout=30):
        """Starts etcd member i again, and waits until it answers healthy."""
        self.etcd[i]["daemon"].start()
        wait_until("%s healthy again" % self.etcd[i]["name"], lambda: self.etcd_healthy(i),
                   timeout, pace=0.2, state=self._daemon_exits)


def main(argv):
    if len(argv) == 3 and argv[1] == "--reaper":
        return _reaper(argv[2])
    if len(argv) != 2:
        print("usage: %s FOLDER   (starts a cluster there, runs until Ctrl-C)" % argv[0],
              file=sys.stderr)
        return 2
    with PatroniCluster(argv[1]) as cluster:
        cluster.install_signal_handlers()
        cluster.start()
        print("leader:       %s" % cluster.leader())
        print("multi-host:   %s" % cluster.multihost_url(db="postgres"))
        for node in cluster.nodes.values():
            print("%s:        %s  (REST %s)" % (node.name, node.url(), node.api))
        print("Ctrl-C stops everything.")
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
