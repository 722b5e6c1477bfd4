#!/usr/bin/env bash
# bench/query: the active order query (docs/query.md) with 100 000 orders due at once, against
# `payledger simulate-platform`: queries per second, and what they cost the write path, in one
# run on one PostgreSQL.
#
#   bench/query/run.sh [--query-orders 100000] [--paid-percent 10] [--channel wechat_v2]
#                      [--concurrency 8] [--connections 64] [--seconds 20] [--orders 20000]
#                      [--loadgen-threads 2] [--drain-seconds 1800] [--activity] [--keep]
#                      [--statements DIR] [--pg-setting 'NAME = VALUE']...
#   --channel: wechat_v2 (MD5 signatures), wechat_v3 or alipay (RSA-2048 on both sides: the
#              simulator's signing runs on this machine too)
#   --concurrency: the config's query.concurrency (1-64; 8 is its default)
#   --drain-seconds: the bound on waiting for every order to be asked (at 112 queries/s, the
#              rate of the first run on a busy machine, 100 000 took 896 s)
#   --activity: samples pg_stat_activity every 0.2 s over the phase with queries and writes what
#              PostgreSQL's sessions were doing (state, wait event, statement) to activity.txt
#              in the temporary folder (kept: --keep is implied)
#   --statements DIR: loads pg_stat_statements (nested statements too) and writes
#              DIR/with.statements.txt: what PostgreSQL ran, in both databases, from the due
#              instant to the end of the phase with queries and callbacks (the 40 statements that
#              took the most time, by database)
#
# One PostgreSQL, two databases: `payledger`, the merchant's ledger that `payledger serve`
# writes, and `payledger_platform`, the platform's own record that `payledger simulate-platform`
# answers from (as scripts/run starts it). Both get the same Q = --query-orders orders straight in
# SQL (bench/lib/seed_ledger.sql, the merchant's ORDER_CREATED with {"channel": CHANNEL}); in the
# platform's record --paid-percent of them are paid (source CHANNEL, transaction id TX<number>),
# so that their queries append a payment through the write path, and the rest are WAIT_PAY
# (NOTPAY). Each of the merchant's orders gets its row of order_queries, not due yet (the seed
# runs in replica mode, where schema 0011's trigger does not fire; the rows are what it would
# have made). The config: the channel's section with its `query`, a generic secret for the load,
# "query": {"schedule_seconds": [3600], "concurrency": --concurrency}, so that each order is asked
# once in the run. Then, with one `payledger serve` and one simulator throughout:
#   create     3 × N orders (N = --orders) through POST /v1/orders, without a channel
#   alone 1    bench/load's mixed phase on the first N: every order's signed generic callback
#              twice, shuffled, C connections (payledger_loadgen as bench/load runs it)
#   with       all Q orders' next_at set to one instant seconds ahead, VACUUM, CHECKPOINT, and
#              at that instant the mixed phase on the next N orders; then until every order has
#              been asked (at most --drain-seconds)
#   alone 2    the mixed phase on the last N orders, the queries done
#   verify     serve stopped: every order asked exactly once, the paid ones' payments appended
#              (source CHANNEL_query) and no others, `payledger verify`
# Every mixed phase follows the same rewrite of order_queries (the phases without queries leave
# next_at as it is), a VACUUM and a CHECKPOINT (before_phase). Queries/s: Q ÷ (the last
# attempt's record − the due instant), and apart, while the callbacks ran
# (payledger_queries_total over the phase) and after. Write-path loss = 1 − callbacks/s with queries ÷ the mean of the two phases without,
# which bracket it, so that a drift of the machine favours neither side. The simulator and its
# record run on the same machine, so their CPU and PostgreSQL work are part of the loss.
#
# Builds (Release) if needed (PAYLEDGER_BENCH_PREBUILT: a tree that holds payledger and
# payledger_loadgen already), starts and stops everything itself, also on failure. Exits 1 when
# an answer of the load was wrong, a query failed or was not made, a payment is missing or
# extra, or `payledger verify` failed; the target (loss ≤ 10 %) is reported, not enforced.
set -euo pipefail
shopt -s inherit_errexit  # A failure inside $(...) fails the run too.
source "$(dirname "$0")/../../scripts/lib/common.sh"
source "$PAYLEDGER_ROOT/bench/lib/bench.sh"

