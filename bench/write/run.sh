#!/usr/bin/env bash
# bench/write: three costs of the writer's statement, measured apart. What a
# plain INSERT saves over INSERT ... ON CONFLICT DO NOTHING for the rows the writer's plan knows
# are new (ledger/write/writer.cpp, kWriteSql): the events of a batch, and the orders that register;
# the key check of schema/0001 (a regular expression with a bounded repetition) against that
# of schema/0006; and a batch's receipts and events from JSON rows against typed arrays (what
# the writer binds in binary since). See bench/README.md.
#
#   bench/write/run.sh [--batches 400] [--rows 20] [--keep]
#
# One PostgreSQL session on a migrated ledger of 20 000 orders (bench/lib/seed_ledger.sql)
# inserts batches of ROWS rows through json_to_recordset, as the writer does, alternately with
# and without ON CONFLICT, BATCHES times each, and times each statement (clock_timestamp, in
# the server): the two variants are paired, so that what disturbs one disturbs the other too.
# Whole-benchmark timings of the two differ by less than this machine's spread from run to
# run, which is why this is measured apart. Replica mode skips the receipt reference triggers
# (schema/0004) for both. Then, the same way, it times 0001's and 0006's key checks over the
# same ROWS keys per batch, alternately; and ROWS receipts with ROWS events, from JSON rows or
# from typed arrays, alternately. It prints the median and mean time per batch and per row (per
# key; per receipt and its event).
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/../../scripts/lib/common.sh"
source "$PAYLEDGER_ROOT/bench/lib/bench.sh"

BATCHES=400
ROWS=20
KEEP=""
COMMAND="bench/write/run.sh $*"
while [ $# -gt 0 ]; do
    case "$1" in
        --batches) BATCHES="$2"; shift 2 ;;
        --rows) ROWS="$2"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        *) bench_die "unknown option $1 (see the header of $0)" ;;
    esac
done
[[ "$BATCHES" =~ ^[1-9][0-9]{0,4}$ ]] || bench_die "--batches wants 1 to 99999"
[[ "$ROWS" =~ ^[1-9][0-9]{0,2}$ ]] || bench_die "--rows wants 1 to 999"

bench_tmp_create
cleanup() {
    bench_pg_down
    if [ -z "$KEEP" ]; then rm -rf "$BENCH_TMP"; else bench_log "kept $BENCH_TMP"; fi
}
trap cleanup EXIT
payledger_install_deps
bench_build payledger
BENCH_BIN="$BENCH_BUILD_DIR"
bench_pg_up
bench_createdb ledger
bench_log "seeding 20000 orders"
bench_seed ledger PGB- 20000 0 1000
bench_psql ledger -c "ANALYZE"

bench_log "timing $BATCHES paired batches of $ROWS rows"
bench_psql ledger -v batches="$BATCHES" -v rows="$ROWS" <<'SQL' >"$BENCH_TMP/result.txt"
SET session_replication_role = replica;
CREATE TEMP TABLE timing (target text, variant text, us float8);
-- The rows of a batch's parameter as the writer's statement reads them (kWriteSql), shared
-- by both variants of each insert (a SQL function in FROM is inlined into the query).
CREATE FUNCTION pg_temp.event_rows(events json)
RETURNS TABLE (seq bigint, out_trade_no text, event_type text, source text, account_id text,
               amount bigint, currency text, transaction_id text, occurred_at timestamptz,
               receipt_id bigint, data jsonb)
LANGUAGE sql AS $$
    SELECT seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id,
           'epoch'::timestamptz + occurred_at * interval '1 microsecond', receipt_id, data::jsonb
    FROM json_to_recordset(events) AS x(seq bigint, out_trade_no text, event_type text,
         source text, account_id text, amount bigint, currency text, transaction_id text,
         occurred_at bigint, receipt_id bigint, data text)
$$;
CREATE FUNCTION pg_temp.order_rows(orders json)
RETURNS TABLE (out_trade_no text, account_id text, amount bigint, currency text, status text,
               transaction_id text, paid_amount bigint, refunded_amount bigint,
               anomalies text[], seq bigint)
LANGUAGE sql AS $$
    SELECT out_trade_no, account_id, amount, currency, status, transaction_id, paid_amount,
           refunded_amount, anomalies, seq
    FROM json_to_recordset(orders) AS x(out_trade_no text, account_id text, amount bigint,
         currency text, status text, transaction_id text, paid_amount bigint,
         refunded_amount bigint, anomalies text[], seq bigint)
$$;
SET payledger.batches = :'batches';
SET payledger.rows = :'rows';
DO $$
DECLARE
    batches int := current_setting('payledger.batches')::int;
    n int := current_setting('payledger.rows')::int;
    base bigint := 1000000000;
    started timestamptz;
    events json;
    orders json;
    plain boolean;
