#pragma once

#include "projections/event.hpp"

namespace payledger::ledger {

// The wall clock, in microseconds since the Unix epoch (UTC): the one reading of the current
// time for what payledger records or compares with recorded times (a receipt's received_at,
// a checkpoint's signed_at, the reconcile --apply events, the subscriptions' lag, the log's
// ts). Durations are measured with std::chrono::steady_clock instead.
[[nodiscard]] projections::TimeMicros NowMicros();

}  // namespace payledger::ledger
