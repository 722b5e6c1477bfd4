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
// lock_wait: the time from just before the writer lock was asked for (the opening's
// set_config, kOpeningSql) to the read: the lock's wait. Not statement_timestamp(), which is
// when the whole query string arrived: an opening sent with the previous batch's COMMIT
// would count that batch's write too.
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
             (extract(epoch FROM clock_timestamp() -
                                 current_setting('payledger.lock_asked_at')::timestamptz) *
              1000000)::bigint AS lock_wait) AS s
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

// A batch's opening, one string of statements (issue 10: under load each round trip cost
// 0.4-0.9 ms, on 2 cores shared with PostgreSQL): opens the transaction, sets how its
// statements are planned, notes the time, takes the writer lock (SPEC §7) and runs the read,
// which is its own statement after the lock, so that its snapshot holds every batch committed
// before the lock was granted. The read's parameter follows as a literal, then ")". Sent on its
// own, or after the previous batch's write and COMMIT, in the same round trip (WriterSession).
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
constexpr std::string_view kOpeningSql =
    "BEGIN; SET LOCAL enable_seqscan = off; SET LOCAL jit = off; "
    "SET LOCAL plan_cache_mode = force_generic_plan; "
    "SELECT set_config('payledger.lock_asked_at', clock_timestamp()::text, true); "
    "SELECT pg_advisory_xact_lock(";
// An opening is sent with the previous batch's COMMIT only while that batch's lock was granted
// within this: the writer lock is then the committer's alone (see WriterSession::Write).
constexpr std::chrono::microseconds kChainedLockWaitMax{1000};
constexpr std::string_view kReadStateName = "writer_read_state";
constexpr std::string_view kWriteName = "writer_write";
// SQLSTATE assert_failure: payledger_expect_counts found a row count other than the plan's.
constexpr std::string_view kAssertFailure = "P0004";

// One statement writes everything and checks how many rows each part touched against $10,
// the plan's counts (SPEC §4: a row count other than expected aborts the transaction).
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
    ON CONFLICT ON CONSTRAINT ledger_events_one_per_type DO NOTHING
    RETURNING 1
), o_new AS (
    INSERT INTO orders (out_trade_no, account_id, amount, currency, status, transaction_id,
                        paid_amount, refunded_amount, anomalies, seq)
    SELECT out_trade_no, account_id, amount, currency, status, transaction_id, paid_amount,
           refunded_amount, anomalies, seq
    FROM json_to_recordset($3::json) AS x(out_trade_no text, account_id text, amount bigint,
         currency text, status text, transaction_id text, paid_amount bigint,
         refunded_amount bigint, anomalies text[], seq bigint)
    ON CONFLICT (out_trade_no) DO NOTHING
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

// The opening (kOpeningSql) of a batch that names the orders `keys`.
std::string OpeningSql(pqxx::nontransaction& tx, const std::set<std::string>& keys) {
    std::string sql;
    sql.append(kOpeningSql)
        .append(std::to_string(kWriterLockKey))
        .append("); EXECUTE ")
        .append(kReadStateName)
        .append("(")
        .append(tx.quote(TextArray(keys)))
        .append(")");
    return sql;
}

// The keys of the orders that `deliveries` name.
std::set<std::string> OrderKeys(std::span<const Delivery> deliveries) {
    std::set<std::string> keys;
    for (const Delivery& delivery : deliveries) {
        PAYLEDGER_ASSERT((delivery.verdict == Outcome::kAppended) == delivery.event.has_value());
        if (delivery.event) keys.insert(delivery.event->out_trade_no);
    }
    return keys;
}

// Whether the receipt `id` is stored with the chain value `chain`: the last receipt of a
// batch, whose chain covers every receipt before it (SPEC §11), so it tells whether that
// batch committed.
bool StoredWithChain(pqxx::nontransaction& tx, std::int64_t id, const ChainValue& chain) {
    const pqxx::result rows =
        tx.exec("SELECT EXISTS (SELECT 1 FROM callback_receipts WHERE id = " + std::to_string(id) +
                " AND chain = " + tx.quote_raw(chain.data(), chain.size()) + "::bytea)");
    return rows.at(0).at(0).as<bool>();
}

}  // namespace

// The transaction blocks of one session, one after another, on a nontransaction: BEGIN goes
// out with the lock and the read (an opening), COMMIT with the write, and with it, in the
// same round trip, the next block's opening or nothing. While a block is open and not
// committed, destroying this rolls it back, so that the connection is usable again (or,
// broken, replaced by the committer). libpqxx's own pqxx::work would send BEGIN and COMMIT in
// round trips of their own.
class TransactionBlock {
public:
    explicit TransactionBlock(pqxx::connection& connection) : session_(connection) {}
    TransactionBlock(const TransactionBlock&) = delete;
    TransactionBlock& operator=(const TransactionBlock&) = delete;
    ~TransactionBlock() {
        try {
            Rollback();
        } catch (...) {
            // The session is broken: the server ends the transaction with it, and the
            // committer connects again (IdleSessionEnded, or the next query's error).
        }
    }

    pqxx::nontransaction& session() { return session_; }
    [[nodiscard]] bool open() const { return open_; }

    // Runs an opening; returns its read's rows.
    pqxx::result Open(const std::string& sql) {
        PAYLEDGER_ASSERT(!open_ && sql.starts_with("BEGIN;"));
        open_ = true;  // Even if it fails: BEGIN may have arrived.
        return session_.exec(sql);
    }

