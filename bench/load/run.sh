#!/usr/bin/env bash
# bench/load: callback throughput and latency of `payledger serve`, in one
# run on one PostgreSQL, against PostgreSQL's own limits for the same work. See bench/README.md.
#
#   bench/load/run.sh [--connections 64] [--seconds 20] [--orders 20000]
#                     [--low-load-requests 1000] [--loadgen-threads 2]
#                     [--preload-orders 0] [--pgbench-orders N] [--keep] [--perf DIR]
#                     [--perf-system] [--statements DIR] [--pg-setting 'NAME = VALUE']...
#                     [--writer-cache-orders N] [--bin PAYLEDGER] [--mixed-only]
#                     [--summary FILE]
#   --loadgen-threads: the load generator's I/O threads; 2, as pgbench's -j for (c) and (d)
#               (with one, a batch's answers were read and followed up one after another:
#               about 50 us each, 1.5 ms for the last of 29)
#   --perf DIR: profiles payledger serve (Linux perf, cpu-clock, 999 Hz) during (a) and (b)
#               and writes DIR/<phase>.data and DIR/<phase>.txt (self time by symbol)
#   --perf-system: with --perf, profiles the whole machine instead, the report by thread
#               (pid), then by symbol (PostgreSQL's backends and the load generator too)
#   --statements DIR: loads pg_stat_statements (nested statements too: the triggers' queries)
#               and writes, for (a) and (b) each, DIR/<phase>.statements.txt (the statements
#               by total execution time, with calls, plans, rows, buffers and WAL) and
#               DIR/<phase>.tables.txt (scans, tuples and buffers of the ledger's tables and
#               indexes over the phase)
#   --writer-cache-orders N: the served config's limits.writer_cache_orders (0: the committer
#               reads every batch's state under the lock, in a round trip of its own)
#   --pg-setting: a line for the throwaway PostgreSQL's postgresql.conf, e.g.
#               "shared_preload_libraries = 'auto_explain'" (repeatable)
#   --bin PAYLEDGER: serve this payledger binary (another revision's, built by
#               bench/load/compare.sh) instead of the working tree's; the load generator is
#               always the working tree's
#   --mixed-only: only (a) and (b), without pgbench's (c) and (d) and the low-load rounds
#               (compare.sh: the two binaries' own figures, side by side)
#   --summary FILE: also writes the figures as `name=value` lines to FILE
#
# Phases, each from C keep-alive connections (default 64):
#   ceiling   the load generator's own: GET /healthz
#   fresh     (a) orders registered, then right away, with no ANALYZE and no VACUUM (autovacuum
#             off for the ledger's tables, so that the result cannot depend on its timing),
#             every order's signed generic callback twice, shuffled: 50 % appends, 50 %
#             duplicates; the state of every new deployment, restore or bulk import
#   analyzed  (b) the same on new orders after ANALYZE
#   (c)       pgbench, the same single-callback transaction without the writer lock, C clients:
#             PostgreSQL's own per-callback limit, which no one-transaction-per-request server
#             can pass
#   (d)       pgbench, 100 such callbacks per transaction (set-based), 2 clients: the
#             database's own ceiling for this work
#   low load  1 connection: lone appends against pgbench's single transaction, 1 client, in 5
#             interleaved rounds after a CHECKPOINT each; the added latency is the median of
#             the rounds' p50 differences
# It prints callbacks/s, p50/p99 (also by outcome), the ratio to (c), the share of (d), and
# the server's peak RSS, as a Markdown table with its targets (bench/README.md).
#
# Builds (Release) if needed, starts its own throwaway PostgreSQL and payledger, and stops
# everything it started, also on failure. Exits 0 when every answer was the expected one
# (exactly one append per order) and `payledger verify` passed (the targets are reported,
# not enforced), 1 otherwise.
set -euo pipefail
shopt -s inherit_errexit  # A failure inside $(...) fails the run too.
source "$(dirname "$0")/../../scripts/lib/common.sh"
source "$PAYLEDGER_ROOT/bench/lib/bench.sh"