BEGIN
    FOR b IN 1..batches LOOP
        FOR pass IN 0..1 LOOP
            base := base + n;
            -- Which variant goes first alternates from batch to batch.
            plain := (b + pass) % 2 = 0;
            SELECT json_agg(json_build_object(
                       'seq', base + i, 'out_trade_no', 'W-' || (base + i),
                       'event_type', 'PAYMENT_SUCCEEDED', 'source', 'generic',
                       'account_id', 'acct-' || i % 1000, 'amount', 100 + i, 'currency', 'CNY',
                       'transaction_id', 'TX-' || (base + i),
                       'occurred_at', 1795996800000000 + i, 'receipt_id', base + i,
                       'data', '{}')),
                   json_agg(json_build_object(
                       'out_trade_no', 'W-' || (base + i), 'account_id', 'acct-' || i % 1000,
                       'amount', 100 + i, 'currency', 'CNY', 'status', 'WAIT_PAY',
                       'transaction_id', NULL, 'paid_amount', 0, 'refunded_amount', 0,
                       'anomalies', '{}', 'seq', base + i))
            INTO events, orders
            FROM generate_series(0, n - 1) AS i;

            started := clock_timestamp();
            IF plain THEN
                INSERT INTO ledger_events (seq, out_trade_no, event_type, source, account_id,
                    amount, currency, transaction_id, occurred_at, receipt_id, data)
                SELECT * FROM pg_temp.event_rows(events);
            ELSE
                INSERT INTO ledger_events (seq, out_trade_no, event_type, source, account_id,
                    amount, currency, transaction_id, occurred_at, receipt_id, data)
                SELECT * FROM pg_temp.event_rows(events)
                ON CONFLICT ON CONSTRAINT ledger_events_one_per_type DO NOTHING;
            END IF;
            INSERT INTO timing VALUES ('ledger_events', CASE WHEN plain THEN 'plain' ELSE 'on_conflict' END,
                                       extract(epoch FROM clock_timestamp() - started) * 1e6);

            started := clock_timestamp();
            IF plain THEN
                INSERT INTO orders (out_trade_no, account_id, amount, currency, status,
                                    transaction_id, paid_amount, refunded_amount, anomalies, seq)
                SELECT * FROM pg_temp.order_rows(orders);
            ELSE
                INSERT INTO orders (out_trade_no, account_id, amount, currency, status,
                                    transaction_id, paid_amount, refunded_amount, anomalies, seq)
                SELECT * FROM pg_temp.order_rows(orders)
                ON CONFLICT (out_trade_no) DO NOTHING;
            END IF;
            INSERT INTO timing VALUES ('orders', CASE WHEN plain THEN 'plain' ELSE 'on_conflict' END,
                                       extract(epoch FROM clock_timestamp() - started) * 1e6);
        END LOOP;
    END LOOP;
END $$;
-- The key check of 0001 (a bounded repetition) against 0006's (a length test and one search
-- for a character outside the set), alternately, each over the same keys of the batch size.
DO $$
DECLARE
    batches int := current_setting('payledger.batches')::int;
    n int := current_setting('payledger.rows')::int;
    keys text[];
    started timestamptz;
    passed int;
    old_check boolean;
BEGIN
    FOR b IN 1..batches LOOP
        keys := ARRAY(SELECT 'PGB-' || lpad((b * n + i)::text, 10, '0') COLLATE "C"
                      FROM generate_series(0, n - 1) AS i);
        FOR pass IN 0..1 LOOP
            old_check := (b + pass) % 2 = 0;
            started := clock_timestamp();
            IF old_check THEN
                SELECT count(*) INTO passed FROM unnest(keys) AS k
                WHERE k ~ '^[A-Za-z0-9_|*.-]{1,64}$';
            ELSE
                SELECT count(*) INTO passed FROM unnest(keys) AS k
                WHERE octet_length(k) BETWEEN 1 AND 64 AND k !~ '[^A-Za-z0-9_|*.-]';
            END IF;
            IF passed <> n THEN
                RAISE EXCEPTION 'a key check refused a valid key';
            END IF;
            INSERT INTO timing VALUES ('key check', CASE WHEN old_check THEN 'regex' ELSE 'scan' END,
                                       extract(epoch FROM clock_timestamp() - started) * 1e6);
        END LOOP;
    END LOOP;
