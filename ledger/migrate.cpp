#include "ledger/migrate.hpp"

#include <set>

#include "ledger/database.hpp"
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

}  // namespace payledger::ledger
