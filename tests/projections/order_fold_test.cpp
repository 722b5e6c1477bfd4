// Tests of projections/order_fold.hpp: FoldOrder, BalanceContribution and AddToBalances against
// docs/events.md#projections. The space is small, so it is tested whole: every subset of
// {PAYMENT_SUCCEEDED, PAYMENT_CLOSED, REFUND_SUCCEEDED} with ORDER_CREATED is a row of one table
// holding the expected status, amounts, anomalies and balance contribution, and every ordering of
// every subset (all 24 of the full set, by std::next_permutation) must fold to that same row. Sets
// that break the fold's REQUIRES must throw InvariantError.

#include "projections/order_fold.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "projections/assert.hpp"
#include "projections/event.hpp"
#include "tests/projections/order_events.hpp"

namespace payledger::projections {
namespace {

using testing::AsStored;
using testing::kOrderAmount;
using testing::kRefundAmount;

// ORD-1's events as the ledger holds them, each at the seq a test names (by default in the order
// they are usually appended: created 1, paid 2, closed 3, refunded 4).
Event Created(std::int64_t seq = 1) { return AsStored(testing::Created(), seq); }
Event Payment(std::int64_t seq = 2) { return AsStored(testing::Payment(), seq); }
Event Close(std::int64_t seq = 3) { return AsStored(testing::Close(), seq); }
Event Refund(std::int64_t seq = 4) { return AsStored(testing::Refund(), seq); }

// The row every set shares: the ORDER_CREATED fields.
OrderRow BaseRow() {
    return {.out_trade_no = "ORD-1",
            .account_id = "acct-1",
            .amount = kOrderAmount,
            .currency = "CNY",
            .status = "WAIT_PAY"};
}

struct SetCase {
    const char* name = "";
    bool payment = false;
    bool close = false;
    bool refund = false;
    const char* status = "";
    bool has_transaction_id = false;
    std::int64_t paid_amount = 0;
    std::int64_t refunded_amount = 0;
    std::vector<std::string> anomalies{};
    std::int64_t balance_contribution = 0;
};

// One row per subset of the three non-creating events.
const std::vector<SetCase>& SetCases() {
    static const std::vector<SetCase> cases{
        {.name = "created only", .status = "WAIT_PAY"},
        {.name = "payment",
         .payment = true,
         .status = "PAID",
         .has_transaction_id = true,
         .paid_amount = kOrderAmount,
         .balance_contribution = kOrderAmount},
        {.name = "close", .close = true, .status = "CLOSED"},
        {.name = "refund",
         .refund = true,
         .status = "WAIT_PAY",
         .refunded_amount = kRefundAmount,
         .anomalies = {"refund_without_payment"}},
        {.name = "payment+close",
         .payment = true,
         .close = true,
         .status = "PAID",
         .has_transaction_id = true,
         .paid_amount = kOrderAmount,
         .anomalies = {"paid_after_close"},
         .balance_contribution = kOrderAmount},
        {.name = "payment+refund",
         .payment = true,
         .refund = true,
         .status = "REFUNDED",
         .has_transaction_id = true,
         .paid_amount = kOrderAmount,
         .refunded_amount = kRefundAmount,
         .balance_contribution = kOrderAmount - kRefundAmount},
        {.name = "close+refund",
         .close = true,
         .refund = true,
         .status = "CLOSED",
         .refunded_amount = kRefundAmount,
         .anomalies = {"refund_without_payment"}},
        {.name = "payment+close+refund",
         .payment = true,
         .close = true,
         .refund = true,
         .status = "REFUNDED",
         .has_transaction_id = true,
         .paid_amount = kOrderAmount,
         .refunded_amount = kRefundAmount,
         .anomalies = {"paid_after_close"},
         .balance_contribution = kOrderAmount - kRefundAmount},
    };
    return cases;
}

std::vector<Event> EventsOf(const SetCase& c) {
    std::vector<Event> events{Created()};
    if (c.payment) events.push_back(Payment());
    if (c.close) events.push_back(Close());
    if (c.refund) events.push_back(Refund());
    return events;
}

OrderRow ExpectedRowOf(const SetCase& c, std::int64_t seq) {
    OrderRow row = BaseRow();
    row.status = c.status;
    if (c.has_transaction_id) row.transaction_id = "4200000001";
    row.paid_amount = c.paid_amount;
    row.refunded_amount = c.refunded_amount;
    row.anomalies = c.anomalies;
    row.seq = seq;
    return row;
}

std::int64_t MaxSeq(const std::vector<Event>& events) {
    std::int64_t seq = 0;
    for (const Event& event : events) seq = std::max(seq, event.seq);
    return seq;
}

TEST(FoldOrder, OrderCreatedAloneIsWaitPayWithTheOrderFields) {
    const std::vector<Event> events{Created(7)};
    OrderRow expected = BaseRow();
    expected.seq = 7;
    EXPECT_EQ(FoldOrder(events), expected);
    const OrderRow row = FoldOrder(events);
    EXPECT_EQ(row.status, "WAIT_PAY");
    EXPECT_FALSE(row.transaction_id.has_value());
    EXPECT_EQ(row.paid_amount, 0);
    EXPECT_EQ(row.refunded_amount, 0);
    EXPECT_TRUE(row.anomalies.empty());
}

TEST(FoldOrder, EverySetOfEventsFoldsToTheRowOfSpecSection4) {
    for (const SetCase& c : SetCases()) {
        SCOPED_TRACE(c.name);
        const std::vector<Event> events = EventsOf(c);
        EXPECT_EQ(FoldOrder(events), ExpectedRowOf(c, MaxSeq(events)));
    }
}

TEST(FoldOrder, EveryOrderingOfEverySetFoldsToTheSameRow) {
    for (const SetCase& c : SetCases()) {
        SCOPED_TRACE(c.name);
        std::vector<Event> events = EventsOf(c);
        const OrderRow expected = ExpectedRowOf(c, MaxSeq(events));
        std::sort(events.begin(), events.end(),
                  [](const Event& a, const Event& b) { return a.seq < b.seq; });
        do {
            EXPECT_EQ(FoldOrder(events), expected);
        } while (
            std::next_permutation(events.begin(), events.end(),
                                  [](const Event& a, const Event& b) { return a.seq < b.seq; }));
    }
}

TEST(FoldOrder, AllTwentyFourOrderingsOfTheFourEventTypesGiveOneRow) {
    const std::vector<Event> all{Created(), Payment(), Close(), Refund()};
    std::vector<std::size_t> order{0, 1, 2, 3};
    OrderRow expected = BaseRow();
    expected.status = "REFUNDED";
    expected.transaction_id = "4200000001";
    expected.paid_amount = kOrderAmount;
    expected.refunded_amount = kRefundAmount;
    expected.anomalies = {"paid_after_close"};
    expected.seq = 4;
    int orderings = 0;
    do {
        std::vector<Event> events;
        for (const std::size_t index : order) events.push_back(all[index]);
        EXPECT_EQ(FoldOrder(events), expected) << "ordering number " << orderings;
        ++orderings;
    } while (std::next_permutation(order.begin(), order.end()));
    EXPECT_EQ(orderings, 24);
}

TEST(FoldOrder, StatusIsRefundedOnlyWhenARefundAndAPaymentExist) {
    EXPECT_EQ(FoldOrder(std::vector<Event>{Created(), Payment(), Refund()}).status, "REFUNDED");
    EXPECT_EQ(FoldOrder(std::vector<Event>{Created(), Refund()}).status, "WAIT_PAY");
    EXPECT_EQ(FoldOrder(std::vector<Event>{Created(), Close(), Refund()}).status, "CLOSED");
}

TEST(FoldOrder, PaymentWinsOverCloseForStatus) {
    EXPECT_EQ(FoldOrder(std::vector<Event>{Created(), Close(), Payment()}).status, "PAID");
    EXPECT_EQ(FoldOrder(std::vector<Event>{Created(), Close()}).status, "CLOSED");
}

TEST(FoldOrder, FullRefundIsRefundedAndContributesNothing) {
    Event refund = Refund();
    refund.amount = kOrderAmount;
    const OrderRow row = FoldOrder(std::vector<Event>{Created(), Payment(), refund});
    EXPECT_EQ(row.status, "REFUNDED");
    EXPECT_EQ(row.refunded_amount, kOrderAmount);
    EXPECT_EQ(BalanceContribution(row), 0);
}

TEST(FoldOrder, AnomaliesAreSortedAndNeverBothBecauseTheyNeedAndExcludeAPayment) {
    // paid_after_close needs a payment and refund_without_payment needs its absence, so no set
    // carries both; every list the table produces must still be sorted.
    for (const SetCase& c : SetCases()) {
        SCOPED_TRACE(c.name);
        const OrderRow row = FoldOrder(EventsOf(c));
        EXPECT_TRUE(std::is_sorted(row.anomalies.begin(), row.anomalies.end()));
        EXPECT_LE(row.anomalies.size(), 1u);
        const bool paid_after_close = std::find(row.anomalies.begin(), row.anomalies.end(),
                                                "paid_after_close") != row.anomalies.end();
        const bool refund_without_payment =
            std::find(row.anomalies.begin(), row.anomalies.end(), "refund_without_payment") !=
            row.anomalies.end();
        EXPECT_EQ(paid_after_close, c.payment && c.close);
        EXPECT_EQ(refund_without_payment, c.refund && !c.payment);
    }
}

TEST(FoldOrder, SeqIsTheLargestSeqWhateverTheEventTypeOrPosition) {
    // The close carries the largest seq but sits in the middle of the span.
    const std::vector<Event> events{Payment(17), Close(42), Created(5), Refund(30)};
    EXPECT_EQ(FoldOrder(events).seq, 42);
    const std::vector<Event> created_last{Payment(3), Created(99)};
    EXPECT_EQ(FoldOrder(created_last).seq, 99);
}

TEST(FoldOrder, OrderFieldsComeFromOrderCreatedNotFromLaterEvents) {
    Event payment = Payment();
    payment.account_id = "someone-else";
    const OrderRow row = FoldOrder(std::vector<Event>{payment, Created()});
    EXPECT_EQ(row.account_id, "acct-1");
    EXPECT_EQ(row.amount, kOrderAmount);
    EXPECT_EQ(row.currency, "CNY");
    EXPECT_EQ(row.out_trade_no, "ORD-1");
}

TEST(FoldOrder, PaidAmountAndTransactionIdAreThePaymentsOwn) {
    Event payment = Payment();
    payment.amount = 1234;  // Decide refuses this as a mismatch; the fold still reports facts.
    payment.transaction_id = "TX-OTHER";
    const OrderRow row = FoldOrder(std::vector<Event>{Created(), payment});
    EXPECT_EQ(row.paid_amount, 1234);
    EXPECT_EQ(row.transaction_id, std::optional<std::string>("TX-OTHER"));
}

TEST(FoldOrder, InvalidSetsThrowInvariantError) {
    Event other_order = Payment();
    other_order.out_trade_no = "ORD-2";
    Event second_created = Created(9);
    second_created.amount = 5;
    const struct {
        const char* name;
        std::vector<Event> events;
    } cases[] = {
        {"empty", {}},
        {"two payments", {Created(), Payment(2), Payment(3)}},
        {"two identical payments", {Created(), Payment(), Payment()}},
        {"two ORDER_CREATED", {Created(), second_created}},
        {"two refunds", {Created(), Payment(), Refund(4), Refund(5)}},
        {"no ORDER_CREATED", {Payment(), Close(), Refund()}},
        {"a payment alone", {Payment()}},
        {"mixed out_trade_no", {Created(), other_order}},
        {"five events", {Created(), Payment(), Close(), Refund(), Refund(6)}},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        EXPECT_THROW((void)FoldOrder(c.events), InvariantError);
    }
}

TEST(BalanceContribution, CountsThePaymentLessARefundOnlyWhenThereIsAPayment) {
    for (const SetCase& c : SetCases()) {
        SCOPED_TRACE(c.name);
        EXPECT_EQ(BalanceContribution(FoldOrder(EventsOf(c))), c.balance_contribution);
    }
}

TEST(BalanceContribution, RefundWithoutPaymentCountsZeroNotNegative) {
    const OrderRow row = FoldOrder(std::vector<Event>{Created(), Refund()});
    ASSERT_EQ(row.refunded_amount, kRefundAmount);
    EXPECT_EQ(BalanceContribution(row), 0);
}

TEST(AddToBalances, SumsPerAccountAndCurrencyAndCreatesZeroRows) {
    const auto row = [](const char* out_trade_no, const char* account_id, const char* currency,
                        std::int64_t paid, std::int64_t refunded) {
        OrderRow r{.out_trade_no = out_trade_no,
                   .account_id = account_id,
                   .amount = 10'000,
                   .currency = currency,
                   .paid_amount = paid,
                   .refunded_amount = refunded};
        return r;
    };
    std::map<BalanceKey, std::int64_t> balances;
    AddToBalances(row("O1", "acct-1", "CNY", 1999, 0), balances);
    AddToBalances(row("O2", "acct-1", "CNY", 1000, 300), balances);
    AddToBalances(row("O3", "acct-1", "USD", 700, 0), balances);
    AddToBalances(row("O4", "acct-1", "CNY", 0, 500), balances);  // Refund without payment.
    AddToBalances(row("O5", "acct-2", "CNY", 0, 0), balances);    // WAIT_PAY: a zero row.

    const std::map<BalanceKey, std::int64_t> expected{
        {{"acct-1", "CNY"}, 1999 + 1000 - 300},
        {{"acct-1", "USD"}, 700},
        {{"acct-2", "CNY"}, 0},
    };
    EXPECT_EQ(balances, expected);
}

TEST(AddToBalances, FoldedOrdersOfEveryKindSumToTheSpecBalance) {
    std::map<BalanceKey, std::int64_t> balances;
    std::int64_t expected = 0;
    for (const SetCase& c : SetCases()) {
        AddToBalances(FoldOrder(EventsOf(c)), balances);
        expected += c.balance_contribution;
    }
    ASSERT_EQ(balances.size(), 1u);
    EXPECT_EQ(balances.at({"acct-1", "CNY"}), expected);
    // 4 orders with a payment, 2 of them refunded.
    EXPECT_EQ(expected, 4 * kOrderAmount - 2 * kRefundAmount);
}

}  // namespace
}  // namespace payledger::projections
