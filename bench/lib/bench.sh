# Shared by bench/load/run.sh and bench/rebuild/run.sh: Release build, a throwaway PostgreSQL
# that a trap stops, timing and statistics helpers. Source it after scripts/lib/common.sh;
# it defines functions only.

BENCH_BUILD_DIR="${PAYLEDGER_BENCH_BUILD_DIR:-$PAYLEDGER_ROOT/build-bench}"

bench_log() { printf '[bench] %s\n' "$*" >&2; }
bench_die() {
    printf '[bench] FAILED: %s\n' "$*" >&2
    exit 1
}

# bench_build TARGET...: configures $BENCH_BUILD_DIR as Release (no tests) and builds the
# targets; cmake rebuilds only what changed. PAYLEDGER_BENCH_JOBS limits parallel jobs.
# -Wrestrict stays a warning: g++ 12 at -O3 reports a false positive inside libstdc++'s
# std::string operator+ (GCC bug 105329) in ledger/pg/database.cpp; every other warning is an
# error as in every build.
# With PAYLEDGER_BENCH_PREBUILT set to a build tree that holds the targets already (the ctest
# of bench/load/compare.sh: scripts/test's Release tree), nothing is built: that tree is used.
bench_build() {
    if [ -n "${PAYLEDGER_BENCH_PREBUILT:-}" ]; then
        BENCH_BUILD_DIR="$PAYLEDGER_BENCH_PREBUILT"
        local target
        for target in "$@"; do
            [ -x "$BENCH_BUILD_DIR/$target" ] ||
                bench_die "PAYLEDGER_BENCH_PREBUILT: no $target in $BENCH_BUILD_DIR"
        done
        return 0
    fi
    local log="$BENCH_TMP/build.log"
    bench_log "building $* (Release) in $BENCH_BUILD_DIR"
    if ! { cmake -S "$PAYLEDGER_ROOT" -B "$BENCH_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_TESTING=OFF -DPAYLEDGER_BUILD_BENCH=ON -DPAYLEDGER_WARNINGS_AS_ERRORS=ON &&
        cmake --build "$BENCH_BUILD_DIR" -j "${PAYLEDGER_BENCH_JOBS:-$(nproc)}" --target "$@"; } \
        >"$log" 2>&1; then
        tail -40 "$log" >&2
        bench_die "the build failed (log above)"
    fi
}

# bench_tmp_create: a temporary folder for one run in BENCH_TMP, readable by the postgres
# user (PostgreSQL runs as postgres when we are root).
bench_tmp_create() {
    BENCH_TMP="$(mktemp -d "${TMPDIR:-/tmp}/payledger-bench.XXXXXX")"
    chmod 755 "$BENCH_TMP"
}

# bench_pg_up [EXTRA_CONF_LINE...]: creates and starts a PostgreSQL cluster under
# $BENCH_TMP/pg on a free port (unix socket only), with scripts/lib/common.sh's settings plus
# the extra lines. Sets BENCH_PG_DATA and BENCH_PG_PORT. bench_pg_down stops it.
bench_pg_up() {
    BENCH_PG_DATA="$BENCH_TMP/pg"
    BENCH_PG_PORT="$(payledger_free_port)" || bench_die "no free port"
    payledger_pg_init "$BENCH_PG_DATA"
    local line
    for line in "$@"; do printf '%s\n' "$line" >>"$BENCH_PG_DATA/postgresql.conf"; done
    payledger_pg_start "$BENCH_PG_DATA" "$BENCH_PG_PORT" || bench_die "PostgreSQL did not start"
}
bench_pg_down() {
    [ -n "${BENCH_PG_DATA:-}" ] && payledger_pg_stop "$BENCH_PG_DATA"
    return 0
}

# What bench_pg_up needs for --statements: pg_stat_statements loaded, nested statements (the
# triggers' queries) and planning counted, I/O timed.
BENCH_STATEMENTS_SETTINGS=("shared_preload_libraries = 'pg_stat_statements'"
    "pg_stat_statements.track = all" "pg_stat_statements.track_planning = on"
    "track_io_timing = on")
# bench_statements_report: the 40 statements that took the most time since the last
# pg_stat_statements_reset(), in every database of the cluster, as a psql table on stdout.
bench_statements_report() {
    bench_psql payledger -P pager=off -c "SELECT d.datname AS db, calls,
        round(total_exec_time::numeric, 1) AS exec_ms,
        round((total_exec_time / calls)::numeric, 3) AS ms_per_call, plans,
        round(total_plan_time::numeric, 1) AS plan_ms, rows, shared_blks_hit AS hit,
        shared_blks_read AS read, shared_blks_dirtied AS dirtied, wal_fpi, wal_bytes,
        left(regexp_replace(query, '\s+', ' ', 'g'), 140) AS query
        FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
        WHERE calls > 0 ORDER BY total_exec_time DESC LIMIT 40"
}

