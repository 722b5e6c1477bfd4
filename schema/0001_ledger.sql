-- payledger's ledger: the two append-only tables (docs/events.md#events, docs/events.md#invariants)
-- and the projections (docs/events.md#projections). Ids are allocated by the writer under the
-- ledger's writer lock (docs/write-path.md#the-writer-lock), so their order is commit order. Keys use
-- the "C" collation: byte order, the order of the canonical digests, so verify and rebuild stream
-- rows in index order.

CREATE FUNCTION payledger_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'payledger: % on % is refused: the table is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TABLE callback_receipts (
    id           bigserial PRIMARY KEY,
    source       text NOT NULL
                 CHECK (source IN ('api', 'wechat_v2', 'wechat_v3', 'alipay', 'generic')),
    received_at  timestamptz NOT NULL,
    peer         text NOT NULL,
    headers      jsonb NOT NULL DEFAULT '{}',
    body         bytea NOT NULL CHECK (octet_length(body) <= 65536),
    outcome      text NOT NULL
                 CHECK (outcome IN ('appended', 'duplicate', 'ignored', 'malformed',
                                    'bad_signature', 'unknown_order', 'conflict', 'mismatch')),
    seq          bigint,
    out_trade_no text COLLATE "C" CHECK (out_trade_no ~ '^[A-Za-z0-9_|*.-]{1,64}$'),
    message      text NOT NULL DEFAULT '',
    CHECK ((outcome IN ('appended', 'duplicate')) = (seq IS NOT NULL))
);
CREATE INDEX callback_receipts_out_trade_no ON callback_receipts (out_trade_no, id);
CREATE INDEX callback_receipts_outcome ON callback_receipts (outcome, id);

CREATE TABLE ledger_events (
    seq            bigserial PRIMARY KEY,
    out_trade_no   text COLLATE "C" NOT NULL CHECK (out_trade_no ~ '^[A-Za-z0-9_|*.-]{1,64}$'),
    event_type     text NOT NULL
                   CHECK (event_type IN ('ORDER_CREATED', 'PAYMENT_SUCCEEDED', 'PAYMENT_CLOSED',
                                         'REFUND_SUCCEEDED')),
    source         text NOT NULL
                   CHECK (source IN ('api', 'wechat_v2', 'wechat_v3', 'alipay', 'generic')),
    account_id     text COLLATE "C" NOT NULL CHECK (account_id ~ '^[A-Za-z0-9_|*.-]{1,64}$'),
    amount         bigint CHECK (amount BETWEEN 1 AND 10000000000000),
    currency       text CHECK (currency ~ '^[A-Z]{3}$'),
    transaction_id text CHECK (octet_length(transaction_id) BETWEEN 1 AND 128),
    occurred_at    timestamptz NOT NULL,
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    receipt_id     bigint NOT NULL UNIQUE
                   REFERENCES callback_receipts (id) DEFERRABLE INITIALLY DEFERRED,
    data           jsonb NOT NULL DEFAULT '{}',
    -- Invariant 1 (docs/events.md#invariants): at most one event per (out_trade_no, event_type).
    -- The index also covers what the fold needs, so verify and rebuild read the events in key order
    -- from the index alone (an index-only scan once the visibility map is set, as for old events).
    CONSTRAINT ledger_events_one_per_type UNIQUE (out_trade_no, event_type)
        INCLUDE (seq, account_id, amount, currency, transaction_id),
    -- A close carries no money; every other event does, and payments and refunds carry the
    -- platform's number.
    CHECK ((event_type = 'PAYMENT_CLOSED') = (amount IS NULL)),
    CHECK ((event_type = 'PAYMENT_CLOSED') = (currency IS NULL)),
    CHECK ((event_type IN ('PAYMENT_SUCCEEDED', 'REFUND_SUCCEEDED')) = (transaction_id IS NOT NULL))
);

ALTER TABLE callback_receipts
    ADD CONSTRAINT callback_receipts_seq_fkey
    FOREIGN KEY (seq) REFERENCES ledger_events (seq) DEFERRABLE INITIALLY DEFERRED;

-- Invariant 2 (docs/events.md#invariants): the schema refuses UPDATE, DELETE and TRUNCATE.
CREATE TRIGGER ledger_events_append_only BEFORE UPDATE OR DELETE ON ledger_events
    FOR EACH ROW EXECUTE FUNCTION payledger_refuse_change();
CREATE TRIGGER ledger_events_no_truncate BEFORE TRUNCATE ON ledger_events
    FOR EACH STATEMENT EXECUTE FUNCTION payledger_refuse_change();
CREATE TRIGGER callback_receipts_append_only BEFORE UPDATE OR DELETE ON callback_receipts
    FOR EACH ROW EXECUTE FUNCTION payledger_refuse_change();
CREATE TRIGGER callback_receipts_no_truncate BEFORE TRUNCATE ON callback_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION payledger_refuse_change();

CREATE TABLE orders (
    out_trade_no    text COLLATE "C" PRIMARY KEY,
    account_id      text COLLATE "C" NOT NULL,
    amount          bigint NOT NULL CHECK (amount BETWEEN 1 AND 10000000000000),
    currency        text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    status          text NOT NULL CHECK (status IN ('WAIT_PAY', 'PAID', 'CLOSED', 'REFUNDED')),
    transaction_id  text,
    paid_amount     bigint NOT NULL CHECK (paid_amount BETWEEN 0 AND 10000000000000),
    refunded_amount bigint NOT NULL CHECK (refunded_amount BETWEEN 0 AND 10000000000000),
    anomalies       text[] NOT NULL DEFAULT '{}',
    seq             bigint NOT NULL
);
CREATE INDEX orders_account ON orders (account_id);

CREATE TABLE balances (
    account_id text COLLATE "C" NOT NULL,
    currency   text COLLATE "C" NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    balance    bigint NOT NULL,
    PRIMARY KEY (account_id, currency)
);
