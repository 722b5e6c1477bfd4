#pragma once

#include <cstdint>
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

// Decides appended, duplicate, conflict, unknown_order or mismatch (SPEC §2, §6) for a
// delivered event against `order_events`, the stored events of the same out_trade_no.
// Pure: the caller holds the writer lock, so `order_events` cannot change meanwhile.
[[nodiscard]] Decision Decide(std::span<const Event> order_events, Event delivered);

}  // namespace payledger::projections
