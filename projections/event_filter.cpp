#include "projections/event_filter.hpp"

namespace payledger::projections {

EventFilter MakeEventFilter(const std::set<EventType>& event_types,
                            const std::optional<std::set<std::string>>& accounts) {
    EventFilter filter;
    if (event_types.size() < kEventTypeCount) filter.event_types = event_types;
    if (accounts) filter.accounts = *accounts;
    return filter;
}

bool Matches(const EventFilter& filter, EventType event_type, const std::string& account_id) {
    return (filter.event_types.empty() || filter.event_types.contains(event_type)) &&
           (filter.accounts.empty() || filter.accounts.contains(account_id));
}

}  // namespace payledger::projections
