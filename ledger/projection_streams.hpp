#pragma once

#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "projections/event.hpp"
#include "projections/order_fold.hpp"

namespace payledger::ledger {

// Splits one line of PostgreSQL's COPY text format into fields (nullopt for \N), undoing
// its backslash escapes. The line may end in "\n".
[[nodiscard]] std::vector<std::optional<std::string>> SplitCopyLine(std::string_view line);

// Streams every event of the transaction's snapshot, ordered by out_trade_no in byte order
// (COPY, constant memory), and folds each order with projections::FoldOrder.
class FoldedOrderStream {
public:
    explicit FoldedOrderStream(pqxx::transaction_base& tx);

    // The next order folded from its events, in out_trade_no byte order; nullopt at the end.
    [[nodiscard]] std::optional<projections::OrderRow> Next();

    [[nodiscard]] std::int64_t events_read() const { return events_read_; }

private:
    std::optional<projections::Event> ReadEvent();

    pqxx::stream_from stream_;
    std::string line_{};
    std::optional<projections::Event> pending_{};
    std::vector<projections::Event> order_events_{};
    std::int64_t events_read_ = 0;
    bool exhausted_ = false;
    bool done_ = false;
};

// Streams the live `orders` projection (or `table`) in out_trade_no byte order.
class LiveOrderStream {
public:
    LiveOrderStream(pqxx::transaction_base& tx, const std::string& table = "orders");
    [[nodiscard]] std::optional<projections::OrderRow> Next();

private:
    pqxx::stream_from stream_;
    std::string line_{};
    bool exhausted_ = false;
};

// Streams the live `balances` projection in (account_id, currency) byte order.
class LiveBalanceStream {
public:
    explicit LiveBalanceStream(pqxx::transaction_base& tx);
    [[nodiscard]] std::optional<projections::BalanceRow> Next();

private:
    pqxx::stream_from stream_;
    std::string line_{};
    bool exhausted_ = false;
};

}  // namespace payledger::ledger
