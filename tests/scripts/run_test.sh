#!/usr/bin/env bash
# scripts/run as a new user meets it: a checkout in a private (0700) folder, as
# root in CI, with the binary already built (PAYLEDGER_BIN: nothing is rebuilt). Each way of
# stopping it must leave no `payledger serve` and no PostgreSQL of that checkout running and
# the port free:
#   1. SIGTERM to the script alone (what `timeout` and service managers send) -> exit 143
#   2. SIGINT to its whole process group (Ctrl-C in a terminal)                -> exit 130
#   3. payledger serve exiting by itself                                       -> exit 0
# and the second and third runs reuse the cluster of the first. The first run also walks
# through README.md's "A lost notification, found": an order paid on the platform simulator the
# script starts, never notified, is PAID within a minute through the query. Then scripts/clean
# removes the local state, the cluster included.
#
#   run_test.sh PAYLEDGER_BINARY SOURCE_DIR
set -euo pipefail
BIN="$1"
SRC="$2"
source "$SRC/scripts/lib/common.sh"

WORK="$(mktemp -d "${PAYLEDGER_TEST_TMPDIR:-/tmp}/payledger-run-test.XXXXXX")"
CHECKOUT="$WORK/payledger"
LOG="$WORK/run.log"
HTTP_PORT="$(payledger_free_port)"
PG_PORT="$(payledger_free_port)"
SIMULATOR_PORT="$(payledger_free_port)"
RUN_PID=""
PG_HOME=""

say() { printf '[run_test] %s\n' "$*"; }
fail() {
    say "FAIL: $*"
    [ -f "$LOG" ] && sed 's/^/    | /' "$LOG"
    exit 1
}

