#include "ledger/writer.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "ledger/chain.hpp"
#include "ledger/database.hpp"
#include "ledger/statements.hpp"
#include "ledger/storable_text.hpp"
#include "projections/assert.hpp"
#include "projections/plan.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger {
namespace {

using nlohmann::json;
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
// SQLSTATE assert_failure: payledger_expect_counts found a row count other than the plan's.
constexpr std::string_view kAssertFailure = "P0004";
// SQLSTATE unique_violation: a row the plan believed new exists (see kWriteSql).
constexpr std::string_view kUniqueViolation = "23505";

// One statement writes everything and checks how many rows each part touched against $10,
// the plan's counts (SPEC §4: a row count other than expected aborts the transaction).
// Events, receipts and new orders are plain INSERTs: the plan made them from what it read
// under the writer lock, so each is new, and one that exists (written behind the lock's back,
// or a plan that is wrong) fails the statement with a unique violation, which is the same
// invariant error as a wrong count. ON CONFLICT DO NOTHING, which only turned that into a
// wrong count, cost a speculative insertion per row (an arbiter index probe, and a WAL record
// that confirms the row): bench/write/run.sh measures about 5 us per event and per new
// order, 15-25 % of their inserts. Balances stay an upsert: their rows may exist.
constexpr const char* kWriteSql = R"sql(
WITH r AS (
    INSERT INTO callback_receipts
        (id, source, received_at, peer, headers, body, outcome, seq, out_trade_no, message,
         chain)
    SELECT id, source, 'epoch'::timestamptz + received_at * interval '1 microsecond', peer,
           headers::jsonb, substring($9::bytea FROM body_at + 1 FOR body_length), outcome, seq,
           out_trade_no, message, decode(chain, 'hex')
    FROM json_to_recordset($1::json) AS x(id bigint, source text, received_at bigint, peer text,
         headers text, body_at integer, body_length integer, outcome text, seq bigint,
         out_trade_no text, message text, chain text)
    RETURNING 1
), e AS (
    INSERT INTO ledger_events
        (seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id,
         occurred_at, receipt_id, data)
    SELECT seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id,
           'epoch'::timestamptz + occurred_at * interval '1 microsecond', receipt_id, data::jsonb
    FROM json_to_recordset($2::json) AS x(seq bigint, out_trade_no text, event_type text,
         source text, account_id text, amount bigint, currency text, transaction_id text,
         occurred_at bigint, receipt_id bigint, data text)
    RETURNING 1
), o_new AS (
    INSERT INTO orders (out_trade_no, account_id, amount, currency, status, transaction_id,
                        paid_amount, refunded_amount, anomalies, seq)
    SELECT out_trade_no, account_id, amount, currency, status, transaction_id, paid_amount,
           refunded_amount, anomalies, seq
    FROM json_to_recordset($3::json) AS x(out_trade_no text, account_id text, amount bigint,
         currency text, status text, transaction_id text, paid_amount bigint,
         refunded_amount bigint, anomalies text[], seq bigint)
    RETURNING 1
), o_upd AS (
    -- Second line of defence: an update matches only the row this batch read (same last
    -- seq), and one that credits a payment only an order without one. The keys in $8 make
    -- it an index probe per order: json_to_recordset is always estimated at 100 rows, and
    -- joined to a table believed small that is a hash join over a sequential scan.
    UPDATE orders AS o
    SET status = x.status, transaction_id = x.transaction_id, paid_amount = x.paid_amount,
        refunded_amount = x.refunded_amount, anomalies = x.anomalies, seq = x.seq
    FROM json_to_recordset($4::json) AS x(out_trade_no text, status text, transaction_id text,
         paid_amount bigint, refunded_amount bigint, anomalies text[], seq bigint,
         prev_seq bigint, credits_payment boolean)
    WHERE o.out_trade_no = ANY ($8::text[]) AND o.out_trade_no = x.out_trade_no
      AND o.seq = x.prev_seq AND (NOT x.credits_payment OR o.transaction_id IS NULL)
    RETURNING 1
), b AS (
    INSERT INTO balances AS b (account_id, currency, balance)
    SELECT account_id, currency, delta
    FROM json_to_recordset($5::json) AS x(account_id text, currency text, delta bigint)
    ON CONFLICT (account_id, currency) DO UPDATE SET balance = b.balance + EXCLUDED.balance
    RETURNING 1
)
SELECT payledger_expect_counts(
           ARRAY[(SELECT count(*) FROM r), (SELECT count(*) FROM e), (SELECT count(*) FROM o_new),
                 (SELECT count(*) FROM o_upd), (SELECT count(*) FROM b)],
           $10::bigint[]),
       setval('callback_receipts_id_seq', $6::bigint),
       CASE WHEN $7::bigint > 0 THEN setval('ledger_events_seq_seq', $7::bigint) END
)sql";

}  // namespace

