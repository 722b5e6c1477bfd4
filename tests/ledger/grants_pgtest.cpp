// PostgreSQL tests of least privilege (docs/design.md#least-privilege): `payledger migrate --grant
// ROLE` (ledger::GrantServiceRole) gives the service's role what serve needs and nothing more. As
// that role the writer writes a batch, the projections update, and the reads work; but it
// cannot disable a trigger, update or delete a ledger row, truncate, create a table or
// migrate, and PUBLIC holds nothing.

#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "ledger/database.hpp"
#include "ledger/migrate.hpp"
#include "ledger/writer.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger {
namespace {

using testing::TestDatabase;

class GrantsPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        role_ = "svc_" + db_.name();
        owner_ = db_.Connect();
        {
            pqxx::nontransaction tx{*owner_};
            tx.exec("DROP ROLE IF EXISTS " + tx.quote_name(role_));
            tx.exec("CREATE ROLE " + tx.quote_name(role_) + " LOGIN");
        }
        GrantServiceRole(*owner_, role_);
        const std::string& url = db_.url();
        // The writer's statements are prepared by ledger::Connect, as for serve.
        service_ =
            Connect(url + (url.find('?') == std::string::npos ? "?" : "&") + "user=" + role_);
    }

    void TearDown() override {
        if (!owner_) return;
        service_.reset();
        pqxx::nontransaction tx{*owner_};
        tx.exec("DROP OWNED BY " + tx.quote_name(role_));
        tx.exec("DROP ROLE IF EXISTS " + tx.quote_name(role_));
    }

    // What `sql` gets as the service's role: "ok", "denied" (insufficient_privilege), or
    // the error's text.
    std::string AsService(const std::string& sql) {
        try {
            pqxx::work tx{*service_};
            tx.exec(sql);
            tx.commit();
            return "ok";
        } catch (const pqxx::insufficient_privilege&) {
            return "denied";
        } catch (const pqxx::sql_error& error) {
            return error.what();
        }
    }

    TestDatabase db_;
    std::string role_;
    std::unique_ptr<pqxx::connection> owner_;
    std::unique_ptr<pqxx::connection> service_;
};

Delivery Order(const std::string& out_trade_no) {
    return testing::OrderRegistration(
        out_trade_no, {.receipt = {.received_at = 1'795'941'000'000'000, .body = "{}"}});
}

TEST_F(GrantsPgTest, TheServiceRoleWritesThroughTheWriter) {
    const auto results = WriteBatch(*service_, std::vector{Order("ORD-1"), Order("ORD-2")});
    EXPECT_EQ(results[0].outcome, projections::Outcome::kAppended);
    EXPECT_EQ(results[1].outcome, projections::Outcome::kAppended);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM orders"), "2");
    EXPECT_EQ(AsService("SELECT count(*) FROM callback_receipts, ledger_events, reconciliations"),
              "ok");
    EXPECT_TRUE(PendingMigrations(*service_).empty());
}

TEST_F(GrantsPgTest, TheServiceRoleCannotRewriteHistory) {
    (void)WriteBatch(*service_, std::vector{Order("ORD-1")});
    {
        pqxx::read_transaction tx{*service_};
        ASSERT_EQ(tx.exec1("SELECT current_user")[0].as<std::string>(), role_);
        ASSERT_EQ(tx.exec1("SELECT rolsuper::text FROM pg_roles WHERE rolname = current_user")[0]
                      .as<std::string>(),
                  "false");
    }
    const std::string denied = "denied";
    EXPECT_EQ(AsService("ALTER TABLE callback_receipts DISABLE TRIGGER USER"), denied);
    EXPECT_EQ(AsService("ALTER TABLE ledger_events DISABLE TRIGGER ledger_events_append_only"),
              denied);
    EXPECT_EQ(AsService("UPDATE ledger_events SET amount = 1"), denied);
    EXPECT_EQ(AsService("DELETE FROM ledger_events"), denied);
    EXPECT_EQ(AsService("UPDATE callback_receipts SET body = 'x'"), denied);
    EXPECT_EQ(AsService("DELETE FROM callback_receipts"), denied);
    EXPECT_EQ(AsService("TRUNCATE callback_receipts"), denied);
    EXPECT_EQ(AsService("DELETE FROM reconciliations"), denied);
    EXPECT_EQ(AsService("DELETE FROM orders"), denied);
    EXPECT_EQ(AsService("CREATE TABLE x (i int)"), denied);
    EXPECT_EQ(AsService("INSERT INTO schema_migrations (name) VALUES ('9999_x')"), denied);
    EXPECT_EQ(AsService("SET session_replication_role = replica"), denied);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events"), "1");
    // Nothing for PUBLIC on the ledger's tables.
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM information_schema.role_table_grants "
                         "WHERE grantee = 'PUBLIC' AND table_schema = 'public'"),
              "0");
}

TEST_F(GrantsPgTest, AnUnknownRoleIsRefused) {
    EXPECT_THROW(GrantServiceRole(*owner_, "no_such_role_" + db_.name()), std::invalid_argument);
}

}  // namespace
}  // namespace payledger::ledger
