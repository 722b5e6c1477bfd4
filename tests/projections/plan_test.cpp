// Tests of projections/plan.hpp: PlanBatch() proven against the fold from scratch
// (docs/events.md#invariants, 5) without a database. Every batch of up to 4 deliveries drawn from a
// pool that holds every event type, duplicates, conflicts, mismatches and deliveries decided before
// the ledger, over two orders in every stored state; then long random batches over three orders.
// Each plan goes through CheckPlan (plan_check.hpp), which a broken plan is shown to fail.

#include "projections/plan.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "projections/event.hpp"
#include "tests/projections/plan_check.hpp"

namespace payledger::projections::plan_test {
namespace {

using testing::CheckPlan;
using testing::Close;
using testing::Created;
using testing::Deliver;
using testing::Inputs;
using testing::Orders;
using testing::OrderSpec;
using testing::Payment;
using testing::PlanCase;
using testing::Pool;
using testing::Refund;
using testing::Store;
using testing::Stored;

// Plans `cases` against `state` and checks every property; counts the outcomes seen.
void PlanAndCheck(const LedgerState& state, const std::vector<PlanCase>& cases,
                  std::map<Outcome, int>* seen = nullptr) {
    const std::vector<PlanInput> inputs = Inputs(cases);
    const BatchPlan plan = PlanBatch(state, inputs);
    const std::vector<std::string> failures = CheckPlan(state, cases, plan);
    ASSERT_TRUE(failures.empty()) << failures.front() << " (batch of " << cases.size() << ")";
    if (seen != nullptr) {
        for (const PlannedDelivery& d : plan.deliveries) ++(*seen)[d.outcome];
    }
}

TEST(PlanTest, TwoCopiesInOneBatchAreAppendedThenDuplicate) {
    LedgerState state{.next_seq = 10, .next_receipt_id = 20};
    Store(Orders()[0], Stored::kCreated, state);
    const std::vector<PlanCase> cases = {Deliver(Payment(Orders()[0], "t1", 1000)),
                                         Deliver(Payment(Orders()[0], "t1", 1000)),
                                         Deliver(Payment(Orders()[0], "t2", 1000))};
    const BatchPlan plan = PlanBatch(state, Inputs(cases));
    ASSERT_EQ(plan.deliveries.size(), 3u);
    EXPECT_EQ(plan.deliveries[0].outcome, Outcome::kAppended);
    EXPECT_EQ(plan.deliveries[0].seq, 11);
    EXPECT_EQ(plan.deliveries[1].outcome, Outcome::kDuplicate);
    EXPECT_EQ(plan.deliveries[1].seq, 11);
    EXPECT_EQ(plan.deliveries[1].ReceiptSeq(), 11);
    EXPECT_EQ(plan.deliveries[2].outcome, Outcome::kConflict);
    EXPECT_EQ(plan.deliveries[2].ReceiptSeq(), std::nullopt);
    EXPECT_EQ(plan.deliveries[2].receipt_id, 23);
    ASSERT_EQ(plan.events.size(), 1u);
    EXPECT_EQ(plan.events[0].receipt_id, 21);
    EXPECT_EQ(plan.events[0].account_id, "acct-1");  // Completed from the order.
    ASSERT_EQ(plan.orders.size(), 1u);
    EXPECT_EQ(plan.orders[0].after.status, "PAID");
    EXPECT_EQ(plan.orders[0].prev_seq, 10);
    EXPECT_TRUE(plan.orders[0].credits_payment);
    EXPECT_EQ(plan.balance_deltas, (std::map<BalanceKey, std::int64_t>{{{"acct-1", "CNY"}, 1000}}));
    EXPECT_EQ(plan.last_receipt_id, 23);
    EXPECT_EQ(plan.last_seq, 11);
}

TEST(PlanTest, AnOrderCreatedInTheBatchIsKnownToTheDeliveriesAfterIt) {
    const LedgerState state{.next_seq = 1, .next_receipt_id = 1};
    const OrderSpec& b = Orders()[1];
    const std::vector<PlanCase> cases = {Deliver(Payment(b, "t1", b.amount)), Deliver(Created(b)),
                                         Deliver(Payment(b, "t1", b.amount))};
    const BatchPlan plan = PlanBatch(state, Inputs(cases));
    EXPECT_EQ(plan.deliveries[0].outcome, Outcome::kUnknownOrder);
    EXPECT_EQ(plan.deliveries[0].order, std::nullopt);
    EXPECT_EQ(plan.deliveries[1].outcome, Outcome::kAppended);
    EXPECT_EQ(plan.deliveries[1].order->status, "WAIT_PAY");
    EXPECT_EQ(plan.deliveries[2].outcome, Outcome::kAppended);
    ASSERT_EQ(plan.orders.size(), 1u);
    EXPECT_EQ(plan.orders[0].prev_seq, std::nullopt);  // Inserted, not updated.
    EXPECT_EQ(plan.orders[0].after.status, "PAID");
    EXPECT_EQ(plan.last_seq, 2);
}

TEST(PlanTest, ABatchWithoutEventsWritesOnlyReceipts) {
    LedgerState state{.next_seq = 5, .next_receipt_id = 9};
    Store(Orders()[0], Stored::kPaid, state);
    const std::vector<PlanCase> cases = {Pool(Orders()[0])[7],
                                         Deliver(Payment(Orders()[0], "t1", 1000))};
    const BatchPlan plan = PlanBatch(state, Inputs(cases));
    EXPECT_EQ(plan.deliveries[0].outcome, Outcome::kBadSignature);
    EXPECT_EQ(plan.deliveries[0].message, "signature of ORD-A fails");
    EXPECT_EQ(plan.deliveries[1].outcome, Outcome::kDuplicate);
    EXPECT_TRUE(plan.events.empty());
    EXPECT_TRUE(plan.orders.empty());
    EXPECT_TRUE(plan.balance_deltas.empty());
    EXPECT_EQ(plan.last_seq, 0);  // The event sequence is left alone.
    EXPECT_EQ(plan.last_receipt_id, 12);
}

TEST(PlanTest, CheckPlanFindsABrokenPlan) {
    LedgerState state{.next_seq = 1, .next_receipt_id = 1};
    Store(Orders()[0], Stored::kCreated, state);
    const std::vector<PlanCase> cases = {Deliver(Payment(Orders()[0], "t1", 1000))};
    const BatchPlan good = PlanBatch(state, Inputs(cases));
    ASSERT_TRUE(CheckPlan(state, cases, good).empty());

    BatchPlan wrong_balance = good;
    wrong_balance.balance_deltas.begin()->second += 1;
    EXPECT_FALSE(CheckPlan(state, cases, wrong_balance).empty());
    BatchPlan wrong_row = good;
    wrong_row.orders[0].after.paid_amount = 999;
    EXPECT_FALSE(CheckPlan(state, cases, wrong_row).empty());
    BatchPlan wrong_prev = good;
    wrong_prev.orders[0].prev_seq = 0;
    EXPECT_FALSE(CheckPlan(state, cases, wrong_prev).empty());
    BatchPlan wrong_seq = good;
    wrong_seq.events[0].seq = 7;
    EXPECT_FALSE(CheckPlan(state, cases, wrong_seq).empty());
    BatchPlan wrong_answer = good;
    wrong_answer.deliveries[0].outcome = Outcome::kDuplicate;
    EXPECT_FALSE(CheckPlan(state, cases, wrong_answer).empty());
    BatchPlan lost_order = good;
    lost_order.orders.clear();
    EXPECT_FALSE(CheckPlan(state, cases, lost_order).empty());
}

// Every sequence (with repetition) of `length` deliveries from `pool`, against `state`.
void EveryBatch(const LedgerState& state, const std::vector<PlanCase>& pool, std::size_t length,
                std::map<Outcome, int>& seen, long& batches) {
    std::vector<std::size_t> pick(length, 0);
    std::vector<PlanCase> cases(length);
    while (true) {
        for (std::size_t i = 0; i < length; ++i) cases[i] = pool[pick[i]];
        PlanAndCheck(state, cases, &seen);
        if (::testing::Test::HasFatalFailure()) return;
        ++batches;
        std::size_t i = 0;
        while (i < length && ++pick[i] == pool.size()) pick[i++] = 0;
        if (i == length) return;
    }
}

std::vector<PlanCase> PoolOf(const OrderSpec& a, const OrderSpec& b) {
    std::vector<PlanCase> pool = Pool(a);
    for (PlanCase& c : Pool(b)) pool.push_back(std::move(c));
    return pool;
}

TEST(PlanTest, EveryBatchOfUpToThreeOverTwoOrdersInEveryStoredState) {
    const std::vector<PlanCase> pool = PoolOf(Orders()[0], Orders()[1]);
    const Stored states[] = {Stored::kNothing, Stored::kCreated, Stored::kPaid, Stored::kClosed,
                             Stored::kRefunded};
    std::map<Outcome, int> seen;
    long batches = 0;
    for (const Stored a : states) {
        for (const Stored b : states) {
            LedgerState state{.next_seq = 100, .next_receipt_id = 500};
            Store(Orders()[0], a, state);
            Store(Orders()[1], b, state);
            for (std::size_t length = 1; length <= 3; ++length) {
                EveryBatch(state, pool, length, seen, batches);
                if (HasFatalFailure()) return;
            }
        }
    }
    EXPECT_EQ(batches, 25L * (16 + 16 * 16 + 16 * 16 * 16));
    // The pool reaches every outcome the ledger decides, and one decided before it.
    for (const Outcome outcome :
         {Outcome::kAppended, Outcome::kDuplicate, Outcome::kConflict, Outcome::kMismatch,
          Outcome::kUnknownOrder, Outcome::kBadSignature}) {
        EXPECT_GT(seen[outcome], 0) << ToString(outcome);
    }
}

TEST(PlanTest, EveryBatchOfFourOverTwoOrders) {
    const std::vector<PlanCase> pool = PoolOf(Orders()[0], Orders()[1]);
    std::map<Outcome, int> seen;
    long batches = 0;
    for (const Stored a : {Stored::kNothing, Stored::kCreated}) {
        LedgerState state{.next_seq = 1, .next_receipt_id = 1};
        Store(Orders()[0], a, state);
        Store(Orders()[1], Stored::kPaid, state);
        EveryBatch(state, pool, 4, seen, batches);
        if (HasFatalFailure()) return;
    }
    EXPECT_EQ(batches, 2L * 16 * 16 * 16 * 16);
}

TEST(PlanTest, RandomLongBatchesOverThreeOrders) {
    std::mt19937_64 random(20261201);
    std::vector<PlanCase> pool = PoolOf(Orders()[0], Orders()[1]);
    for (PlanCase& c : Pool(Orders()[2])) pool.push_back(std::move(c));
    std::uniform_int_distribution<std::size_t> pick(0, pool.size() - 1);
    std::uniform_int_distribution<int> stored(0, 4);
    std::uniform_int_distribution<std::size_t> length(1, 64);
    for (int round = 0; round < 3000; ++round) {
        LedgerState state{.next_seq = 1 + round, .next_receipt_id = 1 + 2 * round};
        for (const OrderSpec& order : Orders())
            Store(order, static_cast<Stored>(stored(random)), state);
        std::vector<PlanCase> cases(length(random));
        for (PlanCase& c : cases) c = pool[pick(random)];
        PlanAndCheck(state, cases);
        if (HasFatalFailure()) return;
    }
}

}  // namespace
}  // namespace payledger::projections::plan_test
