#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "ledger/pg/connection_pool.hpp"
#include "ledger/pg/database.hpp"

namespace payledger::ledger {

// The session settings of replica connections: the defaults, read-only allowed.
[[nodiscard]] SessionSettings ReplicaSession();

// A streaming replica for the auditor reads (read_database_url, read_max_lag_seconds;
// docs/availability.md#read-replicas).
struct ReplicaOptions {
    std::string url{};
    std::chrono::seconds lag_max{30};
    std::size_t pool_size_max = 8;
    std::chrono::milliseconds pool_wait_max{2'000};
    std::chrono::milliseconds check_interval{1'000};
    SessionSettings session = ReplicaSession();
};

// Why a read went to the primary although a replica is configured.
enum class Instead : std::uint8_t {
    kStarting,      // No check of the replica has ended yet.
    kUnreachable,   // It does not answer, or its last good check is older than 5 s.
    kNotReplaying,  // It reports no replay position.
    kLagging,       // It lags more than read_max_lag_seconds.
    kUnconfirmed,   // The primary does not hold its newest receipt (ReadRouter::ConfirmShown).
};
inline constexpr std::size_t kInsteadCount = 5;
// The label of each in /metrics (payledger_reads_sent_to_primary_total's `reason`).
inline constexpr std::array<const char*, kInsteadCount> kInsteadNames{
    "starting", "unreachable", "not_replaying", "lagging", "unconfirmed"};

// What GET /metrics shows of the reads (ReadRouter::status).
struct ReadStatus {
    bool configured = false;              // A replica is configured.
    bool on_replica = false;              // Reads go to it now.
    std::optional<double> lag_seconds{};  // Last measured; none while unreachable or unknown.
    std::uint64_t fallbacks = 0;          // Switches from the replica to the primary.
    std::uint64_t replica_reads = 0;      // Connections handed out, by server.
    std::uint64_t primary_reads = 0;
    // Reads sent to the primary although a replica is configured, by Instead; an unconfirmed
    // one was read from the replica first, and again from the primary.
    std::array<std::uint64_t, kInsteadCount> primary_instead{};
};

// Where one auditor read is served from, for its answer's Payledger-Read-From header.
struct ReadSource {
    bool replica = false;
    double lag_seconds = 0.0;  // The replica's lag at its last check; 0 on the primary.
};

// A pooled connection for one auditor read and where it leads.
struct ReadLease {
    ConnectionPool::Lease connection;
    ReadSource source{};
};

// A connection of the caller's own for one auditor read and where it leads.
struct ReadConnection {
    std::unique_ptr<pqxx::connection> connection{};
    ReadSource source{};
};

// A WAL position of the primary, stamped with the time just before the primary was asked for
// it (it may have reached it a little later: the stamp errs towards a longer lag).
struct WalSample {
    std::chrono::steady_clock::time_point at{};
    std::uint64_t lsn = 0;
};

// The primary's recent WAL positions that a replica has not replayed yet, oldest first, and
// the replica's lag computed from them, without I/O: the ReadRouter's monitor feeds it one
// sample of each server per check. Not thread-safe.
//
// The lag is now minus the time of the oldest sample the replica has not replayed: 0 when it
// has replayed the newest, and growing while it has not, whatever the replica says about
// itself (a replica that receives nothing has replayed all it received).
class PrimarySamples {
public:
    // More samples than this (a primary that writes while the replica replays nothing, for
    // more than an hour at one sample a second) are thinned: see Add.
    static constexpr std::size_t kSamplesMax = 4096;

    // Records that the primary had reached `sample.lsn` by `sample.at`. REQUIRES: `sample.at`
    // is not before the newest sample's time. A position already held by the newest sample
    // adds nothing: its earlier time is when that position was reached. Beyond kSamplesMax,
    // the two adjacent samples closest in time are merged into the earlier time and the
    // larger position, which can only overstate the lag, never understate it.
    void Add(WalSample sample);

    // Forgets the samples at or below `replayed` (the replica's replay position, which only
    // grows), and returns the lag at `now` in seconds.
    [[nodiscard]] double Lag(std::uint64_t replayed, std::chrono::steady_clock::time_point now);

    [[nodiscard]] std::size_t size() const { return samples_.size(); }

private:
    std::deque<WalSample> samples_{};
};

// docs/availability.md#read-replicas: where the auditor reads go. Without a replica every read uses
// the primary's pool. With one (read_database_url), a monitor thread measures the replica's lag
// every check_interval against the primary, on two connections of its own: it samples the
// primary's WAL position, then the replica's replay position, and the lag is the age of the
// oldest primary position the replica has not replayed (PrimarySamples). Reads go to the
// replica while it answers and lags at most lag_max, else to the primary, and back once it is
// fine again. A read that cannot connect to the replica falls back at once. The write path
// never comes here: the committer has its own connection to the primary.
//
// Thread-safe. `on_switch` runs on the monitor's thread or a reader's, once per change of
// server (the first decision included), with a reason for the operator's log; it must not
// throw or block.
class ReadRouter {
public:
    using OnSwitch = std::function<void(bool to_replica, const std::string& reason)>;

    // `primary` must outlive the router. Starts the monitor when `replica` is given.
    ReadRouter(ConnectionPool& primary, std::string primary_url,
               std::optional<ReplicaOptions> replica = std::nullopt, OnSwitch on_switch = {});
    ~ReadRouter();  // Stops the monitor.
    ReadRouter(const ReadRouter&) = delete;
    ReadRouter& operator=(const ReadRouter&) = delete;

    // A pooled connection for one auditor read, by the rule above, and which server it
    // reaches. Throws as ConnectionPool::Acquire does for the primary.
    [[nodiscard]] ReadLease Acquire();
    // A connection of the caller's own (a streamed export), by the same rule.
    [[nodiscard]] ReadConnection Connect();
    // A pooled connection to the primary, and one of the caller's own, whatever the rule says.
    [[nodiscard]] ReadLease AcquirePrimary();
    [[nodiscard]] ReadConnection ConnectPrimary();

    // docs/api.md#what-a-reader-is-shown: after a read of the feeds on `connection`, from
    // `source`, waits until what it saw is as durable as an acknowledged append (the
    // synchronous standbys hold it: AwaitSynchronousStandbys, on the primary). From a replica,
    // the replica's newest receipt and its chain, read after the page, must be on the primary:
    // one round trip with the barrier (AwaitSynchronousStandbysHolding), and no monitoring role.
    // Returns false, counted as Instead::kUnconfirmed, when the primary does not hold it (the
    // replica has WAL of a demoted or restored primary): read again from the primary. Throws
    // pqxx::in_doubt_error when the wait was cancelled or its session lost, and as
    // ConnectionPool::Acquire does for the primary.
    [[nodiscard]] bool ConfirmShown(pqxx::connection& connection, const ReadSource& source);

    [[nodiscard]] ReadStatus status() const;

private:
    enum class Target { kUndecided, kReplica, kPrimary };

    void Monitor();
    void Check();
    // One sample of the primary's WAL position into samples_; keeps the samples it has when
    // the primary cannot be asked.
    void SamplePrimary();
    // Sets the target (and, to the primary, why); logs (on_switch) and counts when it changes.
    void Switch(Target target, Instead why, const std::string& reason);
    void FallBack(Instead why, const std::string& reason);
    void CountInstead(Instead why);
    // The replica's last measured lag when reads go to it now, else none.
    [[nodiscard]] std::optional<double> UseReplica();

    ConnectionPool& primary_;
    const std::string primary_url_;
    const std::optional<ReplicaOptions> replica_;
    const OnSwitch on_switch_;
    std::unique_ptr<ConnectionPool> replica_pool_;
    // The monitor's thread only: its connections and the primary's samples.
    std::unique_ptr<pqxx::connection> monitor_connection_;
    std::unique_ptr<pqxx::connection> primary_monitor_connection_;
    PrimarySamples samples_{};

    mutable std::mutex mutex_;
    std::condition_variable stop_;
    bool stopping_ = false;                               // Guarded by mutex_.
    Target target_ = Target::kUndecided;                  // Guarded by mutex_.
    Instead instead_ = Instead::kStarting;                // Why not the replica; mutex_.
    std::optional<double> lag_seconds_{};                 // Guarded by mutex_.
    std::chrono::steady_clock::time_point checked_at_{};  // Last good check; mutex_.
    std::uint64_t fallbacks_ = 0;                         // Guarded by mutex_.
    std::atomic<std::uint64_t> replica_reads_{0};
    std::atomic<std::uint64_t> primary_reads_{0};
    std::array<std::atomic<std::uint64_t>, kInsteadCount> instead_counts_{};
    std::thread monitor_;
};

// A connection for a one-off read (`payledger events`): to `replica_url` when it answers and
// lags at most `lag_max`, else to `primary_url`, and which one it is (the lag: the bound below);
// `note` receives why when it is the primary.
// One look cannot time the primary's positions, so the lag is bounded from above: 0 when the
// replica has replayed the primary's current WAL position, else the age of the last commit it
// replayed (all commits up to it are there), unknown (the primary) when it replayed none.
[[nodiscard]] ReadConnection ConnectForReads(const std::string& primary_url,
                                             const std::optional<std::string>& replica_url,
                                             std::chrono::seconds lag_max,
                                             const std::function<void(const std::string&)>& note);

}  // namespace payledger::ledger
