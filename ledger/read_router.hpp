#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "ledger/connection_pool.hpp"
#include "ledger/database.hpp"

namespace payledger::ledger {

// The session settings of replica connections: the defaults, read-only allowed.
[[nodiscard]] SessionSettings ReplicaSession();

// A streaming replica for the auditor reads (SPEC §9 read_database_url, read_max_lag_seconds).
struct ReplicaOptions {
    std::string url{};
    std::chrono::seconds lag_max{30};
    std::size_t pool_size_max = 8;
    std::chrono::milliseconds pool_wait_max{2'000};
    std::chrono::milliseconds check_interval{1'000};
    SessionSettings session = ReplicaSession();
};

// What GET /metrics shows of the reads (ReadRouter::status).
struct ReadStatus {
    bool configured = false;              // A replica is configured.
    bool on_replica = false;              // Reads go to it now.
    std::optional<double> lag_seconds{};  // Last measured; none while unreachable or unknown.
    std::uint64_t fallbacks = 0;          // Switches from the replica to the primary.
    std::uint64_t replica_reads = 0;      // Connections handed out, by server.
    std::uint64_t primary_reads = 0;
};

// SPEC §13 read replicas: where the auditor reads go. Without a replica every read uses the
// primary's pool. With one (read_database_url), a monitor thread checks the replica every
// check_interval on a connection of its own: reads go to the replica while it answers and
// its replay lag (ReplicaLag) is at most lag_max, else to the primary, and back once it is
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

    // A pooled connection for one auditor read, by the rule above. Throws as
    // ConnectionPool::Acquire does for the primary.
    [[nodiscard]] ConnectionPool::Lease Acquire();
    // A connection of the caller's own (a streamed export), by the same rule.
    [[nodiscard]] std::unique_ptr<pqxx::connection> Connect();

    [[nodiscard]] ReadStatus status() const;

private:
    enum class Target { kUndecided, kReplica, kPrimary };

    void Monitor();
    void Check();
    // Sets the target; logs (on_switch) and counts when it changes.
    void Switch(Target target, const std::string& reason);
    [[nodiscard]] bool UseReplica();

    ConnectionPool& primary_;
    const std::string primary_url_;
    const std::optional<ReplicaOptions> replica_;
    const OnSwitch on_switch_;
    std::unique_ptr<ConnectionPool> replica_pool_;
    std::unique_ptr<pqxx::connection> monitor_connection_;  // The monitor's thread only.

    mutable std::mutex mutex_;
    std::condition_variable stop_;
    bool stopping_ = false;                               // Guarded by mutex_.
    Target target_ = Target::kUndecided;                  // Guarded by mutex_.
    std::optional<double> lag_seconds_{};                 // Guarded by mutex_.
    std::chrono::steady_clock::time_point checked_at_{};  // Last good check; mutex_.
    std::uint64_t fallbacks_ = 0;                         // Guarded by mutex_.
    std::atomic<std::uint64_t> replica_reads_{0};
    std::atomic<std::uint64_t> primary_reads_{0};
    std::thread monitor_;
};

// The replay lag of the server `connection` is on (SPEC §13): 0 when it is not in recovery or
// has replayed all the WAL it received, else now minus the time of the last transaction it
// replayed; none when it is in recovery and has replayed none since it started.
[[nodiscard]] std::optional<double> ReplicaLag(pqxx::connection& connection);

// A connection for a one-off read (`payledger events`): to `replica_url` when it answers and
// lags at most `lag_max`, else to `primary_url`; `note` receives why when it is the primary.
[[nodiscard]] std::unique_ptr<pqxx::connection> ConnectForReads(
    const std::string& primary_url, const std::optional<std::string>& replica_url,
    std::chrono::seconds lag_max, const std::function<void(const std::string&)>& note);

}  // namespace payledger::ledger
