#include "ledger/pg/migrate.hpp"

#include <set>
#include <stdexcept>

#include "ledger/pg/database.hpp"
#include "schema/migrations.hpp"

namespace payledger::ledger {

std::vector<std::string> Migrate(pqxx::connection& connection) {
    pqxx::work tx{connection};
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", kMigrateLockKey);
    tx.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " name text PRIMARY KEY,"
        " applied_at timestamptz NOT NULL DEFAULT now())");
    std::set<std::string> applied;
    for (const pqxx::row& row : tx.exec("SELECT name FROM schema_migrations")) {
        applied.insert(row[0].as<std::string>());
    }
    std::vector<std::string> now_applied;
    for (const schema::Migration& migration : schema::Migrations()) {
        const std::string name{migration.name};
        if (applied.count(name) != 0) continue;
        tx.exec(std::string{migration.sql});
        tx.exec_params("INSERT INTO schema_migrations (name) VALUES ($1)", name);
        now_applied.push_back(name);
    }
    tx.commit();
    return now_applied;
}

std::vector<std::string> PendingMigrations(pqxx::connection& connection) {
    pqxx::read_transaction tx{connection};
    std::set<std::string> applied;
    if (!tx.exec("SELECT to_regclass('schema_migrations')")[0][0].is_null()) {
        for (const pqxx::row& row : tx.exec("SELECT name FROM schema_migrations")) {
            applied.insert(row[0].as<std::string>());
        }
    }
    std::vector<std::string> pending;
    for (const schema::Migration& migration : schema::Migrations()) {
        if (applied.count(std::string{migration.name}) == 0) pending.emplace_back(migration.name);
    }
    return pending;
}

void GrantServiceRole(pqxx::connection& connection, const std::string& role) {
    pqxx::work tx{connection};
    if (tx.exec_params("SELECT 1 FROM pg_roles WHERE rolname = $1", role).empty()) {
        throw std::invalid_argument("no role " + role + " exists (CREATE ROLE it first)");
    }
    const std::string grantee = tx.quote_name(role);
    tx.exec("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM PUBLIC");
    tx.exec("REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM PUBLIC");
    tx.exec("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM " + grantee);
    tx.exec("REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM " + grantee);
    tx.exec("GRANT USAGE ON SCHEMA public TO " + grantee);
    for (const ServicePrivilege& grant : kServicePrivileges) {
        tx.exec("GRANT " + std::string(grant.privileges) + " ON " +
                (grant.kind == ServicePrivilege::Kind::kSequence ? "SEQUENCE " : "TABLE ") +
                tx.quote_name(std::string(grant.object)) + " TO " + grantee);
    }
    tx.commit();
}

}  // namespace payledger::ledger