QUERY_ORDERS=100000
PAID_PERCENT=10
CHANNEL=wechat_v2
CONCURRENCY=8
CONNECTIONS=64
SECONDS_LIMIT=20
ORDERS=20000
LOADGEN_THREADS=2
DRAIN_SECONDS=1800
ACTIVITY=""
KEEP=""
STATEMENTS_DIR=""
PG_SETTINGS=()  # --pg-setting: lines for postgresql.conf, as bench/load's.
ACCOUNTS=1000
# The phase with queries starts this long after its orders were made due: room for the
# VACUUM and CHECKPOINT before it, so that the instant is the same for the claimer and the load.
DUE_LEAD_SECONDS=15
LOSS_PERCENT_MAX=10  # The target (reported, not enforced).
COMMAND="bench/query/run.sh $*"
while [ $# -gt 0 ]; do
    case "$1" in
        --query-orders) QUERY_ORDERS="$2"; shift 2 ;;
        --paid-percent) PAID_PERCENT="$2"; shift 2 ;;
        --channel) CHANNEL="$2"; shift 2 ;;
        --concurrency) CONCURRENCY="$2"; shift 2 ;;
        --connections) CONNECTIONS="$2"; shift 2 ;;
        --seconds) SECONDS_LIMIT="$2"; shift 2 ;;
        --orders) ORDERS="$2"; shift 2 ;;
        --loadgen-threads) LOADGEN_THREADS="$2"; shift 2 ;;
        --drain-seconds) DRAIN_SECONDS="$2"; shift 2 ;;
        --activity) ACTIVITY=1; KEEP=1; shift ;;
        --keep) KEEP=1; shift ;;
        --statements) STATEMENTS_DIR="$2"; shift 2 ;;
        --pg-setting) PG_SETTINGS+=("$2"); shift 2 ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
        *) bench_die "unknown argument: $1 (see --help)" ;;
    esac
done
for value in "$QUERY_ORDERS" "$CONCURRENCY" "$CONNECTIONS" "$SECONDS_LIMIT" "$ORDERS" \
    "$LOADGEN_THREADS" "$DRAIN_SECONDS"; do
    [[ "$value" =~ ^[1-9][0-9]*$ ]] || bench_die "expected a positive integer, got '$value'"
done
[[ "$PAID_PERCENT" =~ ^[0-9]+$ ]] && [ "$PAID_PERCENT" -le 100 ] ||
    bench_die "--paid-percent: 0 to 100"
[ "$QUERY_ORDERS" -le 10000000 ] || bench_die "--query-orders: at most 10 000 000"
[ "$CONCURRENCY" -le 64 ] || bench_die "--concurrency: 1 to 64 (docs/query.md)"
[ "$CONNECTIONS" -le 150 ] || bench_die "--connections: at most 150 (PostgreSQL max_connections 200)"
case "$CHANNEL" in
    wechat_v2 | wechat_v3 | alipay) ;;
    *) bench_die "--channel: wechat_v2, wechat_v3 or alipay" ;;
esac
PAID=$((QUERY_ORDERS * PAID_PERCENT / 100))

SERVER_PID=""
SIMULATOR_PID=""
SAMPLER_PID=""
FAILED=""
# stop PID NAME: SIGTERM, at most 30 s, then SIGKILL; logs a non-zero exit.
stop() {
    local pid="$1" status=0
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || status=$?
    [ "$status" -eq 0 ] || bench_log "$2 exited with status $status"
}
cleanup() {
    local status=$?
    [ -z "$SAMPLER_PID" ] || stop "$SAMPLER_PID" "the activity sampler" 2>/dev/null
    [ -z "$SERVER_PID" ] || stop "$SERVER_PID" "payledger serve"
    [ -z "$SIMULATOR_PID" ] || stop "$SIMULATOR_PID" "payledger simulate-platform"
    bench_pg_down
    if [ -n "$KEEP" ] || [ "$status" -ne 0 ]; then
        if [ "$status" -ne 0 ] && [ -f "$BENCH_TMP/serve.log" ]; then
            tail -20 "$BENCH_TMP/serve.log" >&2
        fi
        bench_log "kept $BENCH_TMP (logs, PostgreSQL data)"
    else
        rm -rf "$BENCH_TMP"
    fi
}
bench_tmp_create
trap cleanup EXIT

payledger_install_deps curl
bench_build payledger payledger_loadgen
BENCH_BIN="$BENCH_BUILD_DIR"
LOADGEN="$BENCH_BIN/payledger_loadgen"

