#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "projections/decide.hpp"
#include "projections/event.hpp"
#include "projections/order_fold.hpp"

namespace payledger::projections {

// The batch planner: everything the writer decides for one batch, as one pure function.
// The writer is lock → read → PlanBatch → write → check row counts → commit; the tests prove
// the plan against the fold from scratch (docs/events.md#invariants, 5) without a database.

// What the writer read under the writer lock: the next ids of both sequences, and the stored
// events of every order the batch names (an order without events has no entry).
struct LedgerState {
    std::int64_t next_seq = 1;
    std::int64_t next_receipt_id = 1;
    std::map<std::string, std::vector<Event>> events{};  // By out_trade_no.
};

// One delivery of a batch. `outcome` is kAppended when the ledger must decide `*event` (then
// `event` is set); any other outcome was reached before the ledger (malformed, bad_signature,
// mismatch with the configuration, ignored): only its receipt is written, with `message`.
// The pointers must outlive the call.
struct PlanInput {
    Outcome outcome = Outcome::kAppended;
    const Event* event = nullptr;
    const Claims* claims = nullptr;  // Optional even with an event.
    std::string_view message{};      // Only without an event.
};

// What becomes of one delivery.
struct PlannedDelivery {
    std::int64_t receipt_id = 0;
    Outcome outcome = Outcome::kAppended;
    // The appended event's seq; the existing event's for kDuplicate and kConflict; else 0.
    std::int64_t seq = 0;
    std::string message{};
    std::optional<OrderRow> order{};  // The order after this delivery, when it exists.
    // For an ORDER_CREATED delivery whose order exists after it (appended, or the one already
    // there): the data of the order's ORDER_CREATED, what its registration said beside the
    // fingerprint (channel, expires_at), which a duplicate does not change.
    std::string registered_data{};
    TimeMicros registered_at = 0;  // That ORDER_CREATED's occurred_at.

    // What the receipt stores in its `seq` column: appended and duplicate only.
    [[nodiscard]] std::optional<std::int64_t> ReceiptSeq() const;
};

// One row of `orders` to write: inserted when `prev_seq` is empty, else updated, and the
// update must find the row at `prev_seq` (and, when it credits a payment, without one).
struct OrderWrite {
    OrderRow after{};
    std::optional<std::int64_t> prev_seq{};
    bool credits_payment = false;
};

struct BatchPlan {
    std::vector<PlannedDelivery> deliveries{};  // One per input, in input order.
    std::vector<Event> events{};                // New, in seq order; seq and receipt_id set.
    std::vector<OrderWrite> orders{};           // Orders with a new event, by out_trade_no.
    // What `balances` gains per (account_id, currency) of every written order; 0 included,
    // so that a new order's account gets its row (docs/events.md#balances).
    std::map<BalanceKey, std::int64_t> balance_deltas{};
    std::int64_t last_receipt_id = 0;  // The receipt sequence's value after the batch.
    std::int64_t last_seq = 0;         // The event sequence's, or 0 when nothing is appended.
};

// Plans `inputs` in order against `state` with Decide, so that two copies in one batch give
// appended then duplicate, and one batch gives exactly what the same deliveries one batch
// each would. Each order is folded once, and once more per event appended to it.
// REQUIRES: `state.events` holds every stored event of each order an input names.
// Throws InvariantError when the stored events break an invariant.
[[nodiscard]] BatchPlan PlanBatch(LedgerState state, std::span<const PlanInput> inputs);

// Adds to `deltas` what replacing `before` (absent: a new order) by `after` changes in the
// balance of the order's account and currency. Shared by the writer's plan and rebuild.
// REQUIRES: `before`, when present, is the same order (same account and currency).
void AddBalanceChange(const std::optional<OrderRow>& before, const OrderRow& after,
                      std::map<BalanceKey, std::int64_t>& deltas);

}  // namespace payledger::projections
