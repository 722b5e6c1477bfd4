-- Issue 10: a batch in one round trip, planned from the committer's memory of the ledger.
--
-- The writer's first round trip (ledger/writer.cpp) takes the writer lock and reads the
-- sequences, the chain's head and the events of the orders the batch names. A committer that
-- wrote the ledger's last batch itself already knows all of that, if nobody wrote since
-- (ledger::WriterCache). It then sends BEGIN, this function, its write and COMMIT in one
-- pipeline: the function opens the block as the read path's first round trip does (how the
-- block's statements are planned, the writer lock, SPEC §7), and then checks, under the lock,
-- that nobody wrote since. Every writer moves both sequences past what it wrote (setval, not
-- undone by a rollback), so sequences where this writer left them mean that no batch wrote
-- after its own, and its memory is the ledger's. Otherwise it refuses with SQLSTATE PLD01:
-- the pipeline skips the write and COMMIT, and the writer reads the state as before.
-- Returns the lock wait in microseconds (statement start to the lock granted), as the read's
-- lock_wait column.
CREATE FUNCTION payledger_writer_begin(lock_key bigint, expect_next_seq bigint,
                                       expect_next_receipt_id bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    next_seq bigint;
    next_receipt_id bigint;
    lock_wait bigint;
BEGIN
    -- As the read path's SET LOCALs (kBeginSql): until the transaction ends.
    PERFORM set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true),
            set_config('plan_cache_mode', 'force_generic_plan', true);
    PERFORM pg_advisory_xact_lock(lock_key);
    lock_wait := (extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000000)::bigint;
    SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END INTO next_seq
    FROM ledger_events_seq_seq;
    SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END INTO next_receipt_id
    FROM callback_receipts_id_seq;
    IF next_seq <> expect_next_seq OR next_receipt_id <> expect_next_receipt_id THEN
        RAISE EXCEPTION 'the ledger was written since this writer''s last batch'
            USING ERRCODE = 'PLD01',
                  DETAIL = format('next seq %s, next receipt id %s; expected %s, %s', next_seq,
                                  next_receipt_id, expect_next_seq, expect_next_receipt_id);
    END IF;
    RETURN lock_wait;
END;
$$;
