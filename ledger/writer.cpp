#include "ledger/writer.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "ledger/database.hpp"
#include "ledger/statements.hpp"
#include "ledger/storable_text.hpp"
#include "projections/assert.hpp"
#include "projections/decide.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger {
namespace {

using nlohmann::json;
using projections::Event;
using projections::EventType;
using projections::OrderRow;
using projections::Outcome;

// Reads, under the writer lock, the next ids of both sequences and the stored events of the
// orders named in $1 (a text array), in one round trip. Ids are taken from the sequences'
// state rather than nextval() so that they can be assigned while deciding; the write
// statement moves the sequences past them. Safe because every writer holds the lock.
// Plan-proof (issue 10): one index probe per order, whatever the statistics say. A plain
// `out_trade_no = ANY ($1)` is estimated at 1/200 of the table per key on a never-analyzed
// database (out_trade_no alone is not unique), so a few dozen keys made it a sequential
// scan. LIMIT 4 (one event per type, projections::kEventsPerOrderMax) keeps the lateral
// subquery from being flattened into a hash join: each key is an index range of at most 4.
constexpr const char* kReadStateSql = R"sql(
SELECT s.next_seq, s.next_receipt_id, e.*
FROM (SELECT (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
              FROM ledger_events_seq_seq) AS next_seq,
             (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
              FROM callback_receipts_id_seq) AS next_receipt_id) AS s
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

// One statement writes everything and reports how many rows each part touched, so that the
// caller can check them (SPEC §4: a row count other than expected aborts the transaction).
constexpr const char* kWriteSql = R"sql(
WITH r AS (
    INSERT INTO callback_receipts
        (id, source, received_at, peer, headers, body, outcome, seq, out_trade_no, message)
    SELECT id, source, 'epoch'::timestamptz + received_at * interval '1 microsecond', peer,
           headers::jsonb, decode(body, 'hex'), outcome, seq, out_trade_no, message
    FROM json_to_recordset($1::json) AS x(id bigint, source text, received_at bigint, peer text,
         headers text, body text, outcome text, seq bigint, out_trade_no text, message text)
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
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM e), (SELECT count(*) FROM o_new),
       (SELECT count(*) FROM o_upd), (SELECT count(*) FROM b),
       setval('callback_receipts_id_seq', $6::bigint),
       CASE WHEN $7::bigint > 0 THEN setval('ledger_events_seq_seq', $7::bigint) END
)sql";

}  // namespace

