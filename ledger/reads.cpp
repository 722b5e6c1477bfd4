#include "ledger/reads.hpp"

#include <algorithm>

#include "ledger/statements.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

std::string Select(const char* columns, const char* rest) {
    return std::string("SELECT ") + columns + " " + rest;
}

}  // namespace

const std::vector<Statement>& ReadStatements() {
    static const std::vector<Statement> statements = {
        {"read_order", Select(kOrderColumns, "FROM orders WHERE out_trade_no = $1")},
        {"read_order_events",
         Select(kEventColumns, "FROM ledger_events WHERE out_trade_no = $1 ORDER BY seq")},
        {"read_order_receipts",
         Select(kReceiptColumns,
                "FROM callback_receipts WHERE out_trade_no = $1 AND id > $2 ORDER BY id LIMIT $3")},
        {"read_balances",
         "SELECT account_id, currency, balance FROM balances WHERE account_id = $1 "
         "ORDER BY currency"},
        {"read_events_after",
         Select(kEventColumns, "FROM ledger_events WHERE seq > $1 ORDER BY seq LIMIT $2")},
        {"read_receipts_after",
         Select(kReceiptColumns, "FROM callback_receipts WHERE id > $1 ORDER BY id LIMIT $2")},
        {"read_receipts_after_of_outcome",
         Select(kReceiptColumns,
                "FROM callback_receipts WHERE id > $1 AND outcome = $3 ORDER BY id LIMIT $2")},
        // The pages just below a position (SPEC §5 before=), newest first; the readers put
        // them back in ascending order.
        {"read_order_receipts_before",
         Select(kReceiptColumns,
                "FROM callback_receipts WHERE out_trade_no = $1 AND id < $2 "
                "ORDER BY id DESC LIMIT $3")},
        {"read_events_before",
         Select(kEventColumns, "FROM ledger_events WHERE seq < $1 ORDER BY seq DESC LIMIT $2")},
        {"read_receipts_before",
         Select(kReceiptColumns, "FROM callback_receipts WHERE id < $1 ORDER BY id DESC LIMIT $2")},
        {"read_receipts_before_of_outcome",
         Select(kReceiptColumns,
                "FROM callback_receipts WHERE id < $1 AND outcome = $3 "
                "ORDER BY id DESC LIMIT $2")},
    };
    return statements;
}

std::optional<projections::OrderRow> ReadOrder(pqxx::transaction_base& tx,
                                               const std::string& out_trade_no) {
    const pqxx::result rows = tx.exec_prepared("read_order", out_trade_no);
    if (rows.empty()) return std::nullopt;
    return OrderFromRow(rows[0]);
}

std::vector<projections::Event> ReadOrderEvents(pqxx::transaction_base& tx,
                                                const std::string& out_trade_no) {
    std::vector<projections::Event> events;
    for (const pqxx::row& row : tx.exec_prepared("read_order_events", out_trade_no)) {
        events.push_back(EventFromRow(row));
    }
    return events;
}

std::vector<Receipt> ReadOrderReceipts(pqxx::transaction_base& tx,
                                       const std::string& out_trade_no, std::int64_t after,
                                       std::int64_t limit) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    std::vector<Receipt> receipts;
    for (const pqxx::row& row :
         tx.exec_prepared("read_order_receipts", out_trade_no, after, limit)) {
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
                                       std::optional<projections::Outcome> outcome) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    const pqxx::result rows = outcome
                                  ? tx.exec_prepared("read_receipts_after_of_outcome", after, limit,
                                                     std::string(projections::ToString(*outcome)))
                                  : tx.exec_prepared("read_receipts_after", after, limit);
    std::vector<Receipt> receipts;
    for (const pqxx::row& row : rows) receipts.push_back(ReceiptFromRow(row));
    return receipts;
}

std::vector<Receipt> ReadOrderReceiptsBefore(pqxx::transaction_base& tx,
                                             const std::string& out_trade_no, std::int64_t before,
                                             std::int64_t limit) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    std::vector<Receipt> receipts;
    for (const pqxx::row& row :
         tx.exec_prepared("read_order_receipts_before", out_trade_no, before, limit)) {
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
                                        std::optional<projections::Outcome> outcome) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    const pqxx::result rows =
        outcome ? tx.exec_prepared("read_receipts_before_of_outcome", before, limit,
                                   std::string(projections::ToString(*outcome)))
                : tx.exec_prepared("read_receipts_before", before, limit);
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
