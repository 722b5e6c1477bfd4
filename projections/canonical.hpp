#pragma once

#include <string>

#include "projections/order_fold.hpp"

namespace payledger::projections {

// Canonical form (docs/events.md#canonical-digests): one row per line, fields separated by a tab,
// ending in "\n", null written as the empty string. Digests hash these lines in key order (byte
// order).
//   orders:   out_trade_no account_id currency amount status transaction_id paid_amount
//             refunded_amount anomalies (joined with ",")
//   balances: account_id currency balance
[[nodiscard]] std::string CanonicalLine(const OrderRow& order);
// The same, appended to `out` (no allocation when `out` has room).
void AppendCanonicalLine(const OrderRow& order, std::string& out);
[[nodiscard]] std::string CanonicalLine(const BalanceRow& balance);

// What differs between the row folded from the events and the live row of the same key, for
// a person ("status PAID, live WAIT_PAY; paid_amount 100, live 0"); empty when equal.
[[nodiscard]] std::string Differences(const OrderRow& folded, const OrderRow& live);

}  // namespace payledger::projections