if [ -n "$STATEMENTS_DIR" ]; then
    mkdir -p "$STATEMENTS_DIR"
    STATEMENTS_DIR="$(cd "$STATEMENTS_DIR" && pwd)"
    PG_SETTINGS+=("${BENCH_STATEMENTS_SETTINGS[@]}")
fi
bench_pg_up "${PG_SETTINGS[@]}"
bench_log "PostgreSQL on $BENCH_PG_DATA port $BENCH_PG_PORT"
bench_createdb payledger
bench_createdb payledger_platform
[ -z "$STATEMENTS_DIR" ] || bench_psql payledger -c "CREATE EXTENSION pg_stat_statements" >/dev/null

# --- the orders to ask about, in both ledgers ----------------------------------------------
bench_log "seeding $QUERY_ORDERS orders with channel $CHANNEL; $PAID of them paid on the platform"
bench_psql payledger -v prefix=QRY- -v pad=10 -v orders="$QUERY_ORDERS" -v paid=0 \
    -v accounts="$ACCOUNTS" -v data="{\"channel\": \"$CHANNEL\"}" \
    -f "$PAYLEDGER_ROOT/bench/lib/seed_ledger.sql" || bench_die "seeding payledger failed"
# Their schedules, as schema 0011's trigger makes them, but not due: the phase sets next_at.
bench_psql payledger -c "INSERT INTO order_queries (out_trade_no, channel, created_at, next_at)
    SELECT out_trade_no, data->>'channel', occurred_at, NULL FROM ledger_events
    WHERE event_type = 'ORDER_CREATED' AND data ? 'channel'" >/dev/null
bench_psql payledger_platform -v prefix=QRY- -v pad=10 -v orders="$QUERY_ORDERS" \
    -v paid="$PAID" -v accounts="$ACCOUNTS" -v source="$CHANNEL" \
    -f "$PAYLEDGER_ROOT/bench/lib/seed_ledger.sql" || bench_die "seeding payledger_platform failed"
PAID="$(bench_psql payledger_platform -tAc "SELECT count(*) FROM ledger_events
    WHERE event_type = 'PAYMENT_SUCCEEDED'")"
for db in payledger payledger_platform; do
    bench_psql "$db" -c "VACUUM ANALYZE" >/dev/null
done
# As bench/load's (a): autovacuum never runs behind one phase's back and not another's.
for table in ledger_events callback_receipts orders balances order_queries; do
    bench_psql payledger -c "ALTER TABLE $table SET (autovacuum_enabled = false)" >/dev/null
done

# --- the config, the simulator, payledger serve ----------------------------------------------
KEY_DIR="$BENCH_TMP/keys"
mkdir -p "$KEY_DIR"
chmod 700 "$KEY_DIR"
# keypair NAME: $KEY_DIR/NAME_private.pem and NAME_public.pem, RSA 2048 (as scripts/lib/dev_config.sh).
keypair() {
    (umask 077 && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
        -out "$KEY_DIR/$1_private.pem" 2>/dev/null)
    openssl pkey -in "$KEY_DIR/$1_private.pem" -pubout -out "$KEY_DIR/$1_public.pem"
}
PORT="$(payledger_free_port)" || bench_die "no free port"
SIMULATOR_PORT="$(payledger_free_port)" || bench_die "no free port"
SIMULATOR="127.0.0.1:$SIMULATOR_PORT"
SECRET="generic-$(openssl rand -hex 16)"
MERCHANT_TOKEN="merchant-$(openssl rand -hex 16)"
case "$CHANNEL" in
    wechat_v2)
        CHANNEL_JSON="\"wechat_v2\": {\"appid\": \"wx$(openssl rand -hex 8)\", \"mch_id\": \"1900000001\",
    \"api_key\": \"$(openssl rand -hex 16)\", \"sign_type\": \"MD5\",
    \"query\": {\"api_base\": \"http://$SIMULATOR\"}}" ;;
    wechat_v3)
        keypair wechat_v3_platform
        keypair wechat_v3_merchant
        SERIAL="$(openssl rand -hex 20 | tr 'a-f' 'A-F')"
        CHANNEL_JSON="\"wechat_v3\": {\"appid\": \"wx$(openssl rand -hex 8)\", \"mchid\": \"1900000002\",
    \"api_v3_key\": \"$(openssl rand -hex 16)\",
    \"platform_public_keys\": {\"$SERIAL\": \"$KEY_DIR/wechat_v3_platform_public.pem\"},
    \"simulate_private_key\": \"$KEY_DIR/wechat_v3_platform_private.pem\", \"simulate_serial\": \"$SERIAL\",
    \"query\": {\"api_base\": \"http://$SIMULATOR\",
              \"merchant_private_key\": \"$KEY_DIR/wechat_v3_merchant_private.pem\",
              \"merchant_serial\": \"$(openssl rand -hex 20 | tr 'a-f' 'A-F')\"}}" ;;
    alipay)
        keypair alipay
        keypair alipay_app
        CHANNEL_JSON="\"alipay\": {\"app_id\": \"2021000000000001\",
    \"alipay_public_key\": \"$KEY_DIR/alipay_public.pem\",
    \"simulate_private_key\": \"$KEY_DIR/alipay_private.pem\",
    \"query\": {\"api_base\": \"http://$SIMULATOR/gateway.do\",
              \"app_private_key\": \"$KEY_DIR/alipay_app_private.pem\"}}" ;;
