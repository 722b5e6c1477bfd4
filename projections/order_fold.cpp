#include "projections/order_fold.hpp"

#include <algorithm>
#include <array>

#include "projections/assert.hpp"

namespace payledger::projections {
namespace {

std::size_t IndexOf(EventType type) {
    switch (type) {
        case EventType::kOrderCreated:
            return 0;
        case EventType::kPaymentSucceeded:
            return 1;
        case EventType::kPaymentClosed:
            return 2;
        case EventType::kRefundSucceeded:
            return 3;
    }
    PAYLEDGER_ASSERT(false);
    return 0;
}

}  // namespace

OrderRow FoldOrder(std::span<const Event> events) {
    PAYLEDGER_ASSERT(!events.empty());
    PAYLEDGER_ASSERT(events.size() <= static_cast<std::size_t>(kEventsPerOrderMax));
    // Index the set by type first, so nothing below depends on the order of `events`.
    std::array<const Event*, kEventsPerOrderMax> by_type{};
    std::int64_t last_seq = 0;
    for (const Event& event : events) {
        PAYLEDGER_ASSERT(event.out_trade_no == events.front().out_trade_no);
        const Event*& slot = by_type.at(IndexOf(event.event_type));
        PAYLEDGER_ASSERT(slot == nullptr);  // The database's UNIQUE, checked a second time.
        slot = &event;
        last_seq = std::max(last_seq, event.seq);
    }
    const Event* created = by_type[IndexOf(EventType::kOrderCreated)];
    const Event* payment = by_type[IndexOf(EventType::kPaymentSucceeded)];
    const Event* close = by_type[IndexOf(EventType::kPaymentClosed)];
    const Event* refund = by_type[IndexOf(EventType::kRefundSucceeded)];
    PAYLEDGER_ASSERT(created != nullptr);

    OrderRow row{
        .out_trade_no = created->out_trade_no,
        .account_id = created->account_id,
        .amount = created->amount,
        .currency = created->currency,
        .seq = last_seq,
    };
    if (refund != nullptr && payment != nullptr) {
        row.status = "REFUNDED";
    } else if (payment != nullptr) {
        row.status = "PAID";
    } else if (close != nullptr) {
        row.status = "CLOSED";
    } else {
        row.status = "WAIT_PAY";
    }
    if (payment != nullptr) {
        row.transaction_id = payment->transaction_id;
        row.paid_amount = payment->amount;
    }
    if (refund != nullptr) {
        row.refunded_amount = refund->amount;
    }
    // Listed in sorted order.
    if (payment != nullptr && close != nullptr) {
        row.anomalies.emplace_back("paid_after_close");
    }
    if (refund != nullptr && payment == nullptr) {
        row.anomalies.emplace_back("refund_without_payment");
    }
    return row;
}

std::int64_t BalanceContribution(const OrderRow& order) {
    // Payment amounts are at least 1, so paid_amount is 0 exactly when the order has no payment;
    // then nothing was paid and a refund does not count (docs/events.md#balances).
    if (order.paid_amount == 0) {
        return 0;
    }
    return order.paid_amount - order.refunded_amount;
}

void AddToBalances(const OrderRow& order, std::map<BalanceKey, std::int64_t>& balances) {
    balances[{order.account_id, order.currency}] += BalanceContribution(order);
}

}  // namespace payledger::projections

namespace payledger::projections {

void BalanceTotals::Add(const OrderRow& order) {
    std::string key;
    key.reserve(order.account_id.size() + 1 + order.currency.size());
    key += order.account_id;
    key += '\t';  // Neither part can hold a tab (IsValidKey, IsValidCurrency).
    key += order.currency;
    totals_[key] += BalanceContribution(order);
}

std::map<BalanceKey, std::int64_t> BalanceTotals::Sorted() const {
    std::map<BalanceKey, std::int64_t> sorted;
    for (const auto& [key, total] : totals_) {
        const std::size_t tab = key.find('\t');
        sorted.emplace(BalanceKey{key.substr(0, tab), key.substr(tab + 1)}, total);
    }
    return sorted;
}

}  // namespace payledger::projections
