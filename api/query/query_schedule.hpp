#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "api/config.hpp"
#include "api/query/platform_protocol.hpp"
#include "projections/event.hpp"

namespace payledger::api {

// What the schedule of one order decides after each attempt (docs/query.md#when): pure, the
// clock an argument, so that every branch is a row of a table test
// (tests/api/query/query_schedule_test.cpp). The I/O around it is QueryScheduler's.

// An order's schedule as the table order_queries holds it when its attempt is due.
struct ScheduleView {
    std::int64_t step = 0;  // Steps of schedule_seconds taken so far.
    QueryAction next_action = QueryAction::kQuery;
    std::optional<projections::TimeMicros> expires_at{};
    bool close_refused = false;  // The platform refused a close: the order was paid.
};

// What the attempt's answer became once the ledger had it (the write path's outcome), or none
// when nothing went to the ledger (not final, failed).
struct AttemptOutcome {
    AnswerKind kind = AnswerKind::kFailed;
    // The ledger's outcome of a stored answer (appended, duplicate, mismatch…); none when the
    // answer was not stored, or the ledger could not commit it (unavailable).
    std::optional<projections::Outcome> stored{};
};

// The schedule after the attempt: what is next and when, or nothing more.
struct ScheduleStep {
    std::int64_t step = 0;
    QueryAction next_action = QueryAction::kQuery;
    std::optional<projections::TimeMicros> next_at{};  // None: nothing more is due.
    bool close_refused = false;
    bool closed = false;  // The platform confirmed a close now: closed_at is set.
};

// The decision. A final answer the ledger took (appended, duplicate, or a conflict: the order
// is settled another way) ends the schedule; one the ledger could not commit is asked again
// at once. Otherwise a query is followed by the next step of `schedule.steps` (never past the
// expiry), and at or past `expires_at` by the close; a close the platform refused because the
// order was paid is followed at once by a query, and no close again; a close that failed is
// tried again after the next step.
[[nodiscard]] ScheduleStep NextStep(const ScheduleView& view, const AttemptOutcome& outcome,
                                    projections::TimeMicros now, const QuerySchedule& schedule);

// How hard the askers may ask (docs/query.md#pacing). Queries are background work: a backlog of
// due orders must not take what the callbacks need. While the write path carries callbacks (the
// committer spent at least kCallbackShareBusy of the last window writing batches that hold
// them, or more deliveries wait in its queue now than the askers could have put there: a burst
// has begun), the askers yield as PostgreSQL's autovacuum does to its foreground (a cost
// delay): one asks at a time and, after each ask, none asks again for kRestFactor times that
// ask's duration (a twentieth of one asker's time, whatever the machine's speed). Otherwise all
// `concurrency` ask.
inline constexpr double kCallbackShareBusy = 0.2;
inline constexpr int kRestFactor = 19;

struct AskerPace {
    std::size_t askers = 1;  // At most this many asking at once.
    int rest_factor = 0;     // After an ask, no other starts before rest_factor × its duration.
    [[nodiscard]] bool Paced() const { return rest_factor > 0; }
};

[[nodiscard]] AskerPace PaceAskers(double callback_share, std::size_t queued,
                                   std::size_t concurrency);

// The committer's counters at one instant, and how many of its deliveries were the scheduler's
// own answers.
struct WriteLoadSample {
    std::chrono::steady_clock::time_point at{};
    std::uint64_t step_micros = 0;  // Reading, planning and writing committed batches.
    std::uint64_t deliveries = 0;   // Committed deliveries, all sources.
    std::uint64_t answers = 0;      // Of which the query scheduler's own answers.
};

// The share of the time between `from` and `to` the committer spent on callbacks: its busy
// share, apportioned by the deliveries that were not the scheduler's answers (the askers must not
// read their own writes as the callbacks' load and slow themselves down). 0 when no time passed
// or nothing was committed.
[[nodiscard]] double CallbackShare(const WriteLoadSample& from, const WriteLoadSample& to);

}  // namespace payledger::api