CONNECTIONS=64
SECONDS_LIMIT=20
ORDERS=20000
LOW_LOAD_REQUESTS=1000
LOADGEN_THREADS=2
PGBENCH_ORDERS=""
PRELOAD_ORDERS=0
KEEP=""
PERF_DIR=""
PERF_SYSTEM=""
STATEMENTS_DIR=""
SERVE_BIN=""
MIXED_ONLY=""
SUMMARY_FILE=""
PG_SETTINGS=()
WRITER_CACHE_ORDERS=""
ACCOUNTS=1000
COMMAND="bench/load/run.sh $*"
while [ $# -gt 0 ]; do
    case "$1" in
        --connections) CONNECTIONS="$2"; shift 2 ;;
        --seconds) SECONDS_LIMIT="$2"; shift 2 ;;
        --orders) ORDERS="$2"; shift 2 ;;
        --low-load-requests) LOW_LOAD_REQUESTS="$2"; shift 2 ;;
        --loadgen-threads) LOADGEN_THREADS="$2"; shift 2 ;;
        --pgbench-orders) PGBENCH_ORDERS="$2"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --perf) PERF_DIR="$2"; shift 2 ;;
        --perf-system) PERF_SYSTEM=1; shift ;;
        --pg-setting) PG_SETTINGS+=("$2"); shift 2 ;;
        --statements) STATEMENTS_DIR="$2"; shift 2 ;;
        --writer-cache-orders)
            [[ "$2" =~ ^[0-9]+$ ]] || bench_die "--writer-cache-orders takes a whole number"
            WRITER_CACHE_ORDERS="$2"; shift 2 ;;
        --preload-orders) PRELOAD_ORDERS="$2"; shift 2 ;;
        --bin) SERVE_BIN="$2"; shift 2 ;;
        --mixed-only) MIXED_ONLY=1; shift ;;
        --summary) SUMMARY_FILE="$2"; shift 2 ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
        *) bench_die "unknown argument: $1 (see --help)" ;;
    esac
done
for value in "$CONNECTIONS" "$SECONDS_LIMIT" "$ORDERS" "$LOW_LOAD_REQUESTS" "$LOADGEN_THREADS"; do
    [[ "$value" =~ ^[1-9][0-9]*$ ]] || bench_die "expected a positive integer, got '$value'"
done
[[ "$PRELOAD_ORDERS" =~ ^[0-9]+$ ]] || bench_die "--preload-orders: a count"
[ -z "$PERF_SYSTEM" ] || [ -n "$PERF_DIR" ] || bench_die "--perf-system: with --perf DIR"
[ "$CONNECTIONS" -le 180 ] || bench_die "--connections: at most 180 (PostgreSQL max_connections 200)"
# The 1-connection phases: shorter, as they only measure latency.
LOW_LOAD_SECONDS=$((SECONDS_LIMIT < 10 ? SECONDS_LIMIT : 10))
LOW_LOAD_ROUNDS=5
LOW_LOAD_ROUND_SECONDS=2
PGBENCH_BATCH=100
# pgbench needs one loaded order per callback: (c) and the 1-client run at most a few
# thousand per second, (d) a few tens of thousands. An abort says so if they run out.
PGBENCH_ORDERS="${PGBENCH_ORDERS:-$((60000 * SECONDS_LIMIT + 5000 * LOW_LOAD_SECONDS))}"

SERVER_PID=""
FAILED=""
cleanup() {
    local status=$?
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 300); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    bench_pg_down
    if [ -n "$KEEP" ] || [ "$status" -ne 0 ]; then
        [ "$status" -ne 0 ] && [ -f "$BENCH_TMP/serve.log" ] && tail -20 "$BENCH_TMP/serve.log" >&2
        bench_log "kept $BENCH_TMP (logs, PostgreSQL data)"
    else
        rm -rf "$BENCH_TMP"
    fi
}
bench_tmp_create
trap cleanup EXIT

payledger_install_deps curl time
if [ -n "$PERF_DIR" ]; then
    payledger_install_deps linux-perf
    mkdir -p "$PERF_DIR"
    PERF_DIR="$(cd "$PERF_DIR" && pwd)"
fi
if [ -n "$STATEMENTS_DIR" ]; then
    mkdir -p "$STATEMENTS_DIR"
    STATEMENTS_DIR="$(cd "$STATEMENTS_DIR" && pwd)"
    PG_SETTINGS+=("${BENCH_STATEMENTS_SETTINGS[@]}")
fi
bench_build payledger payledger_loadgen
BENCH_BIN="$BENCH_BUILD_DIR"
LOADGEN="$BENCH_BIN/payledger_loadgen"
PAYLEDGER_BIN="$BENCH_BIN/payledger"
if [ -n "$SERVE_BIN" ]; then
    [ -x "$SERVE_BIN" ] || bench_die "--bin: $SERVE_BIN is not an executable"
    PAYLEDGER_BIN="$(cd "$(dirname "$SERVE_BIN")" && pwd)/$(basename "$SERVE_BIN")"
fi

