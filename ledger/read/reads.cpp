#include "ledger/read/reads.hpp"

#include <algorithm>

#include "ledger/pg/statements.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

std::string Select(const char* columns, const char* rest) {
    return std::string("SELECT ") + columns + " " + rest;
}

// A page of receipts: at most `limit` of callback_receipts AS r matching `where`, by id in
// `direction` (ASC or DESC), cut before the first whose body would take the bodies returned
// past `bytes_max` (at least one is returned). So a page of 1000 receipts of 64 KiB each is
// never read into memory whole, here or in the client library: the sizes are summed from the
// values' headers, and only the bodies of the rows returned are read. The cut keeps a prefix
// of the page, so the cursor of the last row returned (or, read backwards, the first) goes on.
std::string ReceiptPage(const char* where, const char* direction, const char* limit,
                        const char* bytes_max) {
    return std::string("SELECT ") + kReceiptColumns +
           " FROM (SELECT p.*, row_number() OVER w AS n, sum(p.body_bytes) OVER w AS bytes_through"
           " FROM (SELECT r.*, " +
           kReceiptBodyBytes +
           " AS body_bytes"
           " FROM callback_receipts AS r WHERE " +
           where + " ORDER BY r.id " + direction + " LIMIT " + limit +
           ") AS p"
           " WINDOW w AS (ORDER BY p.id " +
           direction +
           " ROWS UNBOUNDED PRECEDING)) AS r"
           " WHERE r.n = 1 OR r.bytes_through <= " +
           bytes_max +
           "::bigint"
           " ORDER BY r.id " +
           direction;
}

}  // namespace

const std::vector<Statement>& ReadStatements() {
    static const std::vector<Statement> statements = {
        {"read_order", Select(kOrderColumns, "FROM orders WHERE out_trade_no = $1")},
        {"read_order_view",
         "SELECT o.*, e.data::text, q.out_trade_no IS NOT NULL, q.attempts, "
         "(extract(epoch FROM q.last_at) * 1000000)::bigint, q.last_answer, "
         "(extract(epoch FROM q.next_at) * 1000000)::bigint, "
         "(extract(epoch FROM q.closed_at) * 1000000)::bigint "
         "FROM (" +
             Select(kOrderColumns, "FROM orders WHERE out_trade_no = $1") +
             ") AS o "
             "LEFT JOIN ledger_events AS e "
             "ON e.out_trade_no = $1 AND e.event_type = 'ORDER_CREATED' "
             "LEFT JOIN order_queries AS q ON q.out_trade_no = $1"},
        {"read_order_events",
         Select(kEventColumns, "FROM ledger_events WHERE out_trade_no = $1 ORDER BY seq")},
        {"read_order_receipts",
         ReceiptPage("r.out_trade_no = $1 AND r.id > $2", "ASC", "$3", "$4")},
        {"read_balances",
         "SELECT account_id, currency, balance FROM balances WHERE account_id = $1 "
         "ORDER BY currency"},
        {"read_events_after",
         Select(kEventColumns, "FROM ledger_events WHERE seq > $1 ORDER BY seq LIMIT $2")},
        {"read_receipts_after", ReceiptPage("r.id > $1", "ASC", "$2", "$3")},
        {"read_receipts_after_of_outcome",
         ReceiptPage("r.id > $1 AND r.outcome = $3", "ASC", "$2", "$4")},
        // The pages just below a position (before=, docs/api.md#feeds-and-paging), newest first;
        // the readers put them back in ascending order.
        {"read_order_receipts_before",
         ReceiptPage("r.out_trade_no = $1 AND r.id < $2", "DESC", "$3", "$4")},
        {"read_events_before",
         Select(kEventColumns, "FROM ledger_events WHERE seq < $1 ORDER BY seq DESC LIMIT $2")},
        {"read_receipts_before", ReceiptPage("r.id < $1", "DESC", "$2", "$3")},
        {"read_receipts_before_of_outcome",
         ReceiptPage("r.id < $1 AND r.outcome = $3", "DESC", "$2", "$4")},
    };
    return statements;
}

std::optional<projections::OrderRow> ReadOrder(pqxx::transaction_base& tx,
                                               const std::string& out_trade_no) {
    const pqxx::result rows = tx.exec_prepared("read_order", out_trade_no);
    if (rows.empty()) return std::nullopt;
    return OrderFromRow(rows[0]);
}

std::optional<OrderView> ReadOrderView(pqxx::transaction_base& tx,
                                       const std::string& out_trade_no) {
    const pqxx::result rows = tx.exec_prepared("read_order_view", out_trade_no);
    if (rows.empty()) return std::nullopt;
    const pqxx::row& row = rows[0];
    constexpr pqxx::row::size_type kFirst = 10;  // After kOrderColumns' ten.
    const auto time = [&](pqxx::row::size_type column) -> std::optional<projections::TimeMicros> {
        if (row[column].is_null()) return std::nullopt;
        return row[column].as<std::int64_t>();
    };
    OrderView view{.order = OrderFromRow(row)};
    if (!row[kFirst].is_null()) view.registered_data = row[kFirst].as<std::string>();
    if (row[kFirst + 1].as<bool>()) {
        view.query =
            QueryState{.attempts = row[kFirst + 2].as<std::int64_t>(),
                       .last_at = time(kFirst + 3),
                       .last_answer = row[kFirst + 4].is_null()
                                          ? std::nullopt
                                          : std::optional(row[kFirst + 4].as<std::string>()),
                       .next_at = time(kFirst + 5),
                       .closed_at = time(kFirst + 6)};
    }
    return view;
}

