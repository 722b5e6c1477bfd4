#!/usr/bin/env bash
# bench/rebuild: `payledger verify`, `payledger rebuild`
# and `payledger audit` on a large ledger, as ratios against plain COPY baselines measured on
# the same PostgreSQL in the same run. See bench/README.md.
#
#   bench/rebuild/run.sh [--events 1000000] [--accounts 10000] [--paid-percent 0]
#                        [--runs 3] [--keep]
#
# Loads --events events straight in SQL (bench/lib/seed_ledger.sql): with --paid-percent 0
# one ORDER_CREATED for each of --events orders; with P > 0, fewer orders of which P per
# cent are also paid, the same number of events in all. Then, --runs times:
#   B1       COPY ledger_events TO STDOUT, read by psql into /dev/null
#   B2 copy  COPY orders and balances out and into fresh tables of the same shape, then add
#            their primary keys;  B2 = B1 + B2 copy
#   verify   payledger verify (must exit 0)
#   rebuild  payledger rebuild (must end OK), then VACUUM ANALYZE, CHECKPOINT (not timed)
#   B3       COPY callback_receipts TO STDOUT, read by psql into /dev/null (one receipt per
#            event: the same rows audit reads)
#   audit    payledger audit (must exit 0: the chain the seed computed holds)
# and prints medians, the ratios verify/B1 (target <= 1.3), rebuild/B2 (target <= 1.6) and
# audit/B3 (target <= 1.5), peak RSS, and a Markdown table. Exits 0 when verify and rebuild passed (the targets are
# reported, not enforced), 1 otherwise.
set -euo pipefail
shopt -s inherit_errexit  # A failure inside $(...) fails the run too.
source "$(dirname "$0")/../../scripts/lib/common.sh"
source "$PAYLEDGER_ROOT/bench/lib/bench.sh"

EVENTS=1000000
ACCOUNTS=10000
PAID_PERCENT=0
RUNS=3
KEEP=""
COMMAND="bench/rebuild/run.sh $*"
while [ $# -gt 0 ]; do
    case "$1" in
        --events) EVENTS="$2"; shift 2 ;;
        --accounts) ACCOUNTS="$2"; shift 2 ;;
        --paid-percent) PAID_PERCENT="$2"; shift 2 ;;
        --runs) RUNS="$2"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
        *) bench_die "unknown argument: $1 (see --help)" ;;
    esac
done
for value in "$EVENTS" "$ACCOUNTS" "$RUNS"; do
    [[ "$value" =~ ^[1-9][0-9]*$ ]] || bench_die "expected a positive integer, got '$value'"
done
[[ "$PAID_PERCENT" =~ ^[0-9]+$ ]] && [ "$PAID_PERCENT" -le 100 ] ||
    bench_die "--paid-percent: 0 to 100"
[ "$RUNS" -le 20 ] || bench_die "--runs: at most 20"
# orders + paid = events, paid = orders * P / 100 (rounded so that the total is exact).
ORDERS=$(((EVENTS * 100 + 100 + PAID_PERCENT - 1) / (100 + PAID_PERCENT)))
PAID=$((EVENTS - ORDERS))

cleanup() {
    local status=$?
    bench_pg_down
    if [ -n "$KEEP" ] || [ "$status" -ne 0 ]; then
        bench_log "kept $BENCH_TMP (logs, PostgreSQL data)"
    else
        rm -rf "$BENCH_TMP"
    fi
}
bench_tmp_create
trap cleanup EXIT

payledger_install_deps time
bench_build payledger
BENCH_BIN="$BENCH_BUILD_DIR"

# The bulk steps write a lot of WAL: keep checkpoints out of the measured steps (each write
# step is followed by an explicit CHECKPOINT, outside the timing).
bench_pg_up "max_wal_size = 8GB" "checkpoint_timeout = 30min"
bench_log "PostgreSQL on $BENCH_PG_DATA port $BENCH_PG_PORT"
bench_createdb payledger
URL="$(bench_url payledger)"
export PAYLEDGER_DATABASE_URL="$URL"

bench_log "loading $EVENTS events: $ORDERS orders, $PAID paid, over $ACCOUNTS accounts"
LOAD_START="$(bench_now)"
bench_seed payledger R "$ORDERS" "$PAID" "$ACCOUNTS"
LOAD_SECONDS="$(bench_calc "$(bench_now) - $LOAD_START")"
# Hint bits and the visibility map set now, so that no measured step pays for them.
bench_psql payledger -c "VACUUM (ANALYZE)" -c CHECKPOINT
bench_log "loaded in $(bench_fmt 1 "$LOAD_SECONDS") s; $(bench_psql payledger -tAc \
    "SELECT pg_size_pretty(pg_total_relation_size('ledger_events')) || ' ledger_events, ' ||
            pg_size_pretty(pg_total_relation_size('orders')) || ' orders'")"

