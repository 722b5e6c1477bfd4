-- Loads a synthetic ledger straight in SQL, fast, into an empty, migrated payledger database
-- (bench/rebuild, and the pgbench database of bench/load). psql variables:
--   prefix    out_trade_no prefix; order i (1 ... orders) is prefix || lpad(i, pad, '0')
--   pad       digits of the order number
--   orders    orders, each with one ORDER_CREATED (seq i, account 'acct-' || i % accounts,
--             amount 100 + i % 100000 CNY)
--   paid      how many of them also have a PAYMENT_SUCCEEDED (spread evenly, seq after
--             every ORDER_CREATED, transaction_id 'TX' || the order number)
--   accounts  accounts the orders spread over
--   source    the payments' source (optional, default generic; bench/reconcile: wechat_v2)
--   data      the ORDER_CREATED's data (optional, default {}; bench/query:
--             {"channel": "wechat_v2"}), also merged into its receipt's body. In replica mode
--             the trigger of schema 0011 does not fire: no order_queries row is made
-- Every event gets its receipt (outcome appended, the same id as its seq). The projections
-- are then computed from the events by project_ledger.sql, so `payledger verify`
-- passes. Inserts only: the append-only triggers refuse UPDATE, DELETE and TRUNCATE, not
-- INSERT. One transaction: all or nothing.
\set ON_ERROR_STOP on
\if :{?source}
\else
\set source generic
\endif
\if :{?data}
\else
\set data '{}'
\endif
BEGIN;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM ledger_events) OR EXISTS (SELECT 1 FROM callback_receipts) THEN
        RAISE EXCEPTION 'seed_ledger.sql needs an empty ledger';
    END IF;
END $$;
-- The reference triggers between events and receipts (0004) want both in one statement;
-- replica mode skips them, and the anti-joins at the end check all of them at once.
SET LOCAL session_replication_role = replica;
SET LOCAL work_mem = '256MB';

INSERT INTO ledger_events (seq, out_trade_no, event_type, source, account_id, amount, currency,
                           transaction_id, occurred_at, recorded_at, receipt_id, data)
SELECT i, :'prefix' || lpad(i::text, :pad, '0'), 'ORDER_CREATED', 'api',
       'acct-' || (i % :accounts), 100 + i % 100000, 'CNY', NULL,
       timestamptz '2026-11-29 00:00:00Z' + i * interval '1 millisecond',
       timestamptz '2026-11-29 00:00:00Z' + i * interval '1 millisecond', i, :'data'::jsonb
FROM generate_series(1, :orders) AS i;

-- Order i is the r-th paid order, r = i * paid / orders, when r grows at i.
INSERT INTO ledger_events (seq, out_trade_no, event_type, source, account_id, amount, currency,
                           transaction_id, occurred_at, recorded_at, receipt_id, data)
SELECT :orders + r, :'prefix' || lpad(i::text, :pad, '0'), 'PAYMENT_SUCCEEDED', :'source',
       'acct-' || (i % :accounts), 100 + i % 100000, 'CNY', 'TX' || lpad(i::text, :pad, '0'),
       timestamptz '2026-11-30 00:00:00Z' + r * interval '1 millisecond',
       timestamptz '2026-11-30 00:00:00Z' + r * interval '1 millisecond', :orders + r, '{}'
FROM (SELECT i, i::bigint * :paid / :orders AS r
      FROM generate_series(1, :orders) AS i) AS p
WHERE r > (i - 1)::bigint * :paid / :orders;

-- Receipts first without their chain (NOT NULL again below, before the commit).
ALTER TABLE callback_receipts ALTER COLUMN chain DROP NOT NULL;
INSERT INTO callback_receipts (id, source, received_at, peer, headers, body, outcome, seq,
                               out_trade_no, message)
SELECT receipt_id, source, recorded_at, '127.0.0.1:40000',
       CASE WHEN source = 'api' THEN '{"Content-Type": "application/json"}'::jsonb
            ELSE jsonb_build_object('Content-Type', 'application/json', 'Payledger-Signature',
                                    't=1795996800,v1=' || md5(out_trade_no) || md5(seq::text))
       END,
       convert_to(CASE WHEN event_type = 'ORDER_CREATED' AND data = '{}'
                       THEN json_build_object('out_trade_no', out_trade_no,
                                              'account_id', account_id, 'amount', amount,
                                              'currency', currency)::text
                       WHEN event_type = 'ORDER_CREATED'
                       THEN (jsonb_build_object('out_trade_no', out_trade_no,
                                                'account_id', account_id, 'amount', amount,
                                                'currency', currency) || data)::text
                       ELSE json_build_object('event_type', event_type,
                                              'out_trade_no', out_trade_no,
                                              'transaction_id', transaction_id,
                                              'amount', amount, 'currency', currency)::text
                  END, 'UTF8'),
       'appended', seq, out_trade_no, ''
FROM ledger_events;

-- The receipt chain (docs/integrity.md#the-receipt-chain), as the writer would have computed it: in
-- replica mode the append-only trigger does not fire, and the column is NOT NULL again before the
-- commit.
UPDATE callback_receipts AS c
SET chain = x.chain
FROM (SELECT r.id, payledger_chain(payledger_receipt_line(r, e)) OVER (ORDER BY r.id) AS chain
      FROM callback_receipts AS r
      LEFT JOIN ledger_events AS e ON r.outcome = 'appended' AND e.receipt_id = r.id) AS x
WHERE c.id = x.id;
ALTER TABLE callback_receipts ALTER COLUMN chain SET NOT NULL;

\ir project_ledger.sql

DO $$
BEGIN
    -- Later appends (pgbench, payledger) take ids after the loaded ones.
    PERFORM setval('ledger_events_seq_seq', max(seq)) FROM ledger_events;
    PERFORM setval('callback_receipts_id_seq', max(id)) FROM callback_receipts;
    IF EXISTS (SELECT 1 FROM ledger_events AS e
               LEFT JOIN callback_receipts AS r ON r.id = e.receipt_id WHERE r.id IS NULL) THEN
        RAISE EXCEPTION 'an event has no receipt';
    END IF;
    IF EXISTS (SELECT 1 FROM callback_receipts AS r
               LEFT JOIN ledger_events AS e ON e.seq = r.seq
               WHERE r.seq IS NOT NULL AND e.seq IS NULL) THEN
        RAISE EXCEPTION 'a receipt names a missing event';
    END IF;
END $$;
COMMIT;