std::vector<projections::Event> ReadOrderEvents(pqxx::transaction_base& tx,
                                                const std::string& out_trade_no) {
    std::vector<projections::Event> events;
    for (const pqxx::row& row : tx.exec_prepared("read_order_events", out_trade_no)) {
        events.push_back(EventFromRow(row));
    }
    return events;
}

std::vector<Receipt> ReadOrderReceipts(pqxx::transaction_base& tx, const std::string& out_trade_no,
                                       std::int64_t after, std::int64_t limit,
                                       std::int64_t body_bytes_max) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    std::vector<Receipt> receipts;
    for (const pqxx::row& row :
         tx.exec_prepared("read_order_receipts", out_trade_no, after, limit, body_bytes_max)) {
        receipts.push_back(ReceiptFromRow(row));
    }
    return receipts;
}

std::vector<projections::BalanceRow> ReadBalances(pqxx::transaction_base& tx,
                                                  const std::string& account_id) {
    std::vector<projections::BalanceRow> balances;
    for (const pqxx::row& row : tx.exec_prepared("read_balances", account_id)) {
        balances.push_back({.account_id = row[0].as<std::string>(),
                            .currency = row[1].as<std::string>(),
                            .balance = row[2].as<std::int64_t>()});
    }
    return balances;
}

std::int64_t ReadFeedHead(pqxx::transaction_base& tx) {
    // An Index Only Scan Backward on ledger_events_pkey: a few buffers whatever the size.
    return tx.exec("SELECT coalesce(max(seq), 0) FROM ledger_events")[0][0].as<std::int64_t>();
}

std::vector<projections::Event> ReadEventsAfter(pqxx::transaction_base& tx, std::int64_t after,
                                                std::int64_t limit) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    std::vector<projections::Event> events;
    for (const pqxx::row& row : tx.exec_prepared("read_events_after", after, limit)) {
        events.push_back(EventFromRow(row));
    }
    return events;
}

std::vector<Receipt> ReadReceiptsAfter(pqxx::transaction_base& tx, std::int64_t after,
                                       std::int64_t limit,
                                       std::optional<projections::Outcome> outcome,
                                       std::int64_t body_bytes_max) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    const pqxx::result rows =
        outcome ? tx.exec_prepared("read_receipts_after_of_outcome", after, limit,
                                   std::string(projections::ToString(*outcome)), body_bytes_max)
                : tx.exec_prepared("read_receipts_after", after, limit, body_bytes_max);
    std::vector<Receipt> receipts;
    for (const pqxx::row& row : rows) receipts.push_back(ReceiptFromRow(row));
    return receipts;
}

std::vector<Receipt> ReadOrderReceiptsBefore(pqxx::transaction_base& tx,
                                             const std::string& out_trade_no, std::int64_t before,
                                             std::int64_t limit, std::int64_t body_bytes_max) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    std::vector<Receipt> receipts;
    for (const pqxx::row& row : tx.exec_prepared("read_order_receipts_before", out_trade_no, before,
                                                 limit, body_bytes_max)) {
        receipts.push_back(ReceiptFromRow(row));
    }
    std::reverse(receipts.begin(), receipts.end());
    return receipts;
}

std::vector<projections::Event> ReadEventsBefore(pqxx::transaction_base& tx, std::int64_t before,
                                                 std::int64_t limit) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    std::vector<projections::Event> events;
    for (const pqxx::row& row : tx.exec_prepared("read_events_before", before, limit)) {
        events.push_back(EventFromRow(row));
    }
    std::reverse(events.begin(), events.end());
    return events;
}

std::vector<Receipt> ReadReceiptsBefore(pqxx::transaction_base& tx, std::int64_t before,
                                        std::int64_t limit,
                                        std::optional<projections::Outcome> outcome,
                                        std::int64_t body_bytes_max) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    const pqxx::result rows =
        outcome ? tx.exec_prepared("read_receipts_before_of_outcome", before, limit,
                                   std::string(projections::ToString(*outcome)), body_bytes_max)
                : tx.exec_prepared("read_receipts_before", before, limit, body_bytes_max);
    std::vector<Receipt> receipts;
    for (const pqxx::row& row : rows) receipts.push_back(ReceiptFromRow(row));
    std::reverse(receipts.begin(), receipts.end());
    return receipts;
}

void ForEachEvent(pqxx::transaction_base& tx, std::int64_t after,
                  const std::optional<std::string>& out_trade_no,
                  const std::function<bool(const projections::Event&)>& each) {
    // Not prepared: planned with the actual parameters, so one order's export uses the
    // out_trade_no index and the whole export the seq order.
    const std::string sql = Select(kEventColumns,
                                   "FROM ledger_events WHERE seq > $1 "
                                   "AND ($2::text IS NULL OR out_trade_no = $2) "
                                   "ORDER BY seq LIMIT $3");
    for (;;) {
        const pqxx::result rows = tx.exec_params(sql, after, out_trade_no, kPageSizeMax);
        for (const pqxx::row& row : rows) {
            const projections::Event event = EventFromRow(row);
            after = event.seq;
            if (!each(event)) return;
        }
        if (rows.size() < static_cast<std::size_t>(kPageSizeMax)) return;
    }
}

}  // namespace payledger::ledger
