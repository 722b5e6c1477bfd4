#include "ledger/pg/database.hpp"

#include <poll.h>

#include "ledger/pg/statements.hpp"

namespace payledger::ledger {

std::unique_ptr<pqxx::connection> Connect(const std::string& url, const SessionSettings& settings) {
    auto connection = std::make_unique<pqxx::connection>(url);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    // Deprecated in 6.4 with the whole reactivation feature, which is what we turn off.
    connection->inhibit_reactivation(true);
#pragma GCC diagnostic pop
    // One round trip for all settings. The values are ours, never client input.
    // plan_cache_mode: every execution of a prepared statement is planned for its
    // own parameters and the tables' current size. Left to itself PostgreSQL keeps, after
    // five runs, a generic plan made while the tables were nearly empty, and nothing replaces
    // it until an ANALYZE: on a fresh database that was a sequential scan of `orders` per
    // batch. The writer's transactions set their own (ledger/write/writer.cpp: generic plans that
    // never scan sequentially, as all their accesses are by key).
    pqxx::nontransaction tx{*connection};
    const pqxx::result result =
        tx.exec("SET application_name = " + tx.quote(settings.application_name) +
                "; SET TIME ZONE 'UTC'; SET plan_cache_mode = force_custom_plan"
                "; SET statement_timeout = " +
                std::to_string(settings.statement_timeout.count()) +
                "; SET lock_timeout = " + std::to_string(settings.lock_timeout.count()) +
                "; SET idle_in_transaction_session_timeout = " +
                std::to_string(settings.idle_in_transaction_timeout.count()) +
                // docs/availability.md#failover: a commit is acknowledged only once it is flushed,
                // and with synchronous standbys once they hold it. The session does not inherit
                // a weaker synchronous_commit from its role or database (local or off there
                // would silently void that); remote_apply, stronger, is kept. A transaction
                // that may lose its commit says so itself (SET LOCAL).
                "; SELECT set_config('synchronous_commit', CASE "
                "current_setting('synchronous_commit') WHEN 'remote_apply' THEN 'remote_apply' "
                "ELSE 'on' END, false)" +
                // docs/availability.md#failover, in the same round trip: what
                // target_session_attrs=read-write checks.
                "; SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::bool");
    if (settings.writable && result[0][0].as<bool>()) {
        throw ReadOnlyServer("the database server is read-only (a standby, or in recovery)");
    }
    for (const auto* statements : {&WriterStatements(), &ReadStatements()}) {
        for (const Statement& statement : *statements) {
            connection->prepare(statement.name, statement.sql);
        }
    }
    return connection;
}

bool IdleSessionEnded(const pqxx::connection& connection) {
    if (!connection.is_open()) return true;
    pollfd descriptor{.fd = connection.sock(), .events = POLLIN, .revents = 0};
    return descriptor.fd < 0 || poll(&descriptor, 1, 0) != 0;
}

}  // namespace payledger::ledger
