#include "ledger/reads.hpp"

#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

std::string Select(const char* columns, const char* rest) {
    return std::string("SELECT ") + columns + " " + rest;
}

}  // namespace

std::optional<projections::OrderRow> ReadOrder(pqxx::transaction_base& tx,
                                               const std::string& out_trade_no) {
    const pqxx::result rows =
        tx.exec_params(Select(kOrderColumns, "FROM orders WHERE out_trade_no = $1"), out_trade_no);
    if (rows.empty()) return std::nullopt;
    return OrderFromRow(rows[0]);
}

std::vector<projections::Event> ReadOrderEvents(pqxx::transaction_base& tx,
                                                const std::string& out_trade_no) {
    std::vector<projections::Event> events;
    for (const pqxx::row& row : tx.exec_params(
             Select(kEventColumns, "FROM ledger_events WHERE out_trade_no = $1 ORDER BY seq"),
             out_trade_no)) {
        events.push_back(EventFromRow(row));
    }
    return events;
}

std::vector<Receipt> ReadOrderReceipts(pqxx::transaction_base& tx,
                                       const std::string& out_trade_no) {
    std::vector<Receipt> receipts;
    for (const pqxx::row& row : tx.exec_params(
             Select(kReceiptColumns, "FROM callback_receipts WHERE out_trade_no = $1 ORDER BY id"),
             out_trade_no)) {
        receipts.push_back(ReceiptFromRow(row));
    }
    return receipts;
}

std::vector<projections::BalanceRow> ReadBalances(pqxx::transaction_base& tx,
                                                  const std::string& account_id) {
    std::vector<projections::BalanceRow> balances;
    for (const pqxx::row& row :
         tx.exec_params("SELECT account_id, currency, balance FROM balances WHERE account_id = $1 "
                        "ORDER BY currency",
                        account_id)) {
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
    for (const pqxx::row& row : tx.exec_params(
             Select(kEventColumns, "FROM ledger_events WHERE seq > $1 ORDER BY seq LIMIT $2"),
             after, limit)) {
        events.push_back(EventFromRow(row));
    }
    return events;
}

std::vector<Receipt> ReadReceiptsAfter(pqxx::transaction_base& tx, std::int64_t after,
                                       std::int64_t limit,
                                       std::optional<projections::Outcome> outcome) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    std::optional<std::string> outcome_text;
    if (outcome) outcome_text = std::string(projections::ToString(*outcome));
    std::vector<Receipt> receipts;
    for (const pqxx::row& row : tx.exec_params(
             Select(kReceiptColumns,
                    "FROM callback_receipts WHERE id > $1 AND ($3::text IS NULL OR outcome = $3) "
                    "ORDER BY id LIMIT $2"),
             after, limit, outcome_text)) {
        receipts.push_back(ReceiptFromRow(row));
    }
    return receipts;
}

void ForEachEvent(pqxx::transaction_base& tx, std::int64_t after,
                  const std::optional<std::string>& out_trade_no,
                  const std::function<bool(const projections::Event&)>& each) {
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