esac
CONFIG="$BENCH_TMP/payledger.json"
cat >"$CONFIG" <<JSON
{
  "listen": "127.0.0.1:$PORT",
  "database_url": "$(bench_url payledger)",
  "tokens": {"merchant": ["$MERCHANT_TOKEN"], "auditor": ["auditor-$(openssl rand -hex 16)"],
             "admin": ["admin-$(openssl rand -hex 16)"]},
  "generic": {"secret": "$SECRET"},
  $CHANNEL_JSON,
  "query": {"first_after_seconds": 60, "schedule_seconds": [3600],
            "concurrency": $CONCURRENCY, "timeout_seconds": 10}
}
JSON
chmod 600 "$CONFIG"

PAYLEDGER_DATABASE_URL="$(bench_url payledger_platform)" "$BENCH_BIN/payledger" \
    simulate-platform --listen "$SIMULATOR" --config "$CONFIG" >"$BENCH_TMP/simulator.log" 2>&1 &
SIMULATOR_PID=$!
"$BENCH_BIN/payledger" serve --config "$CONFIG" >"$BENCH_TMP/serve.out" 2>"$BENCH_TMP/serve.log" &
SERVER_PID=$!
for _ in $(seq 1 300); do
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" 2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || bench_die "payledger serve exited (log above)"
    sleep 0.1
done
curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" || bench_die "payledger serve is not up"
kill -0 "$SIMULATOR_PID" 2>/dev/null ||
    bench_die "payledger simulate-platform exited: $(tail -5 "$BENCH_TMP/simulator.log")"
grep -q 'simulate-platform listening' "$BENCH_TMP/simulator.log" ||
    bench_die "payledger simulate-platform is not listening: $(tail -5 "$BENCH_TMP/simulator.log")"
bench_log "payledger serve (pid $SERVER_PID) on 127.0.0.1:$PORT; simulate-platform" \
    "(pid $SIMULATOR_PID) on $SIMULATOR"

# --- helpers --------------------------------------------------------------------------------
metrics() { curl -fsS "http://127.0.0.1:$PORT/metrics"; }
# metric NAME: one value of the running server's /metrics.
metric() { metrics | awk -v name="$1" '$1 == name { print $2 }'; }
# queries_total [ANSWER]: payledger_queries_total summed over channels (and answers, without one).
queries_total() {
    metrics | awk -v answer="${1:-}" '$1 ~ /^payledger_queries_total\{/ &&
        (answer == "" || index($1, "answer=\"" answer "\"")) { n += $2 } END { print n + 0 }'
}
# commit_counters: the committer's "batches deliveries write_seconds" so far.
commit_counters() {
    printf '%s %s %s\n' "$(metric payledger_commit_batches_total)" \
        "$(metric payledger_committed_deliveries_total)" \
        "$(metric 'payledger_commit_step_seconds_total{step="write"}')"
}
# not_asked: the orders to ask about not asked yet, and the last record's time (epoch seconds).
not_asked() {
    bench_psql payledger -tA -F ' ' -c "SELECT count(*) FILTER (WHERE attempts = 0),
        coalesce(extract(epoch FROM max(last_at)), 0) FROM order_queries"
}

