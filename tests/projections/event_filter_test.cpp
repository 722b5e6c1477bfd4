// Tests of projections/event_filter.hpp: which events a subscription's filter lets through, as a
// table of (filter, event type, account, expected), and the filter a subscription's config makes
// (every type is no type filter; no accounts is every account). The SQL twin is held equal to
// Matches by tests/ledger/subscriptions/subscriptions_pgtest.cpp and
// tests/api/subscriptions/feed_window_pgtest.cpp.

#include "projections/event_filter.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "projections/event.hpp"

namespace payledger::projections {
namespace {

TEST(EventFilter, MatchesAsTheTableSays) {
    const EventFilter every{};
    const EventFilter closes{.event_types = {EventType::kPaymentClosed}};
    const EventFilter shop_a{.accounts = {"shop-a"}};
    const EventFilter both{.event_types = {EventType::kOrderCreated, EventType::kPaymentSucceeded},
                           .accounts = {"shop-a", "shop-b"}};
    struct Case {
        const EventFilter* filter;
        EventType type;
        std::string account;
        bool expected;
    };
    const std::vector<Case> cases = {
        {&every, EventType::kOrderCreated, "shop-a", true},
        {&every, EventType::kRefundSucceeded, "anyone", true},
        {&closes, EventType::kPaymentClosed, "shop-a", true},
        {&closes, EventType::kPaymentSucceeded, "shop-a", false},
        {&shop_a, EventType::kRefundSucceeded, "shop-a", true},
        {&shop_a, EventType::kOrderCreated, "shop-b", false},
        {&shop_a, EventType::kOrderCreated, "shop-a-2", false},  // Whole names only.
        {&both, EventType::kPaymentSucceeded, "shop-b", true},
        {&both, EventType::kPaymentClosed, "shop-b", false},    // The type fails.
        {&both, EventType::kOrderCreated, "shop-c", false},     // The account fails.
        {&both, EventType::kRefundSucceeded, "shop-c", false},  // Both fail.
    };
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        EXPECT_EQ(Matches(*c.filter, c.type, c.account), c.expected)
            << "case " << i << ": " << ToString(c.type) << " " << c.account;
    }
}

TEST(EventFilter, EveryTypeIsNoTypeFilterAndNoAccountsIsEveryAccount) {
    const std::set<EventType> all = {EventType::kOrderCreated, EventType::kPaymentSucceeded,
                                     EventType::kPaymentClosed, EventType::kRefundSucceeded};
    ASSERT_EQ(all.size(), kEventTypeCount);
    EXPECT_EQ(MakeEventFilter(all, std::nullopt), EventFilter{});
    const std::set<EventType> some = {EventType::kPaymentSucceeded, EventType::kRefundSucceeded};
    EXPECT_EQ(MakeEventFilter(some, std::nullopt), EventFilter{.event_types = some});
    const std::set<std::string> accounts = {"shop-a"};
    EXPECT_EQ(MakeEventFilter(all, accounts), EventFilter{.accounts = accounts});
    EXPECT_EQ(MakeEventFilter(some, accounts),
              (EventFilter{.event_types = some, .accounts = accounts}));
}

}  // namespace
}  // namespace payledger::projections
