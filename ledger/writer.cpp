#include "ledger/writer.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "ledger/binary_params.hpp"
#include "ledger/chain.hpp"
#include "ledger/database.hpp"
#include "ledger/statements.hpp"
#include "ledger/storable_text.hpp"
#include "projections/assert.hpp"
#include "projections/plan.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger {
namespace {

using projections::Event;
using projections::EventType;
using projections::OrderRow;
using projections::Outcome;

// Reads, under the writer lock, the next ids of both sequences, the chain's head and the
// stored events of the orders named in $1 (a text array). Ids are taken from the sequences'
// state rather than nextval() so that they can be assigned while deciding; the write statement
// moves the sequences past them. Safe because every writer holds the lock.
// lock_wait: the time from the arrival of the query string that runs this (kBeginSql) to the
// read, that is BEGIN and the lock wait (statement_timestamp() is when the string arrived, the
// same for all its statements).
// Plan-proof (issue 10): one index probe per order, whatever the statistics say. A plain
// `out_trade_no = ANY ($1)` is estimated at 1/200 of the table per key on a never-analyzed
// database (out_trade_no alone is not unique), so a few dozen keys made it a sequential
// scan. LIMIT 4 (one event per type, projections::kEventsPerOrderMax) keeps the lateral
// subquery from being flattened into a hash join: each key is an index range of at most 4.
// The chain's head (SPEC §11) is the last receipt's: a backward probe of the primary key.
constexpr const char* kReadStateSql = R"sql(
SELECT s.next_seq, s.next_receipt_id, s.head, s.lock_wait, e.*
FROM (SELECT (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
              FROM ledger_events_seq_seq) AS next_seq,
             (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
              FROM callback_receipts_id_seq) AS next_receipt_id,
             (SELECT chain FROM callback_receipts ORDER BY id DESC LIMIT 1) AS head,
             (extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000000)::bigint
                 AS lock_wait) AS s
LEFT JOIN LATERAL (
    SELECT e.*
    FROM unnest($1::text[]) AS k(out_trade_no)
    CROSS JOIN LATERAL (
        SELECT seq, out_trade_no, event_type, source, account_id, amount, currency,
               transaction_id, (extract(epoch FROM occurred_at) * 1000000)::bigint,
               (extract(epoch FROM recorded_at) * 1000000)::bigint, receipt_id, data::text
        FROM ledger_events
        WHERE out_trade_no = k.out_trade_no
        ORDER BY event_type
        LIMIT 4
    ) AS e
) AS e ON true
ORDER BY e.seq
)sql";
constexpr int kFirstEventColumn = 4;

// The batch's first round trip, one simple query (issue 10: under load each round trip cost
// 0.4-0.9 ms, on 2 cores shared with PostgreSQL): opens the transaction, sets how its
// statements are planned, takes the writer lock (SPEC §7) and runs the read, which is its own
// statement after the lock, so that its snapshot holds every batch committed before the lock
// was granted. The read's parameter follows as a literal, then ")".
//
// How the block's statements are planned, the triggers' queries included (issue 10 point 3):
// once per session, never for the tables' statistics, and never as a sequential scan.
// Every access of the write path is by key, so with sequential scans disabled the planner
// takes the index whatever the statistics say, and a plan made on the first, empty-looking
// batch stays right as the tables grow; force_custom_plan, which replanned every statement of
// every batch for its own parameters instead, cost about 0.6 ms of PostgreSQL's time per batch
// (pg_stat_statements). A sequence can only be scanned sequentially: the penalty that
// enable_seqscan adds to the cost of reading one would make every plan look expensive enough
// for JIT compilation (about 300 ms), so JIT is off: the block's statements are all small.
constexpr std::string_view kBeginSql =
    "BEGIN; SET LOCAL enable_seqscan = off; SET LOCAL jit = off; "
    "SET LOCAL plan_cache_mode = force_generic_plan; SELECT pg_advisory_xact_lock(";
constexpr std::string_view kReadStateName = "writer_read_state";
constexpr std::string_view kWriteName = "writer_write";
// The cached path's opening (WriterCache, schema 0007): how the block's statements are
// planned, as kBeginSql's SET LOCALs, the writer lock, and the check that nobody wrote since
// the cache's batch; answers the lock wait in microseconds.
constexpr std::string_view kBeginName = "writer_begin";
constexpr const char* kBeginFromCacheSql =
    "SELECT payledger_writer_begin($1::bigint, $2::bigint, $3::bigint, $4::bytea)";
