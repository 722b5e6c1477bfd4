#!/usr/bin/env bash
# bench/reconcile: `payledger reconcile` on large WeChat Pay statements,
# to show the time per row and that memory does not grow with the statement. See
# bench/README.md.
#
#   bench/reconcile/run.sh [--rows "20000 200000"] [--missing-percent 1] [--bin PATH] [--keep]
#
# For each size N, on a throwaway PostgreSQL (bench/lib/seed_ledger.sql, payments from
# wechat_v2 on 2026-11-30, Asia/Shanghai):
#   platform  a ledger with N orders, all paid: `payledger simulate-bill wechat` writes the
#             platform's N-row statement of the day from it (timed, peak RSS)
#   ledger    the same N orders with --missing-percent of the payments missing (callbacks
#             lost), then on the statement, each timed with its peak RSS (/usr/bin/time -v):
#             reconcile            must exit 1 with missing_in_ledger = the missing ones
#             reconcile --apply    must exit 0 with applied = the missing ones
#             reconcile again      must exit 0 with matched = N
#             payledger verify     must exit 0
# Prints a Markdown table. --bin uses an already built payledger instead of building the
# Release tree build-bench/. Exits 0 when every step gave what it must, 1 otherwise.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/../../scripts/lib/common.sh"
source "$PAYLEDGER_ROOT/bench/lib/bench.sh"

SIZES="20000 200000"
MISSING_PERCENT=1
BIN=""
KEEP=""
COMMAND="bench/reconcile/run.sh $*"
while [ $# -gt 0 ]; do
    case "$1" in
        --rows) SIZES="$2"; shift 2 ;;
        --missing-percent) MISSING_PERCENT="$2"; shift 2 ;;
        --bin) BIN="$2"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
        *) bench_die "unknown argument: $1 (see --help)" ;;
    esac
done
for value in $SIZES; do
    [[ "$value" =~ ^[1-9][0-9]*$ ]] || bench_die "--rows: positive integers, got '$value'"
done
[[ "$MISSING_PERCENT" =~ ^[0-9]+$ ]] && [ "$MISSING_PERCENT" -le 100 ] ||
    bench_die "--missing-percent: 0 to 100"

cleanup() {
    local status=$?
    bench_pg_down
    if [ -n "$KEEP" ] || [ "$status" -ne 0 ]; then
        bench_log "kept $BENCH_TMP (logs, statements, PostgreSQL data)"
    else
        rm -rf "$BENCH_TMP"
    fi
}
bench_tmp_create
trap cleanup EXIT

payledger_install_deps time
if [ -n "$BIN" ]; then
    BENCH_BIN="$(cd "$(dirname "$BIN")" && pwd)"
    [ -x "$BENCH_BIN/payledger" ] || bench_die "no payledger at $BIN"
else
    bench_build payledger
    BENCH_BIN="$BENCH_BUILD_DIR"
fi
bench_pg_up "max_wal_size = 8GB" "checkpoint_timeout = 30min"
bench_log "PostgreSQL on $BENCH_PG_DATA port $BENCH_PG_PORT"

CONFIG="$BENCH_TMP/config.json"
(umask 077 && cat >"$CONFIG" <<JSON
{"database_url": "", "wechat_v2": {"appid": "wx8888888888888888", "mch_id": "1900000109",
 "api_key": "0123456789abcdef0123456789abcdef"}}
JSON
)