bench_pg_up "${PG_SETTINGS[@]}"
bench_log "PostgreSQL on $BENCH_PG_DATA port $BENCH_PG_PORT"
BENCH_MIGRATE_BIN="$PAYLEDGER_BIN" bench_createdb payledger
[ -z "$STATEMENTS_DIR" ] || bench_psql payledger -c "CREATE EXTENSION pg_stat_statements" >/dev/null
# (a) fresh: autovacuum never analyzes these tables behind the run's back; (b) resets it.
LEDGER_TABLES=(ledger_events callback_receipts orders balances)
for table in "${LEDGER_TABLES[@]}"; do
    bench_psql payledger -c "ALTER TABLE $table SET (autovacuum_enabled = false)" >/dev/null
done
if [ -z "$MIXED_ONLY" ]; then
    bench_createdb pgbench_ledger
    bench_log "loading $PGBENCH_ORDERS orders for pgbench into pgbench_ledger"
    bench_seed pgbench_ledger PGB- "$PGBENCH_ORDERS" 0 "$ACCOUNTS"
    bench_psql pgbench_ledger -c "VACUUM ANALYZE" -c CHECKPOINT
fi
if [ "$PRELOAD_ORDERS" -gt 0 ]; then
    # An older ledger under the new orders: half of the preloaded orders paid.
    bench_log "preloading $PRELOAD_ORDERS orders (half paid) into the payledger database"
    bench_seed payledger OLD- "$PRELOAD_ORDERS" $((PRELOAD_ORDERS / 2)) "$ACCOUNTS"
    bench_psql payledger -c "VACUUM ANALYZE" -c CHECKPOINT
fi

# --- payledger serve, with a generated config --------------------------------------------
PORT="$(payledger_free_port)" || bench_die "no free port"
SECRET="generic-$(openssl rand -hex 16)"
MERCHANT_TOKEN="merchant-$(openssl rand -hex 16)"
CONFIG="$BENCH_TMP/payledger.json"
LIMITS_JSON=""
if [ -n "$WRITER_CACHE_ORDERS" ]; then
    LIMITS_JSON=", \"limits\": {\"writer_cache_orders\": $WRITER_CACHE_ORDERS}"
fi
cat >"$CONFIG" <<JSON
{
  "listen": "127.0.0.1:$PORT",
  "database_url": "$(bench_url payledger)",
  "tokens": {"merchant": ["$MERCHANT_TOKEN"], "auditor": ["auditor-$(openssl rand -hex 16)"],
             "admin": ["admin-$(openssl rand -hex 16)"]},
  "generic": {"secret": "$SECRET"}$LIMITS_JSON
}
JSON
chmod 600 "$CONFIG"
"$PAYLEDGER_BIN" serve --config "$CONFIG" >"$BENCH_TMP/serve.out" 2>"$BENCH_TMP/serve.log" &
SERVER_PID=$!
for _ in $(seq 1 300); do
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" 2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || bench_die "payledger serve exited (log above)"
    sleep 0.1
done
curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" || bench_die "payledger serve is not up"
bench_log "payledger serve (pid $SERVER_PID) on 127.0.0.1:$PORT"


# --- the phases ---------------------------------------------------------------------------
declare -A RPS P50 P99 MAX ERRORS ANSWERED APPENDED DUPLICATES AP50 AP99 DP50 DP99 CPU PG_CPU \
    BATCH LOCK_WAIT MACHINE STEPS

metric() {
    curl -fsS "http://127.0.0.1:$PORT/metrics" | awk -v name="$1" '$1 == name { print $2 }'
}
# step_seconds STEP: the committer's time in one step of its batches (read, plan, write).
step_seconds() { metric "payledger_commit_step_seconds_total{step=\"$1\"}"; }

