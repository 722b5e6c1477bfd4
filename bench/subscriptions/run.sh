#!/usr/bin/env bash
# bench/subscriptions: delivery of the ledger's events to subscriptions (docs/subscriptions.md,
# docs/subscriptions.md#inside-serve) under bench/load's mixed load, and what it costs the write
# path, in one run on one PostgreSQL.
#
#   bench/subscriptions/run.sh [--connections 64] [--seconds 20] [--orders 20000]
#                              [--rounds 2] [--loadgen-threads 2] [--batch-max 100] [--keep]
#                              [--pg-setting 'NAME = VALUE']...
#
# One PostgreSQL and one receiver (payledger_bench_receiver, bench/subscriptions/receiver.cpp:
# the merchant's side, 200 at once to every POST, recording each event's seq and lag) for the
# whole run. Configurations of 0, 1 and 3 subscriptions of every event (batch_max 100), in
# turn, --rounds times (0, 1, 3, 0, 1, 3, …), so that a drift of the machine favours none;
# each on a fresh database (autovacuum off for the ledger's tables, as bench/load's (a)) with
# its own `payledger serve` and a generated config like bench/load's plus its subscriptions:
#   create   N orders through POST /v1/orders (C connections; N ORDER_CREATED events), then
#            until every subscription has all of them (at most 60 s), and a CHECKPOINT
#   mixed    bench/load's mixed phase: every order's signed generic callback twice, shuffled,
#            C connections (payledger_loadgen as bench/load runs it), measured
#   drain    until every subscription has received exactly the ledger's events (distinct
#            seqs and their sum equal to ledger_events'; at most 60 s), then the receiver's
#            figures for the phase's window
#   verify   payledger serve stopped, `payledger verify`
#
# The phase's window is [T0, T1]: T0 just before the load generator starts, T1 just after it
# exits (so the window also holds its start-up and its report, a few ms in which nothing is
# appended). Ingest = events appended ÷ (T1 − T0); delivered = events whose first arrival at
# the receiver falls in [T0, T1] ÷ (T1 − T0), per subscription (every earlier event was
# delivered before T0). A deliverer that keeps up exactly still scores below ingest by the
# events in flight at T1, which the report counts; one whose tail arrives within the load
# generator's report scores exactly ingest (the report gives the last arrival against T1).
# So the target "delivered ≥ ingest" is checked with the events in flight at T1 counted.
# Lag = arrival − recorded_at over the events
# recorded in the window; recorded_at is the appending transaction's start, so it is an upper
# bound of commit-to-delivery. Write-path loss = 1 − callbacks/s ÷ the same round's
# callbacks/s with 0 subscriptions. The table gives the medians over the rounds, then each
# run.
#
# Builds (Release) if needed, starts and stops everything itself, also on failure. Exits 1
# when an answer of the load was wrong, a delivery was incomplete, out of order or malformed,
# or `payledger verify` failed; the targets are reported, not enforced.
set -euo pipefail
shopt -s inherit_errexit  # A failure inside $(...) fails the run too.
source "$(dirname "$0")/../../scripts/lib/common.sh"
source "$PAYLEDGER_ROOT/bench/lib/bench.sh"

CONNECTIONS=64
SECONDS_LIMIT=20
ORDERS=20000
ROUNDS=2
LOADGEN_THREADS=2
BATCH_MAX=100
KEEP=""
PG_SETTINGS=()  # --pg-setting: lines for postgresql.conf, as bench/load's.
ACCOUNTS=1000
CONFIGURATIONS=(0 1 3)
DELIVERY_WAIT_SECONDS=60
# The targets (reported, not enforced).
LAG_P99_MS_MAX=1000
LOSS_PERCENT_MAX=10
COMMAND="bench/subscriptions/run.sh $*"
while [ $# -gt 0 ]; do
    case "$1" in
        --connections) CONNECTIONS="$2"; shift 2 ;;
        --seconds) SECONDS_LIMIT="$2"; shift 2 ;;
        --orders) ORDERS="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --loadgen-threads) LOADGEN_THREADS="$2"; shift 2 ;;
        --batch-max) BATCH_MAX="$2"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --pg-setting) PG_SETTINGS+=("$2"); shift 2 ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
        *) bench_die "unknown argument: $1 (see --help)" ;;
    esac
