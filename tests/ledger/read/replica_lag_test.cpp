// The replica's lag as ledger::PrimarySamples computes it from the primary's sampled WAL
// positions and the replica's replay position: 0 only when the replica has replayed the newest
// sample; otherwise the age of the oldest sample it has not replayed, which grows while it
// replays nothing (a replica that receives nothing), with or without new samples (a primary
// that cannot be asked). Thinning beyond kSamplesMax never understates the lag, checked
// against the exact lag of every sample kept.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "ledger/read/read_router.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;

const steady_clock::time_point kStart = steady_clock::time_point{} + std::chrono::hours{1};

steady_clock::time_point At(double s) {
    return kStart +
           std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double>(s));
}

TEST(PrimarySamples, NoSampleIsNoLag) {
    PrimarySamples samples;
    EXPECT_EQ(samples.Lag(0, At(10)), 0.0);
}

TEST(PrimarySamples, AReplicaThatReplayedTheNewestSampleHasNoLag) {
    PrimarySamples samples;
    samples.Add({.at = At(0), .lsn = 100});
    samples.Add({.at = At(1), .lsn = 200});
    EXPECT_EQ(samples.Lag(200, At(1.5)), 0.0);
    EXPECT_EQ(samples.size(), 0u);  // Replayed samples are forgotten.
    EXPECT_EQ(samples.Lag(200, At(60)), 0.0);
}

TEST(PrimarySamples, TheLagIsTheAgeOfTheOldestSampleNotReplayed) {
    PrimarySamples samples;
    samples.Add({.at = At(0), .lsn = 100});
    samples.Add({.at = At(1), .lsn = 200});
    samples.Add({.at = At(2), .lsn = 300});
    EXPECT_DOUBLE_EQ(samples.Lag(50, At(3)), 3.0);
    EXPECT_DOUBLE_EQ(samples.Lag(100, At(3)), 2.0);  // Replayed exactly the first.
    EXPECT_DOUBLE_EQ(samples.Lag(250, At(3)), 1.0);
    EXPECT_EQ(samples.Lag(300, At(3)), 0.0);
}

TEST(PrimarySamples, AReplicaThatReceivesNothingLagsMoreAndMore) {
    // The replica stays at 100 (its upstream is cut): however often it is asked, and though
    // it has replayed all it received, its lag grows with the primary's samples' age.
    PrimarySamples samples;
    samples.Add({.at = At(0), .lsn = 100});
    EXPECT_EQ(samples.Lag(100, At(0)), 0.0);
    double previous = 0.0;
    for (int s = 1; s <= 30; ++s) {
        samples.Add({.at = At(s), .lsn = 100 + static_cast<std::uint64_t>(s) * 10});
        const double lag = samples.Lag(100, At(s + 0.5));
        EXPECT_DOUBLE_EQ(lag, s - 1 + 0.5) << s;  // The sample at 1 s is the oldest unreplayed.
        EXPECT_GT(lag, previous);
        previous = lag;
    }
}

TEST(PrimarySamples, ThePrimaryUnansweredTheLagStillGrowsFromTheSamplesKept) {
    PrimarySamples samples;
    samples.Add({.at = At(0), .lsn = 100});
    samples.Add({.at = At(1), .lsn = 200});
    // No more samples (the primary cannot be asked); the replica replays nothing more.
    EXPECT_DOUBLE_EQ(samples.Lag(100, At(5)), 4.0);
    EXPECT_DOUBLE_EQ(samples.Lag(100, At(50)), 49.0);
    EXPECT_EQ(samples.Lag(200, At(51)), 0.0);  // Then it catches up.
}

TEST(PrimarySamples, AnUnchangedPositionKeepsTheTimeItWasFirstSeen) {
    PrimarySamples samples;
    samples.Add({.at = At(0), .lsn = 100});
    samples.Add({.at = At(5), .lsn = 100});  // An idle primary adds nothing.
    EXPECT_EQ(samples.size(), 1u);
    EXPECT_DOUBLE_EQ(samples.Lag(50, At(6)), 6.0);
}

TEST(PrimarySamples, ASampleOlderThanTheNewestIsABug) {
    PrimarySamples samples;
    samples.Add({.at = At(5), .lsn = 100});
    EXPECT_THROW(samples.Add({.at = At(4), .lsn = 200}), InvariantError);
}

// The exact lag from every sample ever taken.
double ExactLag(const std::vector<WalSample>& all, std::uint64_t replayed,
                steady_clock::time_point now) {
    for (const WalSample& sample : all) {
        if (sample.lsn > replayed) return std::chrono::duration<double>(now - sample.at).count();
    }
    return 0.0;
}

TEST(PrimarySamples, BeyondTheMaximumTheSamplesAreThinnedAndTheLagIsNeverUnderstated) {
    std::mt19937_64 random{20261204};
    std::uniform_int_distribution<int> gap_ms{1, 3000};
    std::uniform_int_distribution<std::uint64_t> step{1, 1 << 20};
    constexpr std::size_t kSampleCount = 3 * PrimarySamples::kSamplesMax;
    std::vector<WalSample> all;
    PrimarySamples samples;
    steady_clock::time_point at = kStart;
    std::uint64_t lsn = 1;
    for (std::size_t i = 0; i < kSampleCount; ++i) {
        at += std::chrono::milliseconds{gap_ms(random)};
        lsn += step(random);
        all.push_back({.at = at, .lsn = lsn});
        samples.Add(all.back());
        ASSERT_LE(samples.size(), PrimarySamples::kSamplesMax);
    }
    const steady_clock::time_point now = at + seconds{1};
    // The replica catches up in random steps: at every one, the lag is at least the exact one.
    std::uint64_t replayed = 0;
    std::size_t checks = 0;
    while (replayed < lsn) {
        replayed += step(random) * 64;
        const double exact = ExactLag(all, replayed, now);
        EXPECT_GE(samples.Lag(replayed, now), exact) << replayed;
        ++checks;
    }
    EXPECT_GT(checks, 100u);
    EXPECT_EQ(samples.Lag(lsn, now), 0.0);
}

}  // namespace
}  // namespace payledger::ledger
