#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <pqxx/pqxx>
#include <string>

namespace payledger::ledger {

// docs/write-path.md#the-writer-lock: the ledger's writer lock, one key for every process on the
// database. Every transaction that writes ledger_events or callback_receipts takes it first.
inline constexpr std::int64_t kWriterLockKey = 0x7061796c65640001;  // "payled" 0001
// Serialises `migrate` between processes.
inline constexpr std::int64_t kMigrateLockKey = 0x7061796c65640002;
// Taken, and held until commit, by every transaction that inserts into subscription_changes,
// before it does: the ids of that table are then taken in commit order, so a reader paging by
// `id > after` never skips a change (the argument of the writer lock, on a table of its own).
inline constexpr std::int64_t kSubscriptionChangesLockKey = 0x7061796c65640003;

// Settings of every session of the service. The limits make sure a stuck transaction cannot
// hold the writer lock for ever; the name shows in pg_stat_activity.
struct SessionSettings {
    std::string application_name = "payledger";
    std::chrono::milliseconds statement_timeout{10'000};
    std::chrono::milliseconds lock_timeout{5'000};
    std::chrono::milliseconds idle_in_transaction_timeout{10'000};
    // docs/availability.md#failover: payledger never writes through a server in recovery. True:
    // Connect refuses a server that is read-only (a standby, or default_transaction_read_only).
    // False only for sessions that read a replica on purpose (read_database_url).
    bool writable = true;
};

// Thrown by Connect when `writable` was asked for and the server is read-only: a connection
// failure like any other (the committer retries with a new connection, a request answers 503,
// `serve` waits at start), since the primary may be found on the next attempt.
class ReadOnlyServer : public pqxx::broken_connection {
public:
    using pqxx::broken_connection::broken_connection;
};

// Opens a connection with the session settings payledger relies on: UTC, the limits and
// the application name of `settings`. Throws pqxx::broken_connection when the database cannot be
// reached, ReadOnlyServer when `settings.writable` and the server is read-only.
//
// The connection never reconnects by itself: libpqxx 6.4 would otherwise re-open a broken
// connection at the next BEGIN (PQreset), to whichever host answers, without the settings
// above or the read-only check. A broken connection throws pqxx::broken_connection instead,
// and its owner connects again through Connect.
[[nodiscard]] std::unique_ptr<pqxx::connection> Connect(const std::string& url,
                                                        const SessionSettings& settings = {});

// True when the server has closed, or written to, this idle session (a session with no query
// outstanding has nothing to read unless the server ended it: a shutdown, a crash, a failover,
// pg_terminate_backend). A cheap check before reuse; it does not catch a host that vanished
// silently, whose first query fails instead.
[[nodiscard]] bool IdleSessionEnded(const pqxx::connection& connection);

}  // namespace payledger::ledger