cleanup() {
    set +e
    if [ -n "$RUN_PID" ]; then
        # Let scripts/run stop its own server and cluster; kill it only if it will not.
        kill -TERM "$RUN_PID" 2>/dev/null
        local deadline=$((SECONDS + 30))
        while kill -0 "$RUN_PID" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
        kill -KILL "$RUN_PID" 2>/dev/null
    fi
    pkill -KILL -f -- "$CHECKOUT/" 2>/dev/null
    [ -n "$PG_HOME" ] || PG_HOME="$(readlink -f "$CHECKOUT/.data/pg" 2>/dev/null)"
    if [ -n "$PG_HOME" ]; then
        payledger_pg_stop "$PG_HOME"
        case "$PG_HOME" in "$CHECKOUT"/*) ;; *) rm -rf "$(dirname "$PG_HOME")" ;; esac
    fi
    rm -rf "$WORK"
    return 0
}
trap cleanup EXIT

[ "$(stat -c %a "$WORK")" = 700 ] || fail "$WORK is not private"
mkdir "$CHECKOUT"
tar -C "$SRC" --exclude='./build*' --exclude=./.data --exclude=./.git -cf - . |
    tar -C "$CHECKOUT" -xf -
say "checkout copied to $CHECKOUT (in a 0700 folder), running as $(id -un)"

# healthz: prints the status line of GET /healthz, fails when nothing listens.
healthz() {
    exec 3<>"/dev/tcp/127.0.0.1/$HTTP_PORT" || return 1
    printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
    head -n 1 <&3 | tr -d '\r'
    exec 3<&-
}

start_run() {
    : >"$LOG"
    # Job control: the script gets a process group of its own (as a terminal gives it) and
    # starts with SIGINT not ignored, as from a shell prompt.
    set -m
    env -u PAYLEDGER_DATABASE_URL PAYLEDGER_BIN="$BIN" PAYLEDGER_LISTEN="127.0.0.1:$HTTP_PORT" \
        PAYLEDGER_PG_PORT="$PG_PORT" PAYLEDGER_SIMULATOR_LISTEN="127.0.0.1:$SIMULATOR_PORT" \
        "$CHECKOUT/scripts/run" >"$LOG" 2>&1 &
    RUN_PID=$!
    set +m
    local deadline=$((SECONDS + 120))
    until [ "$(healthz 2>/dev/null)" = "HTTP/1.1 200 OK" ]; do
        kill -0 "$RUN_PID" 2>/dev/null || fail "scripts/run exited before /healthz answered"
        [ "$SECONDS" -lt "$deadline" ] || fail "/healthz did not answer within 120 s"
        sleep 0.2
    done
    PG_HOME="$(readlink -f "$CHECKOUT/.data/pg")"
    payledger_pg_running "$PG_HOME" || fail "no PostgreSQL runs in $PG_HOME"
    grep -qF "embedded PostgreSQL: $PG_HOME" "$LOG" || fail "the script did not say where the cluster is"
}

# http PORT METHOD PATH [BODY [TOKEN]]: the response's body (status line, headers and body to
# $WORK/response).
http() {
    local body="${4:-}" auth=""
    [ -n "${5:-}" ] && auth="Authorization: Bearer $5"$'\r\n'
    exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
    printf '%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
        "$2" "$3" "$auth" "${#body}" "$body" >&3
    cat <&3 >"$WORK/response"
    exec 3<&-
    sed '1,/^\r$/d' "$WORK/response"
}

# json FIELD: FIELD of the JSON object on stdin ("" when absent or null).
json() { python3 -c 'import json,sys; v=json.load(sys.stdin).get(sys.argv[1]); print("" if v is None else v)' "$1"; }

# expect_stopped EXPECTED_STATUS WHAT: waits for the script and checks that nothing is left.
expect_stopped() {
    local status=0 deadline=$((SECONDS + 60))
    while kill -0 "$RUN_PID" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || fail "$2: scripts/run did not exit within 60 s"
        sleep 0.2
    done
    wait "$RUN_PID" || status=$?
    RUN_PID=""
    [ "$status" -eq "$1" ] || fail "$2: scripts/run exited with $status, expected $1"
    if pgrep -af -- "$CHECKOUT/" >"$WORK/left"; then
        fail "$2: processes of the checkout are still running: $(cat "$WORK/left")"
    fi
    if pgrep -af -- "-D $PG_HOME" >"$WORK/left"; then
        fail "$2: PostgreSQL of the checkout is still running: $(cat "$WORK/left")"
    fi
    [ ! -e "$PG_HOME/postmaster.pid" ] || fail "$2: $PG_HOME/postmaster.pid is still there"
    [ ! -e "$PG_HOME/.s.PGSQL.$PG_PORT" ] || fail "$2: the PostgreSQL socket is still there"
    if (exec 3<>"/dev/tcp/127.0.0.1/$HTTP_PORT") 2>/dev/null; then
        fail "$2: port $HTTP_PORT still accepts connections"
    fi
    say "ok: $2 -> exit $status, nothing left running, port $HTTP_PORT free"
}

# 1. SIGTERM to the script alone.
start_run
grep -q "creating the embedded PostgreSQL" "$LOG" || fail "the first run did not create a cluster"
if [ "$(id -u)" -eq 0 ]; then
    [ -L "$CHECKOUT/.data/pg" ] || fail "as root, .data/pg should link to the cluster"
    case "$PG_HOME" in "$CHECKOUT"/*) fail "as root, the cluster must live outside the checkout" ;; esac
    say "as root: .data/pg -> $PG_HOME"
fi
# The cluster's identity, to prove that later runs reuse it.
cluster_id() { "$PG_BIN/pg_controldata" -D "$PG_HOME" | grep 'system identifier'; }
first_cluster="$(cluster_id)"
# README.md, "A lost notification, found": registered with its channel, paid on the platform,
# never notified; the query finds it (first query 20 s after the registration).
CONFIG="$CHECKOUT/.data/payledger.dev.json"
token() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokens"][sys.argv[2]][0])' "$CONFIG" "$1"; }
until grep -q "platform simulator on http://127.0.0.1:$SIMULATOR_PORT" "$LOG"; do
    kill -0 "$RUN_PID" 2>/dev/null || fail "scripts/run exited"
    sleep 0.2
done
order='{"out_trade_no":"LOST-1","account_id":"shop-1","amount":1999,"currency":"CNY","channel":"wechat_v3"}'
[ "$(http "$HTTP_PORT" POST /v1/orders "$order" "$(token merchant)" | json status)" = WAIT_PAY ] ||
    fail "registering LOST-1: $(cat "$WORK/response")"
registered=$SECONDS
paid=""
for _ in $(seq 50); do  # the simulator may still be starting
    paid="$(http "$SIMULATOR_PORT" POST /simulate/pay \
        '{"channel":"wechat_v3","out_trade_no":"LOST-1","amount":1999}' 2>/dev/null | json outcome)" &&
        [ "$paid" = appended ] && break
    sleep 0.2
done
[ "$paid" = appended ] || fail "paying LOST-1 on the simulator: $(cat "$WORK/response" 2>/dev/null)"
status=""
until [ "$status" = PAID ]; do
    [ $((SECONDS - registered)) -le 60 ] || fail "LOST-1 not PAID within a minute: $(cat "$WORK/response")"
    sleep 1
    status="$(http "$HTTP_PORT" GET /v1/orders/LOST-1 "" "$(token auditor)" | json status)"
done
say "ok: a lost notification found by the query in $((SECONDS - registered)) s"
http "$HTTP_PORT" GET /v1/orders/LOST-1/events "" "$(token auditor)" | grep -q '"source":"wechat_v3_query"' ||
    fail "LOST-1's payment is not from the query: $(cat "$WORK/response")"
# WeChat's own retry, a day later: the same payment, a duplicate; the answer re-verifies.
retry="$("$BIN" simulate wechat_v3 --out-trade-no LOST-1 --amount 1999 --config "$CONFIG" \
    --url "http://127.0.0.1:$HTTP_PORT" 2>/dev/null)"
case "$retry" in "HTTP 2"*) ;; *) fail "the late notification: $retry" ;; esac
http "$HTTP_PORT" GET /v1/orders/LOST-1/receipts "" "$(token auditor)" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["receipts"]; sys.exit(not (r[-1]["source"] == "wechat_v3" and r[-1]["outcome"] == "duplicate"))' ||
    fail "the late notification is not a duplicate: $(cat "$WORK/response")"
audit="$(PAYLEDGER_DATABASE_URL="postgresql://postgres@/payledger?host=$(readlink -f "$CHECKOUT/.data/pg")&port=$PG_PORT" \
    "$BIN" audit --platform-signatures --config "$CONFIG" 2>&1)" || fail "audit: $audit"
say "ok: the late notification is a duplicate and the answer re-verifies"
kill -TERM "$RUN_PID"
expect_stopped 143 "SIGTERM to scripts/run alone"

# 2. Ctrl-C: SIGINT to the whole foreground process group. The cluster is reused.
start_run
! grep -q "creating the embedded PostgreSQL" "$LOG" || fail "the second run created a new cluster"
[ "$(cluster_id)" = "$first_cluster" ] || fail "the second run uses another cluster"
kill -INT -- "-$RUN_PID"
expect_stopped 130 "SIGINT to the process group (Ctrl-C)"

# 3. The server exits by itself (here: told so directly).
start_run
serve_pid="$(pgrep -f -- "serve --config $CHECKOUT/.data/payledger.dev.json")" ||
    fail "no payledger serve process found"
kill -TERM "$serve_pid"
expect_stopped 0 "payledger serve exiting by itself"
grep -q "exited by itself" "$LOG" || fail "the script did not say that serve exited by itself"
[ "$(cluster_id)" = "$first_cluster" ] || fail "the third run uses another cluster"

# 4. scripts/clean removes the local state, the cluster included.
"$CHECKOUT/scripts/clean" >"$LOG" 2>&1 || fail "scripts/clean failed"
[ ! -e "$CHECKOUT/.data" ] || fail "scripts/clean left .data"
[ ! -e "$PG_HOME" ] || fail "scripts/clean left the cluster $PG_HOME"
say "ok: scripts/clean removed .data and $PG_HOME"
echo "run_test: 5 passed, 0 failed"