// SQLSTATE of payledger_writer_begin's refusal: the ledger was written since the cache's batch.
constexpr std::string_view kLedgerMoved = "PLD01";
// SQLSTATE assert_failure: payledger_expect_counts found a row count other than the plan's.
constexpr std::string_view kAssertFailure = "P0004";
// SQLSTATE unique_violation: a row the plan believed new exists (see kWriteSql).
constexpr std::string_view kUniqueViolation = "23505";

// One statement writes everything and checks how many rows each part touched against $47,
// the plan's counts (SPEC §4: a row count other than expected aborts the transaction).
// Events, receipts and new orders are plain INSERTs: the plan made them from what it read
// under the writer lock, so each is new, and one that exists (written behind the lock's back,
// or a plan that is wrong) fails the statement with a unique violation, which is the same
// invariant error as a wrong count. ON CONFLICT DO NOTHING, which only turned that into a
// wrong count, cost a speculative insertion per row (an arbiter index probe, and a WAL record
// that confirms the row): bench/write/run.sh measures about 5 us per event and per new
// order, 15-25 % of their inserts. Balances stay an upsert: their rows may exist, and so may
// a receipt's body (receipt_bodies, keyed by its SHA-256: stored by an earlier batch).
// Each part's rows come as one array per column, bound in binary (ledger/binary_params.hpp):
// no JSON to parse and no literal to scan, only headers and data become jsonb (and an order's
// anomalies, a text array literal each, text[]). bench/write/run.sh measures it against the
// JSON rows this statement took before.
constexpr const char* kWriteSql = R"sql(
WITH rx AS (
    -- The receipts, each with whether its body is kept (schema/0008): always, but for a
    -- duplicate of event S that is S's n-th duplicate overall, n = those stored (counted up to
    -- 100 on the partial index of duplicates, once per S) + $50, its rank among this batch's
    -- duplicates of S by id (the plan's order); kept iff n <= 100, so a replayed notice adds
    -- rows, not bodies. The rank comes from the plan, not a window over the rows here: the
    -- window's sort cost about 1.5 us a receipt (timed against this, paired, in one session).
    -- Referenced twice, so computed once (a CTE used more than once is materialized).
    SELECT x.*, x.outcome <> 'duplicate' OR coalesce(d.stored, 0) + x.rank <= 100 AS body_stored
    FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::text[], $5::text[],
                $6::bytea[], $7::text[], $8::bigint[], $9::text[], $10::text[], $11::bytea[],
                $50::bigint[])
         AS x(id, source, received_at, peer, headers, body_sha256, outcome, seq, out_trade_no,
              message, chain, rank)
    LEFT JOIN (
        SELECT s.seq,
               (SELECT count(*)
                FROM (SELECT 1 FROM callback_receipts AS c
                      WHERE c.seq = s.seq AND c.outcome = 'duplicate' LIMIT 100) AS c) AS stored
        FROM (SELECT DISTINCT y.seq FROM unnest($7::text[], $8::bigint[]) AS y(outcome, seq)
              WHERE y.outcome = 'duplicate') AS s
    ) AS d ON d.seq = x.seq
), r AS (
    INSERT INTO callback_receipts
        (id, source, received_at, peer, headers, body_sha256, body_stored, outcome, seq,
         out_trade_no, message, chain)
    SELECT id, source, received_at, peer, headers::jsonb, body_sha256, body_stored, outcome,
           seq, out_trade_no, message, chain
    FROM rx
    RETURNING 1
), rb AS (
    -- The batch's distinct bodies ($48 their keys, $49 their bytes), each stored once: not
    -- again when a receipt before kept the same bytes, and not at all when none of its
    -- receipts here keeps it. Not counted: how many are new is not the plan's to know.
    INSERT INTO receipt_bodies (body_sha256, body)
    SELECT u.body_sha256, u.body
    FROM unnest($48::bytea[], $49::bytea[]) AS u(body_sha256, body)
    WHERE EXISTS (SELECT FROM rx WHERE rx.body_sha256 = u.body_sha256 AND rx.body_stored)
    ON CONFLICT (body_sha256) DO NOTHING
), e AS (
    INSERT INTO ledger_events
        (seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id,
         occurred_at, receipt_id, data)
    SELECT seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id,
           occurred_at, receipt_id, data::jsonb
    FROM unnest($12::bigint[], $13::text[], $14::text[], $15::text[], $16::text[],
                $17::bigint[], $18::text[], $19::text[], $20::timestamptz[], $21::bigint[],
                $22::text[])
         AS x(seq, out_trade_no, event_type, source, account_id, amount, currency,
              transaction_id, occurred_at, receipt_id, data)
    RETURNING 1
), o_new AS (
    INSERT INTO orders (out_trade_no, account_id, amount, currency, status, transaction_id,
                        paid_amount, refunded_amount, anomalies, seq)
    SELECT out_trade_no, account_id, amount, currency, status, transaction_id, paid_amount,
           refunded_amount, anomalies::text[], seq
    FROM unnest($23::text[], $24::text[], $25::bigint[], $26::text[], $27::text[],
                $28::text[], $29::bigint[], $30::bigint[], $31::text[], $32::bigint[])
         AS x(out_trade_no, account_id, amount, currency, status, transaction_id, paid_amount,
              refunded_amount, anomalies, seq)
    RETURNING 1
), o_upd AS (
    -- Second line of defence: an update matches only the row this batch read (same last
    -- seq), and one that credits a payment only an order without one. `= ANY` of the keys
    -- makes it an index probe per order: unnest of a parameter is estimated at 10 rows, and
    -- joined to a table believed small that could be a hash join over a sequential scan.
    UPDATE orders AS o
    SET status = x.status, transaction_id = x.transaction_id, paid_amount = x.paid_amount,
        refunded_amount = x.refunded_amount, anomalies = x.anomalies::text[], seq = x.seq
    FROM unnest($33::text[], $34::text[], $35::text[], $36::bigint[], $37::bigint[],
                $38::text[], $39::bigint[], $40::bigint[], $41::boolean[])
         AS x(out_trade_no, status, transaction_id, paid_amount, refunded_amount, anomalies,
              seq, prev_seq, credits_payment)
    WHERE o.out_trade_no = ANY ($33) AND o.out_trade_no = x.out_trade_no
      AND o.seq = x.prev_seq AND (NOT x.credits_payment OR o.transaction_id IS NULL)
    RETURNING 1
), b AS (
    INSERT INTO balances AS b (account_id, currency, balance)
    SELECT account_id, currency, delta
    FROM unnest($42::text[], $43::text[], $44::bigint[]) AS x(account_id, currency, delta)
    ON CONFLICT (account_id, currency) DO UPDATE SET balance = b.balance + EXCLUDED.balance
    RETURNING 1
)
SELECT payledger_expect_counts(
           ARRAY[(SELECT count(*) FROM r), (SELECT count(*) FROM e), (SELECT count(*) FROM o_new),
                 (SELECT count(*) FROM o_upd), (SELECT count(*) FROM b)],
           $47::bigint[]),
       setval('callback_receipts_id_seq', $45::bigint),
       CASE WHEN $46::bigint > 0 THEN setval('ledger_events_seq_seq', $46::bigint) END
)sql";

}  // namespace

