-- Tamper evidence (docs/integrity.md#the-receipt-chain): every receipt stores `chain`, SHA-256 of the
-- previous receipt's chain and its own line, in id order from 32 zero bytes. The writer computes it
-- under the writer lock for every new receipt; this migration chains the receipts a ledger
-- already holds, set-based: a running aggregate over the lines in id order.
--
-- A receipt's line (ledger/integrity/chain.hpp, byte for byte):
--   id \t source \t received_at \t outcome \t seq \t out_trade_no \t body_sha256 \t event \n
-- with null as the empty string, times RFC 3339 UTC with six fractional digits, and event
-- empty unless the outcome is appended, then
--   seq,event_type,out_trade_no,account_id,amount,currency,transaction_id,occurred_at

ALTER TABLE callback_receipts ADD COLUMN chain bytea;

-- The line of a receipt, and the running chain over lines in id order: for this migration,
-- and for loading a ledger straight in SQL (bench/lib/seed_ledger.sql, tests). `e` is the
-- event the receipt appended, or null.
CREATE FUNCTION payledger_receipt_line(r callback_receipts, e ledger_events) RETURNS text
LANGUAGE sql STABLE AS $$
SELECT r.id::text || E'\t' || r.source || E'\t' ||
       to_char(r.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || E'\t' ||
       r.outcome || E'\t' || coalesce(r.seq::text, '') || E'\t' ||
       coalesce(r.out_trade_no, '') || E'\t' || encode(sha256(r.body), 'hex') || E'\t' ||
       coalesce(e.seq::text || ',' || e.event_type || ',' || e.out_trade_no || ',' ||
                e.account_id || ',' || coalesce(e.amount::text, '') || ',' ||
                coalesce(e.currency, '') || ',' || coalesce(e.transaction_id, '') || ',' ||
                to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                '') || E'\n'
$$;
CREATE FUNCTION payledger_chain_step(state bytea, line text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT sha256(state || convert_to(line, 'UTF8')) $$;
CREATE AGGREGATE payledger_chain(text) (
    SFUNC = payledger_chain_step,
    STYPE = bytea,
    INITCOND = '\x0000000000000000000000000000000000000000000000000000000000000000'
);

-- The one rewrite the ledger ever gets, by its owner, inside this migration's transaction.
ALTER TABLE callback_receipts DISABLE TRIGGER callback_receipts_append_only;
UPDATE callback_receipts AS c
SET chain = x.chain
FROM (
    SELECT r.id, payledger_chain(payledger_receipt_line(r, e)) OVER (ORDER BY r.id) AS chain
    FROM callback_receipts AS r
    LEFT JOIN ledger_events AS e ON r.outcome = 'appended' AND e.receipt_id = r.id
) AS x
WHERE c.id = x.id;
ALTER TABLE callback_receipts ENABLE TRIGGER callback_receipts_append_only;

ALTER TABLE callback_receipts ALTER COLUMN chain SET NOT NULL;
ALTER TABLE callback_receipts ADD CONSTRAINT callback_receipts_chain_length
    CHECK (octet_length(chain) = 32);
