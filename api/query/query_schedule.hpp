#pragma once

#include <chrono>
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

}  // namespace payledger::api
