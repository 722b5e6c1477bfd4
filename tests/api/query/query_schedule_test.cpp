// Tests of api/query/query_schedule.hpp: every branch of the schedule's decision in one table
// (a final answer the ledger took ends it, one it could not commit is asked again at once; a
// query is followed by the next step, never past the expiry; at the expiry the close; a close
// refused because paid is followed at once by a query and never a second close; a failed close
// again after a step; the schedule's end), with the clock an argument; and the askers' pace.
#include "api/query/query_schedule.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace payledger::api {
namespace {

using projections::Outcome;
using projections::TimeMicros;

constexpr TimeMicros kDecideSecond = 1'000'000;
constexpr TimeMicros kDecideNow = 1'700'000'000 * kDecideSecond;

QuerySchedule Schedule() {
    return QuerySchedule{.first_after = std::chrono::seconds{60},
                         .steps = {std::chrono::seconds{60}, std::chrono::seconds{120}}};
}

TEST(QueryScheduleTest, EveryBranchAsTheTableSays) {
    struct Case {
        const char* what;
        ScheduleView view;
        AttemptOutcome outcome;
        ScheduleStep expected;
    };
    const std::optional<TimeMicros> in_30s = kDecideNow + 30 * kDecideSecond;
    const std::optional<TimeMicros> in_600s = kDecideNow + 600 * kDecideSecond;
    const std::optional<TimeMicros> past = kDecideNow - kDecideSecond;
    const std::vector<Case> cases = {
        {"paid: appended ends the schedule",
         {.step = 0},
         {.kind = AnswerKind::kFinal, .stored = Outcome::kAppended},
         {.step = 0, .next_at = std::nullopt}},
        {"paid already (the notification came first): duplicate ends it",
         {.step = 1},
         {.kind = AnswerKind::kFinal, .stored = Outcome::kDuplicate},
         {.step = 1, .next_at = std::nullopt}},
        {"the order holds another event for the key: conflict ends it",
         {.step = 1},
         {.kind = AnswerKind::kFinal, .stored = Outcome::kConflict},
         {.step = 1, .next_at = std::nullopt}},
        {"final but the ledger could not commit: at once",
         {.step = 1},
         {.kind = AnswerKind::kFinal, .stored = Outcome::kUnavailable},
         {.step = 1, .next_at = kDecideNow}},
        {"final but a mismatch (another amount): the schedule goes on",
         {.step = 0},
         {.kind = AnswerKind::kFinal, .stored = Outcome::kMismatch},
         {.step = 1, .next_at = kDecideNow + 60 * kDecideSecond}},
        {"not final: the next step",
         {.step = 0},
         {.kind = AnswerKind::kNotFinal},
         {.step = 1, .next_at = kDecideNow + 60 * kDecideSecond}},
        {"failed: the next step too",
         {.step = 1},
         {.kind = AnswerKind::kFailed},
         {.step = 2, .next_at = kDecideNow + 120 * kDecideSecond}},
        {"bad signature: the next step (the schedule goes on)",
         {.step = 1},
         {.kind = AnswerKind::kBadSignature, .stored = Outcome::kBadSignature},
         {.step = 2, .next_at = kDecideNow + 120 * kDecideSecond}},
        {"the last step taken, no expiry: nothing more",
         {.step = 2},
         {.kind = AnswerKind::kNotFinal},
         {.step = 2, .next_at = std::nullopt}},
        {"the last step taken, the expiry ahead: the expiry",
         {.step = 2, .expires_at = in_600s},
         {.kind = AnswerKind::kNotFinal},
         {.step = 2, .next_at = in_600s}},
        {"a step never goes past the expiry",
         {.step = 0, .expires_at = in_30s},
         {.kind = AnswerKind::kNotFinal},
         {.step = 1, .next_at = in_30s}},
        {"the query at the expiry found it unpaid: close now",
         {.step = 1, .expires_at = past},
         {.kind = AnswerKind::kNotFinal},
         {.step = 1, .next_action = QueryAction::kClose, .next_at = kDecideNow}},
        {"a close confirmed and appended: done, closed",
         {.step = 1, .next_action = QueryAction::kClose, .expires_at = past},
         {.kind = AnswerKind::kClosed, .stored = Outcome::kAppended},
         {.step = 1, .next_action = QueryAction::kClose, .next_at = std::nullopt, .closed = true}},
        {"a close refused because paid: a query at once, and never a close again",
         {.step = 1, .next_action = QueryAction::kClose, .expires_at = past},
         {.kind = AnswerKind::kClosePaid},
         {.step = 1,
          .next_action = QueryAction::kQuery,
          .next_at = kDecideNow,
          .close_refused = true}},
        {"after a refused close, a query that is not final goes on with the steps, not closing",
         {.step = 1, .expires_at = past, .close_refused = true},
         {.kind = AnswerKind::kNotFinal},
         {.step = 2, .next_at = kDecideNow + 120 * kDecideSecond, .close_refused = true}},
        {"a close that failed: again after the next step",
         {.step = 1, .next_action = QueryAction::kClose, .expires_at = past},
         {.kind = AnswerKind::kFailed},
         {.step = 2,
          .next_action = QueryAction::kClose,
          .next_at = kDecideNow + 120 * kDecideSecond}},
        {"a close that failed at the end of the steps: nothing more (the statement is the net)",
         {.step = 2, .next_action = QueryAction::kClose, .expires_at = past},
         {.kind = AnswerKind::kFailed},
         {.step = 2, .next_action = QueryAction::kClose, .next_at = std::nullopt}},
    };
    for (const Case& c : cases) {
        const ScheduleStep got = NextStep(c.view, c.outcome, kDecideNow, Schedule());
        EXPECT_EQ(got.step, c.expected.step) << c.what;
        EXPECT_EQ(got.next_action, c.expected.next_action) << c.what;
        EXPECT_EQ(got.next_at, c.expected.next_at) << c.what;
        EXPECT_EQ(got.close_refused, c.expected.close_refused) << c.what;
        EXPECT_EQ(got.closed, c.expected.closed) << c.what;
    }
}

// The askers' pace (docs/query.md#pacing): all of them while the callbacks leave the committer
// idle more than four fifths of the time and no more deliveries wait for it than the askers could
// have queued; one, resting nineteen times its ask, beyond either.
TEST(QueryScheduleTest, TheAskersYieldWhenTheCallbacksKeepTheCommitterBusy) {
    struct Case {
        double share;
        std::size_t queued;
        std::size_t concurrency;
        AskerPace expected;
    };
    const std::vector<Case> cases = {
        {0.0, 0, 8, {.askers = 8, .rest_factor = 0}},
        {0.19, 8, 8, {.askers = 8, .rest_factor = 0}},
        {0.2, 0, 8, {.askers = 1, .rest_factor = 19}},
        {1.0, 0, 8, {.askers = 1, .rest_factor = 19}},
        {0.0, 9, 8, {.askers = 1, .rest_factor = 19}},
        {0.0, 0, 1, {.askers = 1, .rest_factor = 0}},
        {0.5, 0, 1, {.askers = 1, .rest_factor = 19}},
        {0.0, 2, 1, {.askers = 1, .rest_factor = 19}},
    };
    for (const Case& c : cases) {
        const AskerPace got = PaceAskers(c.share, c.queued, c.concurrency);
        const std::string what = std::to_string(c.share) + " " + std::to_string(c.queued) + " " +
                                 std::to_string(c.concurrency);
        EXPECT_EQ(got.askers, c.expected.askers) << what;
        EXPECT_EQ(got.rest_factor, c.expected.rest_factor) << what;
        EXPECT_EQ(got.Paced(), c.expected.rest_factor > 0) << what;
    }
}

// The callbacks' share of the committer's time: its busy share, apportioned by the deliveries
// that were not the askers' own answers.
TEST(QueryScheduleTest, TheCallbacksShareLeavesOutTheAskersOwnAnswers) {
    using std::chrono::milliseconds;
    const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours{1};
    const WriteLoadSample from{.at = t0, .step_micros = 1'000, .deliveries = 50, .answers = 10};
    struct Case {
        const char* what;
        WriteLoadSample to;
        double expected;
    };
    const std::vector<Case> cases = {
        {"callbacks only, busy half the window",
         {.at = t0 + milliseconds{500}, .step_micros = 251'000, .deliveries = 150, .answers = 10},
         0.5},
        {"the askers' answers only: no load for them",
         {.at = t0 + milliseconds{500}, .step_micros = 401'000, .deliveries = 60, .answers = 20},
         0.0},
        {"three quarters callbacks, busy the whole window",
         {.at = t0 + milliseconds{500}, .step_micros = 501'000, .deliveries = 90, .answers = 20},
         0.75},
        {"more step time than wall time (a batch's steps span windows): at most all of it",
         {.at = t0 + milliseconds{500}, .step_micros = 2'001'000, .deliveries = 150, .answers = 10},
         1.0},
        {"nothing committed",
         {.at = t0 + milliseconds{500}, .step_micros = 1'000, .deliveries = 50, .answers = 10},
         0.0},
        {"no time passed", {.at = t0, .step_micros = 9'000, .deliveries = 70, .answers = 10}, 0.0},
    };
    for (const Case& c : cases) {
        EXPECT_DOUBLE_EQ(CallbackShare(from, c.to), c.expected) << c.what;
    }
}

}  // namespace
}  // namespace payledger::api
