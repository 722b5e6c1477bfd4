#pragma once

// The properties of a batch plan, checked without a database: shared by the exhaustive and
// property tests (plan_test.cpp) and the fuzz target (tests/fuzz/fuzz_plan.cpp).

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "projections/event.hpp"
#include "projections/order_fold.hpp"
#include "projections/plan.hpp"
#include "tests/projections/order_events.hpp"

namespace payledger::testing {

// A delivery as the tests build them: owns what projections::PlanInput points to.
struct PlanCase {
    projections::Outcome outcome = projections::Outcome::kAppended;
    std::optional<projections::Event> event{};
    projections::Claims claims{};
    std::string message{};

    [[nodiscard]] projections::PlanInput Input() const {
        return {.outcome = outcome,
                .event = event ? &*event : nullptr,
                .claims = &claims,
                .message = event ? std::string_view{} : std::string_view{message}};
    }
};

inline std::vector<projections::PlanInput> Inputs(std::span<const PlanCase> cases) {
    std::vector<projections::PlanInput> inputs;
    for (const PlanCase& c : cases) inputs.push_back(c.Input());
    return inputs;
}

// The balances the orders of `events` give, folded from scratch (docs/events.md#balances): one row
// per account and currency with an order.
inline std::map<projections::BalanceKey, std::int64_t> BalancesFromScratch(
    const std::map<std::string, std::vector<projections::Event>>& events) {
    std::map<projections::BalanceKey, std::int64_t> balances;
    for (const auto& [key, order_events] : events) {
        if (!order_events.empty())
            projections::AddToBalances(projections::FoldOrder(order_events), balances);
    }
    return balances;
}

// The orders the tests and the fuzz target draw from.
inline const std::vector<OrderSpec>& Orders() {
    // A and B share an account (their deltas add up); C has its own account and currency.
    static const std::vector<OrderSpec> orders = {
        {"ORD-A", "acct-1", "CNY", 1000},
        {"ORD-B", "acct-1", "CNY", 250},
        {"ORD-C", "acct-2", "USD", 777},
    };
    return orders;
}

inline PlanCase Deliver(projections::Event event, projections::Claims claims = {}) {
    return {.event = std::move(event), .claims = std::move(claims)};
}

// The pool of one order: every event type; a second payment that conflicts with the first;
// a payment of the wrong amount (mismatch); a refund whose notice names another payment
// (mismatch once "t1" is paid); a delivery refused before the ledger (only its receipt).
inline std::vector<PlanCase> Pool(const OrderSpec& order) {
    return {
        Deliver(Created(order)),
        Deliver(Payment(order, "t1", order.amount)),
        Deliver(Payment(order, "t2", order.amount)),
        Deliver(Payment(order, "t1", order.amount + 1)),
        Deliver(Close(order)),
        Deliver(Refund(order, "r1", order.amount / 2)),
        Deliver(Refund(order, "r2", order.amount / 2), {.payment_transaction_id = "t2"}),
        {.outcome = projections::Outcome::kBadSignature,
         .message = "signature of " + order.key + " fails"},
    };
}

// What an order may already hold: nothing, its creation, a payment, a close, a refund.
enum class Stored { kNothing, kCreated, kPaid, kClosed, kRefunded };

inline void Store(const OrderSpec& order, Stored stored, projections::LedgerState& state) {
    if (stored == Stored::kNothing) return;
    std::vector<projections::Event>& events = state.events[order.key];
    auto add = [&](projections::Event event) {
        event.seq = state.next_seq++;
        event.receipt_id = state.next_receipt_id++;
        if (event.event_type != projections::EventType::kOrderCreated)
            event.account_id = order.account;
        events.push_back(std::move(event));
    };
    add(Created(order));
    if (stored == Stored::kPaid || stored == Stored::kRefunded)
        add(Payment(order, "t1", order.amount));
    if (stored == Stored::kClosed) add(Close(order));
    if (stored == Stored::kRefunded) add(Refund(order, "r1", order.amount / 2));
}

// Every property of `plan`, the plan of `cases` against `before`; one line per failure.
// 1. Receipt ids and seqs are consecutive from the sequences' next values, in input order;
//    each appended delivery names its event and the event its receipt.
// 2. Each order written equals the fold from scratch of its stored and new events; only
//    orders with a new event are written; an update expects the stored row's seq.
// 3. The balances before plus the deltas equal the balances from scratch (invariant 5).
// 4. One batch answers exactly what the same deliveries one batch each answer in turn.
inline std::vector<std::string> CheckPlan(const projections::LedgerState& before,
                                          std::span<const PlanCase> cases,
                                          const projections::BatchPlan& plan) {
    using projections::Outcome;
    std::vector<std::string> failures;
    auto fail = [&failures](std::string what) { failures.push_back(std::move(what)); };
    if (plan.deliveries.size() != cases.size()) {
        fail("one planned delivery per input");
        return failures;
    }

    // 1.
    std::int64_t expected_seq = before.next_seq;
    std::size_t appended = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const projections::PlannedDelivery& d = plan.deliveries[i];
        if (d.receipt_id != before.next_receipt_id + static_cast<std::int64_t>(i)) {
            fail("receipt " + std::to_string(i) + " has id " + std::to_string(d.receipt_id));
        }
        if (!cases[i].event && (d.outcome != cases[i].outcome || d.message != cases[i].message)) {
            fail("delivery " + std::to_string(i) + " decided before the ledger was changed");
        }
        if (d.outcome != Outcome::kAppended) continue;
        if (appended >= plan.events.size()) {
            fail("more appended deliveries than new events");
            break;
        }
        const projections::Event& event = plan.events[appended++];
        if (event.seq != expected_seq++ || d.seq != event.seq || event.receipt_id != d.receipt_id ||
            !cases[i].event || event.out_trade_no != cases[i].event->out_trade_no ||
            event.event_type != cases[i].event->event_type) {
            fail("appended delivery " + std::to_string(i) + " and event seq " +
                 std::to_string(event.seq) + " do not name each other");
        }
    }
    if (appended != plan.events.size()) fail("new events without an appended delivery");
    const std::int64_t last_receipt_id =
        before.next_receipt_id + static_cast<std::int64_t>(cases.size()) - 1;
    if (plan.last_receipt_id != last_receipt_id) fail("receipt sequence left wrong");
    if (plan.last_seq != (plan.events.empty() ? 0 : expected_seq - 1)) {
        fail("event sequence left wrong");
    }