# step NAME EXPECTED_STATUS COMMAND...: runs a payledger command under /usr/bin/time -v with
# its output in $BENCH_TMP/NAME.out; prints "SECONDS RSS_MIB". Fails the run on another exit
# status than expected.
step() {
    local name="$1" expected="$2" start seconds status=0
    shift 2
    start="$(bench_now)"
    /usr/bin/time -v -o "$BENCH_TMP/$name.time" "$@" >"$BENCH_TMP/$name.out" \
        2>"$BENCH_TMP/$name.err" || status=$?
    seconds="$(bench_calc "$(bench_now) - $start")"
    if [ "$status" -ne "$expected" ]; then
        head -5 "$BENCH_TMP/$name.out" "$BENCH_TMP/$name.err" >&2
        bench_die "$name exited $status, expected $expected"
    fi
    printf '%s %s\n' "$(bench_fmt 2 "$seconds")" "$(awk -F': ' \
        '/Maximum resident set size/ { printf "%.1f", $2 / 1024 }' "$BENCH_TMP/$name.time")"
}
# expect NAME PATTERN: the first output line of step NAME contains PATTERN.
expect() {
    head -1 "$BENCH_TMP/$1.out" | grep -q -- "$2" ||
        bench_die "$1: expected '$2' in: $(head -1 "$BENCH_TMP/$1.out")"
}

# seed DB ORDERS PAID: bench/lib/seed_ledger.sql with payments from wechat_v2.
seed() {
    bench_psql "$1" -v prefix=R -v pad=10 -v orders="$2" -v paid="$3" -v accounts=1000 \
        -v source=wechat_v2 -f "$PAYLEDGER_ROOT/bench/lib/seed_ledger.sql" ||
        bench_die "seeding $1 failed"
}

TABLE="| rows | step | seconds | peak RSS MiB |
|---|---|---|---|"
for rows in $SIZES; do
    missing=$((rows * MISSING_PERCENT / 100))
    bench_log "$rows rows, $missing payments missing in the ledger"
    bench_createdb "platform_$rows"
    bench_createdb "ledger_$rows"
    seed "platform_$rows" "$rows" "$rows"
    seed "ledger_$rows" "$rows" "$((rows - missing))"
    bench_psql "platform_$rows" -c "VACUUM (ANALYZE)"
    bench_psql "ledger_$rows" -c "VACUUM (ANALYZE)" -c CHECKPOINT
    bill="$BENCH_TMP/bill_$rows.txt"
    export PAYLEDGER_DATABASE_URL
    PAYLEDGER_DATABASE_URL="$(bench_url "platform_$rows")"
    result="$(step "simulate_$rows" 0 "$BENCH_BIN/payledger" simulate-bill wechat \
        --date 2026-11-30 --out "$bill" --config "$CONFIG")"
    TABLE+=$'\n'"| $rows | simulate-bill ($(du -m "$bill" | cut -f1) MiB statement) | ${result// / | } |"
    PAYLEDGER_DATABASE_URL="$(bench_url "ledger_$rows")"
    result="$(step "reconcile_$rows" 1 "$BENCH_BIN/payledger" reconcile wechat --bill "$bill" \
        --date 2026-11-30 --config "$CONFIG")"
    expect "reconcile_$rows" "rows=$rows matched=$((rows - missing)) missing_in_ledger=$missing "
    TABLE+=$'\n'"| $rows | reconcile ($missing missing_in_ledger) | ${result// / | } |"
    result="$(step "apply_$rows" 0 "$BENCH_BIN/payledger" reconcile wechat --bill "$bill" \
        --date 2026-11-30 --apply --config "$CONFIG")"
    expect "apply_$rows" "applied=$missing OK"
    TABLE+=$'\n'"| $rows | reconcile --apply ($missing appended) | ${result// / | } |"
    result="$(step "again_$rows" 0 "$BENCH_BIN/payledger" reconcile wechat --bill "$bill" \
        --date 2026-11-30 --config "$CONFIG")"
    expect "again_$rows" "matched=$rows missing_in_ledger=0 "
    TABLE+=$'\n'"| $rows | reconcile again (all matched) | ${result// / | } |"
    result="$(step "verify_$rows" 0 "$BENCH_BIN/payledger" verify --config "$CONFIG")"
    TABLE+=$'\n'"| $rows | verify | ${result// / | } |"
done

printf '\n%s\n\n' "$COMMAND"
printf '%s\n\n' "$(bench_machine)"
printf '%s\n' "$TABLE"
