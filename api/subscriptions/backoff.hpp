#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace payledger::api {

// How long a subscription waits before it sends a failed batch again. Pure: the caller
// supplies the randomness, so tests can pin it.

// The back-off's bounds: it starts at 1 s and doubles per consecutive failure up to 300 s.
inline constexpr std::chrono::milliseconds kRetryDelayMin{1'000};
inline constexpr std::chrono::milliseconds kRetryDelayMax{300'000};
// Jitter: at most this fraction either way, so that receivers that failed together (one
// outage) are not all retried in the same second.
inline constexpr double kRetryJitterFraction = 0.2;

// The delay after `consecutive_failures` failures in a row (1 after the first failure).
// Without `retry_after_seconds`: 1 s * 2^(failures - 1), at most 300 s, times a factor from
// 0.8 to 1.2 picked by `random_unit`. With it (the receiver's Retry-After on a 429 or 503,
// which only the caller knows): the receiver's delay clamped to 1..300 s, times a factor from
// 1.0 to 1.2, never earlier than it asked. Either way the result lies in [1 s, 300 s].
// REQUIRES: consecutive_failures >= 1; 0 <= random_unit < 1; retry_after_seconds >= 0.
[[nodiscard]] std::chrono::milliseconds RetryDelay(std::int64_t consecutive_failures,
                                                   std::optional<std::int64_t> retry_after_seconds,
                                                   double random_unit);

}  // namespace payledger::api
