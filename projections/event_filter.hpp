#pragma once

#include <optional>
#include <set>
#include <string>

#include "projections/event.hpp"

namespace payledger::projections {

// Which events a subscription delivers (docs/subscriptions.md): an event matches when its type is
// one of `event_types` and its account one of `accounts`, an empty set not filtering at all. The
// one definition: the feed window applies Matches in memory, and
// ledger/subscriptions/subscriptions.cpp reads with the same rule in SQL, its twin, which
// tests/api/subscriptions/feed_window_pgtest.cpp and
// tests/ledger/subscriptions/subscriptions_pgtest.cpp hold equal to Matches.
struct EventFilter {
    std::set<EventType> event_types{};
    std::set<std::string> accounts{};  // REQUIRES: each IsValidKey.
    bool operator==(const EventFilter&) const = default;
};

// The filter of a subscription's `event_types` and `accounts` (nullopt: every account). Every
// type is no filter at all, so that the read skips the type test.
[[nodiscard]] EventFilter MakeEventFilter(const std::set<EventType>& event_types,
                                          const std::optional<std::set<std::string>>& accounts);

[[nodiscard]] bool Matches(const EventFilter& filter, EventType event_type,
                           const std::string& account_id);

}  // namespace payledger::projections
