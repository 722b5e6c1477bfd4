// The canonical form (docs/events.md#canonical-digests), written out by hand: tab-separated fields
// in its order, null as the empty string, anomalies joined with ",", one "\n" per row; and the
// property that the fold is a function of the set of events: thousands of random event sets, each
// folded in many random orders, give one canonical line.
#include "projections/canonical.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "projections/order_fold.hpp"

namespace payledger::projections {
namespace {

TEST(CanonicalLine, OrderFieldsInSpecOrderWithNullsEmpty) {
    const OrderRow order{.out_trade_no = "ORD-1",
                         .account_id = "acct-1",
                         .amount = 1999,
                         .currency = "CNY",
                         .status = "WAIT_PAY",
                         .seq = 7};
    EXPECT_EQ(CanonicalLine(order), "ORD-1\tacct-1\tCNY\t1999\tWAIT_PAY\t\t0\t0\t\n");
}

TEST(CanonicalLine, OrderWithPaymentRefundAndAnomalies) {
    const OrderRow order{.out_trade_no = "A|B",
                         .account_id = "x*y",
                         .amount = 100,
                         .currency = "USD",
                         .status = "REFUNDED",
                         .transaction_id = "TX-9",
                         .paid_amount = 100,
                         .refunded_amount = 40,
                         .anomalies = {"paid_after_close"},
                         .seq = 3};
    EXPECT_EQ(CanonicalLine(order),
              "A|B\tx*y\tUSD\t100\tREFUNDED\tTX-9\t100\t40\tpaid_after_close\n");
}

TEST(CanonicalLine, Balance) {
    EXPECT_EQ(CanonicalLine(BalanceRow{.account_id = "acct", .currency = "CNY", .balance = -5}),
              "acct\tCNY\t-5\n");
}

TEST(Differences, NamesEveryDifferingFieldAndNothingElse) {
    const OrderRow folded{.out_trade_no = "O",
                          .account_id = "a",
                          .amount = 5,
                          .currency = "CNY",
                          .status = "PAID",
                          .transaction_id = "T",
                          .paid_amount = 5,
                          .seq = 2};
    OrderRow live = folded;
    EXPECT_EQ(Differences(folded, live), "");
    live.status = "WAIT_PAY";
    live.transaction_id.reset();
    live.paid_amount = 0;
    EXPECT_EQ(Differences(folded, live),
              "status PAID, live WAIT_PAY; transaction_id T, live null; paid_amount 5, live 0");
}

// Random sets: ORDER_CREATED plus any subset of the other three types, random amounts.
std::vector<Event> RandomOrder(std::mt19937_64& random, int index) {
    const std::string key = "ORD-" + std::to_string(index);
    const std::int64_t amount = 1 + static_cast<std::int64_t>(random() % 100000);
    std::vector<Event> events{{.seq = 1,
                               .out_trade_no = key,
                               .event_type = EventType::kOrderCreated,
                               .account_id = "acct",
                               .amount = amount,
                               .currency = "CNY"}};
    std::int64_t seq = 2;
    if (random() % 2 == 0) {
        events.push_back({.seq = seq++,
                          .out_trade_no = key,
                          .event_type = EventType::kPaymentSucceeded,
                          .account_id = "acct",
                          .amount = amount,
                          .currency = "CNY",
                          .transaction_id = "T" + key});
    }
    if (random() % 2 == 0) {
        events.push_back({.seq = seq++,
                          .out_trade_no = key,
                          .event_type = EventType::kPaymentClosed,
                          .account_id = "acct"});
    }
    if (random() % 2 == 0) {
        events.push_back(
            {.seq = seq++,
             .out_trade_no = key,
             .event_type = EventType::kRefundSucceeded,
             .account_id = "acct",
             .amount = 1 + static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(amount)),
             .currency = "CNY",
             .transaction_id = "R" + key});
    }
    return events;
}

TEST(FoldOrderProperty, ThousandsOfRandomSetsFoldTheSameInAnyOrder) {
    std::mt19937_64 random{42};
    int anomalies_seen = 0;
    for (int i = 0; i < 5000; ++i) {
        std::vector<Event> events = RandomOrder(random, i);
        const std::string expected = CanonicalLine(FoldOrder(events));
        const std::int64_t expected_seq = FoldOrder(events).seq;
        anomalies_seen += !FoldOrder(events).anomalies.empty();
        for (int shuffle = 0; shuffle < 10; ++shuffle) {
            std::shuffle(events.begin(), events.end(), random);
            const OrderRow row = FoldOrder(events);
            ASSERT_EQ(CanonicalLine(row), expected) << "order " << i;
            ASSERT_EQ(row.seq, expected_seq);
        }
    }
    EXPECT_GT(anomalies_seen, 1000);  // The generator reaches both anomalies often.
}

}  // namespace
}  // namespace payledger::projections