declare -A RPS P99 APPENDED T0 T1 WINDOW_S CPU SIM_CPU PG_CPU MACHINE COMMITS QUERIES_IN
# mixed LABEL FIRST_ORDER: bench/load's mixed phase on [FIRST_ORDER, FIRST_ORDER + N) (the caller
# makes a CHECKPOINT first); its figures, and the queries answered meanwhile, in the arrays.
mixed() {
    local label="$1" first="$2" out kv t0 t1 window cpu0 sim0 pg0 ticks0 commits0 commits1 q0
    commits0="$(commit_counters)"
    q0="$(queries_total)"
    ticks0="$(bench_ticks)"
    cpu0="$(bench_cpu_seconds "$SERVER_PID")"
    sim0="$(bench_cpu_seconds "$SIMULATOR_PID")"
    pg0="$(bench_pg_cpu_seconds)"
    t0="$(bench_now)"
    out="$("$LOADGEN" --label "$label" --port "$PORT" --threads "$LOADGEN_THREADS" \
        --prefix LOAD- --accounts "$ACCOUNTS" --merchant-token "$MERCHANT_TOKEN" \
        --generic-secret "$SECRET" --mode pay --expect either --copies 2 \
        --connections "$CONNECTIONS" --first-order "$first" --orders "$ORDERS" \
        --seconds "$SECONDS_LIMIT" --timeline 1)" || bench_die "the load generator failed in $label"
    t1="$(bench_now)"
    QUERIES_IN[$label]="$(($(queries_total) - q0))"
    window="$(bench_calc "$t1 - $t0")"
    T0[$label]="$t0"
    T1[$label]="$t1"
    printf '%s\n' "$out" | grep -v '^RESULT ' >&2
    for kv in $(printf '%s\n' "$out" | grep '^RESULT '); do
        case "$kv" in
            rps=*) RPS[$label]="${kv#*=}" ;;
            p99_ms=*) P99[$label]="${kv#*=}" ;;
            appended=*) APPENDED[$label]="${kv#*=}" ;;
            errors=*) [ "${kv#*=}" -eq 0 ] || FAILED=1 ;;
        esac
    done
    [ "${APPENDED[$label]}" -gt 0 ] || bench_die "$label: nothing was appended"
    WINDOW_S[$label]="$window"
    CPU[$label]="$(bench_calc "100 * ($(bench_cpu_seconds "$SERVER_PID") - $cpu0) / $window")"
    SIM_CPU[$label]="$(bench_calc "100 * ($(bench_cpu_seconds "$SIMULATOR_PID") - $sim0) / $window")"
    PG_CPU[$label]="$(bench_calc "100 * ($(bench_pg_cpu_seconds) - $pg0) / $window")"
    MACHINE[$label]="$(bench_ticks_share "$ticks0")"
    commits1="$(commit_counters)"
    COMMITS[$label]="$(awk -v a="$commits0" -v b="$commits1" 'BEGIN {
        split(a, x, " "); split(b, y, " "); n = y[1] - x[1]
        if (n <= 0) { print "—"; exit }
        printf "%.1f; %.2f ms", (y[2] - x[2]) / n, 1000 * (y[3] - x[3]) / n }')"
    bench_log "$label: $(bench_fmt 0 "${RPS[$label]}") callbacks/s, p99 ${P99[$label]} ms;" \
        "${QUERIES_IN[$label]} queries meanwhile; CPU (% of one core) serve" \
        "$(bench_fmt 0 "${CPU[$label]}")%, simulator $(bench_fmt 0 "${SIM_CPU[$label]}")%," \
        "PostgreSQL $(bench_fmt 0 "${PG_CPU[$label]}")%"
}

