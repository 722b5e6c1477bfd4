-- Subscriptions: the ledger's events pushed to the merchant's own systems over HTTP
-- (ledger/subscriptions/subscriptions.hpp). One cursor per subscription, and an append-only record of every
-- cursor move an admin makes and of every disable and enable.

-- The state of each subscription, mutable like `orders`. `after` is the cursor: the last seq
-- the receiver acknowledged (or where an admin put it); deliveries move it with a
-- compare-and-set on its old value, so a stale deliverer can never move it.
CREATE TABLE subscriptions (
    name                 text COLLATE "C" PRIMARY KEY
                         CHECK (octet_length(name) BETWEEN 1 AND 64
                                AND name !~ '[^A-Za-z0-9_|*.-]'),
    after                bigint NOT NULL CHECK (after >= 0),
    disabled             boolean NOT NULL DEFAULT false,
    consecutive_failures integer NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
    last_error           text,
    last_attempt_at      timestamptz,
    next_attempt_at      timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now()
);

-- Why a subscription's cursor moved other than by a delivery, or why it stopped: auditors read
-- this to tell why an event was not delivered. Ids are taken under an advisory lock of their
-- own held until commit (ledger/pg/database.hpp kSubscriptionChangesLockKey), so id order is
-- commit order and a reader paging by `id > after` never skips a row, as for ledger_events.
-- A disable or an enable does not move the cursor: `from` and `to` are both the cursor then.
-- The key to subscriptions keeps a subscription that has a history from being deleted.
CREATE TABLE subscription_changes (
    id     bigserial PRIMARY KEY,
    name   text COLLATE "C" NOT NULL REFERENCES subscriptions (name),
    "from" bigint NOT NULL CHECK ("from" >= 0),
    "to"   bigint NOT NULL CHECK ("to" >= 0),
    why    text NOT NULL CHECK (why IN ('rewind', 'disabled: 410', 'enabled')),
    at     timestamptz NOT NULL DEFAULT now(),
    CHECK (why = 'rewind' OR "from" = "to")
);

CREATE TRIGGER subscription_changes_append_only BEFORE UPDATE OR DELETE ON subscription_changes
    FOR EACH ROW EXECUTE FUNCTION payledger_refuse_change();
CREATE TRIGGER subscription_changes_no_truncate BEFORE TRUNCATE ON subscription_changes
    FOR EACH STATEMENT EXECUTE FUNCTION payledger_refuse_change();
