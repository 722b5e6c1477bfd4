#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "projections/event.hpp"

namespace payledger::projections {

// What the ledger does with one verified delivery, given the events its order already has.
struct Decision {
    Outcome outcome = Outcome::kAppended;
    std::int64_t seq = 0;   // The existing event, for kDuplicate and kConflict.
    std::string message{};  // For a person; empty for kAppended.
    Event event{};          // The delivered event completed from its order (account_id, currency).
};

// What a refund notice says about its order and payment beside the refund itself
// (docs/platforms.md#cross-checks: WeChat v2 total_fee / transaction_id, v3 amount.total /
// transaction_id, Alipay total_amount / trade_no). Each one the notice names must agree with the
// ledger.
struct Claims {
    std::optional<std::int64_t> order_amount{};           // Must equal the order's amount.
    std::optional<std::string> payment_transaction_id{};  // Must equal the stored payment's.
};

// Decides appended, duplicate, conflict, unknown_order or mismatch
// (docs/events.md#same-event-or-conflict) for a delivered event against `order_events`, the stored
// events of the same out_trade_no. `claims` are checked for a refund only, with the other mismatch
// checks: the order amount always, the payment's transaction id when the order has a payment. Pure:
// the caller holds the writer lock, so `order_events` cannot change meanwhile.
[[nodiscard]] Decision Decide(std::span<const Event> order_events, Event delivered,
                              const Claims& claims = {});

}  // namespace payledger::projections
