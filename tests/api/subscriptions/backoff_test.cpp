// Tests of api/subscriptions/backoff.hpp RetryDelay: a table of failures, Retry-After values
// and random draws at the jitter's edges (0, 0.5, just under 1) against the exact delays, and
// a sweep showing every result within [1 s, 300 s] and within 20 % of its nominal delay.

#include "api/subscriptions/backoff.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "projections/assert.hpp"

namespace payledger::api {
namespace {

using std::chrono::milliseconds;

constexpr double kRandomJustUnderOne = 0.999999;

struct RetryDelayCase {
    std::int64_t failures = 1;
    std::optional<std::int64_t> retry_after_seconds{};
    double random_unit = 0.5;
    std::int64_t expected_ms = 0;
};

TEST(RetryDelay, Table) {
    const std::vector<RetryDelayCase> cases = {
        // Doubling from 1 s, no jitter at the middle draw.
        {1, std::nullopt, 0.5, 1'000},
        {2, std::nullopt, 0.5, 2'000},
        {3, std::nullopt, 0.5, 4'000},
        {8, std::nullopt, 0.5, 128'000},
        {9, std::nullopt, 0.5, 256'000},
        {10, std::nullopt, 0.5, 300'000},  // 512 s capped.
        {11, std::nullopt, 0.5, 300'000},
        {1'000'000, std::nullopt, 0.5, 300'000},  // No shift overflows.
        {INT64_MAX, std::nullopt, 0.5, 300'000},
        // Jitter: 0.8 to 1.2 of the nominal delay, inside [1 s, 300 s].
        {3, std::nullopt, 0.0, 3'200},
        {3, std::nullopt, kRandomJustUnderOne, 4'800},
        {3, std::nullopt, 0.25, 3'600},
        {1, std::nullopt, 0.0, 1'000},  // 800 ms raised to the 1 s floor.
        {1, std::nullopt, kRandomJustUnderOne, 1'200},
        {9, std::nullopt, kRandomJustUnderOne, 300'000},  // 307.2 s lowered to the 300 s cap.
        {9, std::nullopt, 0.0, 204'800},
        {12, std::nullopt, 0.0, 240'000},
        {12, std::nullopt, kRandomJustUnderOne, 300'000},
        // Retry-After replaces the doubling, never earlier than asked, within [1 s, 300 s].
        {1, 7, 0.0, 7'000},
        {1, 7, 0.5, 7'700},
        {9, 7, kRandomJustUnderOne, 8'400},  // However many failures came before.
        {1, 0, 0.0, 1'000},                  // "Retry-After: 0" waits the 1 s minimum.
        {1, 0, kRandomJustUnderOne, 1'200},
        {1, 299, 0.0, 299'000},
        {1, 299, 0.5, 300'000},  // 328.9 s lowered to the cap.
        {1, 300, 0.0, 300'000},
        {1, 3600, 0.0, 300'000},
        {1, INT64_MAX, 0.5, 300'000},
    };
    for (const RetryDelayCase& c : cases) {
        EXPECT_EQ(RetryDelay(c.failures, c.retry_after_seconds, c.random_unit),
                  milliseconds{c.expected_ms})
            << "failures " << c.failures << ", retry_after "
            << (c.retry_after_seconds ? std::to_string(*c.retry_after_seconds) : "none")
            << ", random " << c.random_unit;
    }
}

TEST(RetryDelay, EveryDrawStaysWithinBoundsAndJitter) {
    for (std::int64_t failures = 1; failures <= 14; ++failures) {
        const std::int64_t nominal_ms =
            std::min<std::int64_t>(1'000LL << std::min<std::int64_t>(failures - 1, 9), 300'000);
        for (int draw = 0; draw < 100; ++draw) {
            const double random_unit = draw / 100.0;
            const std::int64_t delay_ms = RetryDelay(failures, std::nullopt, random_unit).count();
            EXPECT_GE(delay_ms, 1'000);
            EXPECT_LE(delay_ms, 300'000);
            EXPECT_GE(delay_ms, nominal_ms * 8 / 10);
            EXPECT_LE(delay_ms, nominal_ms * 12 / 10);
        }
    }
}

TEST(RetryDelay, InvalidArgumentsAreInvariantErrors) {
    EXPECT_THROW((void)RetryDelay(0, std::nullopt, 0.5), InvariantError);
    EXPECT_THROW((void)RetryDelay(-1, std::nullopt, 0.5), InvariantError);
    EXPECT_THROW((void)RetryDelay(1, std::nullopt, 1.0), InvariantError);
    EXPECT_THROW((void)RetryDelay(1, std::nullopt, -0.1), InvariantError);
    EXPECT_THROW((void)RetryDelay(1, -5, 0.5), InvariantError);
}

}  // namespace
}  // namespace payledger::api
