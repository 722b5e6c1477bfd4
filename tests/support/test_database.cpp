#include "support/test_database.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "ledger/pg/database.hpp"
#include "ledger/pg/migrate.hpp"

namespace payledger::testing {
namespace {

std::string UniqueDatabaseName() {
    static std::atomic<int> counter{0};
    std::random_device random;
    return "t_" + std::to_string(random() % 1000000) + "_" + std::to_string(::getpid()) + "_" +
           std::to_string(counter++);
}

// libpq takes the last value of a keyword, so a trailing dbname parameter selects the database
// whatever the base URL names.
std::string WithDatabase(const std::string& url, const std::string& name) {
    const char separator = url.find('?') == std::string::npos ? '?' : '&';
    return url + separator + "dbname=" + name;
}

}  // namespace

TestDatabase::TestDatabase(bool migrate) {
    const char* url = std::getenv("PAYLEDGER_TEST_DATABASE_URL");
    if (url == nullptr || *url == '\0') {
        // A laptop may skip; CI must not, or a green run would prove nothing.
        if (std::getenv("CI") != nullptr) {
            ADD_FAILURE() << "PAYLEDGER_TEST_DATABASE_URL is not set";
        }
        return;
    }
    base_url_ = url;
    name_ = UniqueDatabaseName();
    {
        pqxx::connection connection{base_url_};
        pqxx::nontransaction tx{connection};  // CREATE DATABASE refuses a transaction block
        tx.exec0("CREATE DATABASE " + tx.quote_name(name_));
    }
    url_ = WithDatabase(base_url_, name_);
    if (migrate) {
        auto connection = Connect();
        ledger::Migrate(*connection);
    }
}

TestDatabase::~TestDatabase() {
    if (url_.empty()) return;
    try {
        // FORCE: a test that killed a server may leave its sessions to end on their own.
        pqxx::connection connection{base_url_};
        pqxx::nontransaction tx{connection};
        tx.exec0("DROP DATABASE " + tx.quote_name(name_) + " WITH (FORCE)");
    } catch (const std::exception& error) {
        ADD_FAILURE() << "dropping test database " << name_ << ": " << error.what();
    }
}

std::unique_ptr<pqxx::connection> TestDatabase::Connect() const {
    // The test's own sessions hold locks and transactions open on purpose, as long as a slow
    // machine needs: no limits (0 turns each off).
    return ledger::Connect(url_, {.application_name = name_,
                                  .statement_timeout = std::chrono::milliseconds{0},
                                  .lock_timeout = std::chrono::milliseconds{0},
                                  .idle_in_transaction_timeout = std::chrono::milliseconds{0}});
}

std::string TestDatabase::Scalar(const std::string& sql) const {
    auto connection = Connect();
    pqxx::work tx{*connection};
    const pqxx::result result = tx.exec(sql);
    tx.commit();
    if (result.empty() || result[0][0].is_null()) return {};
    return result[0][0].as<std::string>();
}

void AwaitLockWaiters(const TestDatabase& db, const char* waiters_sql) {
    auto connection = db.Connect();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (std::chrono::steady_clock::now() < deadline) {
        pqxx::nontransaction tx{*connection};
        if (tx.exec(waiters_sql)[0][0].as<int>() > 0) return;
        std::this_thread::sleep_for(std::chrono::milliseconds{1});  // Poll pace.
    }
    ADD_FAILURE() << "nobody waited within 60 s: " << waiters_sql;
}

void AwaitSessionDone(const TestDatabase& db, int backend_pid) {
    auto connection = db.Connect();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (std::chrono::steady_clock::now() < deadline) {
        pqxx::nontransaction tx{*connection};
        if (tx.exec_params(
                  "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state <> 'idle'",
                  backend_pid)[0][0]
                .as<int>() == 0) {
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{1});  // Poll pace.
    }
    ADD_FAILURE() << "session " << backend_pid << " still busy after 60 s";
}

}  // namespace payledger::testing
