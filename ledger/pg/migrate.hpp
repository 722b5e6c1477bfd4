#pragma once

#include <array>
#include <pqxx/pqxx>
#include <string>
#include <string_view>
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

// One privilege set that `payledger serve` needs on a table or sequence of the public schema.
struct ServicePrivilege {
    enum class Kind { kTable, kSequence };
    Kind kind = Kind::kTable;
    std::string_view object{};
    std::string_view privileges{};  // Comma-separated, no spaces: "SELECT,INSERT".
};

// docs/availability.md#least-privilege: everything `payledger serve` needs, and the one list of it:
// GrantServiceRole grants exactly these, and /readyz (api/routes/admin.cpp) reports which of
// them the serving role lacks. Appending, never updating or deleting, the ledger's tables; the
// writer moves its sequences with setval (SELECT, UPDATE), reconciliations take ids with
// nextval (USAGE); schema_migrations is read to check the schema at start.
inline constexpr std::array<ServicePrivilege, 16> kServicePrivileges = {{
    {ServicePrivilege::Kind::kTable, "callback_receipts", "SELECT,INSERT"},
    {ServicePrivilege::Kind::kTable, "ledger_events", "SELECT,INSERT"},
    {ServicePrivilege::Kind::kTable, "reconciliations", "SELECT,INSERT"},
    {ServicePrivilege::Kind::kTable, "receipt_bodies", "SELECT,INSERT"},
    {ServicePrivilege::Kind::kTable, "reconciliation_bills", "SELECT,INSERT"},
    {ServicePrivilege::Kind::kTable, "orders", "SELECT,INSERT,UPDATE"},
    {ServicePrivilege::Kind::kTable, "balances", "SELECT,INSERT,UPDATE"},
    {ServicePrivilege::Kind::kSequence, "callback_receipts_id_seq", "SELECT,UPDATE,USAGE"},
    {ServicePrivilege::Kind::kSequence, "ledger_events_seq_seq", "SELECT,UPDATE,USAGE"},
    {ServicePrivilege::Kind::kSequence, "reconciliations_id_seq", "SELECT,UPDATE,USAGE"},
    {ServicePrivilege::Kind::kTable, "subscriptions", "SELECT,INSERT,UPDATE"},
    {ServicePrivilege::Kind::kTable, "subscription_changes", "SELECT,INSERT"},
    {ServicePrivilege::Kind::kSequence, "subscription_changes_id_seq", "USAGE"},
    // Asking the platforms (schema/0011): the schedule's rows, made by the trigger on the
    // ledger's ORDER_CREATEDs, and the first query's delay that serve writes at start.
    {ServicePrivilege::Kind::kTable, "order_queries", "SELECT,INSERT,UPDATE"},
    {ServicePrivilege::Kind::kTable, "order_query_settings", "SELECT,INSERT,UPDATE"},
    {ServicePrivilege::Kind::kTable, "schema_migrations", "SELECT"},
}};

// Grants `role` exactly kServicePrivileges (and USAGE on the schema) and revokes every
// privilege on the tables and sequences from PUBLIC. The role cannot disable a trigger,
// update or delete a ledger row, or migrate. Throws std::invalid_argument for a role that
// does not exist, pqxx exceptions otherwise. Run as the tables' owner.
void GrantServiceRole(pqxx::connection& connection, const std::string& role);

}  // namespace payledger::ledger