# phase LABEL LOADGEN_ARGS...: runs one phase, keeps its RESULT figures, the CPU time of
# payledger serve and of PostgreSQL, and the group-commit batch size over it.
phase() {
    local label="$1"
    shift
    local cpu0 pg_cpu0 ticks0 batches0 deliveries0 wait0 reads0 out step steps0=()
    ticks0="$(bench_ticks)"
    cpu0="$(bench_cpu_seconds "$SERVER_PID")"
    pg_cpu0="$(bench_pg_cpu_seconds)"
    batches0="$(metric payledger_commit_batches_total)"
    deliveries0="$(metric payledger_committed_deliveries_total)"
    wait0="$(metric payledger_writer_lock_wait_seconds_total)"
    reads0="$(metric payledger_commit_state_reads_total)"
    for step in read plan write; do
        steps0+=("$(step_seconds "$step")")
    done
    out="$("$LOADGEN" --label "$label" --port "$PORT" --threads "$LOADGEN_THREADS" \
        --prefix LOAD- --accounts "$ACCOUNTS" --merchant-token "$MERCHANT_TOKEN" \
        --generic-secret "$SECRET" "$@")" || bench_die "the load generator failed in $label"
    printf '%s\n' "$out" | grep -v '^RESULT ' >&2
    local kv
    for kv in $(printf '%s\n' "$out" | grep '^RESULT '); do
        case "$kv" in
            rps=*) RPS[$label]="${kv#*=}" ;;
            p50_ms=*) P50[$label]="${kv#*=}" ;;
            p99_ms=*) P99[$label]="${kv#*=}" ;;
            max_ms=*) MAX[$label]="${kv#*=}" ;;
            errors=*) ERRORS[$label]="${kv#*=}" ;;
            answered=*) ANSWERED[$label]="${kv#*=}" ;;
            appended=*) APPENDED[$label]="${kv#*=}" ;;
            duplicates=*) DUPLICATES[$label]="${kv#*=}" ;;
            appended_p50_ms=*) AP50[$label]="${kv#*=}" ;;
            appended_p99_ms=*) AP99[$label]="${kv#*=}" ;;
            duplicate_p50_ms=*) DP50[$label]="${kv#*=}" ;;
            duplicate_p99_ms=*) DP99[$label]="${kv#*=}" ;;
        esac
    done
    [ "${ERRORS[$label]}" -eq 0 ] || FAILED=1
    local seconds batches deliveries
    seconds="$(printf '%s\n' "$out" | sed -n 's/^RESULT .* seconds=\([0-9.]*\).*/\1/p')"
    CPU[$label]="$(bench_calc "100 * ($(bench_cpu_seconds "$SERVER_PID") - $cpu0) / $seconds")"
    PG_CPU[$label]="$(bench_calc "100 * ($(bench_pg_cpu_seconds) - $pg_cpu0) / $seconds")"
    MACHINE[$label]="$(bench_ticks_share "$ticks0")"
    batches="$(bench_calc "$(metric payledger_commit_batches_total) - $batches0")"
    deliveries="$(bench_calc "$(metric payledger_committed_deliveries_total) - $deliveries0")"
    BATCH[$label]="$(bench_calc "$batches > 0 ? $deliveries / $batches : 0")"
    LOCK_WAIT[$label]="$(bench_calc "$(metric payledger_writer_lock_wait_seconds_total) - $wait0")"
    # The committer's cycle: the wall time of the phase per batch, and its steps' share.
    local i=0 ms
    STEPS[$label]=""
    if [ "$batches" != "0.000000" ]; then
        for step in read plan write; do
            ms="$(bench_calc "1000 * ($(step_seconds "$step") - ${steps0[$i]}) / $batches")"
            STEPS[$label]+="$step $(bench_fmt 2 "$ms"), "
            i=$((i + 1))
        done
        ms="$(bench_calc "1000 * $seconds / $batches")"
        STEPS[$label]+="cycle $(bench_fmt 2 "$ms") ms per commit; "
        ms="$(bench_calc "100 * ($(metric payledger_commit_state_reads_total) - $reads0) / $batches")"
        STEPS[$label]+="$(bench_fmt 0 "$ms") % of commits read the state"
    fi
    bench_log "$label: CPU (% of one core) payledger $(bench_fmt 0 "${CPU[$label]}")%," \
        "PostgreSQL $(bench_fmt 0 "${PG_CPU[$label]}")%;" \
        "$(bench_fmt 1 "${BATCH[$label]}") deliveries per commit" \
        "${STEPS[$label]:+(${STEPS[$label]})}"
}

