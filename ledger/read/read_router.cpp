#include "ledger/read/read_router.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "ledger/read/durability.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// A replica whose last good check is older than this is not read from, whatever it said
// then: the monitor may be stuck on a host that stopped answering, and reads must fall back within
// 10 s (docs/availability.md#read-replicas).
constexpr std::chrono::seconds kCheckStaleAfter{5};

std::string Seconds(double seconds) {
    return std::to_string(static_cast<std::int64_t>(std::floor(seconds))) + " s";
}

// The settings of the monitor's session on the primary: it only reads a WAL position.
SessionSettings PrimaryMonitorSession() {
    SessionSettings session;
    session.application_name = "payledger_reads";
    return session;
}

// The primary's WAL position as a byte offset: the flushed one, which is all that a standby
// can have received (a position written but not yet flushed would count as lag for a moment).
std::uint64_t PrimaryPosition(pqxx::connection& connection) {
    pqxx::nontransaction tx{connection};
    return tx.exec("SELECT (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint")[0][0]
        .as<std::uint64_t>();
}

// What the server `connection` is on has of the primary's WAL, as a byte offset: a standby's
// replay position; a server that is not in recovery (promoted, or the primary itself) has
// its own flushed position. None when a standby reports no replay position.
std::optional<std::uint64_t> ReplayPosition(pqxx::connection& connection) {
    pqxx::nontransaction tx{connection};
    const pqxx::row row = tx.exec(
        "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
        "ELSE pg_current_wal_flush_lsn() END - '0/0'::pg_lsn)::bigint")[0];
    if (row[0].is_null()) return std::nullopt;
    return row[0].as<std::uint64_t>();
}

// The age of the last commit that the standby `connection` is on replayed, in seconds; none
// when it replayed none since it started.
std::optional<double> LastReplayedCommitAge(pqxx::connection& connection) {
    pqxx::nontransaction tx{connection};
    constexpr const char* kAgeSql =
        "SELECT extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8";
    const pqxx::row row = tx.exec(kAgeSql)[0];
    if (row[0].is_null()) return std::nullopt;
    return std::max(0.0, row[0].as<double>());
}

}  // namespace

SessionSettings ReplicaSession() {
    SessionSettings session;
    session.application_name = "payledger_reads";
    session.writable = false;
    return session;
}

void PrimarySamples::Add(WalSample sample) {
    if (!samples_.empty()) {
        PAYLEDGER_ASSERT(sample.at >= samples_.back().at);
        if (sample.lsn <= samples_.back().lsn) return;
    }
    samples_.push_back(sample);
    if (samples_.size() <= kSamplesMax) return;
    // Merge the pair closest in time: the replica's lag is then overstated by at most that
    // gap while it is between their two positions, and exact elsewhere.
    std::size_t closest = 1;
    for (std::size_t i = 2; i < samples_.size(); ++i) {
        if (samples_[i].at - samples_[i - 1].at < samples_[closest].at - samples_[closest - 1].at) {
            closest = i;
        }
    }
    samples_[closest].at = samples_[closest - 1].at;
    samples_.erase(samples_.begin() + static_cast<std::ptrdiff_t>(closest - 1));
}

