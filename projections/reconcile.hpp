#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "projections/event.hpp"

namespace payledger::projections {

// The categories of a reconciliation, in the order of the output lines
// (docs/reconciliation.md#output-and-exit-codes).
enum class Category {
    kMatched,
    kMissingInLedger,
    kMissingInBill,
    kAmountMismatch,
    kTransactionMismatch,
    kUnknownOrder,
    kPending,
    kApplied,
};
inline constexpr int kCategoryCount = 8;

[[nodiscard]] std::string_view ToString(Category category);

// One side of a (event type, out_trade_no) key: the platform's id and the money.
struct Side {
    std::string id{};  // Bill: the platform's id; ledger: the event's transaction_id.
    std::int64_t amount = 0;
    std::string currency{};
};

// What the ledger holds for the key of one bill entry.
struct LedgerFacts {
    std::optional<Side> order{};  // ORDER_CREATED's amount and currency, if registered.
    std::optional<Side> event{};  // The event of the entry's type, from any source and day.
};

// docs/reconciliation.md#matching for a bill entry: unknown_order, then pending (a refund not yet
// successful), then missing_in_ledger, transaction_mismatch, amount_mismatch (amount or currency),
// matched.
[[nodiscard]] Category ClassifyEntry(const Side& bill, bool pending, const LedgerFacts& ledger);

// --apply, with a callback's checks (docs/reconciliation.md#applying): why a missing_in_ledger
// entry may not be appended (a payment whose amount or currency is not the order's, a refund in
// another currency or above the order's amount), or nullopt when it may. REQUIRES: ledger.order is
// set.
[[nodiscard]] std::optional<std::string> ApplyRefusal(EventType type, const Side& bill,
                                                      const Side& order);

// "<id>:<amount>" for a side, "-" for a missing one (the output lines' bill= and ledger=).
[[nodiscard]] std::string SideText(const std::optional<Side>& side);

// One output line: "  <category> <event_type> <out_trade_no> bill=<..> ledger=<..>".
[[nodiscard]] std::string DifferenceLine(Category category, EventType type,
                                         std::string_view out_trade_no, std::string_view bill_text,
                                         std::string_view ledger_text);

}  // namespace payledger::projections
