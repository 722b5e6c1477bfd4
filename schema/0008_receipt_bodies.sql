-- Bodies stored once, and replays that cannot fill the disk (docs/security.md, "Replays of a
-- genuine notice").
--
-- Until now every receipt kept its raw body inline, up to 64 KiB. A platform retries the same
-- notice for a day, and whoever holds one genuine notice can replay it for ever: its
-- signature verifies, so no per-peer limit applies, and Alipay's unsigned empty fields or
-- WeChat v2's unsigned whitespace let it be padded to 64 KiB without breaking the signature.
--
-- 1. A body is stored once, in `receipt_bodies`, keyed by its SHA-256. A receipt written from
--    now on keeps `body_sha256` and no inline body; a byte-identical body is not stored again.
--    Receipts written before keep their inline body (body_sha256 null): both forms are read
--    alike (coalesce(body, the stored body), coalesce(body_sha256, sha256(body))).
-- 2. Once an event has 100 `duplicate` receipts, a further duplicate of it is a receipt
--    without a body: `body_stored` false, nothing added to receipt_bodies; its body_sha256
--    still names the bytes received. Only duplicates lose their body: a delivery that
--    appended, or was refused, keeps it.
-- 3. The chain is unchanged: a receipt's line names body_sha256 (hex), never the bytes, so a
--    body stored once, or not at all, is covered by every receipt that received it.
--    `payledger audit` checks each stored body against its key.

CREATE TABLE receipt_bodies (
    body_sha256 bytea PRIMARY KEY CHECK (octet_length(body_sha256) = 32),
    body        bytea NOT NULL CHECK (octet_length(body) <= 65536)
);
CREATE TRIGGER receipt_bodies_append_only BEFORE UPDATE OR DELETE ON receipt_bodies
    FOR EACH ROW EXECUTE FUNCTION payledger_refuse_change();
CREATE TRIGGER receipt_bodies_no_truncate BEFORE TRUNCATE ON receipt_bodies
    FOR EACH STATEMENT EXECUTE FUNCTION payledger_refuse_change();

ALTER TABLE callback_receipts
    ALTER COLUMN body DROP NOT NULL,
    ADD COLUMN body_sha256 bytea CHECK (octet_length(body_sha256) = 32),
    ADD COLUMN body_stored boolean NOT NULL DEFAULT true,
    -- Exactly one form: the inline body (receipts written before this migration) or its hash.
    ADD CONSTRAINT callback_receipts_body_form CHECK ((body IS NULL) <> (body_sha256 IS NULL)),
    -- Only a duplicate may go without its body.
    ADD CONSTRAINT callback_receipts_body_stored CHECK (body_stored OR outcome = 'duplicate');

-- How many duplicate receipts an event has (the writer counts up to 100): an index of the
-- duplicates only, so the other receipts pay nothing for it.
CREATE INDEX callback_receipts_duplicates ON callback_receipts (seq) WHERE outcome = 'duplicate';

-- A receipt's line (0003) names the hash of its body: the stored one where the body is not
-- inline.
CREATE OR REPLACE FUNCTION payledger_receipt_line(r callback_receipts, e ledger_events)
    RETURNS text
LANGUAGE sql STABLE AS $$
SELECT r.id::text || E'\t' || r.source || E'\t' ||
       to_char(r.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || E'\t' ||
       r.outcome || E'\t' || coalesce(r.seq::text, '') || E'\t' ||
       coalesce(r.out_trade_no, '') || E'\t' ||
       encode(coalesce(r.body_sha256, sha256(r.body)), 'hex') || E'\t' ||
       coalesce(e.seq::text || ',' || e.event_type || ',' || e.out_trade_no || ',' ||
                e.account_id || ',' || coalesce(e.amount::text, '') || ',' ||
                coalesce(e.currency, '') || ',' || coalesce(e.transaction_id, '') || ',' ||
                to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                '') || E'\n'
$$;
