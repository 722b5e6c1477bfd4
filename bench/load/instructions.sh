#!/usr/bin/env bash
# bench/load/instructions.sh: the instructions `payledger serve` executes per callback, counted by
# Valgrind's callgrind, for one fixed workload: the same count for the same binary and inputs
# whatever else the machine is doing, so that two revisions compare without the noise of a
# shared 2-core machine (bench/README.md, "Instructions per callback"). PostgreSQL's side is the
# buffers and WAL the statements touched, from pg_stat_statements, per callback.
#
#   bench/load/instructions.sh [--bin PAYLEDGER]... [--orders 2000] [--connections 8]
#                              [--analyze]
#   --bin PAYLEDGER  a payledger binary to measure (repeatable; default: the working tree's,
#                    built as bench/load/run.sh builds it); the load generator is the tree's
#   --orders N       orders registered through POST /v1/orders, then their signed generic
#                    callback twice each, shuffled (50 % duplicates)
#   --analyze        ANALYZE between the two, as bench/load/run.sh's phase (b) does: the plans
#                    PostgreSQL makes with statistics instead of without
#
# For each binary, on a fresh throwaway PostgreSQL: serve starts under callgrind (instrumentation
# off until the workload), the orders are registered, then the callbacks; the counts of each
# phase are dumped apart. Prints, per binary: serve's instructions per order registration and
# per callback (Ir), and PostgreSQL's shared buffers hit and read, and WAL bytes, per callback.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/../../scripts/lib/common.sh"
source "$PAYLEDGER_ROOT/bench/lib/bench.sh"

BINS=()
ORDERS=2000
CONNECTIONS=8
ANALYZE=""
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) BINS+=("$2"); shift 2 ;;
        --orders) ORDERS="$2"; shift 2 ;;
        --connections) CONNECTIONS="$2"; shift 2 ;;
        --analyze) ANALYZE=1; shift ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
        *) bench_die "unknown argument: $1 (see --help)" ;;
    esac
done
[[ "$ORDERS" =~ ^[1-9][0-9]*$ ]] || bench_die "--orders: a positive count"

SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 600); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    bench_pg_down
    rm -rf "$BENCH_TMP"
}
bench_tmp_create
trap cleanup EXIT
payledger_install_deps valgrind curl
bench_build payledger payledger_loadgen
LOADGEN="$BENCH_BUILD_DIR/payledger_loadgen"
[ ${#BINS[@]} -gt 0 ] || BINS=("$BENCH_BUILD_DIR/payledger")

# dump_ir FILE: the total Ir of one callgrind dump.
dump_ir() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }

measure() {
    local bin="$1" label port config secret token
    label="$(basename "$(dirname "$(dirname "$bin")")")/$(basename "$(dirname "$bin")")"
    BENCH_PG_DATA=""
    bench_pg_up "shared_preload_libraries = 'pg_stat_statements'" "pg_stat_statements.track = all"
    BENCH_MIGRATE_BIN="$bin" bench_createdb payledger
    bench_psql payledger -c "CREATE EXTENSION pg_stat_statements" >/dev/null
    port="$(payledger_free_port)"
    secret="generic-$(openssl rand -hex 16)"
    token="merchant-$(openssl rand -hex 16)"
    config="$BENCH_TMP/payledger.json"
    cat >"$config" <<JSON
{"listen": "127.0.0.1:$port", "database_url": "$(bench_url payledger)",
 "tokens": {"merchant": ["$token"], "auditor": ["auditor-$(openssl rand -hex 16)"],
            "admin": ["admin-$(openssl rand -hex 16)"]},
 "generic": {"secret": "$secret"}}
JSON
    chmod 600 "$config"
    local out="$BENCH_TMP/callgrind.out"
    rm -f "$out"*
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
        "$bin" serve --config "$config" >"$BENCH_TMP/serve.out" 2>"$BENCH_TMP/serve.log" &
    SERVER_PID=$!
    for _ in $(seq 1 1200); do
        curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null && break
        sleep 0.1
    done
    curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" || bench_die "serve did not start"
    local args=(--port "$port" --threads 1 --prefix INS- --accounts 100 --merchant-token "$token"
        --generic-secret "$secret" --connections "$CONNECTIONS" --seconds 3600)
    callgrind_control -i on "$SERVER_PID" >/dev/null
    "$LOADGEN" --label create --mode create --orders "$ORDERS" "${args[@]}" >/dev/null
    callgrind_control -d create "$SERVER_PID" >/dev/null
    [ -z "$ANALYZE" ] || bench_psql payledger -c ANALYZE >/dev/null
    bench_psql payledger -c "SELECT pg_stat_statements_reset()" >/dev/null
    "$LOADGEN" --label pay --mode pay --expect either --copies 2 --orders "$ORDERS" \
        "${args[@]}" >/dev/null
    callgrind_control -d pay "$SERVER_PID" >/dev/null
    local pg
    pg="$(bench_psql payledger -tA -F ' ' -c "SELECT sum(shared_blks_hit), sum(shared_blks_read),
        sum(wal_bytes) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'")"
    kill -TERM "$SERVER_PID"
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
    bench_pg_down
    rm -rf "$BENCH_PG_DATA"
    local create_ir pay_ir
    # Callgrind numbers its dumps (callgrind.out.1, .2); each names its trigger inside.
    create_ir="$(dump_ir "$(grep -l '^desc: Trigger: dump create$' "$out".*)")"
    pay_ir="$(dump_ir "$(grep -l '^desc: Trigger: dump pay$' "$out".*)")"
    [ -n "$create_ir" ] && [ -n "$pay_ir" ] || bench_die "no callgrind dump of $label's phases"
    read -r hit read wal <<<"$pg"
    local callbacks=$((2 * ORDERS))
    printf '| %s | %s | %s | %s | %s | %s |\n' "$label" \
        "$(bench_fmt 0 "$(bench_calc "$create_ir / $ORDERS")")" \
        "$(bench_fmt 0 "$(bench_calc "$pay_ir / $callbacks")")" \
        "$(bench_fmt 2 "$(bench_calc "$hit / $callbacks")")" \
        "$(bench_fmt 3 "$(bench_calc "$read / $callbacks")")" \
        "$(bench_fmt 0 "$(bench_calc "$wal / $callbacks")")"
}

echo
echo "### bench/load/instructions.sh"
echo
echo "\`bench/load/instructions.sh --orders $ORDERS --connections $CONNECTIONS${ANALYZE:+ --analyze}\` — $(bench_machine)"
echo
echo "| binary | serve Ir per order registered | serve Ir per callback | PostgreSQL buffers hit per callback | read | WAL bytes per callback |"
echo "| --- | --- | --- | --- | --- | --- |"
for bin in "${BINS[@]}"; do measure "$bin"; done
