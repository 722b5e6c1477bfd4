// The pure matcher (docs/reconciliation.md#matching): every category a bill entry can end in, the
// checks that decide whether --apply may append it, and the output line's format.
#include "projections/reconcile.hpp"

#include <gtest/gtest.h>

namespace payledger::projections {
namespace {

const Side kBill{.id = "4200001", .amount = 8880, .currency = "CNY"};
const Side kOrder{.amount = 8880, .currency = "CNY"};

TEST(ClassifyEntry, EachCaseEndsInItsCategory) {
    struct Case {
        bool pending;
        LedgerFacts ledger;
        Category expected;
    };
    const Case cases[] = {
        {false, {.order = kOrder, .event = kBill}, Category::kMatched},
        {false, {.order = kOrder}, Category::kMissingInLedger},
        {false,
         {.order = kOrder, .event = Side{"4200002", 8880, "CNY"}},
         Category::kTransactionMismatch},
        // Another id and another amount: another payment, so the id decides.
        {false,
         {.order = kOrder, .event = Side{"4200002", 1, "CNY"}},
         Category::kTransactionMismatch},
        {false,
         {.order = kOrder, .event = Side{"4200001", 8881, "CNY"}},
         Category::kAmountMismatch},
        {false,
         {.order = kOrder, .event = Side{"4200001", 8880, "USD"}},
         Category::kAmountMismatch},
        {false, {}, Category::kUnknownOrder},
        {true, {.order = kOrder}, Category::kPending},
        // No ORDER_CREATED: unknown_order comes first, even for a refund still processing.
        {true, {}, Category::kUnknownOrder},
        {true, {.order = kOrder, .event = Side{"4200002", 1, "CNY"}}, Category::kPending},
        {true, {.order = kOrder, .event = kBill}, Category::kPending},
    };
    for (const Case& c : cases) {
        EXPECT_EQ(ClassifyEntry(kBill, c.pending, c.ledger), c.expected) << ToString(c.expected);
    }
}

TEST(ApplyRefusal, PaymentMustEqualTheOrderRefundAtMostIt) {
    EXPECT_FALSE(ApplyRefusal(EventType::kPaymentSucceeded, kBill, kOrder).has_value());
    EXPECT_TRUE(ApplyRefusal(EventType::kPaymentSucceeded, Side{"x", 8879, "CNY"}, kOrder));
    EXPECT_TRUE(ApplyRefusal(EventType::kPaymentSucceeded, Side{"x", 8881, "CNY"}, kOrder));
    EXPECT_TRUE(ApplyRefusal(EventType::kPaymentSucceeded, Side{"x", 8880, "USD"}, kOrder));
    EXPECT_FALSE(ApplyRefusal(EventType::kRefundSucceeded, Side{"r", 1, "CNY"}, kOrder));
    EXPECT_FALSE(ApplyRefusal(EventType::kRefundSucceeded, Side{"r", 8880, "CNY"}, kOrder));
    EXPECT_TRUE(ApplyRefusal(EventType::kRefundSucceeded, Side{"r", 8881, "CNY"}, kOrder));
    EXPECT_TRUE(ApplyRefusal(EventType::kRefundSucceeded, Side{"r", 1, "USD"}, kOrder));
}

TEST(DifferenceLine, HasTheSpecFormat) {
    EXPECT_EQ(DifferenceLine(Category::kMissingInLedger, EventType::kPaymentSucceeded, "ORD-1",
                             SideText(kBill), SideText(std::nullopt)),
              "  missing_in_ledger PAYMENT_SUCCEEDED ORD-1 bill=4200001:8880 ledger=-");
}

TEST(Category, NamesAreTheSpecsInOrder) {
    const char* names[] = {"matched",
                           "missing_in_ledger",
                           "missing_in_bill",
                           "amount_mismatch",
                           "transaction_mismatch",
                           "unknown_order",
                           "pending",
                           "applied"};
    for (int i = 0; i < kCategoryCount; ++i) {
        EXPECT_EQ(ToString(static_cast<Category>(i)), names[i]);
    }
}

}  // namespace
}  // namespace payledger::projections
