#include "support/test_database.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <random>

#include "ledger/database.hpp"
#include "ledger/migrate.hpp"

namespace payledger::testing {
namespace {

std::string UniqueSchemaName() {
    static std::atomic<int> counter{0};
    std::random_device random;
    return "t_" + std::to_string(random() % 1000000) + "_" + std::to_string(::getpid()) + "_" +
           std::to_string(counter++);
}

std::string WithSearchPath(const std::string& url, const std::string& schema) {
    const char separator = url.find('?') == std::string::npos ? '?' : '&';
    return url + separator + "options=-csearch_path%3D" + schema;
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
    schema_ = UniqueSchemaName();
    {
        pqxx::connection connection{base_url_};
        pqxx::work tx{connection};
        tx.exec("CREATE SCHEMA " + tx.quote_name(schema_));
        tx.commit();
    }
    url_ = WithSearchPath(base_url_, schema_);
    if (migrate) {
        auto connection = Connect();
        ledger::Migrate(*connection);
    }
}

TestDatabase::~TestDatabase() {
    if (url_.empty()) return;
    try {
        pqxx::connection connection{base_url_};
        pqxx::work tx{connection};
        tx.exec("DROP SCHEMA " + tx.quote_name(schema_) + " CASCADE");
        tx.commit();
    } catch (const std::exception& error) {
        ADD_FAILURE() << "dropping test schema " << schema_ << ": " << error.what();
    }
}

std::unique_ptr<pqxx::connection> TestDatabase::Connect() const {
    // Named after the schema, so a test can find (and terminate) its own sessions.
    return ledger::Connect(url_, {.application_name = schema_});
}

std::string TestDatabase::Scalar(const std::string& sql) const {
    auto connection = Connect();
    pqxx::work tx{*connection};
    const pqxx::result result = tx.exec(sql);
    tx.commit();
    if (result.empty() || result[0][0].is_null()) return {};
    return result[0][0].as<std::string>();
}

}  // namespace payledger::testing