const std::vector<Statement>& WriterStatements() {
    static const std::vector<Statement> statements = {
        {kReadStateName.data(), kReadStateSql},  // Both run by EXECUTE: see WriteBatch.
        {kWriteName.data(), kWriteSql},
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

// One JSON object of a parameter's array, written straight into the parameter's text: no
// DOM, so no allocation but for the members that need escapes (issue 10: nlohmann's objects,
// their maps and their destruction were a third of the writing thread's time).
class JsonRow {
public:
    explicit JsonRow(std::string& out) : out_(out) {
        if (!out_.empty()) out_ += ',';
        out_ += '{';
    }
    JsonRow(const JsonRow&) = delete;
    JsonRow& operator=(const JsonRow&) = delete;
    ~JsonRow() { out_ += '}'; }

    JsonRow& Int(std::string_view key, std::int64_t value) {
        Key(key);
        char digits[24];
        const auto end = std::to_chars(std::begin(digits), std::end(digits), value).ptr;
        out_.append(digits, end);
        return *this;
    }
    JsonRow& Bool(std::string_view key, bool value) {
        Key(key);
        out_ += value ? "true" : "false";
        return *this;
    }
    JsonRow& Null(std::string_view key) {
        Key(key);
        out_ += "null";
        return *this;
    }
    JsonRow& Text(std::string_view key, std::string_view text) {
        Key(key);
        AppendJsonString(out_, text);
        return *this;
    }
    JsonRow& NullableText(std::string_view key, const std::optional<std::string>& text) {
        return text ? Text(key, *text) : Null(key);
    }
    JsonRow& TextArray(std::string_view key, const std::vector<std::string>& texts) {
        Key(key);
        out_ += '[';
        for (std::size_t i = 0; i < texts.size(); ++i) {
            if (i > 0) out_ += ',';
            AppendJsonString(out_, texts[i]);
        }
        out_ += ']';
        return *this;
    }
    // Members rendered before (PreparedDelivery), "k":v,...
    JsonRow& Members(std::string_view members) {
        if (out_.back() != '{') out_ += ',';
        out_ += members;
        return *this;
    }
    // A member whose value is JSON rendered before.
    JsonRow& Rendered(std::string_view key, std::string_view json_value) {
        Key(key);
        out_ += json_value;
        return *this;
    }

    // Appends `text` as a JSON string. Most texts here are keys, names and digits, which need
    // no escape; the others (and any byte above ASCII, for the replacement of invalid UTF-8:
    // texts from the wire are evidence, not something to fail a batch over) go to nlohmann.
    static void AppendJsonString(std::string& out, std::string_view text) {
        const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
            const auto byte = static_cast<unsigned char>(c);
            return byte >= 0x20 && byte < 0x80 && c != '"' && c != '\\';
        });
        if (plain) {
            out += '"';
            out += text;
            out += '"';
            return;
        }
        out += json(text).dump(-1, ' ', false, json::error_handler_t::replace);
    }

private:
    void Key(std::string_view key) {
        if (out_.back() != '{') out_ += ',';
        out_ += '"';
        out_ += key;
        out_ += "\":";
    }

    std::string& out_;
};