    // 2.
    std::map<std::string, std::vector<projections::Event>> after = before.events;
    for (const projections::Event& event : plan.events) after[event.out_trade_no].push_back(event);
    std::map<std::string, const projections::OrderWrite*> written;
    for (const projections::OrderWrite& write : plan.orders) {
        if (!written.emplace(write.after.out_trade_no, &write).second) {
            fail("order " + write.after.out_trade_no + " written twice");
        }
    }
    for (const auto& [key, events] : after) {
        if (events.empty()) continue;
        const auto stored = before.events.find(key);
        const bool has_stored = stored != before.events.end() && !stored->second.empty();
        const bool has_new = events.size() > (has_stored ? stored->second.size() : 0);
        const auto it = written.find(key);
        if (has_new != (it != written.end())) {
            fail("order " + key + (has_new ? " not written" : " written without a new event"));
            continue;
        }
        if (!has_new) continue;
        const projections::OrderWrite& write = *it->second;
        if (write.after != projections::FoldOrder(events)) {
            fail("order " + key + " differs from its fold from scratch");
        }
        const std::optional<std::int64_t> prev_seq =
            has_stored ? std::optional(projections::FoldOrder(stored->second).seq) : std::nullopt;
        if (write.prev_seq != prev_seq) fail("order " + key + " expects the wrong stored seq");
        bool credits = false;
        for (const projections::Event& event : plan.events) {
            credits |= event.out_trade_no == key &&
                       event.event_type == projections::EventType::kPaymentSucceeded;
        }
        if (write.credits_payment != credits) fail("order " + key + " credits_payment wrong");
    }
    if (written.size() != plan.orders.size()) fail("duplicate order writes");

    // 3.
    std::map<projections::BalanceKey, std::int64_t> balances = BalancesFromScratch(before.events);
    for (const auto& [key, delta] : plan.balance_deltas) balances[key] += delta;
    if (balances != BalancesFromScratch(after)) fail("balances differ from the fold from scratch");

    // 4.
    projections::LedgerState state = before;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const projections::PlanInput input = cases[i].Input();
        const projections::BatchPlan one =
            projections::PlanBatch(state, std::span<const projections::PlanInput>(&input, 1));
        const projections::PlannedDelivery& alone = one.deliveries.at(0);
        const projections::PlannedDelivery& batched = plan.deliveries[i];
        if (alone.outcome != batched.outcome || alone.seq != batched.seq ||
            alone.message != batched.message || alone.order != batched.order) {
            fail("delivery " + std::to_string(i) + " is answered differently in a batch (" +
                 std::string(projections::ToString(batched.outcome)) + ") than alone (" +
                 std::string(projections::ToString(alone.outcome)) + ")");
        }
        state.next_receipt_id = one.last_receipt_id + 1;
        if (one.last_seq != 0) state.next_seq = one.last_seq + 1;
        for (const projections::Event& event : one.events) {
            state.events[event.out_trade_no].push_back(event);
        }
    }
    return failures;
}

}  // namespace payledger::testing