done
for value in "$CONNECTIONS" "$SECONDS_LIMIT" "$ORDERS" "$ROUNDS" "$LOADGEN_THREADS" "$BATCH_MAX"; do
    [[ "$value" =~ ^[1-9][0-9]*$ ]] || bench_die "expected a positive integer, got '$value'"
done
[ "$CONNECTIONS" -le 180 ] || bench_die "--connections: at most 180 (PostgreSQL max_connections 200)"
[ "$ROUNDS" -le 20 ] || bench_die "--rounds: at most 20"
[ "$BATCH_MAX" -le 1000 ] || bench_die "--batch-max: 1 to 1000"

SERVER_PID=""
RECEIVER_PID=""
FAILED=""
stop_server() {
    [ -n "$SERVER_PID" ] || return 0
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 300); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    local status=0
    wait "$SERVER_PID" 2>/dev/null || status=$?
    [ "$status" -eq 0 ] || bench_log "payledger serve exited with status $status"
    SERVER_PID=""
}
cleanup() {
    local status=$?
    stop_server
    if [ -n "$RECEIVER_PID" ] && kill -0 "$RECEIVER_PID" 2>/dev/null; then
        kill -TERM "$RECEIVER_PID" 2>/dev/null || true
        wait "$RECEIVER_PID" 2>/dev/null || true
    fi
    bench_pg_down
    if [ -n "$KEEP" ] || [ "$status" -ne 0 ]; then
        if [ "$status" -ne 0 ] && [ -n "${SERVE_LOG:-}" ] && [ -f "$SERVE_LOG" ]; then
            tail -20 "$SERVE_LOG" >&2
        fi
        bench_log "kept $BENCH_TMP (logs, the receiver's figures, PostgreSQL data)"
    else
        rm -rf "$BENCH_TMP"
    fi
}
bench_tmp_create
trap cleanup EXIT

payledger_install_deps curl jq
bench_build payledger payledger_loadgen payledger_bench_receiver
BENCH_BIN="$BENCH_BUILD_DIR"
LOADGEN="$BENCH_BIN/payledger_loadgen"

bench_pg_up "${PG_SETTINGS[@]}"
bench_log "PostgreSQL on $BENCH_PG_DATA port $BENCH_PG_PORT"

# --- the receiver, for the whole run -------------------------------------------------------
RECEIVER_PORT="$(payledger_free_port)" || bench_die "no free port"
"$BENCH_BIN/payledger_bench_receiver" --port "$RECEIVER_PORT" >"$BENCH_TMP/receiver.out" \
    2>"$BENCH_TMP/receiver.log" &
RECEIVER_PID=$!
for _ in $(seq 1 100); do
    grep -q '^listening on ' "$BENCH_TMP/receiver.out" && break
    kill -0 "$RECEIVER_PID" 2>/dev/null || bench_die "the receiver exited: $(cat "$BENCH_TMP/receiver.log")"
    sleep 0.1
done
grep -q '^listening on ' "$BENCH_TMP/receiver.out" || bench_die "the receiver is not up"
RECEIVER="http://127.0.0.1:$RECEIVER_PORT"
bench_log "receiver (pid $RECEIVER_PID) on 127.0.0.1:$RECEIVER_PORT"

# --- helpers --------------------------------------------------------------------------------
# run_loadgen LABEL ARGS...: one phase of payledger_loadgen against the running server; sets
# R_RPS R_P99 R_ERRORS R_ANSWERED R_APPENDED R_SECONDS from its RESULT line.
run_loadgen() {
    local label="$1" out kv
    shift
    out="$("$LOADGEN" --label "$label" --port "$PORT" --threads "$LOADGEN_THREADS" \
        --prefix LOAD- --accounts "$ACCOUNTS" --merchant-token "$MERCHANT_TOKEN" \
        --generic-secret "$SECRET" "$@")" || bench_die "the load generator failed in $label"
    printf '%s\n' "$out" | grep -v '^RESULT ' >&2
    for kv in $(printf '%s\n' "$out" | grep '^RESULT '); do
        case "$kv" in
            rps=*) R_RPS="${kv#*=}" ;;
            p99_ms=*) R_P99="${kv#*=}" ;;
            errors=*) R_ERRORS="${kv#*=}" ;;
            answered=*) R_ANSWERED="${kv#*=}" ;;
            appended=*) R_APPENDED="${kv#*=}" ;;
            seconds=*) R_SECONDS="${kv#*=}" ;;
        esac
    done
}

