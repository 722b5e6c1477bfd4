#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <pqxx/pqxx>
#include <string>

namespace payledger::ledger {

// SPEC §7: the ledger's writer lock, one key for every process on the database. Every
// transaction that writes ledger_events or callback_receipts takes it first.
inline constexpr std::int64_t kWriterLockKey = 0x7061796c65640001;  // "payled" 0001
// Serialises `migrate` between processes.
inline constexpr std::int64_t kMigrateLockKey = 0x7061796c65640002;

// Settings of every session of the service. The limits make sure a stuck transaction cannot
// hold the writer lock for ever (issue 5); the name shows in pg_stat_activity.
struct SessionSettings {
    std::string application_name = "payledger";
    std::chrono::milliseconds statement_timeout{10'000};
    std::chrono::milliseconds lock_timeout{5'000};
    std::chrono::milliseconds idle_in_transaction_timeout{10'000};
};

// Opens a connection with the session settings payledger relies on: UTC, the limits and
// the application name of `settings`. Throws pqxx::broken_connection when the database cannot be
// reached.
[[nodiscard]] std::unique_ptr<pqxx::connection> Connect(const std::string& url,
                                                        const SessionSettings& settings = {});

}  // namespace payledger::ledger
