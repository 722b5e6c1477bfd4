#include "api/subscriptions/delivery_decision.hpp"

#include <utility>

#include "api/subscriptions/backoff.hpp"

namespace payledger::api {
namespace {

// What a failed attempt leaves for the operator (last_error): the status, or why none came.
std::string FailureText(const WebhookResult& result) {
    if (result.status != 0) return "HTTP " + std::to_string(result.status);
    return result.error.empty() ? std::string("no answer") : result.error;
}

}  // namespace

Gate DecideGate(const ledger::SubscriptionState& state, std::optional<std::int64_t> known_after,
                projections::TimeMicros now) {
    if (state.disabled) return Gate{.kind = Gate::Kind::kDisabled};
    const bool cursor_moved = known_after != state.after;
    if (state.next_attempt_at && *state.next_attempt_at > now) {
        // Rounded up: a wait rounded down to 0 ms would step again before it is due.
        return Gate{.kind = Gate::Kind::kBackingOff,
                    .cursor_moved = cursor_moved,
                    .wait = std::chrono::ceil<std::chrono::milliseconds>(
                        std::chrono::microseconds{*state.next_attempt_at - now})};
    }
    return Gate{.kind = Gate::Kind::kDeliver, .cursor_moved = cursor_moved};
}

Verdict DecideOnAnswer(const WebhookResult& result, std::int32_t consecutive_failures,
                       std::size_t delivered, std::int64_t batch_max,
                       std::chrono::milliseconds linger, double random_unit) {
    if (result.status >= 200 && result.status < 300) {
        return Verdict{
            .kind = Verdict::Kind::kAdvance,
            .wait = std::cmp_less(delivered, batch_max) ? linger : std::chrono::milliseconds{0}};
    }
    if (result.status == 410) return Verdict{.kind = Verdict::Kind::kDisable};
    const bool honour_retry_after = result.status == 429 || result.status == 503;
    return Verdict{.kind = Verdict::Kind::kRetry,
                   .wait = RetryDelay(
                       std::int64_t{consecutive_failures} + 1,
                       honour_retry_after ? result.retry_after_seconds : std::nullopt, random_unit),
                   .error = FailureText(result)};
}

Next AfterStored(const Verdict& verdict, bool stored) {
    // Lost the compare-and-set: the stored state decides, at once.
    if (!stored) return Next{.forget = true};
    switch (verdict.kind) {
        case Verdict::Kind::kAdvance:
        case Verdict::Kind::kRetry:
            // The cursor is where the thread left it (advanced, or unchanged with the same
            // batch to send again after the back-off).
            return Next{.forget = false, .wait = verdict.wait};
        case Verdict::Kind::kDisable:
            // Nothing is delivered until an admin enables it; the next step reads that.
            return Next{.forget = true};
    }
    return Next{.forget = true};
}

}  // namespace payledger::api
