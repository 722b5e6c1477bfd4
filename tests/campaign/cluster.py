"""The campaign's PostgreSQL: two nodes that take turns as primary and synchronous standby,
an asynchronous read replica, and a platform's ledger on a cluster of its own.

Each node's own settings (socket, port, upstream) live in `node.conf`, included last by
postgresql.conf and written again after every pg_basebackup or pg_rewind, which copy the
source's files. The standby and the replica stream through the fault proxy (`repl` and
`upstream`), whose target is always the current primary. As root every PostgreSQL program
runs as the `postgres` user, as scripts/lib/common.sh does.
"""

import os
import shutil
import subprocess
import time

PG_BIN = "/usr/lib/postgresql/15/bin"
SYNC_NAMES = "FIRST 1 (node_a, node_b)"


def as_postgres(argv):
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--"] + argv
    return argv


def run_pg(argv, log, timeout=120, check=True):
    """Runs a PostgreSQL program (as postgres when root) from /, its output to `log`."""
    with open(log, "ab") as out:
        out.write(("$ " + " ".join(argv) + "\n").encode())
        out.flush()
        proc = subprocess.run(as_postgres(argv), cwd="/", stdout=out, stderr=out,
                              timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError("%s exited %d (see %s)" % (argv[0], proc.returncode, log))
    return proc.returncode


def chown_postgres(path):
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


class Node:
    def __init__(self, name, data, port, log_dir, sock_dir):
        self.name = name            # node_a, node_b, replica, platform
        self.data = data
        # The socket outside the data folder: pg_basebackup and pg_rewind would copy its lock
        # file, and pg_rewind cannot read the socket itself.
        self.sock = sock_dir
        os.makedirs(sock_dir, exist_ok=True)
        os.chmod(sock_dir, 0o755)
        chown_postgres(sock_dir)
        self.port = port
        self.log = os.path.join(log_dir, name + ".ctl.log")        # pg_ctl, initdb, rewind
        self.server_log = os.path.join(log_dir, name + ".server.log")
        for path in (self.log, self.server_log):
            open(path, "a").close()
            chown_postgres(path)
        self.upstream = None        # (host, port) of the proxy it streams through, or None

    @property
    def socket(self):
        return os.path.join(self.sock, ".s.PGSQL.%d" % self.port)

    def url(self, db="payledger", user="postgres"):
        return "postgresql://%s@/%s?host=%s&port=%d" % (user, db, self.sock, self.port)

    def write_node_conf(self, sync_names=True):
        lines = ["port = %d" % self.port,
                 "unix_socket_directories = '%s'" % self.sock,
                 "synchronous_standby_names = '%s'" % (SYNC_NAMES if sync_names else "")]
        if self.upstream is not None:
            lines.append("primary_conninfo = 'host=%s port=%d user=postgres "
                         "application_name=%s connect_timeout=5 keepalives_idle=5 "
                         "keepalives_interval=2 keepalives_count=3'"
                         % (self.upstream[0], self.upstream[1], self.name))
            lines.append("recovery_target_timeline = 'latest'")
            lines.append("wal_receiver_timeout = 10s")
        path = os.path.join(self.data, "node.conf")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        chown_postgres(path)
        standby_signal = os.path.join(self.data, "standby.signal")
        if self.upstream is not None:
            open(standby_signal, "a").close()
            chown_postgres(standby_signal)
        elif os.path.exists(standby_signal):
            os.remove(standby_signal)

    def init(self):
        os.makedirs(self.data, exist_ok=True)
        chown_postgres(self.data)
        os.chmod(self.data, 0o700)
        run_pg([PG_BIN + "/initdb", "-D", self.data, "-U", "postgres", "--auth=trust",
                "-E", "UTF8", "--locale=C.UTF-8"], self.log)
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write("\n".join([
                "listen_addresses = ''", "max_connections = 200", "shared_buffers = 32MB",
                "fsync = on", "synchronous_commit = on", "wal_level = replica",
                "max_wal_senders = 10", "wal_log_hints = on", "wal_keep_size = 512MB",
                "hot_standby = on", "hot_standby_feedback = on",
                "idle_in_transaction_session_timeout = 60s",
                "log_line_prefix = '%m [%p] %q%a '", "log_min_messages = warning",
                "include_if_exists = 'node.conf'"]) + "\n")

    def running(self):
        if not os.path.exists(os.path.join(self.data, "PG_VERSION")):
            return False
        return run_pg([PG_BIN + "/pg_ctl", "-D", self.data, "status"], self.log,
                      check=False) == 0

    def start(self, timeout=90):
        run_pg([PG_BIN + "/pg_ctl", "-D", self.data, "-l", self.server_log,
                "-w", "-t", str(timeout), "start"], self.log, timeout=timeout + 30)

    def stop(self, mode="fast"):
        if not os.path.exists(os.path.join(self.data, "postmaster.pid")):
            return
        run_pg([PG_BIN + "/pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60", "stop"],
               self.log, check=False, timeout=90)

    def reload(self):
        run_pg([PG_BIN + "/pg_ctl", "-D", self.data, "reload"], self.log)

    def promote(self):
        run_pg([PG_BIN + "/pg_ctl", "-D", self.data, "-w", "-t", "60", "promote"], self.log)

    def psql(self, sql, db="payledger", timeout=60, check=True):
        """One statement's rows as lists of strings (psql -At, tab separated)."""
        proc = subprocess.run(["psql", "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                               "-h", self.sock, "-p", str(self.port), "-U", "postgres",
                               "-d", db, "-c", sql], capture_output=True, timeout=timeout)
        if proc.returncode != 0:
            if check:
                raise RuntimeError("psql on %s: %s" % (self.name, proc.stderr.decode().strip()))
            return None
        text = proc.stdout.decode()
        return [line.split("\t") for line in text.split("\n") if line != ""]

    def scalar(self, sql, db="payledger", check=False, timeout=10):
        try:
            rows = self.psql(sql, db=db, check=check, timeout=timeout)
        except (RuntimeError, subprocess.TimeoutExpired):
            return None
        return rows[0][0] if rows else None

    def in_recovery(self):
        value = self.scalar("SELECT pg_is_in_recovery()", db="postgres")
        return None if value is None else value == "t"

    def base_backup_from(self, source):
        if os.path.exists(self.data):
            shutil.rmtree(self.data)
        os.makedirs(self.data)
        chown_postgres(self.data)
        os.chmod(self.data, 0o700)
        run_pg([PG_BIN + "/pg_basebackup", "-h", source.sock, "-p", str(source.port),
                "-U", "postgres", "-D", self.data, "-X", "stream", "-c", "fast"], self.log,
               timeout=600)
        self._forget_copied_state()

    def rewind_from(self, source):
        """pg_rewind from the running `source`; False when it could not. A target that was
        not shut down cleanly is first recovered by pg_rewind in single-user mode, which
        refuses standby mode: no standby.signal then."""
        signal = os.path.join(self.data, "standby.signal")
        if os.path.exists(signal):
            os.remove(signal)
        code = run_pg([PG_BIN + "/pg_rewind", "-D", self.data, "--source-server",
                       "host=%s port=%d user=postgres dbname=postgres" % (source.sock,
                                                                          source.port)],
                      self.log, check=False, timeout=600)
        if code == 0:
            self._forget_copied_state()
        return code == 0

    def _forget_copied_state(self):
        for name in ("postmaster.pid", "standby.signal"):
            path = os.path.join(self.data, name)
            if os.path.exists(path):
                os.remove(path)
        # The source's auto.conf may hold settings of another node.
        auto = os.path.join(self.data, "postgresql.auto.conf")
        with open(auto, "w") as f:
            f.write("# reset by the campaign\n")
        chown_postgres(auto)


def wait_until(condition, timeout, pace=0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            return value
        time.sleep(pace)
