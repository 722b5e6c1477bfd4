#include "ledger/query/order_queries.hpp"

#include <pqxx/nontransaction>

namespace payledger::ledger {
namespace {

// A text array literal of channel names (validated by the caller's enum: no quote can occur).
std::string ChannelArray(const std::vector<std::string>& channels) {
    std::string out = "{";
    for (const std::string& channel : channels) {
        if (out.size() > 1) out += ',';
        out += '"' + channel + '"';
    }
    return out + "}";
}

// The columns a DueQuery reads, from order_queries as `q`.
constexpr const char* kDueColumns =
    "q.out_trade_no, q.channel, q.step, q.next_action, "
    "(extract(epoch FROM q.expires_at) * 1000000)::bigint, q.close_refused, "
    "coalesce((SELECT o.status FROM orders AS o WHERE o.out_trade_no = q.out_trade_no), "
    "'WAIT_PAY'), (extract(epoch FROM now()) * 1000000)::bigint";

DueQuery DueFromRow(const pqxx::row& row) {
    return DueQuery{
        .out_trade_no = row[0].as<std::string>(),
        .channel = row[1].as<std::string>(),
        .step = row[2].as<std::int64_t>(),
        .next_action = row[3].as<std::string>(),
        .expires_at = row[4].is_null() ? std::nullopt : std::optional(row[4].as<std::int64_t>()),
        .close_refused = row[5].as<bool>(),
        .status = row[6].as<std::string>(),
        .database_now = row[7].as<std::int64_t>()};
}

}  // namespace

void WriteQuerySettings(pqxx::connection& connection, std::chrono::seconds first_after) {
    pqxx::work tx{connection};
    tx.exec_params(
        "INSERT INTO order_query_settings (id, first_after_seconds) VALUES (true, $1) "
        "ON CONFLICT (id) DO UPDATE SET first_after_seconds = EXCLUDED.first_after_seconds "
        "WHERE order_query_settings.first_after_seconds <> EXCLUDED.first_after_seconds",
        static_cast<std::int64_t>(first_after.count()));
    tx.commit();
}

std::vector<DueQuery> ClaimDueQueries(pqxx::connection& connection,
                                      const std::vector<std::string>& channels, std::size_t limit,
                                      std::chrono::milliseconds lease) {
    pqxx::work tx{connection};
    const pqxx::result rows = tx.exec_params(
        std::string("UPDATE order_queries AS q SET leased_until = now() + $3 * interval '1 ms' "
                    "WHERE q.out_trade_no IN ("
                    "    SELECT d.out_trade_no FROM order_queries AS d"
                    "    WHERE d.next_at <= now() AND d.channel = ANY ($1::text[])"
                    "      AND (d.leased_until IS NULL OR d.leased_until <= now())"
                    "    ORDER BY d.next_at LIMIT $2 FOR UPDATE SKIP LOCKED) "
                    "RETURNING ") +
            kDueColumns,
        ChannelArray(channels), static_cast<std::int64_t>(limit),
        static_cast<std::int64_t>(lease.count()));
    tx.commit();
    std::vector<DueQuery> due;
    due.reserve(rows.size());
    for (const pqxx::row& row : rows) due.push_back(DueFromRow(row));
    return due;
}

namespace {

void UpdateAttempt(pqxx::work& tx, const std::string& out_trade_no, const AttemptRecord& record) {
    tx.exec_params(
        "UPDATE order_queries SET "
        "attempts = attempts + CASE WHEN $2 THEN 1 ELSE 0 END, "
        "last_at = CASE WHEN $2 THEN now() ELSE last_at END, "
        "last_answer = CASE WHEN $2 THEN $3 ELSE last_answer END, "
        "step = $4, next_action = $5, "
        "next_at = to_timestamp($6::double precision / 1000000), "
        "close_refused = $7, "
        "closed_at = CASE WHEN $8 THEN coalesce(closed_at, now()) ELSE closed_at END, "
        "leased_until = NULL "
        "WHERE out_trade_no = $1",
        out_trade_no, record.asked, record.answer.substr(0, 256), record.step, record.next_action,
        record.next_at, record.close_refused, record.closed);
}

}  // namespace

void RecordAttempts(pqxx::connection& connection,
                    const std::vector<std::pair<std::string, AttemptRecord>>& records) {
    if (records.empty()) return;
    pqxx::work tx{connection};
    tx.exec("SET LOCAL synchronous_commit = off");
    for (const auto& [out_trade_no, record] : records) UpdateAttempt(tx, out_trade_no, record);
    tx.commit();
}

std::int64_t CountDueQueries(pqxx::connection& connection,
                             const std::vector<std::string>& channels) {
    pqxx::nontransaction tx{connection};
    return tx
        .exec_params(
            "SELECT count(*) FROM order_queries WHERE next_at <= now() "
            "AND channel = ANY ($1::text[])",
            ChannelArray(channels))[0][0]
        .as<std::int64_t>();
}

std::optional<DueQuery> ReadOrderQuery(pqxx::connection& connection,
                                       const std::string& out_trade_no) {
    pqxx::nontransaction tx{connection};
    const pqxx::result rows = tx.exec_params(
        std::string("SELECT ") + kDueColumns + " FROM order_queries AS q WHERE q.out_trade_no = $1",
        out_trade_no);
    if (rows.empty()) return std::nullopt;
    return DueFromRow(rows[0]);
}

}  // namespace payledger::ledger