# activity_sampler FILE: every 0.2 s, what each of PostgreSQL's client sessions is doing.
activity_sampler() {
    while :; do
        bench_psql postgres -tA -F '|' -c "SELECT pid, datname, state,
            coalesce(wait_event_type || ':' || wait_event, 'CPU'),
            left(regexp_replace(query, '\s+', ' ', 'g'), 50)
            FROM pg_stat_activity WHERE backend_type = 'client backend'
            AND pid <> pg_backend_pid()" >>"$1" 2>/dev/null || true
        sleep 0.2
    done
}
# activity_summary SAMPLES: the samples by session, each session named by what it ran (the
# claimer records attempts, the committer prefetches and writes its batches
# (ledger/write/writer_statements.cpp), the simulator reads the platform's record), then by state,
# wait event and last statement.
activity_summary() {
    awk -F '|' '
        { n[$1]++; key[$1, $3 "|" $4 "|" $5]++; seen[$1] = seen[$1] $5 "\n"; db[$1] = $2
          if ($3 == "active") active[$1]++ }
        END {
            for (pid in n) {
                role = "other"
                if (db[pid] == "payledger_platform") role = "simulator (the platform record)"
                else if (index(seen[pid], "UPDATE order_queries")) role = "query claimer"
                else if (index(seen[pid], "WITH rx AS")) role = "committer (its write)"
                else if (index(seen[pid], "SELECT s.head")) role = "committer (its prefetch)"
                else if (index(seen[pid], "count(*) FILTER")) role = "this script"
                printf "session %s, %s: %d samples, %d active\n", pid, role, n[pid], active[pid]
                for (k in key) {
                    split(k, part, SUBSEP)
                    if (part[1] == pid) printf "    %5d  %s\n", key[k], part[2]
                }
            }
        }' "$1"
}

# --- the phases -----------------------------------------------------------------------------
bench_log "creating $((3 * ORDERS)) orders for the callbacks"
out="$("$LOADGEN" --label create --port "$PORT" --threads "$LOADGEN_THREADS" --prefix LOAD- \
    --accounts "$ACCOUNTS" --merchant-token "$MERCHANT_TOKEN" --mode create \
    --connections "$CONNECTIONS" --orders $((3 * ORDERS)) --seconds 600)" ||
    bench_die "the load generator failed creating orders"
printf '%s\n' "$out" | grep -v '^RESULT ' >&2
printf '%s\n' "$out" | grep -q "^RESULT .*answered=$((3 * ORDERS)) " ||
    bench_die "not every order was created"
printf '%s\n' "$out" | grep -q '^RESULT .*errors=0 ' || FAILED=1
[ "$(queries_total)" -eq 0 ] || bench_die "queries were made before their phase"

# before_phase NEXT_AT: what precedes every mixed phase, the same for all three: every row of
# order_queries rewritten (next_at = NEXT_AT: the due instant before the phase with queries,
# unchanged before the others), VACUUM, CHECKPOINT. Making 100 000 orders due at once is this
# bench's device, not the queries' cost: without the same rewrite before the phases without
# queries, only the phase with them paid for its WAL, its dead rows and the autovacuum that
# followed them (a run on 1c67830: 8 444 and 8 505 callbacks/s alone, 7 138 with 21 queries/s
# at 68 % PostgreSQL CPU, below the phases without them).
before_phase() {
    bench_psql payledger -c "UPDATE order_queries SET next_at = $1" -c "VACUUM order_queries" \
        -c CHECKPOINT >/dev/null
}

bench_log "alone 1: the callbacks without queries"
before_phase next_at
mixed alone1 0

bench_log "with: $QUERY_ORDERS queries due at once, and the callbacks"
DUE_AT="$(($(date +%s) + DUE_LEAD_SECONDS))"
before_phase "to_timestamp($DUE_AT)"
awk -v now="$(bench_now)" -v due="$DUE_AT" 'BEGIN { exit !(now < due) }' ||
    bench_die "the UPDATE, VACUUM and CHECKPOINT outlasted the ${DUE_LEAD_SECONDS} s lead"
if [ -n "$ACTIVITY" ]; then
    activity_sampler "$BENCH_TMP/activity.samples" &
    SAMPLER_PID=$!
fi
sleep "$(bench_calc "$DUE_AT - $(bench_now)")"
[ -z "$STATEMENTS_DIR" ] || bench_psql payledger -c "SELECT pg_stat_statements_reset()" >/dev/null
mixed with "$ORDERS"
if [ -n "$STATEMENTS_DIR" ]; then
    bench_statements_report >"$STATEMENTS_DIR/with.statements.txt"
    bench_log "with: statements in $STATEMENTS_DIR/with.statements.txt"
