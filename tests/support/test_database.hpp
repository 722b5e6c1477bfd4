#pragma once

#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "ledger/pg/database.hpp"

namespace payledger::testing {

// A database of its own on the test cluster, migrated, dropped at destruction. A database, not
// a schema: the writer lock (docs/write-path.md#the-writer-lock) is one advisory lock per database,
// so tests sharing a database would queue behind each other's appends and a test that times that
// lock would depend on what runs beside it. Fails the test (CI) or skips it (a laptop) when
// PAYLEDGER_TEST_DATABASE_URL is unset.
class TestDatabase {
public:
    // `migrate`: apply the migrations (false leaves the database empty).
    explicit TestDatabase(bool migrate = true);
    ~TestDatabase();
    TestDatabase(const TestDatabase&) = delete;
    TestDatabase& operator=(const TestDatabase&) = delete;

    // False when the test was skipped (no database configured outside CI).
    [[nodiscard]] bool available() const { return !url_.empty(); }
    [[nodiscard]] const std::string& url() const { return url_; }
    // The database's name, unique on the cluster; also the application_name of the sessions
    // Connect() opens, so a test can find (and terminate) its own sessions.
    [[nodiscard]] const std::string& name() const { return name_; }

    // A new connection to the test database.
    [[nodiscard]] std::unique_ptr<pqxx::connection> Connect() const;

    // Runs `sql` in its own transaction and returns the first column of the first row.
    std::string Scalar(const std::string& sql) const;

private:
    std::string base_url_;
    std::string name_;
    std::string url_;
};

// Session limits for services under test that wait on locks a test holds on purpose: the
// product's 5 s lock timeout would turn a slow, loaded machine into a 503.
[[nodiscard]] inline ledger::SessionSettings PatientSession(std::string application_name) {
    return {.application_name = std::move(application_name),
            .statement_timeout = std::chrono::seconds{60},
            .lock_timeout = std::chrono::seconds{60},
            .idle_in_transaction_timeout = std::chrono::seconds{60}};
}

// Sessions of the current test database waiting for a lock: pg_locks covers the whole cluster,
// where other tests run side by side, so every count is narrowed to this database's sessions.
inline constexpr const char* kAdvisoryWaitersSql =
    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
    "WHERE a.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted";
inline constexpr const char* kRowWaitersSql =
    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
    "WHERE a.datname = current_database() AND l.locktype IN ('transactionid', 'tuple') "
    "AND NOT l.granted";

// Polls PostgreSQL's own lock table until `waiters_sql` (one of the two above) counts a waiting
// session: synchronises on what the database reports, not on time. Fails the test after 60 s.
void AwaitLockWaiters(const TestDatabase& db, const char* waiters_sql);

// Polls pg_stat_activity until the server session `backend_pid` is idle or gone: what it was
// running when its client vanished has ended (committed, for a block whose COMMIT had been
// sent). Fails the test after 60 s.
void AwaitSessionDone(const TestDatabase& db, int backend_pid);

}  // namespace payledger::testing

// Use at the start of every PostgreSQL test body.
#define PAYLEDGER_REQUIRE_DATABASE(db)                             \
    do {                                                           \
        if (!(db).available()) GTEST_SKIP() << "no test database"; \
    } while (false)
