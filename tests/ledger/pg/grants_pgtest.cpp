// PostgreSQL tests of least privilege (docs/availability.md#least-privilege): `payledger migrate
// --grant ROLE` (ledger::GrantServiceRole) gives the service's role what serve needs and nothing
// more. As that role the writer writes a batch, the projections update, and the reads work; but it
// cannot disable a trigger, update or delete a ledger row, truncate, create a table or
// migrate, and PUBLIC holds nothing.

#include <gtest/gtest.h>

#include <algorithm>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "ledger/pg/database.hpp"
#include "ledger/pg/migrate.hpp"
#include "ledger/write/writer.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger::grants_pgtest {
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

// The role holds exactly ledger::kServicePrivileges, the list /readyz checks too: every
// privilege on every table and sequence of the schema, as PostgreSQL's has_*_privilege sees it,
// is held when the list names it and only then (a new table, or a grant written beside the
// list, fails here).
TEST_F(GrantsPgTest, TheRoleHoldsExactlyTheServicePrivileges) {
    std::set<std::string> listed;
    for (const ServicePrivilege& needed : kServicePrivileges) {
        std::string privileges(needed.privileges);
        for (std::size_t start = 0; start <= privileges.size();) {
            const std::size_t comma = std::min(privileges.find(',', start), privileges.size());
            listed.insert(std::string(needed.object) + " " +
                          privileges.substr(start, comma - start));
            start = comma + 1;
        }
    }
    std::set<std::string> held;
    std::set<std::string> objects;
    pqxx::work tx{*owner_};
    const pqxx::result rows = tx.exec(
        "SELECT c.relname, p.privilege, CASE c.relkind WHEN 'S' "
        "THEN has_sequence_privilege(" +
        tx.quote(role_) +
        ", c.oid, p.privilege) "
        "ELSE has_table_privilege(" +
        tx.quote(role_) +
        ", c.oid, p.privilege) END "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, "
        "unnest(CASE c.relkind WHEN 'S' THEN ARRAY['SELECT', 'UPDATE', 'USAGE'] "
        "ELSE ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', "
        "'TRIGGER'] END) AS p (privilege) "
        "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'S')");
    for (const pqxx::row& row : rows) {
        const std::string object = row[0].as<std::string>();
        objects.insert(object);
        if (row[2].as<bool>()) held.insert(object + " " + row[1].as<std::string>());
    }
    EXPECT_EQ(held, listed);
    // Every object the list names exists (a renamed table would otherwise be lacked silently).
    for (const ServicePrivilege& needed : kServicePrivileges) {
        EXPECT_TRUE(objects.contains(std::string(needed.object))) << needed.object;
    }
}

TEST_F(GrantsPgTest, AnUnknownRoleIsRefused) {
    EXPECT_THROW(GrantServiceRole(*owner_, "no_such_role_" + db_.name()), std::invalid_argument);
}

}  // namespace
}  // namespace payledger::ledger::grants_pgtest