double PrimarySamples::Lag(std::uint64_t replayed, std::chrono::steady_clock::time_point now) {
    while (!samples_.empty() && samples_.front().lsn <= replayed) samples_.pop_front();
    if (samples_.empty()) return 0.0;
    return std::max(0.0, std::chrono::duration<double>(now - samples_.front().at).count());
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

void ReadRouter::SamplePrimary() {
    // Stamped before the question: the primary may have reached its answer a little later,
    // so the stamp can only make the lag look longer, never shorter.
    const auto at = std::chrono::steady_clock::now();
    try {
        if (primary_monitor_connection_ == nullptr ||
            IdleSessionEnded(*primary_monitor_connection_)) {
            primary_monitor_connection_ = ledger::Connect(primary_url_, PrimaryMonitorSession());
        }
        samples_.Add(WalSample{.at = at, .lsn = PrimaryPosition(*primary_monitor_connection_)});
    } catch (const std::exception&) {
        // The samples taken so far stay: the lag goes on growing while the replica has not
        // replayed them. The reads' own connections to the primary report its failure.
        primary_monitor_connection_.reset();
    }
}

void ReadRouter::Check() {
    // The primary first: the replica is then compared with a position the primary had
    // before the replica was asked.
    SamplePrimary();
    std::optional<double> lag;
    bool replaying = true;
    std::string failure;
    try {
        if (monitor_connection_ == nullptr || IdleSessionEnded(*monitor_connection_)) {
            monitor_connection_ = ledger::Connect(replica_->url, replica_->session);
        }
        const std::optional<std::uint64_t> replayed = ReplayPosition(*monitor_connection_);
        replaying = replayed.has_value();
        if (replayed) lag = samples_.Lag(*replayed, std::chrono::steady_clock::now());
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
        return FallBack(Instead::kUnreachable, "the replica is unreachable: " + failure);
    }
    if (!replaying) {
        return FallBack(Instead::kNotReplaying, "the replica reports no replay position");
    }
    const auto lag_max = static_cast<double>(replica_->lag_max.count());
    if (*lag > lag_max) {
        return FallBack(Instead::kLagging, "the replica lags " + Seconds(*lag) +
                                               " behind the primary, more than "
                                               "read_max_lag_seconds (" +
                                               Seconds(lag_max) + ")");
    }
    Switch(Target::kReplica, Instead::kStarting, "the replica answers and lags " + Seconds(*lag));
}

void ReadRouter::FallBack(Instead why, const std::string& reason) {
    Switch(Target::kPrimary, why, reason);
}

void ReadRouter::Switch(Target target, Instead why, const std::string& reason) {
    {
        std::lock_guard lock{mutex_};
        if (target == Target::kPrimary) instead_ = why;
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

std::optional<double> ReadRouter::UseReplica() {
    if (!replica_) return std::nullopt;
    std::optional<double> lag;
    bool stale = false;
    {
        std::lock_guard lock{mutex_};
        if (target_ != Target::kReplica) {
            CountInstead(instead_);
            return std::nullopt;
        }
        lag = lag_seconds_;
        stale = std::chrono::steady_clock::now() - checked_at_ > kCheckStaleAfter;
    }
    if (!stale) return lag;  // None only between a check's measure and its switch.
    FallBack(Instead::kUnreachable, "the replica's last good check is older than 5 s");
    CountInstead(Instead::kUnreachable);
    return std::nullopt;
}

ReadLease ReadRouter::Acquire() {
    if (const std::optional<double> lag = UseReplica()) {
        try {
            ConnectionPool::Lease lease = replica_pool_->Acquire();
            ++replica_reads_;
            return ReadLease{.connection = std::move(lease),
                             .source = {.replica = true, .lag_seconds = *lag}};
        } catch (const pqxx::broken_connection& error) {
            // Cannot connect: fall back at once rather than answer 503; the monitor brings
            // the reads back when the replica answers again.
            replica_pool_->DropIdle();
            FallBack(Instead::kUnreachable,
                     std::string("the replica is unreachable: ") + error.what());
            CountInstead(Instead::kUnreachable);
        }
    }
    ConnectionPool::Lease lease = primary_.Acquire();
    ++primary_reads_;
    return ReadLease{.connection = std::move(lease), .source = {}};
}

ReadLease ReadRouter::AcquirePrimary() {
    ConnectionPool::Lease lease = primary_.Acquire();
    ++primary_reads_;
    return ReadLease{.connection = std::move(lease), .source = {}};
}

bool ReadRouter::ConfirmShown(pqxx::connection& connection, const ReadSource& source) {
    if (!source.replica) {
        AwaitSynchronousStandbys(connection);
        return true;
    }
    // The replica's head is read after what it showed, so it covers all of it; asking the
    // catalog instead (pg_stat_wal_receiver's timeline) needs pg_read_all_stats, and without it
    // every read silently went to the primary.
    const std::optional<LedgerHead> head = ReadLedgerHead(connection);
    ConnectionPool::Lease primary = primary_.Acquire();
    if (AwaitSynchronousStandbysHolding(*primary, head)) return true;
    CountInstead(Instead::kUnconfirmed);
    return false;
}

void ReadRouter::CountInstead(Instead why) { ++instead_counts_.at(static_cast<std::size_t>(why)); }

ReadConnection ReadRouter::Connect() {
    if (const std::optional<double> lag = UseReplica()) {
        try {
            auto connection = ledger::Connect(replica_->url, replica_->session);
            ++replica_reads_;
            return ReadConnection{.connection = std::move(connection),
                                  .source = {.replica = true, .lag_seconds = *lag}};
        } catch (const pqxx::broken_connection& error) {
            FallBack(Instead::kUnreachable,
                     std::string("the replica is unreachable: ") + error.what());
            CountInstead(Instead::kUnreachable);
        }
    }
    return ConnectPrimary();
}

ReadConnection ReadRouter::ConnectPrimary() {
    auto connection = ledger::Connect(primary_url_);
    ++primary_reads_;
    return ReadConnection{.connection = std::move(connection), .source = {}};
}

ReadStatus ReadRouter::status() const {
    std::array<std::uint64_t, kInsteadCount> instead{};
    for (std::size_t i = 0; i < kInsteadCount; ++i) instead.at(i) = instead_counts_.at(i).load();
    std::lock_guard lock{mutex_};
    return ReadStatus{.configured = replica_.has_value(),
                      .on_replica = target_ == Target::kReplica,
                      .lag_seconds = lag_seconds_,
                      .fallbacks = fallbacks_,
                      .replica_reads = replica_reads_.load(),
                      .primary_reads = primary_reads_.load(),
                      .primary_instead = instead};
}

namespace {

// The lag of the standby `replica` is on, from one look: 0 when it has replayed the primary's
// current position, else the age of the last commit it replayed, an upper bound (every commit
// up to it is there); none when it replayed none. Without an answer from the primary, the
// upper bound alone.
std::optional<double> OneLookLag(pqxx::connection& replica,
                                 const std::optional<std::uint64_t>& primary_position) {
    const std::optional<std::uint64_t> replayed = ReplayPosition(replica);
    if (primary_position && replayed && *replayed >= *primary_position) return 0.0;
    return LastReplayedCommitAge(replica);
}

}  // namespace

ReadConnection ConnectForReads(const std::string& primary_url,
                               const std::optional<std::string>& replica_url,
                               std::chrono::seconds lag_max,
                               const std::function<void(const std::string&)>& note) {
    if (!replica_url) return ReadConnection{.connection = Connect(primary_url), .source = {}};
    // The primary is asked first, so that the replica is compared with a position it had.
    std::unique_ptr<pqxx::connection> primary;
    std::optional<std::uint64_t> primary_position;
    try {
        primary = Connect(primary_url);
        primary_position = PrimaryPosition(*primary);
    } catch (const pqxx::broken_connection&) {
        primary.reset();  // The lag is then bounded by the replica's last replayed commit.
    }
    try {
        auto connection = Connect(*replica_url, ReplicaSession());
        const std::optional<double> lag = OneLookLag(*connection, primary_position);
        if (lag && *lag <= static_cast<double>(lag_max.count())) {
            return ReadConnection{.connection = std::move(connection),
                                  .source = {.replica = true, .lag_seconds = *lag}};
        }
        note(lag ? "the replica lags " + Seconds(*lag) +
                       " behind the primary, more than read_max_lag_seconds; reading the primary"
                 : "the replica has replayed no transaction yet; reading the primary");
    } catch (const pqxx::broken_connection& error) {
        note(std::string("the replica is unreachable (") + error.what() + "); reading the primary");
    }
    return ReadConnection{
        .connection = primary != nullptr ? std::move(primary) : Connect(primary_url), .source = {}};
}

}  // namespace payledger::ledger
