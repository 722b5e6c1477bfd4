#include "ledger/database.hpp"

#include "ledger/statements.hpp"

namespace payledger::ledger {

std::unique_ptr<pqxx::connection> Connect(const std::string& url, const SessionSettings& settings) {
    auto connection = std::make_unique<pqxx::connection>(url);
    // One round trip for all settings. The values are ours, never client input.
    pqxx::nontransaction tx{*connection};
    tx.exec("SET application_name = " + tx.quote(settings.application_name) +
            "; SET TIME ZONE 'UTC'; SET statement_timeout = " +
            std::to_string(settings.statement_timeout.count()) +
            "; SET lock_timeout = " + std::to_string(settings.lock_timeout.count()) +
            "; SET idle_in_transaction_session_timeout = " +
            std::to_string(settings.idle_in_transaction_timeout.count()));
    for (const auto* statements : {&WriterStatements(), &ReadStatements()}) {
        for (const Statement& statement : *statements) {
            connection->prepare(statement.name, statement.sql);
        }
    }
    return connection;
}

}  // namespace payledger::ledger
