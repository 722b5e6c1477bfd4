#include "api/query/query_schedule.hpp"

#include <algorithm>

namespace payledger::api {
namespace {

using projections::Outcome;

constexpr projections::TimeMicros kMicrosPerScheduleSecond = 1'000'000;

// A stored answer that settles the order for the schedule: the event is in the ledger (new, or
// there already), or the order holds another one for that key (a conflict).
bool Settles(const AttemptOutcome& outcome) {
    if (!outcome.stored) return false;
    switch (*outcome.stored) {
        case Outcome::kAppended:
        case Outcome::kDuplicate:
        case Outcome::kConflict:
            return true;
        case Outcome::kIgnored:
        case Outcome::kMalformed:
        case Outcome::kBadSignature:
        case Outcome::kUnknownOrder:
        case Outcome::kMismatch:
        case Outcome::kRateLimited:
        case Outcome::kUnavailable:
            return false;
    }
    return false;
}

// The next step of the schedule from `now`, never past the expiry; after the last step, the
// expiry itself (for the close) when it is still ahead, else nothing.
ScheduleStep NextOnSchedule(const ScheduleView& view, QueryAction action,
                            projections::TimeMicros now, const QuerySchedule& schedule) {
    ScheduleStep next{
        .step = view.step, .next_action = action, .close_refused = view.close_refused};
    if (view.step < static_cast<std::int64_t>(schedule.steps.size())) {
        const auto wait = schedule.steps[static_cast<std::size_t>(view.step)];
        next.next_at =
            now + static_cast<projections::TimeMicros>(wait.count()) * kMicrosPerScheduleSecond;
        next.step = view.step + 1;
        if (view.expires_at && !view.close_refused && *view.expires_at > now) {
            next.next_at = std::min(*next.next_at, *view.expires_at);
        }
    } else if (view.expires_at && !view.close_refused && *view.expires_at > now) {
        next.next_at = *view.expires_at;
    }
    return next;
}

}  // namespace

ScheduleStep NextStep(const ScheduleView& view, const AttemptOutcome& outcome,
                      projections::TimeMicros now, const QuerySchedule& schedule) {
    ScheduleStep done{
        .step = view.step, .next_action = view.next_action, .close_refused = view.close_refused};
    const bool stored_but_uncommitted = outcome.stored && *outcome.stored == Outcome::kUnavailable;
    if (stored_but_uncommitted) {
        // The answer is good and the ledger could not take it now: ask again at once.
        done.next_at = now;
        return done;
    }
    if (outcome.kind == AnswerKind::kClosePaid) {
        // Paid between the last query and the close: the query finds the payment.
        return {.step = view.step,
                .next_action = QueryAction::kQuery,
                .next_at = now,
                .close_refused = true};
    }
    if ((outcome.kind == AnswerKind::kFinal || outcome.kind == AnswerKind::kClosed) &&
        Settles(outcome)) {
        done.closed = outcome.kind == AnswerKind::kClosed;
        return done;  // Settled: nothing more is due.
    }
    if (view.next_action == QueryAction::kQuery) {
        const bool expired = view.expires_at && *view.expires_at <= now && !view.close_refused;
        if (expired) {
            // The one more query at the expiry found it unpaid: close it now.
            return {.step = view.step,
                    .next_action = QueryAction::kClose,
                    .next_at = now,
                    .close_refused = false};
        }
        return NextOnSchedule(view, QueryAction::kQuery, now, schedule);
    }
    // A close that did not go through: again after the next step, while steps are left.
    ScheduleStep next = NextOnSchedule(
        {.step = view.step, .next_action = view.next_action, .expires_at = std::nullopt},
        QueryAction::kClose, now, schedule);
    return next;
}

AskerPace PaceAskers(double callback_share, std::size_t queued, std::size_t concurrency) {
    if (callback_share >= kCallbackShareBusy || queued > concurrency) {
        return {.askers = 1, .rest_factor = kRestFactor};
    }
    return {.askers = std::max<std::size_t>(concurrency, 1), .rest_factor = 0};
}

double CallbackShare(const WriteLoadSample& from, const WriteLoadSample& to) {
    const auto wall =
        std::chrono::duration_cast<std::chrono::microseconds>(to.at - from.at).count();
    if (wall <= 0 || to.deliveries <= from.deliveries || to.step_micros < from.step_micros) {
        return 0.0;
    }
    const double deliveries = static_cast<double>(to.deliveries - from.deliveries);
    const double answers =
        to.answers > from.answers ? static_cast<double>(to.answers - from.answers) : 0.0;
    const double callbacks = std::max(deliveries - answers, 0.0);
    const double busy =
        static_cast<double>(to.step_micros - from.step_micros) / static_cast<double>(wall);
    return std::min(busy, 1.0) * (callbacks / deliveries);
}

}  // namespace payledger::api