# --statements: what PostgreSQL did over a phase. The tables' counters are cumulative, so a
# phase's are the difference of two snapshots; a backend publishes its counters within about
# a second of going idle, so a snapshot taken just after a phase may miss its last second.
table_counters() {
    bench_psql payledger -tA -F ' ' -c "SELECT relname, seq_scan, seq_tup_read,
        coalesce(idx_scan, 0), coalesce(idx_tup_fetch, 0), n_tup_ins, n_tup_upd, n_tup_hot_upd,
        heap_blks_read, heap_blks_hit, coalesce(idx_blks_read, 0), coalesce(idx_blks_hit, 0)
        FROM pg_stat_user_tables JOIN pg_statio_user_tables USING (relid, schemaname, relname)
        ORDER BY relname"
}
statements_begin() {
    [ -n "$STATEMENTS_DIR" ] || return 0
    table_counters >"$BENCH_TMP/tables_$1.before"
    bench_psql payledger -c "SELECT pg_stat_statements_reset()" >/dev/null
}
statements_end() {
    [ -n "$STATEMENTS_DIR" ] || return 0
    bench_statements_report >"$STATEMENTS_DIR/$1.statements.txt"
    table_counters >"$BENCH_TMP/tables_$1.after"
    echo "$1: the tables' counters over the phase (after - before)" >"$STATEMENTS_DIR/$1.tables.txt"
    {
        echo "table seq_scan seq_tup_read idx_scan idx_tup_fetch ins upd hot_upd" \
            "heap_read heap_hit idx_read idx_hit"
        awk 'NR == FNR { for (i = 2; i <= NF; i++) before[$1, i] = $i; next }
            { printf "%s", $1; for (i = 2; i <= NF; i++) printf " %d", $i - before[$1, i]
              printf "\n" }' "$BENCH_TMP/tables_$1.before" "$BENCH_TMP/tables_$1.after"
    } | column -t >>"$STATEMENTS_DIR/$1.tables.txt"
    bench_log "$1: statements in $STATEMENTS_DIR/$1.statements.txt, tables in $1.tables.txt"
}

# mixed LABEL FIRST_ORDER: every order of [FIRST_ORDER, FIRST_ORDER + ORDERS) paid by two
# copies of its callback, shuffled; exactly one of them must append.
mixed() {
    local perf_pid=""
    statements_begin "$1"
    if [ -n "$PERF_DIR" ]; then
        local target=(-p "$SERVER_PID")
        [ -n "$PERF_SYSTEM" ] && target=(-a)
        perf record -e cpu-clock -F 999 "${target[@]}" -o "$PERF_DIR/$1.data" \
            2>"$PERF_DIR/$1.record.log" &
        perf_pid=$!
    fi
    phase "$1" --mode pay --expect either --copies 2 --connections "$CONNECTIONS" \
        --first-order "$2" --orders "$ORDERS" --seconds "$SECONDS_LIMIT" --timeline 1
    if [ -n "$perf_pid" ]; then
        kill -INT "$perf_pid"
        wait "$perf_pid" || true
        local sort=dso,symbol
        [ -n "$PERF_SYSTEM" ] && sort=pid,dso,symbol
        perf report -i "$PERF_DIR/$1.data" --stdio --no-children --sort "$sort" \
            --percent-limit 0.5 2>/dev/null | sed -E 's/ +(- +)*$//' | cut -c1-220 >"$PERF_DIR/$1.txt"
        bench_log "$1: profile in $PERF_DIR/$1.txt"
    fi
    statements_end "$1"
    [ "${APPENDED[$1]}" -gt 0 ] || bench_die "$1: nothing was appended"
}

# --- pgbench on the same PostgreSQL -------------------------------------------------------
# pgbench_run NAME SCRIPT CLIENTS SECONDS [ARGS...]: runs SCRIPT of bench/load; prints its
# tps. `base` is the highest order already paid, so every run pays fresh orders.
pgbench_run() {
    local name="$1" script="$2" clients="$3" seconds="$4" base ticks0
    shift 4
    base="$(bench_psql pgbench_ledger -tAc "SELECT coalesce(max(substr(out_trade_no, 5)::bigint), 0)
        FROM ledger_events WHERE event_type = 'PAYMENT_SUCCEEDED'")"
    ticks0="$(bench_ticks)"
    if ! "$PG_BIN/pgbench" -h "$BENCH_PG_DATA" -p "$BENCH_PG_PORT" -U postgres -n -M prepared \
        -f "$PAYLEDGER_ROOT/bench/load/$script" -c "$clients" -j "$((clients < 2 ? 1 : 2))" \
        -T "$seconds" -D clients="$clients" -D k=0 -D base="$base" "$@" \
        pgbench_ledger >"$BENCH_TMP/pgbench_$name.out" 2>&1; then
        tail -20 "$BENCH_TMP/pgbench_$name.out" >&2
        bench_die "pgbench $name aborted (out of loaded orders? raise --pgbench-orders)"
    fi
    # Run in $(...): the machine's idle and steal go through a file (machine_cell).
    bench_ticks_share "$ticks0" >"$BENCH_TMP/machine_$name"
    grep -E '^(number of transactions actually|number of failed|latency average|tps)' \
        "$BENCH_TMP/pgbench_$name.out" | sed "s/^/[pgbench $name] /" >&2
    sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$BENCH_TMP/pgbench_$name.out"
}

bench_log "the load generator's ceiling (GET /healthz)"
phase healthz --mode healthz --connections "$CONNECTIONS" --orders 100000000 \
    --seconds "$LOW_LOAD_SECONDS"