const std::vector<Statement>& WriterStatements() {
    static const std::vector<Statement> statements = {
        {"writer_lock", "SELECT pg_advisory_xact_lock($1)"},
        {"writer_read_state", kReadStateSql},
        {"writer_write", kWriteSql},
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

std::string Hex(const std::string& bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) {
        const auto byte = static_cast<unsigned char>(c);
        out += kDigits[byte >> 4];
        out += kDigits[byte & 0x0f];
    }
    return out;
}

json Nullable(const std::optional<std::string>& value) {
    return value ? json(*value) : json(nullptr);
}

json AnomaliesLiteral(const OrderRow& row) { return row.anomalies; }

// The receipt row as the writer stores it: the delivery's receipt with the id, outcome, seq
// and message this batch decided. Reads the body in place (a batch may hold megabytes of
// bodies: the receipt itself is never copied).
json ReceiptJson(const Receipt& receipt, std::int64_t id, const DeliveryResult& result) {
    const bool names_event =
        result.outcome == Outcome::kAppended || result.outcome == Outcome::kDuplicate;
    return {{"id", id},
            {"source", projections::ToString(receipt.source)},
            {"received_at", receipt.received_at},
            {"peer", WithoutNul(receipt.peer)},
            {"headers", JsonWithoutNul(receipt.headers)},
            {"body", Hex(receipt.body)},
            {"outcome", projections::ToString(result.outcome)},
            {"seq", names_event ? json(result.seq) : json(nullptr)},
            {"out_trade_no", Nullable(receipt.out_trade_no)},
            {"message", WithoutNul(result.message)}};
}

json EventJson(const Event& event) {
    const bool has_money = event.event_type != EventType::kPaymentClosed;
    return {{"seq", event.seq},
            {"out_trade_no", event.out_trade_no},
            {"event_type", projections::ToString(event.event_type)},
            {"source", projections::ToString(event.source)},
            {"account_id", event.account_id},
            {"amount", has_money ? json(event.amount) : json(nullptr)},
            {"currency", has_money ? json(event.currency) : json(nullptr)},
            {"transaction_id", Nullable(event.transaction_id)},
            {"occurred_at", event.occurred_at},
            {"receipt_id", event.receipt_id},
            {"data", JsonWithoutNul(event.data)}};
}

// The stored state of the orders a batch touches, and what the batch adds to it.
struct OrderState {
    std::vector<Event> events;
    std::optional<OrderRow> before;  // The row as stored, folded from the stored events.
    bool touched = false;
    bool credits_payment = false;
};

std::string DumpJson(const json& value) {
    // Replace rather than throw on invalid UTF-8: texts from the wire (peer, headers) are
    // evidence, not something to fail a batch over.
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::vector<DeliveryResult> WriteBatch(pqxx::connection& connection,
                                       std::span<const Delivery> deliveries, BatchStats* stats) {
    PAYLEDGER_ASSERT(!deliveries.empty());
    pqxx::work tx{connection};
    const auto lock_started = std::chrono::steady_clock::now();
    tx.exec_prepared("writer_lock", kWriterLockKey);
    if (stats != nullptr) stats->lock_wait = std::chrono::steady_clock::now() - lock_started;

    std::set<std::string> keys;
    for (const Delivery& delivery : deliveries) {
        PAYLEDGER_ASSERT((delivery.verdict == Outcome::kAppended) == delivery.event.has_value());
        if (delivery.event) keys.insert(delivery.event->out_trade_no);
    }
    const pqxx::result state = tx.exec_prepared("writer_read_state", TextArray(keys));
    PAYLEDGER_ASSERT(!state.empty());
    std::int64_t next_seq = state[0][0].as<std::int64_t>();
    std::int64_t next_receipt_id = state[0][1].as<std::int64_t>();
    std::map<std::string, OrderState> orders;
    for (const pqxx::row& row : state) {
        if (row[2].is_null()) continue;  // The LEFT JOIN's row when no event is stored.
        Event event = EventFromRow(row, 2);
        orders[event.out_trade_no].events.push_back(std::move(event));
    }
    for (auto& [key, order] : orders) {
        order.before = projections::FoldOrder(order.events);
    }

    std::vector<DeliveryResult> results;
    results.reserve(deliveries.size());
    json receipts = json::array();
    json events = json::array();
    for (const Delivery& delivery : deliveries) {
        const std::int64_t receipt_id = next_receipt_id++;
        DeliveryResult result{
            .outcome = delivery.verdict, .message = delivery.message, .receipt_id = receipt_id};
        if (delivery.event) {
            OrderState& order = orders[delivery.event->out_trade_no];
            projections::Decision decision =
                projections::Decide(order.events, *delivery.event, delivery.claims);
            result.outcome = decision.outcome;
            result.seq = decision.seq;
            result.message = std::move(decision.message);
            if (decision.outcome == Outcome::kAppended) {
                Event& event = decision.event;
                event.seq = next_seq++;
                event.receipt_id = receipt_id;
                result.seq = event.seq;
                events.push_back(EventJson(event));
                order.touched = true;
                order.credits_payment |= event.event_type == EventType::kPaymentSucceeded;
                order.events.push_back(std::move(event));
            }
            if (!order.events.empty()) {  // Stored events always include ORDER_CREATED.
                result.order = projections::FoldOrder(order.events);
            }
        }
        receipts.push_back(ReceiptJson(delivery.receipt, receipt_id, result));
        results.push_back(std::move(result));
    }

    json new_orders = json::array();
    json updated_orders = json::array();
    std::set<std::string> updated_keys;
    std::map<projections::BalanceKey, std::int64_t> deltas;
    for (const auto& [key, order] : orders) {
        if (!order.touched) continue;
        const OrderRow after = projections::FoldOrder(order.events);
        json row = {{"out_trade_no", after.out_trade_no},
                    {"status", after.status},
                    {"transaction_id", Nullable(after.transaction_id)},
                    {"paid_amount", after.paid_amount},
                    {"refunded_amount", after.refunded_amount},
                    {"anomalies", AnomaliesLiteral(after)},
                    {"seq", after.seq}};
        std::int64_t& delta = deltas[{after.account_id, after.currency}];
        delta += projections::BalanceContribution(after);
        if (order.before) {
            PAYLEDGER_ASSERT(order.before->account_id == after.account_id);
            PAYLEDGER_ASSERT(order.before->currency == after.currency);
            delta -= projections::BalanceContribution(*order.before);
            row["prev_seq"] = order.before->seq;
            row["credits_payment"] = order.credits_payment;
            updated_keys.insert(after.out_trade_no);
            updated_orders.push_back(std::move(row));
        } else {
            row["account_id"] = after.account_id;
            row["amount"] = after.amount;
            row["currency"] = after.currency;
            new_orders.push_back(std::move(row));
        }
    }
    json balance_rows = json::array();
    for (const auto& [key, delta] : deltas) {
        balance_rows.push_back(
            {{"account_id", key.first}, {"currency", key.second}, {"delta", delta}});
    }

    const pqxx::row counts = tx.exec_prepared1(
        "writer_write", DumpJson(receipts), DumpJson(events), DumpJson(new_orders),
        DumpJson(updated_orders), DumpJson(balance_rows), next_receipt_id - 1,
        events.empty() ? std::int64_t{0} : next_seq - 1, TextArray(updated_keys));
    PAYLEDGER_ASSERT(counts[0].as<std::size_t>() == receipts.size());
    PAYLEDGER_ASSERT(counts[1].as<std::size_t>() == events.size());
    PAYLEDGER_ASSERT(counts[2].as<std::size_t>() == new_orders.size());
    PAYLEDGER_ASSERT(counts[3].as<std::size_t>() == updated_orders.size());
    PAYLEDGER_ASSERT(counts[4].as<std::size_t>() == balance_rows.size());
    tx.commit();
    return results;
}

}  // namespace payledger::ledger
