// Tests of projections/decide.hpp: Decide() against docs/events.md#same-event-or-conflict (same
// event or conflict, by fingerprint, and the mismatch checks against the order). Each test builds
// the stored events of one order by hand, delivers one event and checks the outcome, the seq named
// (the stored event's for duplicate and conflict, 0 otherwise) and the completed event. Fingerprint
// edges are tables: one row per field that differs; so are the claims a refund notice makes about
// its order and payment (docs/platforms.md#cross-checks).

#include "projections/decide.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "projections/assert.hpp"
#include "projections/event.hpp"
#include "tests/projections/order_events.hpp"

namespace payledger::projections::decide_test {
namespace {

using testing::AsStored;
using testing::Close;
using testing::Created;
using testing::kOrderAmount;
using testing::Payment;
using testing::Refund;

TEST(Decide, EveryCallbackEventForAnUnregisteredOrderIsUnknownOrder) {
    for (const Event& delivered : {Payment(), Close(), Refund()}) {
        SCOPED_TRACE(std::string(ToString(delivered.event_type)));
        const Decision empty = Decide({}, delivered);
        EXPECT_EQ(empty.outcome, Outcome::kUnknownOrder);
        EXPECT_EQ(empty.seq, 0);
        EXPECT_NE(empty.message.find(delivered.out_trade_no), std::string::npos) << empty.message;
        // Other events of the order without its ORDER_CREATED do not make it known.
        const std::vector<Event> no_created{AsStored(Close(), 5)};
        EXPECT_EQ(Decide(no_created, delivered).outcome, Outcome::kUnknownOrder);
    }
}

TEST(Decide, FirstOrderCreatedIsAppendedUnchanged) {
    const Decision decision = Decide({}, Created());
    EXPECT_EQ(decision.outcome, Outcome::kAppended);
    EXPECT_EQ(decision.seq, 0);
    EXPECT_TRUE(decision.message.empty());
    EXPECT_EQ(decision.event.account_id, "acct-1");
    EXPECT_EQ(decision.event.amount, kOrderAmount);
    EXPECT_EQ(decision.event.currency, "CNY");
}

TEST(Decide, OrderCreatedWithTheSameFingerprintIsDuplicateNamingTheStoredSeq) {
    const std::vector<Event> stored{AsStored(Created(), 41)};
    Event again = Created();
    again.occurred_at = 9'000'000;  // Not part of the fingerprint.
    again.receipt_id = 99;
    again.data = R"({"note":"retry"})";
    const Decision decision = Decide(stored, again);
    EXPECT_EQ(decision.outcome, Outcome::kDuplicate);
    EXPECT_EQ(decision.seq, 41);
}

TEST(Decide, OrderCreatedWithADifferentFingerprintIsConflict) {
    const struct {
        const char* name;
        void (*change)(Event&);
    } cases[] = {
        {"account_id", [](Event& e) { e.account_id = "acct-2"; }},
        {"amount", [](Event& e) { e.amount = kOrderAmount + 1; }},
        {"currency", [](Event& e) { e.currency = "USD"; }},
    };
    const std::vector<Event> stored{AsStored(Created(), 41)};
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        Event delivered = Created();
        c.change(delivered);
        const Decision decision = Decide(stored, delivered);
        EXPECT_EQ(decision.outcome, Outcome::kConflict);
        EXPECT_EQ(decision.seq, 41);
        EXPECT_FALSE(decision.message.empty());
    }
}

TEST(Decide, PaymentMatchingTheOrderIsAppendedWithTheOrdersAccount) {
    const std::vector<Event> stored{AsStored(Created(), 1)};
    const Decision decision = Decide(stored, Payment());
    EXPECT_EQ(decision.outcome, Outcome::kAppended);
    EXPECT_EQ(decision.seq, 0);
    EXPECT_TRUE(decision.message.empty());
    EXPECT_EQ(decision.event.account_id, "acct-1");
    EXPECT_EQ(decision.event.event_type, EventType::kPaymentSucceeded);
    EXPECT_EQ(decision.event.amount, kOrderAmount);
    EXPECT_EQ(decision.event.transaction_id, std::optional<std::string>("4200000001"));
}

TEST(Decide, AccountIdIsCopiedFromTheOrderOverWhateverWasDelivered) {
    const std::vector<Event> stored{AsStored(Created(), 1)};
    for (Event delivered : {Payment(), Close(), Refund()}) {
        SCOPED_TRACE(std::string(ToString(delivered.event_type)));
        delivered.account_id = "forged-account";
        const Decision decision = Decide(stored, delivered);
        EXPECT_EQ(decision.outcome, Outcome::kAppended);
        EXPECT_EQ(decision.event.account_id, "acct-1");
    }
}

TEST(Decide, PaymentWithTheSameFingerprintIsDuplicateNamingTheStoredSeq) {
    const std::vector<Event> stored{AsStored(Created(), 1), AsStored(Payment(), 7)};
    Event again = Payment();
    again.source = Source::kGeneric;  // Another channel, same facts.
    again.occurred_at = 8'000'000;
    const Decision decision = Decide(stored, again);
    EXPECT_EQ(decision.outcome, Outcome::kDuplicate);
    EXPECT_EQ(decision.seq, 7);
}

TEST(Decide, PaymentWithADifferentFingerprintIsConflictNamingTheStoredSeq) {
    const struct {
        const char* name;
        void (*change)(Event&);
    } cases[] = {
        {"transaction_id", [](Event& e) { e.transaction_id = "4200000002"; }},
        {"no transaction_id", [](Event& e) { e.transaction_id.reset(); }},
        {"amount", [](Event& e) { e.amount = kOrderAmount - 1; }},
        {"currency", [](Event& e) { e.currency = "USD"; }},
    };
    const std::vector<Event> stored{AsStored(Created(), 1), AsStored(Payment(), 7)};
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        Event delivered = Payment();
        c.change(delivered);
        const Decision decision = Decide(stored, delivered);
        EXPECT_EQ(decision.outcome, Outcome::kConflict);
        EXPECT_EQ(decision.seq, 7);
        EXPECT_FALSE(decision.message.empty());
    }
}

