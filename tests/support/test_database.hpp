#pragma once

#include <memory>
#include <pqxx/pqxx>
#include <string>

namespace payledger::testing {

// A schema of its own on the test database, migrated, dropped at destruction. Every URL it
// hands out selects that schema (search_path), so tests can run side by side.
// Fails the test (CI) or skips it (a laptop) when PAYLEDGER_TEST_DATABASE_URL is unset.
class TestDatabase {
public:
    // `migrate`: apply the migrations (false leaves the schema empty).
    explicit TestDatabase(bool migrate = true);
    ~TestDatabase();
    TestDatabase(const TestDatabase&) = delete;
    TestDatabase& operator=(const TestDatabase&) = delete;

    // False when the test was skipped (no database configured outside CI).
    [[nodiscard]] bool available() const { return !url_.empty(); }
    [[nodiscard]] const std::string& url() const { return url_; }
    [[nodiscard]] const std::string& schema() const { return schema_; }

    // A new connection to the test schema.
    [[nodiscard]] std::unique_ptr<pqxx::connection> Connect() const;

    // Runs `sql` in its own transaction and returns the first column of the first row.
    std::string Scalar(const std::string& sql) const;

private:
    std::string base_url_;
    std::string schema_;
    std::string url_;
};

}  // namespace payledger::testing

// Use at the start of every PostgreSQL test body.
#define PAYLEDGER_REQUIRE_DATABASE(db)                             \
    do {                                                           \
        if (!(db).available()) GTEST_SKIP() << "no test database"; \
    } while (false)