const std::vector<Statement>& WriterStatements() {
    static const std::vector<Statement> statements = {
        {kReadStateName.data(), kReadStateSql},  // None by exec_prepared: see WriteBatch.
        {kWriteName.data(), kWriteSql},
        {kBeginName.data(), kBeginFromCacheSql},
    };
    return statements;
}

namespace {

// A PostgreSQL array literal of keys. Keys are validated (projections::IsValidKey): no quote,
// backslash, comma, brace or space can occur, and the quotes make that certain twice.
std::string TextArray(const std::set<std::string>& keys) {
    std::string out = "{";
    for (const std::string& key : keys) {
        PAYLEDGER_ASSERT(projections::IsValidKey(key));
        if (out.size() > 1) out += ',';
        out += '"' + key + '"';
    }
    out += '}';
    return out;
}

std::optional<std::string> StorableOrNull(const std::optional<std::string>& text) {
    if (!text) return std::nullopt;
    return StorableText(*text);
}

// A PostgreSQL array literal of texts, an order's anomalies (their codes, but quoted and
// escaped whatever they hold).
std::string ArrayLiteral(const std::vector<std::string>& texts) {
    std::string out = "{";
    for (const std::string& text : texts) {
        if (out.size() > 1) out += ',';
        out += '"';
        for (const char c : text) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        out += '"';
    }
    out += '}';
    return out;
}

PreparedDelivery Prepare(const Delivery& delivery) {
    const Receipt& received = delivery.receipt;
    PreparedDelivery prepared;
    prepared.peer = StorableText(received.peer);
    prepared.headers = StorableText(JsonWithoutNul(received.headers));
    if (delivery.event) prepared.event_data = StorableText(JsonWithoutNul(delivery.event->data));
    prepared.body_digest = Sha256Of(received.body);
    prepared.body_sha256 = HexDigitsOf(prepared.body_digest);
    return prepared;
}

// The batch's transaction block on a nontransaction session: BEGIN goes out with the lock and
// the read (Open, with kBeginSql), COMMIT with the write (CommitAfter). Once opened and until
// CommitAfter() succeeds, leaving the scope rolls the block back, so the session is usable for
// the next batch (or, broken, replaced by the committer). libpqxx's own pqxx::work would send
// BEGIN and COMMIT in round trips of their own.
class TransactionBlock {
public:
    explicit TransactionBlock(pqxx::connection& connection) : session_(connection) {}
    TransactionBlock(const TransactionBlock&) = delete;
    TransactionBlock& operator=(const TransactionBlock&) = delete;
    ~TransactionBlock() {
        if (!open_) return;
        try {
            session_.exec("ROLLBACK");
        } catch (...) {
            // The session is broken: the server ends the transaction with it, and the
            // committer connects again (IdleSessionEnded, or the next query's error).
        }
    }