# The subscriptions' names as a JSON array, for jq.
names_json() { printf '%s\n' "$@" | jq -R . | jq -cs .; }

# wait_delivered DB NAME...: waits (at most DELIVERY_WAIT_SECONDS) until each subscription has
# received as many distinct seqs as DB has events; dies when one has not.
wait_delivered() {
    local db="$1" expected have="" names deadline
    shift
    [ $# -gt 0 ] || return 0
    names="$(names_json "$@")"
    expected="$(bench_psql "$db" -tAc "SELECT count(*) FROM ledger_events")"
    deadline=$((SECONDS + DELIVERY_WAIT_SECONDS))
    while [ "$SECONDS" -le "$deadline" ]; do
        have="$(curl -fsS "$RECEIVER/counts" |
            jq -r --argjson names "$names" '[$names[] as $n | .subscriptions[$n] // 0] | min')"
        [ "$have" -lt "$expected" ] || return 0
        sleep 0.1
    done
    bench_die "after ${DELIVERY_WAIT_SECONDS} s a subscription of $db has $have of its" \
        "$expected events: $(curl -fsS "$RECEIVER/counts" | jq -c .)"
}

# metric NAME: one value of the running server's /metrics.
metric() {
    curl -fsS "http://127.0.0.1:$PORT/metrics" | awk -v name="$1" '$1 == name { print $2 }'
}
# commit_counters: the committer's "batches deliveries write_seconds" so far.
commit_counters() {
    printf '%s %s %s\n' "$(metric payledger_commit_batches_total)" \
        "$(metric payledger_committed_deliveries_total)" \
        "$(metric 'payledger_commit_step_seconds_total{step="write"}')"
}

# Results by "ROUND,N" (N subscriptions).
declare -A RPS P99 APPENDED LOADGEN_S WINDOW_S INGEST DELIVERED_MIN KEPT_MIN DELIVERED_ALL IN_FLIGHT LAG50 LAG99 \
    LAGMAX REDELIVERED OUT_OF_ORDER CATCHUP_MS LAST_AFTER_MS CPU RECEIVER_CPU PG_CPU MACHINE \
    VERIFY FAILURES LOSS COMMITS

