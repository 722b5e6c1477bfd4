-- Asking the platform: the active order query and the close of expired orders (docs/query.md).
--
-- 1. What payledger learns by asking a platform is appended through the same write path as a
--    notification, with sources of its own: `<channel>_query` for a query's answer,
--    `<channel>_close` for a close's. Both CHECKs widen.
-- 2. order_queries: the schedule of every order registered with a channel (POST /v1/orders
--    `channel`, kept in its ORDER_CREATED's data). Not a ledger table: the schedule's state
--    changes (attempts, the next time), the facts it finds are ledger events. A row is made by
--    the trigger below in the transaction that appends the ORDER_CREATED, so no order is ever
--    left without its schedule, and none is made for an order without a channel. `next_at` is
--    when the next query (or, past `expires_at`, the close) is due, null once nothing more is;
--    `leased_until` is set by the process making the due query (FOR UPDATE SKIP LOCKED on the
--    due index), so that each due query is made by one process, and by another when that one
--    died before it recorded the answer.
-- 3. order_query_settings: the first query's delay, written by `serve` at start from its
--    config (query.first_after_seconds), which the trigger reads.

ALTER TABLE callback_receipts DROP CONSTRAINT callback_receipts_source_check;
ALTER TABLE callback_receipts ADD CONSTRAINT callback_receipts_source_check
    CHECK (source IN ('api', 'wechat_v2', 'wechat_v3', 'alipay', 'generic',
                      'wechat_bill', 'alipay_bill',
                      'wechat_v2_query', 'wechat_v3_query', 'alipay_query',
                      'wechat_v2_close', 'wechat_v3_close', 'alipay_close'));
ALTER TABLE ledger_events DROP CONSTRAINT ledger_events_source_check;
ALTER TABLE ledger_events ADD CONSTRAINT ledger_events_source_check
    CHECK (source IN ('api', 'wechat_v2', 'wechat_v3', 'alipay', 'generic',
                      'wechat_bill', 'alipay_bill',
                      'wechat_v2_query', 'wechat_v3_query', 'alipay_query',
                      'wechat_v2_close', 'wechat_v3_close', 'alipay_close'));

CREATE TABLE order_query_settings (
    id                  boolean PRIMARY KEY DEFAULT true CHECK (id),
    first_after_seconds integer NOT NULL CHECK (first_after_seconds BETWEEN 0 AND 86400)
);

CREATE TABLE order_queries (
    out_trade_no text COLLATE "C" PRIMARY KEY,
    channel      text NOT NULL CHECK (channel IN ('wechat_v2', 'wechat_v3', 'alipay')),
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz,
    -- Steps of the query schedule taken (docs/query.md#when); what is due at next_at.
    step         integer NOT NULL DEFAULT 0 CHECK (step >= 0),
    next_action  text NOT NULL DEFAULT 'query' CHECK (next_action IN ('query', 'close')),
    next_at      timestamptz,
    attempts     integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_at      timestamptz,
    last_answer  text CHECK (octet_length(last_answer) <= 256),
    closed_at    timestamptz,
    -- The platform refused the close because the order was paid: not closed again.
    close_refused boolean NOT NULL DEFAULT false,
    leased_until timestamptz
);
CREATE INDEX order_queries_due ON order_queries (next_at) WHERE next_at IS NOT NULL;

-- The schedule of an order registered with a channel: its first query `first_after_seconds`
-- after its registration, or its expiry if that comes first. From the database's clock (now(),
-- the registering transaction's), as every later step (the scheduler's decisions take the
-- database's time from its claim) and the due check: the event's occurred_at is the clock of
-- the serve that registered it, which may be minutes off.
CREATE FUNCTION payledger_schedule_order_query() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    first_after integer := coalesce(
        (SELECT first_after_seconds FROM order_query_settings WHERE id), 60);
    expires timestamptz := (NEW.data->>'expires_at')::timestamptz;
BEGIN
    INSERT INTO order_queries (out_trade_no, channel, created_at, expires_at, next_at)
    VALUES (NEW.out_trade_no, NEW.data->>'channel', NEW.occurred_at, expires,
            least(now() + make_interval(secs => first_after), expires));
    RETURN NULL;
END;
$$;
CREATE TRIGGER ledger_events_schedule_query AFTER INSERT ON ledger_events
    FOR EACH ROW WHEN (NEW.event_type = 'ORDER_CREATED' AND NEW.data ? 'channel')
    EXECUTE FUNCTION payledger_schedule_order_query();
