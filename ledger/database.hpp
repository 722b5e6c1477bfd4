#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <pqxx/pqxx>

namespace payledger::ledger {

// SPEC §7: the ledger's writer lock, one key for every process on the database. Every
// transaction that writes ledger_events or callback_receipts takes it first.
inline constexpr std::int64_t kWriterLockKey = 0x7061796c65640001;  // "payled" 0001
// Serialises `migrate` between processes.
inline constexpr std::int64_t kMigrateLockKey = 0x7061796c65640002;

// Limits on every session of the service (issue 5: a stuck transaction cannot hold the
// writer lock for ever).
struct SessionLimits {
    std::chrono::milliseconds statement_timeout{10'000};
    std::chrono::milliseconds lock_timeout{5'000};
    std::chrono::milliseconds idle_in_transaction_timeout{10'000};
};

// Opens a connection with the session settings payledger relies on: UTC, the limits above,
// an application name. Throws pqxx::broken_connection when the database cannot be reached.
[[nodiscard]] std::unique_ptr<pqxx::connection> Connect(const std::string& url,
                                                        const SessionLimits& limits = {});

}  // namespace payledger::ledger
