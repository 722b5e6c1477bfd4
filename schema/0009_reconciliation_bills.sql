-- A reconciliation's bill stored apart from its record, outside the writer lock.
--
-- A run of `reconcile` is recorded under the writer lock, so that a reader paging
-- reconciliations by id never skips one (0002). The record held the bill file's bytes, up to
-- 256 MiB: the callbacks' batches waited behind their copy and ran into their lock_timeout
-- (503).
--
-- 1. reconciliation_bills holds each bill's bytes once, keyed by their SHA-256 (hex, as
--    reconciliations.bill_sha256), and the server checks that the key is their digest. The
--    bytes are inserted first, in a transaction of their own without the writer lock
--    (ON CONFLICT DO NOTHING: the same bill reconciled again is stored once). Append-only like
--    the ledger.
-- 2. A run recorded from now on keeps no inline bill: stored_bill_sha256 names its bytes in
--    reconciliation_bills (a foreign key: they were stored before the record). Runs recorded
--    before keep their inline bill. Every row has exactly one of the two forms.
-- 3. payledger_reconciliation_bill(r) reads a run's bill in either form.

CREATE TABLE reconciliation_bills (
    bill_sha256 text PRIMARY KEY CHECK (bill_sha256 ~ '^[0-9a-f]{64}$'),
    bill        bytea NOT NULL,  -- The bill file's bytes, as given.
    CONSTRAINT reconciliation_bills_digest CHECK (bill_sha256 = encode(sha256(bill), 'hex'))
);
CREATE TRIGGER reconciliation_bills_append_only BEFORE UPDATE OR DELETE ON reconciliation_bills
    FOR EACH ROW EXECUTE FUNCTION payledger_refuse_change();
CREATE TRIGGER reconciliation_bills_no_truncate BEFORE TRUNCATE ON reconciliation_bills
    FOR EACH STATEMENT EXECUTE FUNCTION payledger_refuse_change();

ALTER TABLE reconciliations
    ALTER COLUMN bill DROP NOT NULL,
    ADD COLUMN stored_bill_sha256 text REFERENCES reconciliation_bills (bill_sha256),
    -- Exactly one form: the inline bill (runs recorded before this migration) or the stored one.
    ADD CONSTRAINT reconciliations_bill_form CHECK ((bill IS NULL) <> (stored_bill_sha256 IS NULL)),
    -- The stored bill is the run's own.
    ADD CONSTRAINT reconciliations_stored_bill
        CHECK (stored_bill_sha256 IS NULL OR stored_bill_sha256 = bill_sha256);

CREATE FUNCTION payledger_reconciliation_bill(r reconciliations) RETURNS bytea
LANGUAGE sql STABLE AS $$
SELECT coalesce(r.bill, (SELECT b.bill FROM reconciliation_bills b
                         WHERE b.bill_sha256 = r.stored_bill_sha256))
$$;