    pqxx::nontransaction& session() { return session_; }

    // Runs `sql`, which begins with BEGIN; returns its last statement's rows.
    pqxx::result Open(const std::string& sql) {
        PAYLEDGER_ASSERT(!open_ && sql.starts_with("BEGIN;"));
        open_ = true;  // Even if it fails: BEGIN may have arrived.
        return session_.exec(sql);
    }

    // Runs the prepared statement `name` with `params` (binary), the block's last, and COMMIT,
    // in one round trip. Like pqxx::work::commit: a session lost while they were in flight
    // leaves the outcome unknown (pqxx::in_doubt_error, never retried); an error answered by
    // the server means nothing was committed (the pipeline skips the COMMIT after an error).
    void CommitAfter(const std::string& name, std::vector<std::string> params) {
        PAYLEDGER_ASSERT(open_);
        std::vector<PipelineStatement> statements;
        statements.push_back({.name = name, .params = std::move(params)});
        (void)Finish(statements);
    }

    // Runs `statements`, the first a BEGIN, and COMMIT in one round trip: the whole block, as
    // CommitAfter. Returns ExecPipelineThenCommit's first fields.
    std::vector<std::optional<std::string>> OpenAndCommit(
        const std::vector<PipelineStatement>& statements) {
        PAYLEDGER_ASSERT(!open_ && !statements.empty() && statements.front().sql == "BEGIN");
        open_ = true;  // Even if it fails: BEGIN may have arrived.
        return Finish(statements);
    }

private:
    std::vector<std::optional<std::string>> Finish(
        const std::vector<PipelineStatement>& statements) {
        std::vector<std::optional<std::string>> firsts;
        try {
            firsts = ExecPipelineThenCommit(session_.conn(), statements);
        } catch (const pqxx::in_doubt_error&) {
            open_ = false;  // The session is dropped (ClassifyFailure): nothing to roll back.
            throw;
        } catch (const pqxx::broken_connection&) {
            open_ = false;
            throw;
        } catch (...) {
            // A refusal on a session that ExecPipelineThenCommit closed: nothing to roll back
            // (and a ROLLBACK would only make libpqxx reconnect for it).
            if (!session_.conn().is_open()) open_ = false;
            throw;
        }
        // Done, as the statements and COMMIT succeeded.
        open_ = false;
        return firsts;
    }

    pqxx::nontransaction session_;
    bool open_ = false;
};

}  // namespace

void PrepareForWrite(Delivery& delivery) {
    if (!delivery.prepared) delivery.prepared = Prepare(delivery);
}

