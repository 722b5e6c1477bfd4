-- A batch in one round trip, planned from the committer's memory of the ledger
-- (docs/write-path.md#the-writer-cache).
--
-- The writer's first round trip (ledger/write/writer.cpp) takes the writer lock and reads the
-- sequences, the chain's head and the events of the orders the batch names. A committer that
-- wrote the ledger's last batch itself already knows all of that, if nobody wrote since
-- (ledger::WriterCache). It then sends BEGIN, this function, its write and COMMIT in one
-- pipeline: the function opens the block as the read path's first round trip does (how the
-- block's statements are planned, the writer lock), and then checks, under the lock,
-- that the ledger is where this writer left it: both sequences (every writer moves them past
-- what it wrote, with setval, which a rollback does not undo), and the chain's head (the last
-- receipt's chain covers every receipt and event before it, so it also tells a ledger that lost
-- this writer's last commit, in a failover to a standby that had not received it or a restore, from
-- one where another writer's batch brought the sequences back to the same values). Otherwise it
-- refuses with SQLSTATE PLD01: the pipeline skips the write and COMMIT, and the writer reads the
-- state as before. Returns the lock wait in microseconds (statement start to the lock granted), as
-- the read's lock_wait column.
CREATE FUNCTION payledger_writer_begin(lock_key bigint, expect_next_seq bigint,
                                       expect_next_receipt_id bigint, expect_head bytea)
    RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    next_seq bigint;
    next_receipt_id bigint;
    lock_wait bigint;
    head bytea;
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
    -- The read path's probe: backwards along the primary key.
    SELECT chain INTO head FROM callback_receipts ORDER BY id DESC LIMIT 1;
    IF next_seq <> expect_next_seq OR next_receipt_id <> expect_next_receipt_id
       OR head IS DISTINCT FROM expect_head THEN
        RAISE EXCEPTION 'the ledger is not where this writer''s last batch left it'
            USING ERRCODE = 'PLD01',
                  DETAIL = format('next seq %s, next receipt id %s, head %s; expected %s, %s, %s',
                                  next_seq, next_receipt_id, encode(head, 'hex'), expect_next_seq,
                                  expect_next_receipt_id, encode(expect_head, 'hex'));
    END IF;
    RETURN lock_wait;
END;
$$;