TEST(Decide, EveryCloseAfterTheFirstIsDuplicate) {
    const std::vector<Event> stored{AsStored(Created(), 1), AsStored(Close(), 9)};
    Event other = Close();
    other.source = Source::kWechatV2;
    other.occurred_at = 123'000'000;
    other.transaction_id = "anything";
    const Decision decision = Decide(stored, other);
    EXPECT_EQ(decision.outcome, Outcome::kDuplicate);
    EXPECT_EQ(decision.seq, 9);
}

TEST(Decide, CloseAfterAPaymentIsAppendedBecauseEventsAreFacts) {
    const std::vector<Event> stored{AsStored(Created(), 1), AsStored(Payment(), 2)};
    EXPECT_EQ(Decide(stored, Close()).outcome, Outcome::kAppended);
}

TEST(Decide, RefundWithoutCurrencyTakesTheOrdersCurrency) {
    Event order = AsStored(Created(), 1);
    order.currency = "USD";
    const std::vector<Event> stored{order};
    Event refund = Refund();
    refund.currency.clear();
    const Decision decision = Decide(stored, refund);
    EXPECT_EQ(decision.outcome, Outcome::kAppended);
    EXPECT_EQ(decision.event.currency, "USD");
}

TEST(Decide, RefundWithoutCurrencyIsComparedAfterTakingTheOrdersCurrency) {
    const std::vector<Event> stored{AsStored(Created(), 1), AsStored(Payment(), 2),
                                    AsStored(Refund(), 11)};
    Event same = Refund();
    same.currency.clear();
    const Decision duplicate = Decide(stored, same);
    EXPECT_EQ(duplicate.outcome, Outcome::kDuplicate);
    EXPECT_EQ(duplicate.seq, 11);

    Event second_refund = Refund();
    second_refund.currency.clear();
    second_refund.transaction_id = "50300002";
    second_refund.amount = 300;
    const Decision conflict = Decide(stored, second_refund);
    EXPECT_EQ(conflict.outcome, Outcome::kConflict);
    EXPECT_EQ(conflict.seq, 11);
}

TEST(Decide, RefundWithADifferentFingerprintIsConflict) {
    const struct {
        const char* name;
        void (*change)(Event&);
    } cases[] = {
        {"transaction_id", [](Event& e) { e.transaction_id = "50300002"; }},
        {"amount", [](Event& e) { e.amount = 600; }},
        {"currency", [](Event& e) { e.currency = "USD"; }},
    };
    const std::vector<Event> stored{AsStored(Created(), 1), AsStored(Payment(), 2),
                                    AsStored(Refund(), 11)};
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        Event delivered = Refund();
        c.change(delivered);
        const Decision decision = Decide(stored, delivered);
        EXPECT_EQ(decision.outcome, Outcome::kConflict);
        EXPECT_EQ(decision.seq, 11);
    }
}

TEST(Decide, DeliveriesThatDisagreeWithTheOrderAreMismatch) {
    const struct {
        const char* name;
        Event delivered;
    } cases[] = {
        {"payment amount below the order's",
         [] {
             Event e = Payment();
             e.amount = kOrderAmount - 1;
             return e;
         }()},
        {"payment amount above the order's",
         [] {
             Event e = Payment();
             e.amount = kOrderAmount + 1;
             return e;
         }()},
        {"payment currency",
         [] {
             Event e = Payment();
             e.currency = "USD";
             return e;
         }()},
        {"refund amount above the order's",
         [] {
             Event e = Refund();
             e.amount = kOrderAmount + 1;
             return e;
         }()},
        {"refund currency",
         [] {
             Event e = Refund();
             e.currency = "HKD";
             return e;
         }()},
    };
    const std::vector<Event> stored{AsStored(Created(), 1)};
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const Decision decision = Decide(stored, c.delivered);
        EXPECT_EQ(decision.outcome, Outcome::kMismatch);
        EXPECT_EQ(decision.seq, 0);
        EXPECT_FALSE(decision.message.empty());
    }
}