fi
read -r LEFT_AT_END _ < <(not_asked)
# Until every order is answered, by the counter (a scrape does no database work: polling
# not_asked scans order_queries, 39 ms a time at 20 000 orders on the busy machine of the first
# runs), then until every answer is recorded.
DEADLINE=$((SECONDS + DRAIN_SECONDS))
while :; do
    ANSWERED="$(queries_total)"
    if [ "$ANSWERED" -ge "$QUERY_ORDERS" ]; then
        read -r LEFT LAST_AT < <(not_asked)
        [ "$LEFT" -gt 0 ] || break
    fi
    [ "$SECONDS" -le "$DEADLINE" ] || bench_die "after $DRAIN_SECONDS s, $ANSWERED of" \
        "$QUERY_ORDERS orders were answered, $(not_asked | cut -d' ' -f1) not recorded yet"
    sleep 1
done
if [ -n "$SAMPLER_PID" ]; then
    stop "$SAMPLER_PID" "the activity sampler" 2>/dev/null
    SAMPLER_PID=""
    {
        echo "pg_stat_activity every 0.2 s from the due instant until the last query was"
        echo "recorded, by session: state | wait event | last statement (client backends)"
        activity_summary "$BENCH_TMP/activity.samples"
    } >"$BENCH_TMP/activity.txt"
    bench_log "activity of PostgreSQL's sessions: $BENCH_TMP/activity.txt"
fi
QUERIES_DONE_S="$(bench_calc "$LAST_AT - $DUE_AT")"
QPS="$(bench_calc "$QUERY_ORDERS / $QUERIES_DONE_S")"
QPS_WITH="$(bench_calc "${QUERIES_IN[with]} / ${WINDOW_S[with]}")"
AFTER_S="$(bench_calc "$LAST_AT - ${T1[with]}")"
QPS_AFTER="—"
if [ "$LEFT_AT_END" -gt 0 ]; then
    QPS_AFTER="$(bench_fmt 0 "$(bench_calc "($QUERY_ORDERS - ${QUERIES_IN[with]}) / $AFTER_S")")"
fi
bench_log "$QUERY_ORDERS queries in $(bench_fmt 1 "$QUERIES_DONE_S") s: $(bench_fmt 0 "$QPS")/s" \
    "($(bench_fmt 0 "$QPS_WITH")/s beside the callbacks, $QPS_AFTER/s after them);" \
    "$LEFT_AT_END not asked yet when the callbacks ended"

bench_log "alone 2: the callbacks without queries, after them"
before_phase next_at
mixed alone2 $((2 * ORDERS))