END $$;
-- The receipts and events of a batch from JSON rows (json_to_recordset, as the writer's
-- statement took them before it bound its rows in binary) against typed arrays (unnest, what
-- binary parameters hand the statement; their recv functions, outside this timing, only copy
-- the values), alternately. Headers and data become jsonb from text in both.
DO $$
DECLARE
    batches int := current_setting('payledger.batches')::int;
    n int := current_setting('payledger.rows')::int;
    base bigint := 3000000000;
    started timestamptz;
    rj text; ej text; bodies bytea;
    ids bigint[]; srcs text[]; rat timestamptz[]; peers text[]; hdrs text[]; bods bytea[];
    outs text[]; seqs bigint[]; otn text[]; msgs text[]; chains bytea[];
    eseq bigint[]; etype text[]; eacct text[]; eamt bigint[]; ecur text[]; etx text[];
    eocc timestamptz[]; erid bigint[]; edata text[];
    use_json boolean;
    k int;
    hdr text := '{"content-type":"application/json","user-agent":"payledger-loadgen","x-payledger-signature":"' || repeat('ab', 32) || '","x-payledger-timestamp":"1795996800"}';
BEGIN
    FOR b IN 1..batches LOOP
        FOR pass IN 0..1 LOOP
            base := base + n;
            use_json := (b + pass) % 2 = 0;
            SELECT string_agg(convert_to('{"out_trade_no":"W-' || (base + i) || '","amount":' || (100 + i) || ',"currency":"CNY","status":"SUCCESS","transaction_id":"TX-' || (base+i) || '","paid_at":"2026-12-01T10:00:00Z","account_id":"acct-' || (i % 1000) || '"}', 'UTF8'), ''::bytea ORDER BY i)
            INTO bodies FROM generate_series(0, n - 1) AS i;
            IF use_json THEN
                SELECT '[' || string_agg(json_build_object('id', base + i, 'body_at', i * 200, 'outcome', 'appended',
                           'seq', base + i, 'message', '', 'chain', repeat('cd', 32), 'source', 'generic',
                           'received_at', 1795996800000000 + i, 'peer', '127.0.0.1:5000' || i,
                           'headers', hdr, 'body_length', 150, 'out_trade_no', 'W-' || (base + i))::text, ',') || ']',
                       '[' || string_agg(json_build_object(
                           'seq', base + i, 'out_trade_no', 'W-' || (base + i),
                           'event_type', 'PAYMENT_SUCCEEDED', 'source', 'generic',
                           'account_id', 'acct-' || i % 1000, 'amount', 100 + i, 'currency', 'CNY',
                           'transaction_id', 'TX-' || (base + i),
                           'occurred_at', 1795996800000000 + i, 'receipt_id', base + i,
                           'data', '{"paid_at":"2026-12-01T10:00:00Z","status":"SUCCESS"}')::text, ',') || ']'
                INTO rj, ej FROM generate_series(0, n - 1) AS i;
                started := clock_timestamp();
                WITH r AS (
                    INSERT INTO callback_receipts
                        (id, source, received_at, peer, headers, body, outcome, seq, out_trade_no, message, chain)
                    SELECT id, source, 'epoch'::timestamptz + received_at * interval '1 microsecond', peer,
                           headers::jsonb, substring(bodies FROM body_at + 1 FOR body_length), outcome, seq,
                           out_trade_no, message, decode(chain, 'hex')
                    FROM json_to_recordset(rj::json) AS x(id bigint, source text, received_at bigint, peer text,
                         headers text, body_at integer, body_length integer, outcome text, seq bigint,
                         out_trade_no text, message text, chain text)
                    RETURNING 1
                ), e AS (
                    INSERT INTO ledger_events
                        (seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id,
                         occurred_at, receipt_id, data)
                    SELECT seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id,
                           'epoch'::timestamptz + occurred_at * interval '1 microsecond', receipt_id, data::jsonb
                    FROM json_to_recordset(ej::json) AS x(seq bigint, out_trade_no text, event_type text,
                         source text, account_id text, amount bigint, currency text, transaction_id text,
                         occurred_at bigint, receipt_id bigint, data text)
                    RETURNING 1
                ) SELECT 1 INTO k FROM (SELECT count(*) FROM r) a, (SELECT count(*) FROM e) b;
            ELSE
                SELECT array_agg(base + i ORDER BY i), array_agg('generic'::text ORDER BY i),
                       array_agg('epoch'::timestamptz + (1795996800000000 + i) * interval '1 microsecond' ORDER BY i),
                       array_agg('127.0.0.1:5000' || i ORDER BY i), array_agg(hdr ORDER BY i),
                       array_agg(substring(bodies FROM i * 200 + 1 FOR 150) ORDER BY i),
                       array_agg('appended'::text ORDER BY i), array_agg(base + i ORDER BY i),
                       array_agg('W-' || (base + i) ORDER BY i), array_agg(''::text ORDER BY i),
                       array_agg(decode(repeat('cd', 32), 'hex') ORDER BY i),
                       array_agg('PAYMENT_SUCCEEDED'::text ORDER BY i), array_agg('acct-' || i % 1000 ORDER BY i),
                       array_agg((100 + i)::bigint ORDER BY i), array_agg('CNY'::text ORDER BY i),
                       array_agg('TX-' || (base + i) ORDER BY i),
                       array_agg('{"paid_at":"2026-12-01T10:00:00Z","status":"SUCCESS"}'::text ORDER BY i)
                INTO ids, srcs, rat, peers, hdrs, bods, outs, seqs, otn, msgs, chains, etype, eacct, eamt, ecur, etx, edata
                FROM generate_series(0, n - 1) AS i;
                started := clock_timestamp();
                WITH r AS (
                    INSERT INTO callback_receipts
                        (id, source, received_at, peer, headers, body, outcome, seq, out_trade_no, message, chain)
                    SELECT i, s, ra, p, h::jsonb, bo, o, sq, ot, m, c FROM unnest(ids, srcs, rat, peers, hdrs, bods, outs, seqs, otn, msgs, chains) AS u(i, s, ra, p, h, bo, o, sq, ot, m, c)
                    RETURNING 1
                ), e AS (
                    INSERT INTO ledger_events
                        (seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id,
                         occurred_at, receipt_id, data)
                    SELECT sq, ot, et, s, ac, am, cu, tx, ra, i, d::jsonb FROM unnest(seqs, otn, etype, srcs, eacct, eamt, ecur, etx, rat, ids, edata) AS u(sq, ot, et, s, ac, am, cu, tx, ra, i, d)
                    RETURNING 1
                ) SELECT 1 INTO k FROM (SELECT count(*) FROM r) a, (SELECT count(*) FROM e) b;
            END IF;
            INSERT INTO timing VALUES ('receipts and events', CASE WHEN use_json THEN 'json' ELSE 'typed' END, extract(epoch FROM clock_timestamp() - started) * 1e6);
        END LOOP;
    END LOOP;
