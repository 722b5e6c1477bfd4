#include "ledger/database.hpp"

namespace payledger::ledger {

std::unique_ptr<pqxx::connection> Connect(const std::string& url, const SessionLimits& limits) {
    auto connection = std::make_unique<pqxx::connection>(url);
    // One round trip for all settings. The values are our own integers, never input.
    pqxx::nontransaction tx{*connection};
    tx.exec("SET application_name = 'payledger'; SET TIME ZONE 'UTC'; SET statement_timeout = " +
            std::to_string(limits.statement_timeout.count()) +
            "; SET lock_timeout = " + std::to_string(limits.lock_timeout.count()) +
            "; SET idle_in_transaction_session_timeout = " +
            std::to_string(limits.idle_in_transaction_timeout.count()));
    return connection;
}

}  // namespace payledger::ledger