    // Runs `sql`, the block's last statements, then COMMIT and `opening` (empty: none), in one
    // round trip; returns the opening's read. Like pqxx::work::commit: a session lost while
    // they were in flight leaves the outcome unknown (pqxx::in_doubt_error, never retried). An
    // error answered by the server skips the rest of the string: it came from `sql` or COMMIT
    // (nothing committed), or after the COMMIT from the opening; a block, aborted, is then
    // open (Rollback ends it).
    pqxx::result CommitAfter(std::string sql, const std::string& opening) {
        PAYLEDGER_ASSERT(open_);
        sql += "; COMMIT";
        if (!opening.empty()) {
            PAYLEDGER_ASSERT(opening.starts_with("BEGIN;"));
            sql.append("; ").append(opening);
        }
        pqxx::result rows;
        try {
            rows = session_.exec(sql);
        } catch (const pqxx::broken_connection& e) {
            open_ = false;  // Nothing to roll back on a lost session.
            throw pqxx::in_doubt_error(std::string("connection lost during COMMIT: ") + e.what());
        }
        // Done, as `sql` succeeded (a block that failed before would have thrown; a failed
        // block would answer COMMIT with a silent ROLLBACK), and the next one open if asked.
        open_ = !opening.empty();
        return rows;
    }

    // Ends the open block, if any, without committing it.
    void Rollback() {
        if (!open_) return;
        open_ = false;
        session_.exec("ROLLBACK");
    }

private:
    pqxx::nontransaction session_;
    bool open_ = false;
};

WriterSession::WriterSession(pqxx::connection& connection)
    : connection_(connection), block_(std::make_unique<TransactionBlock>(connection)) {}

WriterSession::~WriterSession() = default;

void PrepareForWrite(Delivery& delivery) {
    if (!delivery.prepared) delivery.prepared = Prepare(delivery);
}

std::vector<DeliveryResult> WriteBatch(pqxx::connection& connection,
                                       std::span<const Delivery> deliveries, BatchStats* stats) {
    WriterSession session{connection};
    return session.Write(deliveries, {}, stats);
}

std::vector<DeliveryResult> WriterSession::Write(std::span<const Delivery> deliveries,
                                                 const TakeNext& take_next, BatchStats* stats) {
    PAYLEDGER_ASSERT(!deliveries.empty());
    // The read and the write run by SQL EXECUTE, inside the round trips' strings, so they must
    // be on the server before (libpqxx prepares a statement at its first exec_prepared
    // otherwise); a no-op once done on this connection.
    connection_.prepare_now(std::string(kReadStateName));
    connection_.prepare_now(std::string(kWriteName));
    TransactionBlock& block = *block_;
    pqxx::nontransaction& tx = block.session();
    // Opened with the previous batch's COMMIT, or now.
    const bool opened = block.open() && opened_first_ == deliveries.data() &&
                        opened_size_ == deliveries.size();
    pqxx::result rows = std::move(opened_rows_);
    opened_first_ = nullptr;
    opened_size_ = 0;
    opened_rows_ = pqxx::result{};
    if (!opened) {
        block.Rollback();  // An opening for other deliveries (none in the committer's use).
        rows = block.Open(OpeningSql(tx, OrderKeys(deliveries)));
    }
    PAYLEDGER_ASSERT(!rows.empty());
    const std::chrono::microseconds lock_wait{rows[0][3].as<std::int64_t>()};
    if (stats != nullptr) stats->lock_wait = lock_wait;
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
    std::vector<DeliveryResult> results;
    results.reserve(plan.deliveries.size());
    for (projections::PlannedDelivery& planned : plan.deliveries) {
        results.push_back({.outcome = planned.outcome,
                           .seq = planned.seq,
                           .message = std::move(planned.message),
                           .order = std::move(planned.order),
                           .receipt_id = planned.receipt_id});
    }

    // The next batch, opened in this COMMIT's round trip, while the writer lock is the
    // committer's alone: when another writer waited for it too, this batch's answers would
    // wait for that writer's batch (the string's reply comes after its last statement).
    std::span<const Delivery> next;
    if (take_next && lock_wait < kChainedLockWaitMax) next = take_next();
    const std::string opening = next.empty() ? std::string{} : OpeningSql(tx, OrderKeys(next));
    try {
        pqxx::result next_rows = block.CommitAfter(std::move(write_sql), opening);
        if (!next.empty()) {
            opened_first_ = next.data();
            opened_size_ = next.size();
            opened_rows_ = std::move(next_rows);
        }
    } catch (const pqxx::sql_error& e) {
        if (next.empty()) {
            try {
                block.Rollback();  // Nothing was committed.
            } catch (...) {
                // A lost session: the server ends the transaction, the committer reconnects.
            }
            if (e.sqlstate() != kAssertFailure) throw;
            throw InvariantError(e.what());  // Rolled back, as the contract says (writer.hpp).
        }
        // The write or COMMIT failed (nothing committed), or the opening after the COMMIT
        // did: the batch's last receipt tells which. Unknown when that cannot be asked.
        bool committed = false;
        try {
            block.Rollback();
            committed = StoredWithChain(tx, plan.last_receipt_id, chain);
        } catch (const std::exception& check) {
            throw pqxx::in_doubt_error(std::string("the batch's COMMIT or the next opening "
                                                   "failed (") +
                                       e.what() + "), and its outcome could not be read: " +
                                       check.what());
        }
        if (!committed) {
            if (e.sqlstate() != kAssertFailure) throw;
            throw InvariantError(e.what());
        }
        // Committed: the next batch is opened again by its own Write.
    }
    return results;
}

}  // namespace payledger::ledger
