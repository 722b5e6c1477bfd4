#include "projections/reconcile.hpp"

#include <array>
#include <utility>

#include "projections/assert.hpp"

namespace payledger::projections {
namespace {

constexpr std::array<std::pair<Category, std::string_view>, kCategoryCount> kCategoryNames{{
    {Category::kMatched, "matched"},
    {Category::kMissingInLedger, "missing_in_ledger"},
    {Category::kMissingInBill, "missing_in_bill"},
    {Category::kAmountMismatch, "amount_mismatch"},
    {Category::kTransactionMismatch, "transaction_mismatch"},
    {Category::kUnknownOrder, "unknown_order"},
    {Category::kPending, "pending"},
    {Category::kApplied, "applied"},
}};

}  // namespace

std::string_view ToString(Category category) {
    for (const auto& [candidate, name] : kCategoryNames) {
        if (candidate == category) return name;
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

Category ClassifyEntry(const Side& bill, bool pending, const LedgerFacts& ledger) {
    // An entry for an order the ledger never registered is unknown_order, pending or not:
    // a refund of an unknown order is a difference to look at, never something to wait for.
    if (!ledger.order) return Category::kUnknownOrder;
    // The bill does not claim a pending refund settled: nothing to compare yet.
    if (pending) return Category::kPending;
    if (!ledger.event) return Category::kMissingInLedger;
    // Another platform id is another payment or refund, whatever the amounts say.
    if (ledger.event->id != bill.id) return Category::kTransactionMismatch;
    if (ledger.event->amount != bill.amount || ledger.event->currency != bill.currency) {
        return Category::kAmountMismatch;
    }
    return Category::kMatched;
}

std::optional<std::string> ApplyRefusal(EventType type, const Side& bill, const Side& order) {
    if (bill.currency != order.currency) {
        return "the bill's currency " + bill.currency + " differs from the order's " +
               order.currency;
    }
    switch (type) {
        case EventType::kPaymentSucceeded:
            if (bill.amount != order.amount) {
                return "the bill's payment amount " + std::to_string(bill.amount) +
                       " differs from the order amount " + std::to_string(order.amount);
            }
            return std::nullopt;
        case EventType::kRefundSucceeded:
            if (bill.amount > order.amount) {
                return "the bill's refund amount " + std::to_string(bill.amount) +
                       " exceeds the order amount " + std::to_string(order.amount);
            }
            return std::nullopt;
        case EventType::kOrderCreated:
        case EventType::kPaymentClosed:
            break;
    }
    PAYLEDGER_ASSERT(false);  // Bills hold payments and refunds only.
    return std::nullopt;
}

std::string SideText(const std::optional<Side>& side) {
    if (!side) return "-";
    return side->id + ":" + std::to_string(side->amount);
}

std::string DifferenceLine(Category category, EventType type, std::string_view out_trade_no,
                           std::string_view bill_text, std::string_view ledger_text) {
    std::string line = "  ";
    line += ToString(category);
    line += ' ';
    line += ToString(type);
    line += ' ';
    line += out_trade_no;
    line += " bill=";
    line += bill_text;
    line += " ledger=";
    line += ledger_text;
    return line;
}

}  // namespace payledger::projections
