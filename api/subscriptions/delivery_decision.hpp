#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "api/subscriptions/webhook_client.hpp"
#include "ledger/subscriptions/subscriptions.hpp"
#include "projections/event.hpp"

namespace payledger::api {

// The decisions of a subscription's thread (SubscriptionDeliverer, deliverer.hpp), apart from
// its I/O: given what is stored, what the receiver answered and what the clock says, what to
// do next. Pure: no database, no network, no clock and no randomness of their own, so that each
// branch is tested alone (tests/api/subscriptions/delivery_decision_test.cpp). The deliverer reads,
// POSTs and stores; these functions decide.

// Before a POST: whether the thread may deliver now, from the stored state.
struct Gate {
    enum class Kind {
        kDeliver,     // Send the held batch, or take the next.
        kDisabled,    // A 410 disabled it: nothing until an admin enables it.
        kBackingOff,  // After failures: not before the stored next attempt.
    };
    Kind kind = Kind::kDeliver;
    // The stored cursor is not where the thread last saw it (its first look, an admin's
    // rewind, another process moved it): drop the held batch and read from the stored cursor.
    // Never with kDisabled (an enable decides again).
    bool cursor_moved = false;
    std::chrono::milliseconds wait{0};  // kBackingOff: until the next attempt is due.
    bool operator==(const Gate&) const = default;
};

// `known_after`: the cursor as the thread last saw it stored; nullopt when it knows none.
[[nodiscard]] Gate DecideGate(const ledger::SubscriptionState& state,
                              std::optional<std::int64_t> known_after, projections::TimeMicros now);

// After a POST: what the receiver's answer makes of the batch.
struct Verdict {
    enum class Kind {
        kAdvance,  // Any 2xx: move the cursor to the batch's last seq.
        kDisable,  // 410 Gone: disable the subscription.
        kRetry,    // Anything else, no answer included: record the failure, send it again.
    };
    Kind kind = Kind::kAdvance;
    // kAdvance: before the next batch (`linger` after a batch short of batch_max, so that a
    // steady stream gathers into full batches; else none). kRetry: the back-off (RetryDelay;
    // Retry-After counts on a 429 or a 503 only, as Standard Webhooks says).
    std::chrono::milliseconds wait{0};
    std::string error{};  // kRetry: what the subscription's last_error keeps.
    bool operator==(const Verdict&) const = default;
};

// `consecutive_failures`: as stored before this attempt. `delivered`: the batch's events.
// `random_unit`: the back-off's jitter draw, in [0, 1).
[[nodiscard]] Verdict DecideOnAnswer(const WebhookResult& result, std::int32_t consecutive_failures,
                                     std::size_t delivered, std::int64_t batch_max,
                                     std::chrono::milliseconds linger, double random_unit);

// Once the verdict went to the database by compare-and-set on the cursor the thread knew:
// `stored` false when the cursor had moved meanwhile (an admin's rewind, another process).
struct Next {
    // Forget the held batch and the known cursor: the next step starts from what is stored.
    bool forget = false;
    std::chrono::milliseconds wait{0};
    bool operator==(const Next&) const = default;
};

[[nodiscard]] Next AfterStored(const Verdict& verdict, bool stored);

}  // namespace payledger::api