# bench_psql DB ARGS...: psql on the bench cluster as postgres, no psqlrc, stop on error.
bench_psql() {
    local db="$1"
    shift
    PGOPTIONS="-c client_min_messages=warning" \
        psql -X -q -v ON_ERROR_STOP=1 -h "$BENCH_PG_DATA" -p "$BENCH_PG_PORT" -U postgres "$@" "$db"
}

# bench_createdb DB: creates the database and applies payledger's migrations to it.
bench_createdb() {
    payledger_pg_createdb "$BENCH_PG_DATA" "$BENCH_PG_PORT" "$1"
    # BENCH_MIGRATE_BIN: another revision's binary migrates the database it will serve.
    PAYLEDGER_DATABASE_URL="$(bench_url "$1")" "${BENCH_MIGRATE_BIN:-$BENCH_BIN/payledger}" \
        migrate >/dev/null ||
        bench_die "payledger migrate failed on $1"
}
bench_url() { payledger_pg_url "$BENCH_PG_DATA" "$BENCH_PG_PORT" "$1"; }

# bench_seed DB PREFIX ORDERS PAID ACCOUNTS: loads a synthetic ledger (bench/lib/seed_ledger.sql).
bench_seed() {
    bench_psql "$1" -v prefix="$2" -v pad=10 -v orders="$3" -v paid="$4" -v accounts="$5" \
        -f "$PAYLEDGER_ROOT/bench/lib/seed_ledger.sql" || bench_die "seeding $1 failed"
}

# Wall clock in seconds with microseconds (bash 5).
bench_now() { printf '%s\n' "${EPOCHREALTIME/,/.}"; }
# bench_calc EXPRESSION: floating-point arithmetic, e.g. bench_calc "$b - $a".
bench_calc() { awk "BEGIN { printf \"%.6f\", ($1) }"; }
# bench_fmt DIGITS NUMBER: NUMBER rounded to DIGITS decimals.
bench_fmt() { awk -v d="$1" -v x="$2" 'BEGIN { printf "%.*f", d, x }'; }
# bench_median NUMBER...: the median (the mean of the middle two for an even count).
bench_median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
        END { if (NR % 2) printf "%.6f", v[(NR + 1) / 2];
              else printf "%.6f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# bench_yes CONDITION: "yes" or "**no**" for an awk condition, e.g. bench_yes "$x <= 50".
bench_yes() { awk "BEGIN { print (($1) ? \"yes\" : \"**no**\") }"; }

# bench_vmhwm_mib PID: the process's peak resident set size (VmHWM) in MiB.
bench_vmhwm_mib() {
    awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"
}
# bench_cpu_seconds PID: user + system CPU time the process has used so far.
bench_cpu_seconds() {
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"
}

# bench_pg_cpu_seconds: user + system CPU time used so far by the bench cluster: its
# postmaster, its live children (backends, background processes), and the children that have
# exited (the postmaster's cutime and cstime, fields 16 and 17: it waits for each), so that a
# backend that ends between two readings (pgbench's, between rounds) does not take its time
# out of the sum (without them, one low-load round once read -140 %).
bench_pg_cpu_seconds() {
    local postmaster pid
    postmaster="$(head -1 "$BENCH_PG_DATA/postmaster.pid")"
    {
        awk '{ print $14 + $15 + $16 + $17 }' "/proc/$postmaster/stat"
        for pid in $(ps -o pid= --ppid "$postmaster"); do
            awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || true
        done
    } | awk -v hz="$(getconf CLK_TCK)" '{ t += $1 } END { printf "%.2f", t / hz }'
}

# bench_ticks: the machine's CPU time so far, in clock ticks: "total idle steal" (the first
# line of /proc/stat; idle counts iowait too; steal is time the hypervisor ran others).
bench_ticks() {
    awk '$1 == "cpu" { t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $5 + $6, $9; exit }' /proc/stat
}
# bench_ticks_share "TICKS_BEFORE": idle and steal since then, in % of the machine, as
# "IDLE STEAL" (one decimal each).
bench_ticks_share() {
    local now
    now="$(bench_ticks)"
    awk -v a="$1" -v b="$now" 'BEGIN {
        split(a, x, " "); split(b, y, " "); t = y[1] - x[1]
        if (t <= 0) t = 1
        printf "%.1f %.1f", 100 * (y[2] - x[2]) / t, 100 * (y[3] - x[3]) / t }'
}

# A line describing the machine and the tree, for the report.
bench_machine() {
    local cpu commit
    cpu="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
    commit="$(git -C "$PAYLEDGER_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    if [ -n "$(git -C "$PAYLEDGER_ROOT" status --porcelain 2>/dev/null)" ]; then
        commit="$commit (+ uncommitted changes)"
    fi
    printf '%s, %s cores, %s GiB; PostgreSQL %s; commit %s; %s' "$cpu" "$(nproc)" \
        "$(awk '/^MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)" \
        "$("$PG_BIN/postgres" --version | awk '{ print $3 }')" "$commit" \
        "$(date -u +%Y-%m-%dT%H:%MZ)"
}
