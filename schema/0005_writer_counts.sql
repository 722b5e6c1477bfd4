-- The writer checks the row counts of its write inside the statement itself.
--
-- A row count other than the plan's aborts the transaction (docs/events.md#the-live-update). The
-- writer sends its write and COMMIT in one round trip (ledger/write/writer.cpp), so the check cannot wait
-- for the client: the statement passes what it touched and what the plan expected, and fails,
-- before COMMIT runs, when they differ (COMMIT is then skipped, and the block rolled back).
CREATE FUNCTION payledger_expect_counts(touched bigint[], expected bigint[]) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF touched IS DISTINCT FROM expected THEN
        RAISE EXCEPTION 'the write touched % rows where the plan expected %', touched, expected
            USING ERRCODE = 'assert_failure',
                  HINT = 'receipts, events, new orders, updated orders, balances';
    END IF;
    RETURN true;
END;
$$;