PreparedDelivery Prepare(const Delivery& delivery) {
    const Receipt& received = delivery.receipt;
    PreparedDelivery prepared;
    std::string object;
    {
        JsonRow row{object};
        row.Text("source", projections::ToString(received.source))
            .Int("received_at", received.received_at)
            .Text("peer", WithoutNul(received.peer))
            .Text("headers", JsonWithoutNul(received.headers))
            .Int("body_length", static_cast<std::int64_t>(received.body.size()))
            .NullableText("out_trade_no", received.out_trade_no);
    }
    prepared.receipt_members = object.substr(1, object.size() - 2);  // Without the braces.
    if (delivery.event) {
        JsonRow::AppendJsonString(prepared.event_data, JsonWithoutNul(delivery.event->data));
    }
    prepared.body_sha256 = Sha256HexOf(received.body);
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

    // Runs `sql`, the block's last statements, and COMMIT, in one round trip. Like
    // pqxx::work::commit: a session lost while they were in flight leaves the outcome unknown
    // (pqxx::in_doubt_error, never retried); an error answered by the server means nothing was
    // committed (PostgreSQL skips the rest of the string, COMMIT included, after an error).
    void CommitAfter(std::string sql) {
        PAYLEDGER_ASSERT(open_);
        sql += "; COMMIT";
        try {
            session_.exec(sql);
        } catch (const pqxx::broken_connection& e) {
            open_ = false;  // Nothing to roll back on a lost session.
            throw pqxx::in_doubt_error(std::string("connection lost during COMMIT: ") + e.what());
        }
        // Done, as `sql` succeeded: a block that failed before would have thrown (a failed
        // block would answer COMMIT with a silent ROLLBACK).
        open_ = false;
    }

private:
    pqxx::nontransaction session_;
    bool open_ = false;
};

}  // namespace

void PrepareForWrite(Delivery& delivery) {
    if (!delivery.prepared) delivery.prepared = Prepare(delivery);
}

