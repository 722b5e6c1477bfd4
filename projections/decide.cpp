#include "projections/decide.hpp"

#include <utility>

#include "projections/assert.hpp"

namespace payledger::projections {
namespace {

const Event* FindType(std::span<const Event> events, EventType type) {
    for (const Event& event : events) {
        if (event.event_type == type) return &event;
    }
    return nullptr;
}

Decision Reject(Outcome outcome, std::string message, Event event) {
    return {.outcome = outcome, .message = std::move(message), .event = std::move(event)};
}

// What a refund notice names about its order and payment must be the ledger's
// (docs/platforms.md#cross-checks).
std::string MismatchOfClaims(std::span<const Event> order_events, const Event& order,
                             const Claims& claims) {
    if (claims.order_amount && *claims.order_amount != order.amount) {
        return "refund notice names the order total " + std::to_string(*claims.order_amount) +
               ", the order amount is " + std::to_string(order.amount);
    }
    const Event* payment = FindType(order_events, EventType::kPaymentSucceeded);
    if (claims.payment_transaction_id && payment != nullptr &&
        payment->transaction_id != claims.payment_transaction_id) {
        return "refund notice names the payment " + *claims.payment_transaction_id +
               ", the order's payment is " + payment->transaction_id.value_or("");
    }
    return {};
}

// The checks against the order that fail with `mismatch` (docs/events.md#same-event-or-conflict).
std::string MismatchAgainstOrder(std::span<const Event> order_events, const Event& order,
                                 const Event& delivered, const Claims& claims) {
    switch (delivered.event_type) {
        case EventType::kOrderCreated:
        case EventType::kPaymentClosed:
            return {};
        case EventType::kPaymentSucceeded:
            if (delivered.currency != order.currency) {
                return "payment currency " + delivered.currency + " differs from the order's " +
                       order.currency;
            }
            if (delivered.amount != order.amount) {
                return "payment amount " + std::to_string(delivered.amount) +
                       " differs from the order amount " + std::to_string(order.amount);
            }
            return {};
        case EventType::kRefundSucceeded:
            if (delivered.currency != order.currency) {
                return "refund currency " + delivered.currency + " differs from the order's " +
                       order.currency;
            }
            if (delivered.amount > order.amount) {
                return "refund amount " + std::to_string(delivered.amount) +
                       " exceeds the order amount " + std::to_string(order.amount);
            }
            return MismatchOfClaims(order_events, order, claims);
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

}  // namespace

Decision Decide(std::span<const Event> order_events, Event delivered, const Claims& claims) {
    for (const Event& event : order_events) {
        PAYLEDGER_ASSERT(event.out_trade_no == delivered.out_trade_no);
    }
    const Event* order = FindType(order_events, EventType::kOrderCreated);
    if (delivered.event_type != EventType::kOrderCreated) {
        if (order == nullptr) {
            // The message first: the argument that moves `delivered` may be evaluated first.
            std::string message = "no order " + delivered.out_trade_no + " was registered";
            return Reject(Outcome::kUnknownOrder, std::move(message), std::move(delivered));
        }
        delivered.account_id = order->account_id;
        if (delivered.event_type == EventType::kRefundSucceeded && delivered.currency.empty()) {
            delivered.currency = order->currency;  // A refund without one takes its order's.
        }
    }
    if (const Event* stored = FindType(order_events, delivered.event_type); stored != nullptr) {
        if (SameFingerprint(*stored, delivered)) {
            return {.outcome = Outcome::kDuplicate, .seq = stored->seq, .event = delivered};
        }
        std::string message = std::string(ToString(delivered.event_type)) + " for " +
                              delivered.out_trade_no +
                              " already exists with a different fingerprint";
        return {.outcome = Outcome::kConflict,
                .seq = stored->seq,
                .message = std::move(message),
                .event = std::move(delivered)};
    }
    if (order != nullptr) {
        std::string mismatch = MismatchAgainstOrder(order_events, *order, delivered, claims);
        if (!mismatch.empty()) {
            return Reject(Outcome::kMismatch, std::move(mismatch), std::move(delivered));
        }
    }
    return {.outcome = Outcome::kAppended, .event = std::move(delivered)};
}

}  // namespace payledger::projections