TEST(Decide, RefundUpToTheOrderAmountIsAppended) {
    const std::vector<Event> stored{AsStored(Created(), 1), AsStored(Payment(), 2)};
    for (const std::int64_t amount : {std::int64_t{1}, kOrderAmount - 1, kOrderAmount}) {
        SCOPED_TRACE(amount);
        Event refund = Refund();
        refund.amount = amount;
        const Decision decision = Decide(stored, refund);
        EXPECT_EQ(decision.outcome, Outcome::kAppended);
        EXPECT_EQ(decision.event.amount, amount);
    }
}

TEST(Decide, RefundBeforeAnyPaymentIsAppendedForTheProjectionToFlag) {
    const std::vector<Event> stored{AsStored(Created(), 1)};
    EXPECT_EQ(Decide(stored, Refund()).outcome, Outcome::kAppended);
}

// The cross-checks: what a refund notice names about its order (the total) and its
// payment (the transaction id) must be the ledger's. A table, one row per claim.
TEST(Decide, RefundClaimsThatDisagreeWithTheOrderOrItsPaymentAreMismatch) {
    const struct {
        const char* name;
        Claims claims;
    } cases[] = {
        {"order total below", {.order_amount = kOrderAmount - 1}},
        {"order total above", {.order_amount = kOrderAmount + 1}},
        {"another payment", {.payment_transaction_id = "4200000002"}},
        {"both", {.order_amount = 1, .payment_transaction_id = "4200000002"}},
        {"right total, another payment",
         {.order_amount = kOrderAmount, .payment_transaction_id = "4200000002"}},
        {"right payment, another total",
         {.order_amount = 500, .payment_transaction_id = "4200000001"}},
    };
    const std::vector<Event> stored{AsStored(Created(), 1), AsStored(Payment(), 2)};
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const Decision decision = Decide(stored, Refund(), c.claims);
        EXPECT_EQ(decision.outcome, Outcome::kMismatch);
        EXPECT_EQ(decision.seq, 0);
        EXPECT_NE(decision.message.find("refund notice names"), std::string::npos)
            << decision.message;
    }
}

TEST(Decide, RefundClaimsThatAgreeOrAreAbsentAreAppended) {
    const std::vector<Event> stored{AsStored(Created(), 1), AsStored(Payment(), 2)};
    for (const Claims& claims :
         {Claims{}, Claims{.order_amount = kOrderAmount},
          Claims{.payment_transaction_id = "4200000001"},
          Claims{.order_amount = kOrderAmount, .payment_transaction_id = "4200000001"}}) {
        EXPECT_EQ(Decide(stored, Refund(), claims).outcome, Outcome::kAppended);
    }
}

// "when the order has one": before its payment, a refund's transaction id has nothing to be
// compared with; the total is still the order's.
TEST(Decide, RefundTransactionClaimIsCheckedOnlyOnceTheOrderHasAPayment) {
    const std::vector<Event> unpaid{AsStored(Created(), 1)};
    EXPECT_EQ(Decide(unpaid, Refund(), {.payment_transaction_id = "4200000002"}).outcome,
              Outcome::kAppended);
    EXPECT_EQ(Decide(unpaid, Refund(), {.order_amount = kOrderAmount + 1}).outcome,
              Outcome::kMismatch);
}

// The claims belong to refunds: a payment or close carries none, and the refund's own amount
// rule still comes first.
TEST(Decide, ClaimsAreCheckedForRefundsOnlyAfterTheRefundsOwnRules) {
    const std::vector<Event> stored{AsStored(Created(), 1), AsStored(Payment(), 2)};
    Event excessive = Refund();
    excessive.amount = kOrderAmount + 1;
    const Decision decision = Decide(stored, excessive, {.order_amount = 1});
    EXPECT_EQ(decision.outcome, Outcome::kMismatch);
    EXPECT_NE(decision.message.find("exceeds"), std::string::npos) << decision.message;
    const std::vector<Event> created{AsStored(Created(), 1)};
    EXPECT_EQ(Decide(created, Payment(), {.order_amount = 1}).outcome, Outcome::kAppended);
}

// A resend of a recorded refund stays a duplicate: the fingerprint decides first.
TEST(Decide, StoredRefundIsJudgedByFingerprintBeforeClaims) {
    const std::vector<Event> stored{AsStored(Created(), 1), AsStored(Payment(), 2),
                                    AsStored(Refund(), 3)};
    EXPECT_EQ(Decide(stored, Refund(), {.order_amount = 1}).outcome, Outcome::kDuplicate);
    Event other = Refund();
    other.transaction_id = "50300002";
    EXPECT_EQ(Decide(stored, other, {.order_amount = 1}).outcome, Outcome::kConflict);
}

TEST(Decide, StoredEventsOfAnotherOrderThrowInvariantError) {
    Event other = AsStored(Created(), 1);
    other.out_trade_no = "ORD-2";
    const std::vector<Event> stored{other};
    EXPECT_THROW((void)Decide(stored, Payment()), InvariantError);
}

}  // namespace
}  // namespace payledger::projections::decide_test