# run_configuration ROUND N: one configuration on a fresh database, its figures in the arrays.
run_configuration() {
    local round="$1" n="$2" key="$1,$2" run="r$1c$2"
    local db="subscriptions_$run" names=() subscriptions="" i name
    bench_log "round $round, $n subscription(s): database $db"
    bench_createdb "$db"
    for table in ledger_events callback_receipts orders balances; do
        bench_psql "$db" -c "ALTER TABLE $table SET (autovacuum_enabled = false)" >/dev/null
    done
    for i in $(seq 1 "$n"); do
        name="${run}s$i"
        names+=("$name")
        [ -z "$subscriptions" ] || subscriptions+=","
        subscriptions+="
    {\"name\": \"$name\", \"url\": \"$RECEIVER/hooks/$name\",
     \"secret\": \"whsec_$(openssl rand -base64 32)\", \"batch_max\": $BATCH_MAX}"
    done

    PORT="$(payledger_free_port)" || bench_die "no free port"
    SECRET="generic-$(openssl rand -hex 16)"
    MERCHANT_TOKEN="merchant-$(openssl rand -hex 16)"
    CONFIG="$BENCH_TMP/payledger_$run.json"
    SERVE_LOG="$BENCH_TMP/serve_$run.log"
    cat >"$CONFIG" <<JSON
{
  "listen": "127.0.0.1:$PORT",
  "database_url": "$(bench_url "$db")",
  "tokens": {"merchant": ["$MERCHANT_TOKEN"], "auditor": ["auditor-$(openssl rand -hex 16)"],
             "admin": ["admin-$(openssl rand -hex 16)"]},
  "generic": {"secret": "$SECRET"},
  "subscriptions": [$subscriptions]
}
JSON
    chmod 600 "$CONFIG"
    "$BENCH_BIN/payledger" serve --config "$CONFIG" >"$BENCH_TMP/serve_$run.out" 2>"$SERVE_LOG" &
    SERVER_PID=$!
    for _ in $(seq 1 300); do
        curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" 2>/dev/null && break
        kill -0 "$SERVER_PID" 2>/dev/null || bench_die "payledger serve exited (log above)"
        sleep 0.1
    done
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" || bench_die "payledger serve is not up"

    # create: the orders, then every subscription catches up before the measured phase.
    run_loadgen "create_$run" --mode create --connections "$CONNECTIONS" --orders "$ORDERS" \
        --seconds 600
    [ "$R_ANSWERED" -eq "$ORDERS" ] || bench_die "only $R_ANSWERED orders created"
    [ "$R_ERRORS" -eq 0 ] || FAILED=1
    local created_at
    created_at="$(bench_now)"
    wait_delivered "$db" "${names[@]}"
    CATCHUP_MS[$key]="—"
    if [ "$n" -gt 0 ]; then
        CATCHUP_MS[$key]="$(curl -fsS "$RECEIVER/stats" | jq -r --argjson names \
            "$(names_json "${names[@]}")" --argjson t "$created_at" \
            '[$names[] as $n | .subscriptions[$n].last_arrival] | max - $t | . * 1000 | round')"
    fi
    bench_psql "$db" -c CHECKPOINT >/dev/null

    # mixed: measured.
    local t0 t1 cpu0 receiver_cpu0 pg_cpu0 ticks0 window commits0 commits1
    commits0="$(commit_counters)"
    ticks0="$(bench_ticks)"
    cpu0="$(bench_cpu_seconds "$SERVER_PID")"
    receiver_cpu0="$(bench_cpu_seconds "$RECEIVER_PID")"
    pg_cpu0="$(bench_pg_cpu_seconds)"
    t0="$(bench_now)"
    run_loadgen "mixed_$run" --mode pay --expect either --copies 2 --connections "$CONNECTIONS" \
        --first-order 0 --orders "$ORDERS" --seconds "$SECONDS_LIMIT" --timeline 1
    t1="$(bench_now)"
    window="$(bench_calc "$t1 - $t0")"
    CPU[$key]="$(bench_calc "100 * ($(bench_cpu_seconds "$SERVER_PID") - $cpu0) / $window")"
    RECEIVER_CPU[$key]="$(bench_calc "100 * ($(bench_cpu_seconds "$RECEIVER_PID") - $receiver_cpu0) / $window")"
    PG_CPU[$key]="$(bench_calc "100 * ($(bench_pg_cpu_seconds) - $pg_cpu0) / $window")"
    MACHINE[$key]="$(bench_ticks_share "$ticks0")"
    # The write path's commits over the phase: deliveries per commit, and the second round trip
    # (the write, COMMIT and its WAL flush) per commit.
    commits1="$(commit_counters)"
    COMMITS[$key]="$(awk -v a="$commits0" -v b="$commits1" 'BEGIN {
        split(a, x, " "); split(b, y, " "); n = y[1] - x[1]
        if (n <= 0) { print "—"; exit }
        printf "%.1f; %.2f ms", (y[2] - x[2]) / n, 1000 * (y[3] - x[3]) / n }')"
    [ "$R_ERRORS" -eq 0 ] || FAILED=1
    [ "$R_APPENDED" -gt 0 ] || bench_die "$run: nothing was appended"
    RPS[$key]="$R_RPS"
    P99[$key]="$R_P99"
    APPENDED[$key]="$R_APPENDED"
    WINDOW_S[$key]="$window"
    LOADGEN_S[$key]="$R_SECONDS"
    INGEST[$key]="$(bench_calc "$R_APPENDED / $window")"

    # drain: every subscription has exactly the ledger's events, in order.
    wait_delivered "$db" "${names[@]}"
    local stats ledger
    stats="$BENCH_TMP/stats_$run.json"
    curl -fsS "$RECEIVER/stats?from=$t0&to=$t1" >"$stats"
    ledger="$(bench_psql "$db" -tA -F ' ' -c "SELECT count(*), coalesce(sum(seq), 0) FROM ledger_events")"
    local malformed
    malformed="$(jq -r .malformed "$stats")"
    [ "$malformed" -eq 0 ] || { bench_log "malformed deliveries: $(jq -c .malformed_samples "$stats")"; FAILED=1; }
    local delivered=() kept=() in_flight=() lag50=() lag99=() lagmax=() redelivered=0 out_of_order=0 last_after=()
    local distinct seq_sum ooo redo arrived after p50 p99 max last
    for name in "${names[@]}"; do
        read -r distinct seq_sum ooo redo arrived after p50 p99 max last < <(jq -r --arg n "$name" \
            '.subscriptions[$n] | [.distinct, .seq_sum, .out_of_order, .redelivered,
             .window.arrived, .window.recorded_arrived_after, .window.lag_ms.p50,
             .window.lag_ms.p99, .window.lag_ms.max, .last_arrival] | @tsv' "$stats")
        if [ "$distinct $seq_sum" != "$ledger" ]; then
            bench_log "$name: received $distinct distinct seqs summing to $seq_sum;" \
                "the ledger has count and sum $ledger"
            FAILED=1
        fi
        if [ "$ooo" -ne 0 ]; then
            bench_log "$name: $ooo events out of order"
            FAILED=1
        fi
        out_of_order=$((out_of_order + ooo))
        redelivered=$((redelivered + redo))
        delivered+=("$(bench_calc "$arrived / $window")")
        kept+=("$(bench_calc "($arrived + $after) / $window")")
        in_flight+=("$after")
        lag50+=("$p50")
        lag99+=("$p99")
        lagmax+=("$max")
        last_after+=("$(bench_calc "1000 * ($last - $t1)")")
    done
    if [ "$n" -gt 0 ]; then
        DELIVERED_MIN[$key]="$(printf '%s\n' "${delivered[@]}" | sort -g | head -1)"
        KEPT_MIN[$key]="$(printf '%s\n' "${kept[@]}" | sort -g | head -1)"
        DELIVERED_ALL[$key]="$(for d in "${delivered[@]}"; do bench_fmt 0 "$d"; echo; done | paste -sd /)"
        IN_FLIGHT[$key]="$(printf '%s\n' "${in_flight[@]}" | paste -sd /)"
        LAG50[$key]="$(printf '%s\n' "${lag50[@]}" | sort -g | tail -1)"
        LAG99[$key]="$(printf '%s\n' "${lag99[@]}" | sort -g | tail -1)"
        LAGMAX[$key]="$(printf '%s\n' "${lagmax[@]}" | sort -g | tail -1)"
        LAST_AFTER_MS[$key]="$(printf '%s\n' "${last_after[@]}" | sort -g | tail -1)"
        bench_log "$run: delivered/s ${DELIVERED_ALL[$key]} (ingest $(bench_fmt 0 "${INGEST[$key]}")/s);" \
            "lag ms p50/p99/max (worst subscription) $(bench_fmt 1 "${LAG50[$key]}")/$(bench_fmt 1 \
            "${LAG99[$key]}")/$(bench_fmt 1 "${LAGMAX[$key]}"); in flight at the end ${IN_FLIGHT[$key]}"
    fi
    REDELIVERED[$key]="$redelivered"
    OUT_OF_ORDER[$key]="$out_of_order"
    FAILURES[$key]="$(grep -c '"subscription delivery failed"' "$SERVE_LOG" || true)"
    bench_log "$run: CPU (% of one core) payledger $(bench_fmt 0 "${CPU[$key]}")%, receiver" \
        "$(bench_fmt 0 "${RECEIVER_CPU[$key]}")%, PostgreSQL $(bench_fmt 0 "${PG_CPU[$key]}")%"

    stop_server
    local verify_status=0
    "$BENCH_BIN/payledger" verify --config "$CONFIG" >"$BENCH_TMP/verify_$run.out" 2>&1 ||
        verify_status=$?
    VERIFY[$key]="$verify_status"
    if [ "$verify_status" -ne 0 ]; then
        cat "$BENCH_TMP/verify_$run.out" >&2
        FAILED=1
    fi
}