# timed COMMAND...: runs it, prints its wall-clock seconds.
timed() {
    local start
    start="$(bench_now)"
    "$@"
    bench_calc "$(bench_now) - $start"
}

b1() { bench_psql payledger -c "COPY ledger_events TO STDOUT" >/dev/null; }
b3() { bench_psql payledger -c "COPY callback_receipts TO STDOUT" >/dev/null; }

b2_copy() {
    bench_psql payledger -c "DROP TABLE IF EXISTS orders_b2, balances_b2" \
        -c "CREATE TABLE orders_b2 (LIKE orders INCLUDING DEFAULTS INCLUDING CONSTRAINTS)" \
        -c "CREATE TABLE balances_b2 (LIKE balances INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
    bench_psql payledger -c "COPY orders TO STDOUT" |
        bench_psql payledger -c "COPY orders_b2 FROM STDIN"
    bench_psql payledger -c "COPY balances TO STDOUT" |
        bench_psql payledger -c "COPY balances_b2 FROM STDIN"
    bench_psql payledger -c "ALTER TABLE orders_b2 ADD PRIMARY KEY (out_trade_no)" \
        -c "ALTER TABLE balances_b2 ADD PRIMARY KEY (account_id, currency)"
}

# payledger_step NAME RUN [OK_LINES]: payledger NAME under /usr/bin/time -v; prints
# "SECONDS RSS_MIB CPU_SECONDS" (CPU: user + system of the payledger process).
# Fails the run unless it exits 0 with OK_LINES [2: every projection] lines ending in OK.
payledger_step() {
    local name="$1" run="$2" ok_lines="${3:-2}" start seconds
    local out="$BENCH_TMP/$name.$run.out" times="$BENCH_TMP/$name.$run.time"
    start="$(bench_now)"
    if ! /usr/bin/time -v -o "$times" "$BENCH_BIN/payledger" "$name" >"$out" 2>&1; then
        cat "$out" >&2
        bench_die "payledger $name failed (run $run)"
    fi
    seconds="$(bench_calc "$(bench_now) - $start")"
    [ "$(grep -c ' OK$' "$out")" -eq "$ok_lines" ] || { cat "$out" >&2; bench_die "$name: not OK"; }
    printf '%s %s %s\n' "$seconds" \
        "$(awk -F': ' '/Maximum resident set size/ { printf "%.1f", $2 / 1024 }' "$times")" \
        "$(awk -F': ' '/User time|System time/ { cpu += $2 } END { printf "%.2f", cpu }' "$times")"
}

declare -a T_B1 T_B2COPY T_B2 T_VERIFY T_REBUILD R_VERIFY R_REBUILD C_VERIFY C_REBUILD
declare -a T_B3 T_AUDIT R_AUDIT C_AUDIT
for run in $(seq 1 "$RUNS"); do
    bench_log "run $run of $RUNS"
    seconds="$(timed b1)"
    T_B1+=("$seconds")
    seconds="$(timed b2_copy)"
    T_B2COPY+=("$seconds")
    T_B2+=("$(bench_calc "${T_B1[-1]} + $seconds")")
    bench_psql payledger -c "DROP TABLE orders_b2, balances_b2" -c CHECKPOINT
    step="$(payledger_step verify "$run")"
    read -r seconds rss cpu <<<"$step"
    T_VERIFY+=("$seconds")
    R_VERIFY+=("$rss")
    C_VERIFY+=("$cpu")
    step="$(payledger_step rebuild "$run")"
    read -r seconds rss cpu <<<"$step"
    T_REBUILD+=("$seconds")
    R_REBUILD+=("$rss")
    C_REBUILD+=("$cpu")
    bench_psql payledger -c "VACUUM (ANALYZE) orders, balances" -c CHECKPOINT
    T_B3+=("$(timed b3)")
    step="$(payledger_step audit "$run" 1)"
    read -r seconds rss cpu <<<"$step"
    T_AUDIT+=("$seconds")
    R_AUDIT+=("$rss")
    C_AUDIT+=("$cpu")
    bench_log "run $run: B1 $(bench_fmt 2 "${T_B1[-1]}") s, B2 $(bench_fmt 2 "${T_B2[-1]}") s," \
        "verify $(bench_fmt 2 "${T_VERIFY[-1]}") s (CPU ${C_VERIFY[-1]} s, ${R_VERIFY[-1]} MiB)," \
        "rebuild $(bench_fmt 2 "${T_REBUILD[-1]}") s (CPU ${C_REBUILD[-1]} s, ${R_REBUILD[-1]} MiB)," \
        "B3 $(bench_fmt 2 "${T_B3[-1]}") s," \
        "audit $(bench_fmt 2 "${T_AUDIT[-1]}") s (CPU ${C_AUDIT[-1]} s, ${R_AUDIT[-1]} MiB)"