END $$;
\pset format unaligned
\pset tuples_only on
\pset fieldsep '|'
SELECT target, variant, count(*),
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY us)::numeric, 1),
       round(avg(us)::numeric, 1)
FROM timing GROUP BY target, variant ORDER BY target, variant;
SQL

{
    printf '`%s` on %s, %s cores, commit %s, %s\n\n' "$COMMAND" "$(hostname)" "$(nproc)" \
        "$(git -C "$PAYLEDGER_ROOT" rev-parse --short HEAD)" "$(date -u +%FT%TZ)"
    printf '| batches of %s rows | batches | median per batch | mean per batch | median per row |\n' "$ROWS"
    printf '| --- | --- | --- | --- | --- |\n'
    while IFS='|' read -r target variant count median mean; do
        [ -n "$target" ] || continue
        case "$variant" in
            plain) label="$target, plain INSERT" ;;
            on_conflict) label="$target, ON CONFLICT DO NOTHING" ;;
            regex) label="$target, 0001: \`~ '^[A-Za-z0-9_\\|*.-]{1,64}\$'\`" ;;
            scan) label="$target, 0006: \`octet_length BETWEEN 1 AND 64 AND !~ '[^A-Za-z0-9_\\|*.-]'\`" ;;
            json) label="$target, JSON rows (json_to_recordset)" ;;
            typed) label="$target, typed arrays (unnest), as bound in binary" ;;
        esac
        printf '| %s | %s | %s µs | %s µs | %s µs |\n' "$label" "$count" "$median" "$mean" \
            "$(bench_fmt 1 "$(bench_calc "$median / $ROWS")")"
    done <"$BENCH_TMP/result.txt"
    awk -F'|' -v rows="$ROWS" '
        { m[$1, $2] = $4 }
        END {
            n = split("ledger_events orders", ts, " ")
            for (i = 1; i <= n; i++) {
                t = ts[i]; c = m[t, "on_conflict"]; p = m[t, "plain"]
                if (c > 0) printf "\n%s: the plain INSERT saves %.1f µs per batch (%.1f µs per row, %.0f %%).", t, c - p, (c - p) / rows, 100 * (c - p) / c
            }
            c = m["key check", "regex"]; p = m["key check", "scan"]
            if (c > 0) printf "\nkey check: %.2f µs a key with 0001'"'"'s regular expression, %.2f µs with 0006'"'"'s test.", c / rows, p / rows
            c = m["receipts and events", "json"]; p = m["receipts and events", "typed"]
            if (c > 0) printf "\nreceipts and events: typed arrays save %.1f µs per batch (%.1f µs per receipt and event, %.0f %%).", c - p, (c - p) / rows, 100 * (c - p) / c
            printf "\n"
        }' "$BENCH_TMP/result.txt"
}
