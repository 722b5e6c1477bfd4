#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "projections/event.hpp"

namespace payledger::ledger {
class ConnectionPool;
class Committer;
class ReadRouter;
}  // namespace payledger::ledger

namespace payledger::api {

// Counters of the service, rendered in Prometheus text format. Thread-safe (atomics).
// Synchronous replication as /readyz last read it on the primary (docs/operations.md).
struct SyncReplication {
    std::string standby_names{};  // synchronous_standby_names; empty: no commit waits.
    // Standbys synchronous now (pg_stat_replication.sync_state sync or quorum); none when the
    // role may not see it (without pg_read_all_stats).
    std::optional<std::int64_t> synchronous_standbys{};
};

// Whether synchronous_standby_names lets any standby confirm a commit: it names '*' (alone, as
// Patroni's strict mode sets it when it has no standby to name, or in a list: "FIRST 1 (s1, *)",
// quoted or not). Then a standby that is never promoted, a read replica or a backup's stream,
// may be the one that confirms, and a failover to another can lose what only it holds
// (deploy/patroni/README.md, the windows that remain).
[[nodiscard]] bool AnyStandbyConfirms(std::string_view standby_names);

class Metrics {
public:
    static constexpr std::size_t kChannelCount = 5;   // One per projections::Source.
    static constexpr std::size_t kOutcomeCount = 10;  // One per projections::Outcome.
    static constexpr std::array<double, 12> kLatencyBucketsSeconds{
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0};

    void CountDelivery(projections::Source channel, projections::Outcome outcome);
    void ObserveRequest(std::chrono::steady_clock::duration latency);
    void CountInternalError() { ++internal_errors_; }
    // Kept for /metrics, which does no database work of its own.
    void SetSyncReplication(SyncReplication sync);

    // The text of GET /metrics, with the pool's, the committer's and the read router's gauges.
    [[nodiscard]] std::string Render(const ledger::ConnectionPool& pool,
                                     const ledger::Committer& committer,
                                     const ledger::ReadRouter& reads) const;

private:
    std::array<std::array<std::atomic<std::uint64_t>, kOutcomeCount>, kChannelCount> deliveries_{};
    std::array<std::atomic<std::uint64_t>, kLatencyBucketsSeconds.size()> latency_buckets_{};
    std::atomic<std::uint64_t> latency_count_{0};
    std::atomic<std::uint64_t> latency_sum_micros_{0};
    std::atomic<std::uint64_t> internal_errors_{0};
    mutable std::mutex sync_mutex_;
    std::optional<SyncReplication> sync_{};  // Guarded by sync_mutex_; none before a check.
};

}  // namespace payledger::api