# --- checks ---------------------------------------------------------------------------------
FINAL="$(queries_total final)"
NOT_FINAL="$(queries_total not_final)"
BAD="$(queries_total bad_signature)"
FAILED_QUERIES="$(queries_total failed)"
stop "$SERVER_PID" "payledger serve"
SERVER_PID=""
stop "$SIMULATOR_PID" "payledger simulate-platform"
SIMULATOR_PID=""
read -r ASKED_TWICE QUERY_PAYMENTS PAID_STATUS < <(bench_psql payledger -tA -F ' ' -c "SELECT
    (SELECT count(*) FROM order_queries WHERE attempts <> 1),
    (SELECT count(*) FROM ledger_events WHERE source = '${CHANNEL}_query'),
    (SELECT count(*) FROM orders WHERE out_trade_no LIKE 'QRY-%' AND status = 'PAID')")
bench_log "answers: $FINAL final, $NOT_FINAL not final, $BAD bad signatures, $FAILED_QUERIES" \
    "failed; orders not asked exactly once: $ASKED_TWICE; payments appended by the queries:" \
    "$QUERY_PAYMENTS of $PAID; paid orders of the queried: $PAID_STATUS"
if [ "$FINAL" -ne "$PAID" ] || [ "$NOT_FINAL" -ne $((QUERY_ORDERS - PAID)) ] ||
    [ "$BAD" -ne 0 ] || [ "$FAILED_QUERIES" -ne 0 ] || [ "$ASKED_TWICE" -ne 0 ] ||
    [ "$QUERY_PAYMENTS" -ne "$PAID" ] || [ "$PAID_STATUS" -ne "$PAID" ]; then
    FAILED=1
fi
VERIFY_STATUS=0
"$BENCH_BIN/payledger" verify --config "$CONFIG" >"$BENCH_TMP/verify.out" 2>&1 || VERIFY_STATUS=$?
cat "$BENCH_TMP/verify.out" >&2
[ "$VERIFY_STATUS" -eq 0 ] || FAILED=1

# --- report ---------------------------------------------------------------------------------
ALONE="$(bench_calc "(${RPS[alone1]} + ${RPS[alone2]}) / 2")"
LOSS="$(bench_calc "100 * (1 - ${RPS[with]} / $ALONE)")"
row() {
    local cell out="|"
    for cell in "$@"; do out+=" $cell |"; done
    printf '%s\n' "$out"
}
phase_row() {
    local label="$1" k="$2"
    row "$label" "$(bench_fmt 0 "${RPS[$k]}")" "$(bench_fmt 2 "${P99[$k]}")" "${QUERIES_IN[$k]}" \
        "${COMMITS[$k]}" \
        "$(bench_fmt 0 "${CPU[$k]}") / $(bench_fmt 0 "${SIM_CPU[$k]}") / $(bench_fmt 0 "${PG_CPU[$k]}")" \
        "${MACHINE[$k]% *}, ${MACHINE[$k]#* }"
}
{
    echo
    echo "### bench/query"
    echo
    echo "\`$COMMAND\` — $(bench_machine)"
    echo
    echo "$QUERY_ORDERS orders of $CHANNEL due at once ($PAID paid on the platform, the rest" \
        "NOTPAY), query.concurrency $CONCURRENCY, against \`payledger simulate-platform\` on" \
        "the same machine and PostgreSQL; the write path: bench/load's mixed phase, $ORDERS" \
        "orders' callbacks twice, shuffled, $CONNECTIONS connections."
    echo
    row "measure" "result" "target" "met"
    row "---" "---" "---" "---"
    row "queries: all $QUERY_ORDERS made (due instant to the last attempt recorded)" \
        "$(bench_fmt 1 "$QUERIES_DONE_S") s: **$(bench_fmt 0 "$QPS")/s**" "—" "—"
    row "queries/s beside the callbacks; after them" \
        "$(bench_fmt 0 "$QPS_WITH")/s (${QUERIES_IN[with]} in $(bench_fmt 1 "${WINDOW_S[with]}") s); $QPS_AFTER/s" \
        "—" "—"
    row "answers: final; not final; bad signature; failed" \
        "$FINAL; $NOT_FINAL; $BAD; $FAILED_QUERIES" "$PAID; $((QUERY_ORDERS - PAID)); 0; 0" \
        "$(bench_yes "$FINAL == $PAID && $NOT_FINAL == $QUERY_ORDERS - $PAID && $BAD + $FAILED_QUERIES == 0")"
    row "orders asked other than once; payments the queries appended" \
        "$ASKED_TWICE; $QUERY_PAYMENTS" "0; $PAID" \
        "$(bench_yes "$ASKED_TWICE == 0 && $QUERY_PAYMENTS == $PAID && $PAID_STATUS == $PAID")"
    row "callbacks/s without queries (before; after)" \
        "$(bench_fmt 0 "$ALONE") ($(bench_fmt 0 "${RPS[alone1]}"); $(bench_fmt 0 "${RPS[alone2]}"))" \
        "—" "—"
    row "callbacks/s with the queries running" "$(bench_fmt 0 "${RPS[with]}")" "—" "—"
    row "**write-path loss**" "**$(bench_fmt 1 "$LOSS") %**" "≤ $LOSS_PERCENT_MAX %" \
        "$(bench_yes "$LOSS <= $LOSS_PERCENT_MAX")"
    row "orders not asked yet when the callbacks ended (> 0: they ran beside queries throughout)" \
        "$LEFT_AT_END" "> 0" "$(bench_yes "$LEFT_AT_END > 0")"
    row "\`payledger verify\` after the run" "exit $VERIFY_STATUS" "exit 0" \
        "$(bench_yes "$VERIFY_STATUS == 0")"
    echo
    row "phase" "callbacks/s" "p99 ms" "queries answered in it" \
        "deliveries per commit; write and COMMIT per commit" \
        "CPU % serve / simulator / PostgreSQL" "machine idle, steal %"
    row "---" "---" "---" "---" "---" "---" "---"
    phase_row "alone 1" alone1
    phase_row "with $QUERY_ORDERS due" with
    phase_row "alone 2" alone2
    echo
    echo "Loss = 1 − callbacks/s with the queries ÷ the mean of the two phases without them," \
        "which ran before and after it in the same run. The simulator (the platform) and its" \
        "record run on the same machine and PostgreSQL: their CPU is part of the loss, as a" \
        "remote platform's would not be."
}
[ -z "$FAILED" ] || bench_die "an answer was wrong, a query failed or was not made once, or verify failed (above)"