namespace {

// What PlanWrite decided: the plan, the write's parameters (kWriteSql) and the chain's head
// after the batch.
struct PlannedWrite {
    projections::BatchPlan plan{};
    std::vector<std::string> params{};
    ChainValue head{};
};

// Plans `deliveries` against `state` (the stored events of every order they name, the next
// ids) and `chain` (the head before the batch), and renders the write's parameters. Pure.
PlannedWrite PlanWrite(std::span<const Delivery> deliveries, projections::LedgerState state,
                       ChainValue chain) {
    std::vector<projections::PlanInput> inputs;
    inputs.reserve(deliveries.size());
    for (const Delivery& delivery : deliveries) {
        inputs.push_back({.verdict = delivery.verdict,
                          .event = delivery.event ? &*delivery.event : nullptr,
                          .claims = &delivery.claims,
                          .message = delivery.message});
    }
    PlannedWrite planned_write{.plan = projections::PlanBatch(std::move(state), inputs)};
    projections::BatchPlan& plan = planned_write.plan;

    // The write's parameters: one binary array per column of each part (kWriteSql).
    BinaryArray r_id{PgType::kInt8}, r_source{PgType::kText}, r_received_at{PgType::kTimestamptz},
        r_peer{PgType::kText}, r_headers{PgType::kText}, r_body_sha256{PgType::kBytea},
        r_outcome{PgType::kText}, r_seq{PgType::kInt8}, r_out_trade_no{PgType::kText},
        r_message{PgType::kText}, r_chain{PgType::kBytea};
    BinaryArray e_seq{PgType::kInt8}, e_out_trade_no{PgType::kText}, e_event_type{PgType::kText},
        e_source{PgType::kText}, e_account_id{PgType::kText}, e_amount{PgType::kInt8},
        e_currency{PgType::kText}, e_transaction_id{PgType::kText},
        e_occurred_at{PgType::kTimestamptz}, e_receipt_id{PgType::kInt8}, e_data{PgType::kText};
    // The batch's distinct bodies, each sent once, by key (kWriteSql's rb: one statement must
    // not insert one key twice); and each duplicate's rank among the batch's duplicates of its
    // event (kWriteSql's rx), 0 for other receipts.
    BinaryArray body_key{PgType::kBytea}, body_bytes{PgType::kBytea};
    std::set<Sha256Digest> bodies_sent;
    BinaryArray r_duplicate_rank{PgType::kInt8};
    std::map<std::int64_t, std::int64_t> duplicates_of;  // seq -> this batch's so far.
    // SPEC §11: each receipt's chain, in id order, under the writer lock.
    std::string line_scratch;
    std::size_t appended = 0;
    for (std::size_t i = 0; i < deliveries.size(); ++i) {
        const Delivery& delivery = deliveries[i];
        const Receipt& received = delivery.receipt;
        std::optional<PreparedDelivery> rendered_here;
        const PreparedDelivery& prepared =
            delivery.prepared ? *delivery.prepared : rendered_here.emplace(Prepare(delivery));
        const projections::PlannedDelivery& planned = plan.deliveries[i];
        const Event* event = nullptr;
        if (planned.outcome == Outcome::kAppended) event = &plan.events.at(appended++);
        const std::optional<std::int64_t> seq = planned.ReceiptSeq();
        chain = NextChain(chain,
                          {.id = planned.receipt_id,
                           .source = received.source,
                           .received_at = received.received_at,
                           .outcome = planned.outcome,
                           .seq = seq,
                           .out_trade_no = received.out_trade_no ? *received.out_trade_no
                                                                 : std::string_view{},
                           .body_sha256_hex = std::string_view(prepared.body_sha256.data(),
                                                               prepared.body_sha256.size())},
                          event, line_scratch);
        r_id.Int8(planned.receipt_id);
        r_source.Bytes(projections::ToString(received.source));
        r_received_at.TimeMicros(received.received_at);
        r_peer.Bytes(prepared.peer);
        r_headers.Bytes(prepared.headers);
        const std::string_view digest(reinterpret_cast<const char*>(prepared.body_digest.data()),
                                      prepared.body_digest.size());
        r_body_sha256.Bytes(digest);
        if (bodies_sent.insert(prepared.body_digest).second) {
            body_key.Bytes(digest);
            body_bytes.Bytes(received.body);
        }
        r_outcome.Bytes(projections::ToString(planned.outcome));
        r_seq.NullableInt8(seq);
        r_duplicate_rank.Int8(planned.outcome == Outcome::kDuplicate && seq ? ++duplicates_of[*seq]
                                                                            : 0);
        r_out_trade_no.NullableBytes(StorableOrNull(received.out_trade_no));
        r_message.Bytes(StorableText(planned.message));
        r_chain.Bytes(std::string_view(reinterpret_cast<const char*>(chain.data()), chain.size()));
        if (event != nullptr) {
            // The plan's event is the delivered one as decided: its data is the delivery's.
            PAYLEDGER_ASSERT(delivery.event && event->data == delivery.event->data);
            e_seq.Int8(event->seq);
            e_out_trade_no.Bytes(event->out_trade_no);  // Keys: validated (IsValidKey).
            e_event_type.Bytes(projections::ToString(event->event_type));
            e_source.Bytes(projections::ToString(event->source));
            e_account_id.Bytes(event->account_id);
            if (event->event_type != EventType::kPaymentClosed) {
                e_amount.Int8(event->amount);
                e_currency.Bytes(StorableText(event->currency));
            } else {
                e_amount.Null();
                e_currency.Null();
            }
            e_transaction_id.NullableBytes(StorableOrNull(event->transaction_id));
            e_occurred_at.TimeMicros(event->occurred_at);
            e_receipt_id.Int8(event->receipt_id);
            e_data.Bytes(prepared.event_data);
        }
    }
    PAYLEDGER_ASSERT(appended == plan.events.size());
    BinaryArray n_out_trade_no{PgType::kText}, n_account_id{PgType::kText},
        n_amount{PgType::kInt8}, n_currency{PgType::kText}, n_status{PgType::kText},
        n_transaction_id{PgType::kText}, n_paid_amount{PgType::kInt8},
        n_refunded_amount{PgType::kInt8}, n_anomalies{PgType::kText}, n_seq{PgType::kInt8};
    BinaryArray u_out_trade_no{PgType::kText}, u_status{PgType::kText},
        u_transaction_id{PgType::kText}, u_paid_amount{PgType::kInt8},
        u_refunded_amount{PgType::kInt8}, u_anomalies{PgType::kText}, u_seq{PgType::kInt8},
        u_prev_seq{PgType::kInt8}, u_credits_payment{PgType::kBool};
    std::set<std::string> updated_keys;
    for (const projections::OrderWrite& write : plan.orders) {
        const OrderRow& after = write.after;
        const std::optional<std::string> transaction_id = StorableOrNull(after.transaction_id);
        if (write.prev_seq) {
            u_out_trade_no.Bytes(after.out_trade_no);
            u_status.Bytes(after.status);
            u_transaction_id.NullableBytes(transaction_id);
            u_paid_amount.Int8(after.paid_amount);
            u_refunded_amount.Int8(after.refunded_amount);
            u_anomalies.Bytes(StorableText(ArrayLiteral(after.anomalies)));
            u_seq.Int8(after.seq);
            u_prev_seq.Int8(*write.prev_seq);
            u_credits_payment.Bool(write.credits_payment);
            updated_keys.insert(after.out_trade_no);
        } else {
            n_out_trade_no.Bytes(after.out_trade_no);
            n_account_id.Bytes(after.account_id);
            n_amount.Int8(after.amount);
            n_currency.Bytes(StorableText(after.currency));
            n_status.Bytes(after.status);
            n_transaction_id.NullableBytes(transaction_id);
            n_paid_amount.Int8(after.paid_amount);
            n_refunded_amount.Int8(after.refunded_amount);
            n_anomalies.Bytes(StorableText(ArrayLiteral(after.anomalies)));
            n_seq.Int8(after.seq);
        }
    }
    BinaryArray b_account_id{PgType::kText}, b_currency{PgType::kText}, b_delta{PgType::kInt8};
    for (const auto& [key, delta] : plan.balance_deltas) {
        b_account_id.Bytes(key.first);
        b_currency.Bytes(StorableText(key.second));
        b_delta.Int8(delta);
    }

    // The statement checks its own row counts (payledger_expect_counts, schema/0005) and
    // fails before COMMIT when they differ.
    BinaryArray expected_counts{PgType::kInt8};
    for (const std::size_t count : {deliveries.size(), plan.events.size(), n_seq.size(),
                                    updated_keys.size(), plan.balance_deltas.size()}) {
        expected_counts.Int8(static_cast<std::int64_t>(count));
    }
    std::vector<std::string>& params = planned_write.params;
    params.reserve(50);
    for (BinaryArray* column :
         {&r_id, &r_source, &r_received_at, &r_peer, &r_headers, &r_body_sha256, &r_outcome,
          &r_seq, &r_out_trade_no, &r_message, &r_chain, &e_seq, &e_out_trade_no, &e_event_type,
          &e_source, &e_account_id, &e_amount, &e_currency, &e_transaction_id, &e_occurred_at,
          &e_receipt_id, &e_data, &n_out_trade_no, &n_account_id, &n_amount, &n_currency,
          &n_status, &n_transaction_id, &n_paid_amount, &n_refunded_amount, &n_anomalies,
          &n_seq, &u_out_trade_no, &u_status, &u_transaction_id, &u_paid_amount,
          &u_refunded_amount, &u_anomalies, &u_seq, &u_prev_seq, &u_credits_payment,
          &b_account_id, &b_currency, &b_delta}) {
        params.push_back(column->Take());
    }
    params.push_back(BinaryInt8(plan.last_receipt_id));
    params.push_back(BinaryInt8(plan.last_seq));
    params.push_back(expected_counts.Take());
    params.push_back(body_key.Take());
    params.push_back(body_bytes.Take());
    params.push_back(r_duplicate_rank.Take());
    planned_write.head = chain;
    return planned_write;
}

std::vector<DeliveryResult> ResultsOf(projections::BatchPlan& plan) {
    std::vector<DeliveryResult> results;
    results.reserve(plan.deliveries.size());
    for (projections::PlannedDelivery& planned : plan.deliveries) {
        results.push_back({.outcome = planned.outcome,
                           .seq = planned.seq,
                           .message = std::move(planned.message),
                           .order = std::move(planned.order),
                           .receipt_id = planned.receipt_id});
    }
    return results;
}

// An event as the database stores it, in the fields the plan reads (WriterCache).
Event AsStored(Event event) {
    if (event.event_type != EventType::kPaymentClosed) event.currency = StorableText(event.currency);
    event.transaction_id = StorableOrNull(event.transaction_id);
    event.recorded_at = 0;
    event.data.clear();
    event.data.shrink_to_fit();
    return event;
}

// Tells `cache` what the committed batch planned on `state` left: the events of each order
// named in `keys`, and the next ids. After the COMMIT, so a failure here (out of memory) must
// not fail the committed batch: it only makes the cache forget.
void RememberCommitted(WriterCache& cache, const std::set<std::string>& keys,
                       const projections::LedgerState& state, const PlannedWrite& planned) noexcept {
    try {
        std::map<std::string, std::vector<Event>> events;
        for (const std::string& key : keys) {
            std::vector<Event>& stored = events[key];
            if (const auto found = state.events.find(key); found != state.events.end()) {
                for (const Event& event : found->second) stored.push_back(AsStored(event));
            }
        }
        for (const Event& event : planned.plan.events) {
            events.at(event.out_trade_no).push_back(AsStored(event));
        }
        const projections::BatchPlan& plan = planned.plan;
        cache.Remember(state, plan.last_seq > 0 ? plan.last_seq + 1 : state.next_seq,
                       plan.last_receipt_id + 1, planned.head, std::move(events));
    } catch (...) {
        cache.Clear();
    }
}

using Clock = std::chrono::steady_clock;

// The batch in one round trip, planned from `cache` (WriteBatch). Empty when the cache does not
// know every order named, or was found wrong (then the block was rolled back and the cache
// cleared): the caller reads the state instead.
std::optional<std::vector<DeliveryResult>> WriteFromCache(pqxx::connection& connection,
                                                          std::span<const Delivery> deliveries,
                                                          const std::set<std::string>& keys,
                                                          WriterCache& cache, BatchStats* stats) {
    ChainValue head{};
    std::optional<projections::LedgerState> state = cache.StateFor(keys, head);
    if (!state) return std::nullopt;
    const Clock::time_point started = Clock::now();
    PlannedWrite planned = PlanWrite(deliveries, *state, head);
    std::vector<PipelineStatement> statements;
    statements.push_back({.sql = "BEGIN"});
    statements.push_back({.name = std::string(kBeginName),
                          .params = {BinaryInt8(kWriterLockKey), BinaryInt8(state->next_seq),
                                     BinaryInt8(state->next_receipt_id),
                                     std::string(reinterpret_cast<const char*>(head.data()),
                                                 head.size())}});
    statements.push_back({.name = std::string(kWriteName), .params = std::move(planned.params)});
    const Clock::time_point write_begins = Clock::now();
    std::vector<std::optional<std::string>> firsts;
    {
        TransactionBlock block{connection};
        try {
            firsts = block.OpenAndCommit(statements);
        } catch (const pqxx::sql_error& e) {
            // Written since (the check), or an order's state other than the cache's (the write's
            // own checks): nothing was committed. Anything else is the read path's failure too.
            const std::string sqlstate = e.sqlstate();
            if (!connection.is_open() || (sqlstate != kLedgerMoved && sqlstate != kAssertFailure &&
                                          sqlstate != kUniqueViolation)) {
                throw;
            }
            cache.Clear();
            return std::nullopt;  // The block rolls back as it goes.
        }
    }
    // Committed: nothing from here on may fail the batch (the committer would write it again).
    if (stats != nullptr) {
        std::int64_t lock_wait = 0;
        if (firsts.size() == 3 && firsts[1]) {
            const std::string& text = *firsts[1];
            (void)std::from_chars(text.data(), text.data() + text.size(), lock_wait);
        }
        stats->state_read = false;
        stats->lock_wait = std::chrono::microseconds(lock_wait);
        stats->read = Clock::duration::zero();
        stats->plan = write_begins - started;
        stats->write = Clock::now() - write_begins;
    }
    RememberCommitted(cache, keys, *state, planned);
    return ResultsOf(planned.plan);
}

}  // namespace