done
tail -2 "$BENCH_TMP/rebuild.$RUNS.out" | sed 's/^/[bench] rebuild: /' >&2

B1="$(bench_median "${T_B1[@]}")"
B2="$(bench_median "${T_B2[@]}")"
VERIFY="$(bench_median "${T_VERIFY[@]}")"
REBUILD="$(bench_median "${T_REBUILD[@]}")"
RATIO_VERIFY="$(bench_calc "$VERIFY / $B1")"
RATIO_REBUILD="$(bench_calc "$REBUILD / $B2")"
B3="$(bench_median "${T_B3[@]}")"
AUDIT="$(bench_median "${T_AUDIT[@]}")"
RATIO_AUDIT="$(bench_calc "$AUDIT / $B3")"
RSS_AUDIT="$(printf '%s\n' "${R_AUDIT[@]}" | sort -g | tail -1)"
RSS_VERIFY="$(printf '%s\n' "${R_VERIFY[@]}" | sort -g | tail -1)"
RSS_REBUILD="$(printf '%s\n' "${R_REBUILD[@]}" | sort -g | tail -1)"
all() { local x out=""; for x in "$@"; do out="$out${out:+, }$(bench_fmt 2 "$x")"; done; echo "$out"; }
row() { printf '| %s | %s | %s | %s |\n' "$@"; }
{
    echo
    echo "### bench/rebuild"
    echo
    echo "\`$COMMAND\` — $EVENTS events, $ORDERS orders ($PAID paid), $ACCOUNTS accounts;" \
        "loaded in $(bench_fmt 1 "$LOAD_SECONDS") s; medians of $RUNS runs — $(bench_machine)"
    echo
    row "step" "median s (runs)" "payledger CPU s, peak RSS" "ratio, target"
    row "---" "---" "---" "---"
    row "B1: COPY ledger_events TO STDOUT → /dev/null" "$(bench_fmt 2 "$B1") ($(all "${T_B1[@]}"))" \
        "—" "—"
    row "B2: B1 + COPY orders, balances into fresh tables + primary keys" \
        "$(bench_fmt 2 "$B2") ($(all "${T_B2[@]}"))" "—" "—"
    row "\`payledger verify\` (exit 0)" "$(bench_fmt 2 "$VERIFY") ($(all "${T_VERIFY[@]}"))" \
        "$(bench_fmt 2 "$(bench_median "${C_VERIFY[@]}")") s, $RSS_VERIFY MiB" \
        "verify/B1 = **$(bench_fmt 2 "$RATIO_VERIFY")**, ≤ 1.3: $(bench_yes "$RATIO_VERIFY <= 1.3")"
    row "\`payledger rebuild\` (OK)" "$(bench_fmt 2 "$REBUILD") ($(all "${T_REBUILD[@]}"))" \
        "$(bench_fmt 2 "$(bench_median "${C_REBUILD[@]}")") s, $RSS_REBUILD MiB" \
        "rebuild/B2 = **$(bench_fmt 2 "$RATIO_REBUILD")**, ≤ 1.6: $(bench_yes "$RATIO_REBUILD <= 1.6")"
    row "B3: COPY callback_receipts TO STDOUT → /dev/null" \
        "$(bench_fmt 2 "$B3") ($(all "${T_B3[@]}"))" "—" "—"
    row "\`payledger audit\` (exit 0)" "$(bench_fmt 2 "$AUDIT") ($(all "${T_AUDIT[@]}"))" \
        "$(bench_fmt 2 "$(bench_median "${C_AUDIT[@]}")") s, $RSS_AUDIT MiB" \
        "audit/B3 = **$(bench_fmt 2 "$RATIO_AUDIT")**, ≤ 1.5: $(bench_yes "$RATIO_AUDIT <= 1.5")"
    echo
    echo "\`payledger rebuild\` ends with a full verify (ledger/integrity/rebuild.cpp): rebuild − verify" \
        "= $(bench_fmt 2 "$(bench_calc "$REBUILD - $VERIFY")") s for the build and the swap."
}
