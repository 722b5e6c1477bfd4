#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "projections/event.hpp"

namespace payledger::projections {

// `orders` (docs/events.md#projections): one row per order.
struct OrderRow {
    std::string out_trade_no{};
    std::string account_id{};
    std::int64_t amount = 0;
    std::string currency{};
    std::string status{};  // WAIT_PAY, PAID, CLOSED or REFUNDED.
    std::optional<std::string> transaction_id{};
    std::int64_t paid_amount = 0;
    std::int64_t refunded_amount = 0;
    std::vector<std::string> anomalies{};  // Sorted.
    std::int64_t seq = 0;                  // The last event applied.

    friend bool operator==(const OrderRow&, const OrderRow&) = default;
};

// `balances` (docs/events.md#balances): one row per (account_id, currency) with at least one order.
struct BalanceRow {
    std::string account_id{};
    std::string currency{};
    std::int64_t balance = 0;

    friend bool operator==(const BalanceRow&, const BalanceRow&) = default;
};

// Folds the events of one order into its row. The result depends only on the set of events,
// never on their order (docs/events.md#projections).
// REQUIRES: every event has the same out_trade_no, at most one of each type, and one of
// them is ORDER_CREATED. Throws InvariantError otherwise.
[[nodiscard]] OrderRow FoldOrder(std::span<const Event> events);

// What an order adds to its account's balance in its currency: the payment, less the refund
// when the order also has a payment.
[[nodiscard]] std::int64_t BalanceContribution(const OrderRow& order);

using BalanceKey = std::pair<std::string, std::string>;  // account_id, currency.

// Adds `order` to the balances it contributes to (creating a zero row when absent).
void AddToBalances(const OrderRow& order, std::map<BalanceKey, std::int64_t>& balances);

// The balances of many orders, summed in a hash table (one entry per account and currency)
// and sorted by key only once, at the end: for folding every order of the ledger.
class BalanceTotals {
public:
    void Add(const OrderRow& order);
    [[nodiscard]] std::map<BalanceKey, std::int64_t> Sorted() const;

private:
    std::unordered_map<std::string, std::int64_t> totals_;  // "account_id\tcurrency".
};

}  // namespace payledger::projections
