// Migrations: each applied once and recorded; several processes migrating
// one database at once is safe. Against the real PostgreSQL, one fresh database per test.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "ledger/pg/migrate.hpp"
#include "schema/migrations.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger {
namespace {

using testing::TestDatabase;

TEST(MigratePgTest, AppliesEveryMigrationOnceAndRecordsIt) {
    TestDatabase db{/*migrate=*/false};
    PAYLEDGER_REQUIRE_DATABASE(db);
    auto connection = db.Connect();
    const std::vector<std::string> first = Migrate(*connection);
    ASSERT_EQ(first.size(), schema::Migrations().size());
    EXPECT_EQ(first.front(), "0001_ledger");
    EXPECT_TRUE(Migrate(*connection).empty());
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM schema_migrations"),
              std::to_string(schema::Migrations().size()));
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM ledger_events"), "0");
}

TEST(MigratePgTest, ConcurrentMigrationsApplyEachFileExactlyOnce) {
    TestDatabase db{/*migrate=*/false};
    PAYLEDGER_REQUIRE_DATABASE(db);
    constexpr int kProcesses = 6;
    std::vector<std::vector<std::string>> applied(kProcesses);
    std::vector<std::string> errors(kProcesses);
    std::vector<std::thread> threads;
    for (int i = 0; i < kProcesses; ++i) {
        threads.emplace_back([&, i] {
            try {
                auto connection = db.Connect();
                applied[static_cast<std::size_t>(i)] = Migrate(*connection);
            } catch (const std::exception& error) {
                errors[static_cast<std::size_t>(i)] = error.what();
            }
        });
    }
    for (std::thread& thread : threads) thread.join();
    std::size_t total = 0;
    for (int i = 0; i < kProcesses; ++i) {
        EXPECT_EQ(errors[static_cast<std::size_t>(i)], "") << "migration " << i << " failed";
        total += applied[static_cast<std::size_t>(i)].size();
    }
    // Exactly one of them applied every file; the others found nothing to do.
    EXPECT_EQ(total, schema::Migrations().size());
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM schema_migrations"),
              std::to_string(schema::Migrations().size()));
}

}  // namespace
}  // namespace payledger::ledger