for round in $(seq 1 "$ROUNDS"); do
    for n in "${CONFIGURATIONS[@]}"; do
        run_configuration "$round" "$n"
    done
    for n in "${CONFIGURATIONS[@]}"; do
        LOSS[$round,$n]="$(bench_calc "100 * (1 - ${RPS[$round,$n]} / ${RPS[$round,0]})")"
    done
done

# --- report ---------------------------------------------------------------------------------
# median ARRAY N: the median over the rounds of ARRAY[round,N].
median() {
    local -n values="$1"
    local round all=()
    for round in $(seq 1 "$ROUNDS"); do all+=("${values[$round,$2]}"); done
    bench_median "${all[@]}"
}
# per_round ARRAY N DIGITS: the rounds' values, "a, b".
per_round() {
    local -n values="$1"
    local round all=()
    for round in $(seq 1 "$ROUNDS"); do all+=("$(bench_fmt "$3" "${values[$round,$2]}")"); done
    local IFS=,
    printf '%s' "${all[*]}" | sed 's/,/, /g'
}
row() {
    local cell out="|"
    for cell in "$@"; do out+=" $cell |"; done
    printf '%s\n' "$out"
}
VERIFY_ALL=0
declare -A RATIO
for round in $(seq 1 "$ROUNDS"); do
    for n in "${CONFIGURATIONS[@]}"; do
        [ "${VERIFY[$round,$n]}" -eq 0 ] || VERIFY_ALL=1
        [ "$n" -eq 0 ] || RATIO[$round,$n]="$(bench_calc "${KEPT_MIN[$round,$n]} / ${INGEST[$round,$n]}")"
    done
