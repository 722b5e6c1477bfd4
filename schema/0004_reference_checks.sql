-- The references between receipts and events, checked once per statement.
--
-- 0001 made them foreign keys, checked at commit row by row: one query per receipt (its
-- event) and one per event (its receipt). The writer's session plans every query for its own
-- parameters (plan_cache_mode = force_custom_plan, ledger/pg/database.cpp: a generic plan made
-- while the tables were small could be a sequential scan, and stayed), and the checks' queries
-- too. Under bench/load that was about 50 checks per batch, 1.3 ms of the writer's 9.5 ms
-- cycle, 1.0 ms of it planning (pg_stat_statements, track = all).
--
-- These triggers check the same references, for all the rows one statement inserted, with one
-- query each, planned once per statement. What else the foreign keys did, refuse to delete or
-- change a referenced row, the append-only triggers of 0001 do for both tables, whoever asks.
-- The one difference: a reference must hold when the statement that inserts it ends, not at
-- commit. The writer inserts a batch's receipts and events in one statement (its triggers
-- fire after the whole statement, so each table's rows see the other's).
--
-- Each receipt is probed on its own (a subquery with LIMIT is never turned into a join), so
-- the check is an index probe per row whatever the statistics say: the same plan-proof shape
-- as the writer's own statements.

ALTER TABLE callback_receipts DROP CONSTRAINT callback_receipts_seq_fkey;
ALTER TABLE ledger_events DROP CONSTRAINT ledger_events_receipt_id_fkey;

-- A receipt that names an event (appended, duplicate) names one that exists.
CREATE FUNCTION payledger_check_receipt_events() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing bigint;
BEGIN
    SELECT n.seq INTO missing
    FROM inserted AS n
    WHERE n.seq IS NOT NULL
      AND (SELECT e.seq FROM ledger_events AS e WHERE e.seq = n.seq LIMIT 1) IS NULL
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert on table "callback_receipts" names an event that does not exist'
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('Key (seq)=(%s) is not present in table "ledger_events".',
                                  missing);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER callback_receipts_seq_exists AFTER INSERT ON callback_receipts
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION payledger_check_receipt_events();

-- Every event names the receipt that delivered it.
CREATE FUNCTION payledger_check_event_receipts() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing bigint;
BEGIN
    SELECT n.receipt_id INTO missing
    FROM inserted AS n
    WHERE (SELECT r.id FROM callback_receipts AS r WHERE r.id = n.receipt_id LIMIT 1) IS NULL
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert on table "ledger_events" names a receipt that does not exist'
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('Key (receipt_id)=(%s) is not present in table '
                                  '"callback_receipts".', missing);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER ledger_events_receipt_exists AFTER INSERT ON ledger_events
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION payledger_check_event_receipts();