WriterCache::WriterCache(std::size_t orders_max) : generation_max_(std::max<std::size_t>(1, orders_max / 2)) {}

void WriterCache::Clear() {
    valid_ = false;
    Drop(newer_);
    Drop(older_);
}

void WriterCache::Drop(Generation& generation) {
    if (generation.empty()) return;
    if (dropped_.size() >= kDroppedMax) dropped_.erase(dropped_.begin());  // Nobody took it.
    dropped_.push_back(std::move(generation));
    generation = Generation{};
}

std::optional<projections::LedgerState> WriterCache::StateFor(const std::set<std::string>& keys,
                                                              ChainValue& head) {
    if (!valid_) return std::nullopt;
    projections::LedgerState state{.next_seq = next_seq_, .next_receipt_id = next_receipt_id_};
    for (const std::string& key : keys) {
        const std::vector<Event>* events = nullptr;
        if (const auto found = newer_.find(key); found != newer_.end()) {
            events = &found->second;
        } else if (const auto old = older_.find(key); old != older_.end()) {
            events = &old->second;
        } else {
            return std::nullopt;
        }
        if (!events->empty()) state.events.emplace(key, *events);
    }
    head = head_;
    return state;
}

void WriterCache::Remember(const projections::LedgerState& before, std::int64_t next_seq_after,
                           std::int64_t next_receipt_id_after, const ChainValue& head,
                           std::map<std::string, std::vector<Event>> events) {
    if (valid_ && (before.next_seq != next_seq_ || before.next_receipt_id != next_receipt_id_)) {
        Clear();  // Another writer's batches came in between: what it changed is unknown.
    }
    valid_ = true;
    next_seq_ = next_seq_after;
    next_receipt_id_ = next_receipt_id_after;
    head_ = head;
    for (auto& [key, stored] : events) {
        older_.erase(key);
        newer_.insert_or_assign(key, std::move(stored));
        if (newer_.size() >= generation_max_) {
            Drop(older_);
            older_ = std::move(newer_);
            newer_ = Generation{};
        }
    }
}

