#pragma once

#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace payledger::ledger {

// Applies the migrations of schema/ that `connection`'s schema has not recorded yet, in
// order, in one transaction under an advisory lock, so several processes may migrate at
// once: one applies, the others wait and then find nothing to do. Returns the names
// applied now. Throws pqxx exceptions on failure (nothing is applied then).
std::vector<std::string> Migrate(pqxx::connection& connection);

// The migrations of schema/ that the database has not recorded, in order, without changing
// anything (all of them when it has no schema_migrations table).
[[nodiscard]] std::vector<std::string> PendingMigrations(pqxx::connection& connection);

// docs/design.md#least-privilege: grants `role` exactly what `payledger serve` needs (SELECT and
// INSERT on callback_receipts, ledger_events and reconciliations; SELECT, INSERT and UPDATE
// on orders and balances; the sequences; SELECT on schema_migrations) and revokes every
// privilege on the tables and sequences from PUBLIC. The role cannot disable a trigger,
// update or delete a ledger row, or migrate. Throws std::invalid_argument for a role that
// does not exist, pqxx exceptions otherwise. Run as the tables' owner.
void GrantServiceRole(pqxx::connection& connection, const std::string& role);

}  // namespace payledger::ledger