bench_log "(a) fresh: $ORDERS orders through POST /v1/orders, then their callbacks at once"
phase create --mode create --connections "$CONNECTIONS" --orders "$ORDERS" --seconds 600
[ "${ANSWERED[create]}" -eq "$ORDERS" ] || bench_die "only ${ANSWERED[create]} orders created"
bench_psql payledger -c CHECKPOINT >/dev/null
mixed fresh 0

bench_log "(b) analyzed: $ORDERS more orders, ANALYZE, then their callbacks"
phase create_b --mode create --connections "$CONNECTIONS" --first-order "$ORDERS" \
    --orders "$ORDERS" --seconds 600
[ "${ANSWERED[create_b]}" -eq "$ORDERS" ] || bench_die "only ${ANSWERED[create_b]} orders created"
for table in "${LEDGER_TABLES[@]}"; do
    bench_psql payledger -c "ALTER TABLE $table RESET (autovacuum_enabled)" >/dev/null
done
bench_psql payledger -c ANALYZE -c CHECKPOINT >/dev/null
mixed analyzed "$ORDERS"

if [ -z "$MIXED_ONLY" ]; then
    bench_log "(c) pgbench: one callback per transaction, no writer lock, $CONNECTIONS clients"
    PGBENCH_C="$(pgbench_run c callback.pgbench "$CONNECTIONS" "$SECONDS_LIMIT" -D lock=0)"
    bench_psql pgbench_ledger -c CHECKPOINT >/dev/null
    bench_log "(d) pgbench: $PGBENCH_BATCH callbacks per transaction, 2 clients"
    PGBENCH_D_TPS="$(pgbench_run d callback_batch.pgbench 2 "$SECONDS_LIMIT" -D n="$PGBENCH_BATCH")"
    PGBENCH_D="$(bench_calc "$PGBENCH_D_TPS * $PGBENCH_BATCH")"
    bench_psql pgbench_ledger -c CHECKPOINT >/dev/null

    bench_log "low load: 1 connection; $LOW_LOAD_ROUNDS rounds of lone appends, then pgbench 1 client"
    # Interleaved rounds, each after a CHECKPOINT of both databases: the WAL flush dominates a
    # lone transaction, and its time drifts with what the disk is doing (a checkpoint half-way,
    # another tenant), so both sides of the difference are measured side by side, round by round.
    LOW_FIRST=$((2 * ORDERS))
    PER_ROUND=$((LOW_LOAD_REQUESTS / LOW_LOAD_ROUNDS))
    [ "$PER_ROUND" -ge 20 ] || bench_die "--low-load-requests: at least 20 per round ($LOW_LOAD_ROUNDS rounds)"
    phase create_1 --mode create --connections "$CONNECTIONS" --first-order "$LOW_FIRST" \
        --orders "$LOW_LOAD_REQUESTS" --seconds 600
    phase healthz_1 --mode healthz --connections 1 --orders "$LOW_LOAD_REQUESTS" \
        --seconds "$LOW_LOAD_SECONDS"
    declare -a ROUND_APPEND_P50 ROUND_APPEND_P99 ROUND_PGB_P50 ROUND_PGB_P99 ROUND_ADDED
    for round in $(seq 1 "$LOW_LOAD_ROUNDS"); do
        bench_psql payledger -c CHECKPOINT >/dev/null
        bench_psql pgbench_ledger -c CHECKPOINT >/dev/null
        phase "unique_1_$round" --mode pay --expect appended --connections 1 \
            --first-order "$((LOW_FIRST + (round - 1) * PER_ROUND))" --orders "$PER_ROUND" \
            --seconds "$LOW_LOAD_SECONDS"
        ROUND_APPEND_P50+=("${P50[unique_1_$round]}")
        ROUND_APPEND_P99+=("${P99[unique_1_$round]}")
        rm -f "$BENCH_TMP"/pgb1.*
        pgbench_run "one_$round" callback.pgbench 1 "$LOW_LOAD_ROUND_SECONDS" -D lock=0 --log \
            --log-prefix="$BENCH_TMP/pgb1" >/dev/null
        # The per-transaction log: the third field is the latency in microseconds.
        read -r pgb_p50 pgb_p99 < <(cat "$BENCH_TMP"/pgb1.* | awk '{ print $3 }' | sort -n | awk '
            { v[NR] = $1 }
            END { i50 = int(NR * 0.50 + 0.999999); i99 = int(NR * 0.99 + 0.999999);
                  printf "%.2f %.2f\n", v[i50] / 1000, v[i99] / 1000 }')
        ROUND_PGB_P50+=("$pgb_p50")
        ROUND_PGB_P99+=("$pgb_p99")
        ROUND_ADDED+=("$(bench_calc "${P50[unique_1_$round]} - $pgb_p50")")
        bench_log "low load round $round: lone appends p50 ${P50[unique_1_$round]} ms," \
            "pgbench 1 client p50 $pgb_p50 ms"
    done
    LONE_P50="$(bench_median "${ROUND_APPEND_P50[@]}")"
    LONE_P99="$(bench_median "${ROUND_APPEND_P99[@]}")"
    PGB1_P50="$(bench_median "${ROUND_PGB_P50[@]}")"
    PGB1_P99="$(bench_median "${ROUND_PGB_P99[@]}")"
    ADDED_P50="$(bench_median "${ROUND_ADDED[@]}")"
fi

RSS_MIB="$(bench_vmhwm_mib "$SERVER_PID")"
bench_log "payledger serve peak RSS (VmHWM): $RSS_MIB MiB"
kill -TERM "$SERVER_PID"
for _ in $(seq 1 300); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
wait "$SERVER_PID" || bench_log "payledger serve exited with status $?"
SERVER_PID=""

bench_log "payledger verify (after the run)"
VERIFY_STATUS=0
"$PAYLEDGER_BIN" verify --config "$CONFIG" >"$BENCH_TMP/verify.out" 2>&1 || VERIFY_STATUS=$?
cat "$BENCH_TMP/verify.out" >&2
[ "$VERIFY_STATUS" -eq 0 ] || FAILED=1
if [ -z "$MIXED_ONLY" ]; then
    PGBENCH_VERIFY="$(PAYLEDGER_DATABASE_URL="$(bench_url pgbench_ledger)" "$BENCH_BIN/payledger" \
        verify 2>&1 | tr '\n' ' ')" || bench_die "the pgbench database fails verify: $PGBENCH_VERIFY"
    bench_log "payledger verify of the pgbench database: $PGBENCH_VERIFY"
fi

if [ -n "$SUMMARY_FILE" ]; then
    {
        for label in fresh analyzed; do
            echo "${label}_rps=${RPS[$label]}"
            echo "${label}_p99_ms=${P99[$label]}"
            echo "${label}_batch=${BATCH[$label]}"
        done
        echo "rss_mib=$RSS_MIB"
        echo "verify=$VERIFY_STATUS"
        [ -n "$MIXED_ONLY" ] || echo "pgbench_c=$PGBENCH_C"
        [ -n "$MIXED_ONLY" ] || echo "pgbench_d=$PGBENCH_D"
    } >"$SUMMARY_FILE"
fi
if [ -n "$MIXED_ONLY" ]; then
    printf '\n### bench/load (mixed only)\n\n`%s` — %s\n\n' "$COMMAND" "$(bench_machine)"
    for label in fresh analyzed; do
        printf -- '- %s: %s/s, p50 %s ms, p99 %s ms, %s errors; %s deliveries per commit\n' \
            "$label" "$(bench_fmt 0 "${RPS[$label]}")" "${P50[$label]}" "${P99[$label]}" \
            "${ERRORS[$label]}" "$(bench_fmt 1 "${BATCH[$label]}")"
    done
    [ -z "$FAILED" ] || bench_die "some answers were not the expected ones, or verify failed (above)"
    exit 0
fi

# --- report -------------------------------------------------------------------------------
row() { printf '| %s | %s | %s | %s |\n' "$@"; }
phase_cell() {
    printf '%s/s; p50 %s ms, p99 %s ms, max %s ms; %s errors' "$(bench_fmt 0 "${RPS[$1]}")" \
        "${P50[$1]}" "${P99[$1]}" "${MAX[$1]}" "${ERRORS[$1]}"
}
mixed_cell() {
    printf '%s; %s appended (p50 %s, p99 %s ms), %s duplicates (p50 %s, p99 %s ms)' \
        "$(phase_cell "$1")" "${APPENDED[$1]}" "${AP50[$1]}" "${AP99[$1]}" "${DUPLICATES[$1]}" \
        "${DP50[$1]}" "${DP99[$1]}"
}
# machine_cell LABEL: "idle I %, steal S %" of the machine over a phase (MACHINE, or the file
# pgbench_run wrote for (c) and (d)).
machine_cell() {
    local share="${MACHINE[$1]:-}"
    [ -n "$share" ] || share="$(cat "$BENCH_TMP/machine_$1")"
    printf 'idle %s %%, steal %s %%' "${share% *}" "${share#* }"
}
cpu_cell() {
    printf '%s%% / %s%%, %s' "$(bench_fmt 0 "${CPU[$1]}")" "$(bench_fmt 0 "${PG_CPU[$1]}")" \
        "$(bench_fmt 1 "${BATCH[$1]}")"
}
# mixed_rows LABEL NAME: the phase, its ratio to (c), its share of (d), and its targets.
mixed_rows() {
    local ratio share
    ratio="$(bench_calc "${RPS[$1]} / $PGBENCH_C")"
    share="$(bench_calc "100 * ${RPS[$1]} / $PGBENCH_D")"
    row "$2: 50 % appends, 50 % duplicates, shuffled, $C connections (${ANSWERED[$1]})" \
        "$(mixed_cell "$1")" "p99 ≤ 25 ms; duplicates p99 ≤ appends p99" \
        "$(bench_yes "${P99[$1]} <= 25 && ${DP99[$1]} <= ${AP99[$1]}")"
    row "**$2 ÷ (c)**" "**$(bench_fmt 2 "$ratio")×**" "≥ 3×" "$(bench_yes "$ratio >= 3")"
    row "**$2 ÷ (d)**" "**$(bench_fmt 1 "$share") %**" "≥ 25 %" "$(bench_yes "$share >= 25")"
}
C="$CONNECTIONS"
{
    echo
    echo "### bench/load"
    echo
    echo "\`$COMMAND\` — $(bench_machine)"
    echo
    row "measure" "result" "target" "met"
    row "---" "---" "---" "---"
    row "load generator ceiling: GET /healthz, $C connections" "$(phase_cell healthz)" "—" "—"
    row "POST /v1/orders, $C connections (${ANSWERED[create]} orders)" "$(phase_cell create)" \
        "—" "—"
    mixed_rows fresh "(a) fresh, no ANALYZE"
    mixed_rows analyzed "(b) analyzed"
    row "(c) pgbench: the same single-callback transaction, no writer lock, $C clients" \
        "$(bench_fmt 0 "$PGBENCH_C") callbacks/s" "—" "—"
    row "(d) pgbench: $PGBENCH_BATCH callbacks per transaction, 2 clients" \
        "$(bench_fmt 0 "$PGBENCH_D") callbacks/s ($(bench_fmt 0 "$PGBENCH_D_TPS") tps)" "—" "—"
    row "payledger serve peak RSS (VmHWM)" "$RSS_MIB MiB" "≤ 128 MiB" \
        "$(bench_yes "$RSS_MIB <= 128")"
    row "low load, 1 connection: GET /healthz" "$(phase_cell healthz_1)" "—" "—"
    row "low load, 1 connection: lone appends ($LOW_LOAD_ROUNDS rounds of $PER_ROUND, medians)" \
        "p50 $(bench_fmt 2 "$LONE_P50") ms, p99 $(bench_fmt 2 "$LONE_P99") ms (round p50s: ${ROUND_APPEND_P50[*]})" "—" "—"
    row "low load, pgbench 1 client, no writer lock (a round of $LOW_LOAD_ROUND_SECONDS s after each, medians)" \
        "p50 $(bench_fmt 2 "$PGB1_P50") ms, p99 $(bench_fmt 2 "$PGB1_P99") ms (round p50s: ${ROUND_PGB_P50[*]})" "—" "—"
    row "added latency of a lone callback (append − pgbench 1 client, p50, median of the rounds' differences)" \
        "$(bench_fmt 2 "$ADDED_P50") ms" "≤ 1 ms" "$(bench_yes "$ADDED_P50 <= 1")"
    row "\`payledger verify\` after the run" "exit $VERIFY_STATUS" "exit 0" \
        "$(bench_yes "$VERIFY_STATUS == 0")"
    echo
    echo "CPU over the phase, % of one core (payledger serve / PostgreSQL), and deliveries" \
        "per commit: (a) $(cpu_cell fresh); (b) $(cpu_cell analyzed); ceiling" \
        "$(cpu_cell healthz). Writer lock wait: (a) $(bench_fmt 3 "${LOCK_WAIT[fresh]}") s," \
        "(b) $(bench_fmt 3 "${LOCK_WAIT[analyzed]}") s. Ledger before the run:" \
        "$PRELOAD_ORDERS preloaded orders."
    echo
    echo "The whole machine over each phase (/proc/stat; steal is CPU time the hypervisor gave" \
        "to others, which moves the figures from run to run): (a) $(machine_cell fresh);" \
        "(b) $(machine_cell analyzed); (c) $(machine_cell c); (d) $(machine_cell d)."
}
[ -z "$FAILED" ] || bench_die "some answers were not the expected ones, or verify failed (above)"