std::vector<DeliveryResult> WriteBatch(pqxx::connection& connection,
                                       std::span<const Delivery> deliveries, BatchStats* stats,
                                       WriterCache* cache) {
    PAYLEDGER_ASSERT(!deliveries.empty());
    std::set<std::string> keys;
    for (const Delivery& delivery : deliveries) {
        PAYLEDGER_ASSERT((delivery.verdict == Outcome::kAppended) == delivery.event.has_value());
        if (delivery.event) keys.insert(delivery.event->out_trade_no);
    }
    // The read runs by SQL EXECUTE, inside the first round trip's string, and the others by
    // libpq's own Bind (ExecPipelineThenCommit), so all must be on the server before (libpqxx
    // prepares a statement at its first exec_prepared otherwise); a no-op once done on this
    // connection.
    for (const Statement& statement : WriterStatements()) connection.prepare_now(statement.name);
    try {
        if (cache != nullptr) {
            if (std::optional<std::vector<DeliveryResult>> results =
                    WriteFromCache(connection, deliveries, keys, *cache, stats)) {
                return std::move(*results);
            }
        }
        const Clock::time_point started = Clock::now();
        TransactionBlock block{connection};
        pqxx::nontransaction& tx = block.session();
        std::string read_sql;
        read_sql.append(kBeginSql)
            .append(std::to_string(kWriterLockKey))
            .append("); EXECUTE ")
            .append(kReadStateName)
            .append("(")
            .append(tx.quote(TextArray(keys)))
            .append(")");
        const pqxx::result rows = block.Open(read_sql);
        const Clock::time_point read_done = Clock::now();
        PAYLEDGER_ASSERT(!rows.empty());
        if (stats != nullptr) {
            stats->state_read = true;
            stats->lock_wait = std::chrono::microseconds(rows[0][3].as<std::int64_t>());
        }
        projections::LedgerState state{.next_seq = rows[0][0].as<std::int64_t>(),
                                       .next_receipt_id = rows[0][1].as<std::int64_t>()};
        ChainValue chain = kChainStart;  // An empty ledger's.
        if (!rows[0][2].is_null()) {
            const pqxx::binarystring head{rows[0][2]};
            PAYLEDGER_ASSERT(head.size() == chain.size());
            std::copy(head.begin(), head.end(), chain.begin());
        }
        for (const pqxx::row& row : rows) {
            if (row[kFirstEventColumn].is_null()) continue;  // The LEFT JOIN's row: no event.
            Event event = EventFromRow(row, kFirstEventColumn);
            state.events[event.out_trade_no].push_back(std::move(event));
        }

        PlannedWrite planned = cache != nullptr ? PlanWrite(deliveries, state, chain)
                                                : PlanWrite(deliveries, std::move(state), chain);
        const Clock::time_point write_begins = Clock::now();
        try {
            block.CommitAfter(std::string(kWriteName), std::move(planned.params));
        } catch (const pqxx::sql_error& e) {
            if (e.sqlstate() != kAssertFailure && e.sqlstate() != kUniqueViolation) throw;
            throw InvariantError(e.what());  // Rolled back, as the contract says (writer.hpp).
        }
        if (stats != nullptr) {
            stats->read = read_done - started;
            stats->plan = write_begins - read_done;
            stats->write = Clock::now() - write_begins;
        }
        if (cache != nullptr) RememberCommitted(*cache, keys, state, planned);
        return ResultsOf(planned.plan);
    } catch (...) {
        // Not committed, or perhaps committed: the cache may no longer be the ledger.
        if (cache != nullptr) cache->Clear();
        throw;
    }
}

}  // namespace payledger::ledger
