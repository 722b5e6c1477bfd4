#include "projections/plan.hpp"

#include <utility>

#include "projections/assert.hpp"

namespace payledger::projections {
namespace {

// An order the batch names: its events so far, the row as stored, the row now.
struct PlannedOrder {
    std::vector<Event> events{};
    std::optional<OrderRow> stored{};
    std::optional<OrderRow> now{};
    bool touched = false;
    bool credits_payment = false;
};

}  // namespace

std::optional<std::int64_t> PlannedDelivery::ReceiptSeq() const {
    if (outcome == Outcome::kAppended || outcome == Outcome::kDuplicate) return seq;
    return std::nullopt;
}

void AddBalanceChange(const std::optional<OrderRow>& before, const OrderRow& after,
                      std::map<BalanceKey, std::int64_t>& deltas) {
    std::int64_t& delta = deltas[{after.account_id, after.currency}];
    delta += BalanceContribution(after);
    if (before) {
        PAYLEDGER_ASSERT(before->account_id == after.account_id);
        PAYLEDGER_ASSERT(before->currency == after.currency);
        delta -= BalanceContribution(*before);
    }
}

BatchPlan PlanBatch(LedgerState state, std::span<const PlanInput> inputs) {
    std::map<std::string, PlannedOrder> orders;
    for (auto& [key, events] : state.events) {
        PAYLEDGER_ASSERT(!events.empty());
        PlannedOrder& order = orders[key];
        order.events = std::move(events);
        order.stored = FoldOrder(order.events);
        order.now = order.stored;
    }

    BatchPlan plan;
    plan.deliveries.reserve(inputs.size());
    std::int64_t next_receipt_id = state.next_receipt_id;
    std::int64_t next_seq = state.next_seq;
    for (const PlanInput& input : inputs) {
        PAYLEDGER_ASSERT((input.outcome == Outcome::kAppended) == (input.event != nullptr));
        PlannedDelivery& delivery = plan.deliveries.emplace_back();
        delivery.receipt_id = next_receipt_id++;
        if (input.event == nullptr) {
            delivery.outcome = input.outcome;
            delivery.message = input.message;
            continue;
        }
        PlannedOrder& order = orders[input.event->out_trade_no];
        Decision decision =
            Decide(order.events, *input.event, input.claims != nullptr ? *input.claims : Claims{});
        delivery.outcome = decision.outcome;
        delivery.seq = decision.seq;
        delivery.message = std::move(decision.message);
        if (decision.outcome == Outcome::kAppended) {
            Event& event = decision.event;
            event.seq = next_seq++;
            event.receipt_id = delivery.receipt_id;
            delivery.seq = event.seq;
            order.touched = true;
            order.credits_payment |= event.event_type == EventType::kPaymentSucceeded;
            plan.events.push_back(event);
            order.events.push_back(std::move(event));
            order.now = FoldOrder(order.events);  // Every order's events include ORDER_CREATED.
        }
        delivery.order = order.now;
        if (input.event->event_type == EventType::kOrderCreated) {
            for (const Event& stored : order.events) {
                if (stored.event_type == EventType::kOrderCreated) {
                    delivery.registered_data = stored.data;
                    delivery.registered_at = stored.occurred_at;
                }
            }
        }
    }
    plan.last_receipt_id = next_receipt_id - 1;
    plan.last_seq = plan.events.empty() ? 0 : next_seq - 1;

    for (auto& [key, order] : orders) {
        if (!order.touched) continue;
        AddBalanceChange(order.stored, *order.now, plan.balance_deltas);
        plan.orders.push_back(
            {.after = std::move(*order.now),
             .prev_seq = order.stored ? std::optional(order.stored->seq) : std::nullopt,
             .credits_payment = order.credits_payment});
    }
    return plan;
}

}  // namespace payledger::projections