done
{
    echo
    echo "### bench/subscriptions"
    echo
    echo "\`$COMMAND\` — $(bench_machine)"
    echo
    echo "Medians of $ROUNDS round(s); $CONNECTIONS connections, $ORDERS orders, every order's" \
        "callback twice, shuffled; subscriptions of every event, batch_max $BATCH_MAX, one local" \
        "receiver answering 200 at once."
    echo
    row "subscriptions" "callbacks/s" "p99 ms" "ingest events/s" \
        "delivered events/s (min over subscriptions; with those in flight at the end, ÷ ingest)" \
        "lag ms p50 / p99 / max (worst subscription)" "write-path loss vs 0" "targets" "met"
    row "---" "---" "---" "---" "---" "---" "---" "---" "---"
    for n in "${CONFIGURATIONS[@]}"; do
        if [ "$n" -eq 0 ]; then
            row 0 "$(bench_fmt 0 "$(median RPS 0)")" "$(bench_fmt 2 "$(median P99 0)")" \
                "$(bench_fmt 0 "$(median INGEST 0)")" "—" "—" "—" "—" "—"
            continue
        fi
        ratio="$(median RATIO "$n")"
        median_lag99="$(median LAG99 "$n")"
        loss="$(median LOSS "$n")"
        row "$n" "$(bench_fmt 0 "$(median RPS "$n")")" "$(bench_fmt 2 "$(median P99 "$n")")" \
            "$(bench_fmt 0 "$(median INGEST "$n")")" \
            "$(bench_fmt 0 "$(median DELIVERED_MIN "$n")") ($(bench_fmt 3 "$ratio")×)" \
            "$(bench_fmt 1 "$(median LAG50 "$n")") / $(bench_fmt 1 "$median_lag99") / $(bench_fmt 1 "$(median LAGMAX "$n")")" \
            "$(bench_fmt 1 "$loss") %" \
            "delivered ≥ ingest; lag p99 ≤ $LAG_P99_MS_MAX ms; loss ≤ $LOSS_PERCENT_MAX %" \
            "$(bench_yes "$ratio >= 1"); $(bench_yes "$median_lag99 <= $LAG_P99_MS_MAX"); $(bench_yes "$loss <= $LOSS_PERCENT_MAX")"
    done
    row "\`payledger verify\` of every database" "exit $VERIFY_ALL" "" "" "" "" "" "exit 0" \
        "$(bench_yes "$VERIFY_ALL == 0")"
    echo
    echo "Each run, in the order they ran:"
    echo
    row "round, subscriptions" "callbacks/s; p99 ms" "appended in the window, s (the load generator's own) = ingest/s" \
        "delivered/s per subscription" "in flight at the window's end; last arrival after it" \
        "lag ms p50 / p99 / max (worst)" "caught up after create" "redelivered; out of order; failed attempts" \
        "write path: deliveries per commit; write and COMMIT per commit" \
        "CPU % serve / receiver / PostgreSQL; machine idle, steal %"
    row "---" "---" "---" "---" "---" "---" "---" "---" "---" "---"
    for round in $(seq 1 "$ROUNDS"); do
        for n in "${CONFIGURATIONS[@]}"; do
            k="$round,$n"
            if [ "$n" -eq 0 ]; then
                delivery_cells=("—" "—" "—" "—")
            else
                delivery_cells=("${DELIVERED_ALL[$k]}" \
                    "${IN_FLIGHT[$k]} events; $(bench_fmt 0 "${LAST_AFTER_MS[$k]}") ms" \
                    "$(bench_fmt 1 "${LAG50[$k]}") / $(bench_fmt 1 "${LAG99[$k]}") / $(bench_fmt 1 "${LAGMAX[$k]}")" \
                    "${CATCHUP_MS[$k]} ms")
            fi
            row "$round, $n" "$(bench_fmt 0 "${RPS[$k]}"); $(bench_fmt 2 "${P99[$k]}")" \
                "${APPENDED[$k]} in $(bench_fmt 3 "${WINDOW_S[$k]}") ($(bench_fmt 3 "${LOADGEN_S[$k]}")) = $(bench_fmt 0 "${INGEST[$k]}")" \
                "${delivery_cells[@]}" "${REDELIVERED[$k]}; ${OUT_OF_ORDER[$k]}; ${FAILURES[$k]}" "${COMMITS[$k]}" \
                "$(bench_fmt 0 "${CPU[$k]}") / $(bench_fmt 0 "${RECEIVER_CPU[$k]}") / $(bench_fmt 0 "${PG_CPU[$k]}"); ${MACHINE[$k]% *}, ${MACHINE[$k]#* }"
        done
    done
    echo
    echo "The window of a phase is from just before the load generator starts to just after it" \
        "exits; ingest and delivered are counted over it (delivered: each seq's first arrival" \
        "at the receiver). Every subscription had received all earlier events before it began," \
        "so a deliverer that keeps up exactly still falls short of ingest by the events in flight" \
        "at its end (counted above, and in the ratio to ingest). The window is longer than the load generator's own time" \
        "(its start-up and its report, in which nothing is appended): when the last event" \
        "arrived before the window's end (a negative \"last arrival after it\"), delivered =" \
        "ingest says only that every event of the phase had arrived when the load generator" \
        "exited, and the lag is the sharper figure. Lag = arrival − \`recorded_at\` over the events recorded in the" \
        "window: \`recorded_at\` is the appending transaction's start, before its COMMIT, so this" \
        "is an upper bound of commit-to-delivery. Write-path loss is 1 − callbacks/s ÷ the same" \
        "round's callbacks/s with 0 subscriptions, median over the rounds. The receiver runs on" \
        "the same machine, so its CPU is part of the loss."
}
[ -z "$FAILED" ] || bench_die "an answer was wrong, a delivery was out of order or malformed, or verify failed (above)"
