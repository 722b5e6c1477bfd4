#include "ledger/read_router.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace payledger::ledger {
namespace {

// A replica whose last good check is older than this is not read from, whatever it said
// then: the monitor may be stuck on a host that stopped answering (SPEC §13: within 10 s).
constexpr std::chrono::seconds kCheckStaleAfter{5};

std::string Seconds(double seconds) {
    return std::to_string(static_cast<std::int64_t>(std::floor(seconds))) + " s";
}

}  // namespace

SessionSettings ReplicaSession() {
    SessionSettings session;
    session.application_name = "payledger_reads";
    session.writable = false;
    return session;
}

std::optional<double> ReplicaLag(pqxx::connection& connection) {
    pqxx::nontransaction tx{connection};
    // Replay behind receive (pg_wal_replay_pause, or a slow replica): the age of the last
    // replayed commit. Received all replayed: 0, however old that commit is (nothing newer
    // has come). Receive is NULL without a WAL receiver (the primary is away): the age too.
    const pqxx::row row = tx.exec(
        "SELECT pg_is_in_recovery(), "
        "coalesce(pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn(), false), "
        "extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8")[0];
    if (!row[0].as<bool>() || row[1].as<bool>()) return 0.0;
    if (row[2].is_null()) return std::nullopt;
    return std::max(0.0, row[2].as<double>());
}

ReadRouter::ReadRouter(ConnectionPool& primary, std::string primary_url,
                       std::optional<ReplicaOptions> replica, OnSwitch on_switch)
    : primary_(primary),
      primary_url_(std::move(primary_url)),
      replica_(std::move(replica)),
      on_switch_(std::move(on_switch)) {
    if (!replica_) return;
    replica_pool_ = std::make_unique<ConnectionPool>(replica_->url, replica_->pool_size_max,
                                                     replica_->pool_wait_max, replica_->session);
    monitor_ = std::thread([this] { Monitor(); });
}

ReadRouter::~ReadRouter() {
    {
        std::lock_guard lock{mutex_};
        stopping_ = true;
    }
    stop_.notify_all();
    if (monitor_.joinable()) monitor_.join();
}

void ReadRouter::Monitor() {
    for (;;) {
        Check();
        std::unique_lock lock{mutex_};
        // A period, not a synchronisation: the next check is due, or the router stops.
        if (stop_.wait_for(lock, replica_->check_interval, [this] { return stopping_; })) return;
    }
}

void ReadRouter::Check() {
    std::optional<double> lag;
    std::string failure;
    try {
        if (monitor_connection_ == nullptr || IdleSessionEnded(*monitor_connection_)) {
            monitor_connection_ = ledger::Connect(replica_->url, replica_->session);
        }
        lag = ReplicaLag(*monitor_connection_);
    } catch (const std::exception& error) {
        monitor_connection_.reset();
        failure = error.what();
    }
    {
        std::lock_guard lock{mutex_};
        lag_seconds_ = lag;
        if (failure.empty()) checked_at_ = std::chrono::steady_clock::now();
    }
    if (!failure.empty()) {
        replica_pool_->DropIdle();  // They are likely broken too: the next reads reconnect.
        return Switch(Target::kPrimary, "the replica is unreachable: " + failure);
    }
    if (!lag) return Switch(Target::kPrimary, "the replica has replayed no transaction yet");
    const auto lag_max = static_cast<double>(replica_->lag_max.count());
    if (*lag > lag_max) {
        return Switch(Target::kPrimary, "the replica lags " + Seconds(*lag) +
                                            ", more than read_max_lag_seconds (" +
                                            Seconds(lag_max) + ")");
    }
    Switch(Target::kReplica, "the replica answers and lags " + Seconds(*lag));
}

void ReadRouter::Switch(Target target, const std::string& reason) {
    {
        std::lock_guard lock{mutex_};
        if (target_ == target) return;
        if (target == Target::kPrimary && target_ == Target::kReplica) ++fallbacks_;
        target_ = target;
    }
    if (!on_switch_) return;
    try {
        on_switch_(target == Target::kReplica, reason);
    } catch (...) {
        // Only the log line is lost; the routing has changed.
    }
}

bool ReadRouter::UseReplica() {
    if (!replica_) return false;
    bool stale = false;
    {
        std::lock_guard lock{mutex_};
        if (target_ != Target::kReplica) return false;
        stale = std::chrono::steady_clock::now() - checked_at_ > kCheckStaleAfter;
    }
    if (!stale) return true;
    Switch(Target::kPrimary, "the replica's last good check is older than 5 s");
    return false;
}

ConnectionPool::Lease ReadRouter::Acquire() {
    if (UseReplica()) {
        try {
            ConnectionPool::Lease lease = replica_pool_->Acquire();
            ++replica_reads_;
            return lease;
        } catch (const pqxx::broken_connection& error) {
            // Cannot connect: fall back at once rather than answer 503; the monitor brings
            // the reads back when the replica answers again.
            replica_pool_->DropIdle();
            Switch(Target::kPrimary, std::string("the replica is unreachable: ") + error.what());
        }
    }
    ConnectionPool::Lease lease = primary_.Acquire();
    ++primary_reads_;
    return lease;
}

std::unique_ptr<pqxx::connection> ReadRouter::Connect() {
    if (UseReplica()) {
        try {
            auto connection = ledger::Connect(replica_->url, replica_->session);
            ++replica_reads_;
            return connection;
        } catch (const pqxx::broken_connection& error) {
            Switch(Target::kPrimary, std::string("the replica is unreachable: ") + error.what());
        }
    }
    auto connection = ledger::Connect(primary_url_);
    ++primary_reads_;
    return connection;
}

ReadStatus ReadRouter::status() const {
    std::lock_guard lock{mutex_};
    return ReadStatus{.configured = replica_.has_value(),
                      .on_replica = target_ == Target::kReplica,
                      .lag_seconds = lag_seconds_,
                      .fallbacks = fallbacks_,
                      .replica_reads = replica_reads_.load(),
                      .primary_reads = primary_reads_.load()};
}

std::unique_ptr<pqxx::connection> ConnectForReads(
    const std::string& primary_url, const std::optional<std::string>& replica_url,
    std::chrono::seconds lag_max, const std::function<void(const std::string&)>& note) {
    if (replica_url) {
        try {
            auto connection = Connect(*replica_url, ReplicaSession());
            const std::optional<double> lag = ReplicaLag(*connection);
            if (lag && *lag <= static_cast<double>(lag_max.count())) return connection;
            note(lag ? "the replica lags " + Seconds(*lag) +
                           ", more than read_max_lag_seconds; reading the primary"
                     : "the replica has replayed no transaction yet; reading the primary");
        } catch (const pqxx::broken_connection& error) {
            note(std::string("the replica is unreachable (") + error.what() +
                 "); reading the primary");
        }
    }
    return Connect(primary_url);
}

}  // namespace payledger::ledger
