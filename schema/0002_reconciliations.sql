-- Reconciliation against the platforms' daily statements (docs/reconciliation.md).
--
-- 1. Payments and refunds proven by a bill are appended with source wechat_bill or
--    alipay_bill, each with its receipt (the bill's raw line): both CHECKs widen.
-- 2. reconciliations: one row per run that read a complete bill, append-only like the
--    ledger. Rows are inserted under the ledger's writer lock (docs/write-path.md#the-writer-lock),
--    so a reader paging by id never skips one.
-- 3. The ledger side of a reconciliation reads the payments and refunds of one day.

ALTER TABLE callback_receipts DROP CONSTRAINT callback_receipts_source_check;
ALTER TABLE callback_receipts ADD CONSTRAINT callback_receipts_source_check
    CHECK (source IN ('api', 'wechat_v2', 'wechat_v3', 'alipay', 'generic',
                      'wechat_bill', 'alipay_bill'));
ALTER TABLE ledger_events DROP CONSTRAINT ledger_events_source_check;
ALTER TABLE ledger_events ADD CONSTRAINT ledger_events_source_check
    CHECK (source IN ('api', 'wechat_v2', 'wechat_v3', 'alipay', 'generic',
                      'wechat_bill', 'alipay_bill'));

CREATE INDEX ledger_events_settled_at ON ledger_events (occurred_at)
    WHERE event_type IN ('PAYMENT_SUCCEEDED', 'REFUND_SUCCEEDED');

CREATE TABLE reconciliations (
    id          bigserial PRIMARY KEY,
    platform    text NOT NULL CHECK (platform IN ('wechat', 'alipay')),
    date        date NOT NULL,
    bill        bytea NOT NULL,  -- The bill file's bytes, as given.
    bill_sha256 text NOT NULL CHECK (bill_sha256 ~ '^[0-9a-f]{64}$'),
    ran_at      timestamptz NOT NULL DEFAULT now(),
    applied     boolean NOT NULL,  -- Run with --apply.
    counts      jsonb NOT NULL,    -- {"rows": n, "matched": n, ... "applied": n}.
    ok          boolean NOT NULL,
    -- [{"category","event_type","out_trade_no","bill","ledger"}] in the output's order.
    differences jsonb NOT NULL CHECK (jsonb_typeof(differences) = 'array')
);

CREATE TRIGGER reconciliations_append_only BEFORE UPDATE OR DELETE ON reconciliations
    FOR EACH ROW EXECUTE FUNCTION payledger_refuse_change();
CREATE TRIGGER reconciliations_no_truncate BEFORE TRUNCATE ON reconciliations
    FOR EACH STATEMENT EXECUTE FUNCTION payledger_refuse_change();
