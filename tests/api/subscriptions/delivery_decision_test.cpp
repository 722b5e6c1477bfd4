// Tests of api/subscriptions/delivery_decision.hpp, the subscription thread's decisions apart
// from its I/O, one table per decision: before a POST (deliver, disabled, backing off, due, the
// cursor moved or first seen), on the receiver's answer (2xx full and short, 410, 429 and 503
// with and without Retry-After, other statuses whose Retry-After is ignored, no answer), and
// once the verdict was stored or lost its compare-and-set.

#include "api/subscriptions/delivery_decision.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace payledger::api {
namespace {

using std::chrono::milliseconds;

constexpr projections::TimeMicros kNow = 1'780'000'000'000'000;

ledger::SubscriptionState Stored(std::int64_t after, bool disabled = false,
                                 std::optional<projections::TimeMicros> next_attempt_at = {}) {
    return ledger::SubscriptionState{.name = "rebates",
                                     .after = after,
                                     .disabled = disabled,
                                     .next_attempt_at = next_attempt_at};
}

struct GateCase {
    std::string what;
    ledger::SubscriptionState state;
    std::optional<std::int64_t> known_after;
    Gate expected;
};

TEST(DecideGate, Table) {
    using Kind = Gate::Kind;
    const std::vector<GateCase> cases = {
        {"due, the cursor where the thread left it", Stored(40), 40, {Kind::kDeliver, false}},
        {"first look: no cursor known", Stored(40), std::nullopt, {Kind::kDeliver, true}},
        {"rewound by an admin", Stored(12), 40, {Kind::kDeliver, true}},
        {"moved ahead by another process", Stored(90), 40, {Kind::kDeliver, true}},
        {"rewound to the very beginning", Stored(0), 40, {Kind::kDeliver, true}},
        {"disabled after a 410", Stored(40, true), 40, {Kind::kDisabled}},
        {"disabled, rewound meanwhile: an enable decides", Stored(3, true), 40, {Kind::kDisabled}},
        {"disabled, backing off too", Stored(40, true, kNow + 5'000'000), 40, {Kind::kDisabled}},
        {"backing off 5 s",
         Stored(40, false, kNow + 5'000'000),
         40,
         {Kind::kBackingOff, false, milliseconds{5'000}}},
        {"backing off, a part of a millisecond rounds up",
         Stored(40, false, kNow + 1),
         40,
         {Kind::kBackingOff, false, milliseconds{1}}},
        {"backing off 1.5 ms rounds up to 2",
         Stored(40, false, kNow + 1'500),
         40,
         {Kind::kBackingOff, false, milliseconds{2}}},
        {"backing off, rewound meanwhile",
         Stored(7, false, kNow + 2'000'000),
         40,
         {Kind::kBackingOff, true, milliseconds{2'000}}},
        {"due exactly now", Stored(40, false, kNow), 40, {Kind::kDeliver, false}},
        {"due since a while", Stored(40, false, kNow - 60'000'000), 40, {Kind::kDeliver, false}},
    };
    for (const GateCase& c : cases) {
        EXPECT_EQ(DecideGate(c.state, c.known_after, kNow), c.expected) << c.what;
    }
}

WebhookResult Answered(int status, std::optional<std::int64_t> retry_after = {}) {
    return WebhookResult{.status = status, .retry_after_seconds = retry_after};
}

// A retry after `wait_ms`, keeping `error` as last_error.
Verdict Retry(std::int64_t wait_ms, std::string error) {
    return Verdict{Verdict::Kind::kRetry, milliseconds{wait_ms}, std::move(error)};
}

struct AnswerCase {
    std::string what;
    WebhookResult result;
    std::int32_t consecutive_failures = 0;
    std::size_t delivered = 7;
    Verdict expected;
};

TEST(DecideOnAnswer, Table) {
    using Kind = Verdict::Kind;
    constexpr milliseconds kLinger{20};
    constexpr std::int64_t kBatchMax = 7;
    // The jitter draw of 0.5 leaves RetryDelay's nominal delays (backoff_test.cpp).
    constexpr double kMiddle = 0.5;
    WebhookResult timeout{.failure = WebhookFailure::kTimeout,
                          .error = "read from 127.0.0.1:9000: timed out"};
    WebhookResult refused{.failure = WebhookFailure::kConnect};
    const std::vector<AnswerCase> cases = {
        {"200, a full batch: the next at once", Answered(200), 0, 7, {Kind::kAdvance}},
        {"204, a short batch: linger", Answered(204), 0, 3, {Kind::kAdvance, kLinger}},
        {"299 is a 2xx", Answered(299), 4, 7, {Kind::kAdvance}},
        {"2xx after failures, Retry-After ignored",
         Answered(200, 60),
         5,
         1,
         {Kind::kAdvance, kLinger}},
        {"410 disables", Answered(410), 0, 7, {Kind::kDisable}},
        {"410 after failures, with Retry-After", Answered(410, 30), 3, 7, {Kind::kDisable}},
        {"500, first failure: 1 s", Answered(500), 0, 7, Retry(1'000, "HTTP 500")},
        {"500, fourth failure: 8 s", Answered(500), 3, 7, Retry(8'000, "HTTP 500")},
        {"500's Retry-After is ignored", Answered(500, 120), 0, 7, Retry(1'000, "HTTP 500")},
        {"429 with Retry-After: at least what it asked", Answered(429, 30), 0, 7,
         Retry(33'000, "HTTP 429")},
        {"503 with Retry-After, whatever failed before", Answered(503, 30), 6, 7,
         Retry(33'000, "HTTP 503")},
        {"429 without Retry-After doubles", Answered(429), 2, 7, Retry(4'000, "HTTP 429")},
        {"503 asking for hours: the cap", Answered(503, 36'000), 0, 7, Retry(300'000, "HTTP 503")},
        {"404", Answered(404), 0, 7, Retry(1'000, "HTTP 404")},
        {"301 is no acknowledgement", Answered(301), 0, 7, Retry(1'000, "HTTP 301")},
        {"100 is no acknowledgement", Answered(100), 0, 7, Retry(1'000, "HTTP 100")},
        {"a timeout: its error text", timeout, 1, 7,
         Retry(2'000, "read from 127.0.0.1:9000: timed out")},
        {"no answer and no text", refused, 0, 7, Retry(1'000, "no answer")},
        {"failures far past the cap", Answered(502), 1'000'000, 7, Retry(300'000, "HTTP 502")},
    };
    for (const AnswerCase& c : cases) {
        EXPECT_EQ(DecideOnAnswer(c.result, c.consecutive_failures, c.delivered, kBatchMax, kLinger,
                                 kMiddle),
                  c.expected)
            << c.what;
    }
}

TEST(DecideOnAnswer, TheBackOffsJitterIsTheCallersDraw) {
    const Verdict early = DecideOnAnswer(Answered(500), 2, 7, 7, milliseconds{20}, 0.0);
    const Verdict late = DecideOnAnswer(Answered(500), 2, 7, 7, milliseconds{20}, 0.999);
    EXPECT_EQ(early.wait, milliseconds{3'200});
    EXPECT_GT(late.wait, milliseconds{4'790});
    EXPECT_LE(late.wait, milliseconds{4'800});
}

TEST(AfterStored, Table) {
    using Kind = Verdict::Kind;
    const Verdict advanced{Kind::kAdvance, milliseconds{20}};
    const Verdict full{Kind::kAdvance};
    const Verdict gone{Kind::kDisable};
    const Verdict retry = Retry(4'000, "HTTP 500");
    // Stored: the cursor stays known; lingering, or at once, or after the back-off with the
    // same batch. A disabled subscription reads its state again (until an admin enables it).
    EXPECT_EQ(AfterStored(advanced, true), (Next{false, milliseconds{20}}));
    EXPECT_EQ(AfterStored(full, true), (Next{false, milliseconds{0}}));
    EXPECT_EQ(AfterStored(retry, true), (Next{false, milliseconds{4'000}}));
    EXPECT_EQ(AfterStored(gone, true), (Next{true, milliseconds{0}}));
    // The compare-and-set lost (a rewind, another process): forget and read what is stored,
    // at once, whatever the verdict was.
    for (const Verdict& verdict : {advanced, full, gone, retry}) {
        EXPECT_EQ(AfterStored(verdict, false), (Next{true, milliseconds{0}}));
    }
}

}  // namespace
}  // namespace payledger::api
