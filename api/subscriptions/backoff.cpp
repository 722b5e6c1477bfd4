#include "api/subscriptions/backoff.hpp"

#include <algorithm>
#include <cmath>

#include "projections/assert.hpp"

namespace payledger::api {

std::chrono::milliseconds RetryDelay(std::int64_t consecutive_failures,
                                     std::optional<std::int64_t> retry_after_seconds,
                                     double random_unit) {
    PAYLEDGER_ASSERT(consecutive_failures >= 1);
    PAYLEDGER_ASSERT(random_unit >= 0.0);
    PAYLEDGER_ASSERT(random_unit < 1.0);
    const std::int64_t min_ms = kRetryDelayMin.count();
    const std::int64_t max_ms = kRetryDelayMax.count();
    std::int64_t nominal_ms = 0;
    double factor = 1.0;
    if (retry_after_seconds) {
        PAYLEDGER_ASSERT(*retry_after_seconds >= 0);
        // Compared in seconds first: a huge Retry-After must not overflow milliseconds.
        const std::int64_t seconds =
            std::clamp<std::int64_t>(*retry_after_seconds, min_ms / 1000, max_ms / 1000);
        nominal_ms = seconds * 1000;
        // Only later than asked: coming back early would be refused again.
        factor = 1.0 + kRetryJitterFraction * random_unit;
    } else {
        // 2^9 s = 512 s is past the cap already: no shift beyond it, so none overflows.
        const std::int64_t doublings = std::min<std::int64_t>(consecutive_failures - 1, 9);
        nominal_ms = std::min(min_ms << doublings, max_ms);
        factor = 1.0 - kRetryJitterFraction + 2.0 * kRetryJitterFraction * random_unit;
    }
    const auto jittered_ms =
        static_cast<std::int64_t>(std::llround(static_cast<double>(nominal_ms) * factor));
    return std::chrono::milliseconds{std::clamp(jittered_ms, min_ms, max_ms)};
}

}  // namespace payledger::api