std::vector<DeliveryResult> WriteBatch(pqxx::connection& connection,
                                       std::span<const Delivery> deliveries, BatchStats* stats) {
    PAYLEDGER_ASSERT(!deliveries.empty());
    std::set<std::string> keys;
    for (const Delivery& delivery : deliveries) {
        PAYLEDGER_ASSERT((delivery.verdict == Outcome::kAppended) == delivery.event.has_value());
        if (delivery.event) keys.insert(delivery.event->out_trade_no);
    }
    // The read and the write run by SQL EXECUTE, inside the round trips' strings, so they must
    // be on the server before (libpqxx prepares a statement at its first exec_prepared
    // otherwise); a no-op once done on this connection.
    connection.prepare_now(std::string(kReadStateName));
    connection.prepare_now(std::string(kWriteName));
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
    PAYLEDGER_ASSERT(!rows.empty());
    if (stats != nullptr) {
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

    std::vector<projections::PlanInput> inputs;
    inputs.reserve(deliveries.size());
    for (const Delivery& delivery : deliveries) {
        inputs.push_back({.verdict = delivery.verdict,
                          .event = delivery.event ? &*delivery.event : nullptr,
                          .claims = &delivery.claims,
                          .message = delivery.message});
    }
    projections::BatchPlan plan = projections::PlanBatch(std::move(state), inputs);

    std::size_t bodies_size = 0;
    for (const Delivery& delivery : deliveries) bodies_size += delivery.receipt.body.size();
    PAYLEDGER_ASSERT(bodies_size <= static_cast<std::size_t>(INT32_MAX));  // substring()'s int.
    std::string bodies;
    bodies.reserve(bodies_size);
    // The parameters' JSON arrays, without their brackets until the end. A receipt's row is its
    // id, its place in `bodies`, what the plan made of it and its chain, then its prepared
    // members; an event's is what the plan decided, then its prepared data.
    std::string receipts;
    std::string events;
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
        {
            JsonRow row{receipts};
            row.Int("id", planned.receipt_id)
                .Int("body_at", static_cast<std::int64_t>(bodies.size()))
                .Text("outcome", projections::ToString(planned.outcome));
            if (seq) {
                row.Int("seq", *seq);
            } else {
                row.Null("seq");
            }
            row.Text("message", WithoutNul(planned.message))
                .Text("chain", ChainHex(chain))
                .Members(prepared.receipt_members);
        }
        bodies += received.body;
        if (event != nullptr) {
            // The plan's event is the delivered one as decided: its data is the delivery's.
            PAYLEDGER_ASSERT(delivery.event && event->data == delivery.event->data);
            JsonRow row{events};
            const bool has_money = event->event_type != EventType::kPaymentClosed;
            row.Int("seq", event->seq)
                .Text("out_trade_no", event->out_trade_no)
                .Text("event_type", projections::ToString(event->event_type))
                .Text("source", projections::ToString(event->source))
                .Text("account_id", event->account_id);
            if (has_money) {
                row.Int("amount", event->amount).Text("currency", event->currency);
            } else {
                row.Null("amount").Null("currency");
            }
            row.NullableText("transaction_id", event->transaction_id)
                .Int("occurred_at", event->occurred_at)
                .Int("receipt_id", event->receipt_id)
                .Rendered("data", prepared.event_data);
        }
    }
    PAYLEDGER_ASSERT(appended == plan.events.size());
    std::string new_orders;
    std::string updated_orders;
    std::size_t new_order_count = 0;
    std::set<std::string> updated_keys;
    for (const projections::OrderWrite& write : plan.orders) {
        const OrderRow& after = write.after;
        JsonRow row{write.prev_seq ? updated_orders : new_orders};
        row.Text("out_trade_no", after.out_trade_no)
            .Text("status", after.status)
            .NullableText("transaction_id", after.transaction_id)
            .Int("paid_amount", after.paid_amount)
            .Int("refunded_amount", after.refunded_amount)
            .TextArray("anomalies", after.anomalies)
            .Int("seq", after.seq);
        if (write.prev_seq) {
            row.Int("prev_seq", *write.prev_seq).Bool("credits_payment", write.credits_payment);
            updated_keys.insert(after.out_trade_no);
        } else {
            row.Text("account_id", after.account_id)
                .Int("amount", after.amount)
                .Text("currency", after.currency);
            ++new_order_count;
        }
    }
    std::string balance_rows;
    for (const auto& [key, delta] : plan.balance_deltas) {
        JsonRow{balance_rows}.Text("account_id", key.first).Text("currency", key.second).Int(
            "delta", delta);
    }

    // The write runs by EXECUTE, with its parameters as literals, so that COMMIT can follow
    // it in the same round trip; the statement checks its own row counts
    // (payledger_expect_counts, schema/0005) and fails before COMMIT when they differ.
    const std::string expected_counts =
        "{" + std::to_string(deliveries.size()) + "," + std::to_string(plan.events.size()) +
        "," + std::to_string(new_order_count) + "," + std::to_string(updated_keys.size()) + "," +
        std::to_string(plan.balance_deltas.size()) + "}";
    std::string write_sql = "EXECUTE " + std::string(kWriteName) + "(";
    for (const std::string* part :
         {&receipts, &events, &new_orders, &updated_orders, &balance_rows}) {
        write_sql.append(tx.quote("[" + *part + "]")).append(", ");
    }
    write_sql.append(std::to_string(plan.last_receipt_id))
        .append(", ")
        .append(std::to_string(plan.last_seq))
        .append(", ")
        .append(tx.quote(TextArray(updated_keys)))
        .append(", ")
        .append(tx.quote_raw(reinterpret_cast<const unsigned char*>(bodies.data()), bodies.size()))
        .append(", ")
        .append(tx.quote(expected_counts))
        .append(")");
    try {
        block.CommitAfter(std::move(write_sql));
    } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != kAssertFailure && e.sqlstate() != kUniqueViolation) throw;
        throw InvariantError(e.what());  // Rolled back, as the contract says (writer.hpp).
    }

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

}  // namespace payledger::ledger
