// Invariant 2 (docs/events.md#invariants): the schema itself refuses UPDATE, DELETE and
// TRUNCATE on ledger_events and callback_receipts, whoever asks; the projections stay
// writable (rebuild needs them). Also the CHECK constraints on money columns.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ledger/write/writer.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger {
namespace {

using testing::TestDatabase;

class AppendOnlyPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        auto connection = db_.Connect();
        const Delivery delivery = testing::OrderRegistration(
            "ORD-1", {.account_id = "acct", .receipt = {.peer = "127.0.0.1:1", .body = "{}"}});
        (void)WriteBatch(*connection, std::span(&delivery, 1));
    }

    // Runs `sql` and returns the error text, or "" when it succeeded.
    std::string Refusal(const std::string& sql) {
        auto connection = db_.Connect();
        try {
            pqxx::work tx{*connection};
            tx.exec(sql);
            tx.commit();
            return "";
        } catch (const pqxx::sql_error& error) {
            return error.what();
        }
    }

    TestDatabase db_;
};

TEST_F(AppendOnlyPgTest, UpdateDeleteAndTruncateOfEventsAreRefused) {
    for (const char* sql : {"UPDATE ledger_events SET amount = 1", "DELETE FROM ledger_events",
                            "TRUNCATE ledger_events CASCADE"}) {
        EXPECT_NE(Refusal(sql).find("append-only"), std::string::npos) << sql;
    }
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events"), "1");
    EXPECT_EQ(db_.Scalar("SELECT amount FROM ledger_events"), "100");
}

TEST_F(AppendOnlyPgTest, UpdateDeleteAndTruncateOfReceiptsAreRefused) {
    for (const char* sql :
         {"UPDATE callback_receipts SET outcome = 'malformed', seq = NULL",
          "DELETE FROM callback_receipts", "TRUNCATE callback_receipts CASCADE"}) {
        EXPECT_NE(Refusal(sql).find("append-only"), std::string::npos) << sql;
    }
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts"), "1");
    EXPECT_EQ(db_.Scalar("SELECT outcome FROM callback_receipts"), "appended");
}

TEST_F(AppendOnlyPgTest, TheUniqueKeyRefusesASecondEventOfOneType) {
    const std::string error = Refusal(
        "WITH r AS (INSERT INTO callback_receipts (source, received_at, peer, body, outcome, "
        "chain) VALUES ('api', now(), 'test', '', 'malformed', sha256('')) RETURNING id) "
        "INSERT INTO ledger_events (out_trade_no, event_type, source, account_id, amount, "
        "currency, occurred_at, receipt_id) "
        "SELECT 'ORD-1', 'ORDER_CREATED', 'api', 'acct', 100, 'CNY', now(), id FROM r");
    EXPECT_NE(error.find("ledger_events_one_per_type"), std::string::npos) << error;
}

// schema/0004: the references between receipts and events hold at the end of every statement
// that inserts them (they were deferred foreign keys; the append-only triggers keep the
// referenced rows from changing).
TEST_F(AppendOnlyPgTest, AReceiptMustNameAnEventThatExists) {
    const std::string error = Refusal(
        "INSERT INTO callback_receipts (source, received_at, peer, body, outcome, seq, chain) "
        "VALUES ('api', now(), 'test', '', 'duplicate', 999999, sha256(''))");
    EXPECT_NE(error.find("names an event that does not exist"), std::string::npos) << error;
    EXPECT_NE(error.find("(seq)=(999999)"), std::string::npos) << error;
    // The event the stored receipt names is a valid target.
    EXPECT_EQ(Refusal("INSERT INTO callback_receipts (source, received_at, peer, body, outcome, "
                      "seq, chain) SELECT 'api', now(), 'test', '', 'duplicate', seq, "
                      "sha256('') FROM ledger_events"),
              "");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts"), "2");
}

TEST_F(AppendOnlyPgTest, AnEventMustNameAReceiptThatExists) {
    const std::string error = Refusal(
        "INSERT INTO ledger_events (out_trade_no, event_type, source, account_id, amount, "
        "currency, occurred_at, receipt_id) "
        "VALUES ('ORD-2', 'ORDER_CREATED', 'api', 'acct', 100, 'CNY', now(), 999999)");
    EXPECT_NE(error.find("names a receipt that does not exist"), std::string::npos) << error;
    EXPECT_NE(error.find("(receipt_id)=(999999)"), std::string::npos) << error;
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events"), "1");
}

TEST_F(AppendOnlyPgTest, MoneyColumnsRefuseWhatSpecSection1Forbids) {
    const std::string insert =
        "INSERT INTO ledger_events (out_trade_no, event_type, source, account_id, amount, "
        "currency, transaction_id, occurred_at, receipt_id) "
        "SELECT 'ORD-1', 'PAYMENT_SUCCEEDED', 'generic', 'acct', ";
    for (const char* amount : {"0", "-1", "10000000000001"}) {
        EXPECT_NE(Refusal(insert + amount + ", 'CNY', 'T1', now(), id FROM callback_receipts"), "")
            << amount;
    }
    EXPECT_NE(Refusal(insert + "100, 'cny', 'T1', now(), id FROM callback_receipts"), "");
    EXPECT_NE(Refusal("UPDATE orders SET paid_amount = -1"), "");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events"), "1");
}

// A key is 1 to 64 of A-Z a-z 0-9 _ | * . - (docs/events.md#money-keys-and-time; schema/0006 checks
// it without the regular expression of 0001, and must refuse and accept exactly what that one did).
TEST_F(AppendOnlyPgTest, KeysRefuseWhatSpecSection1Forbids) {
    const std::string longest(64, 'k');
    const std::vector<std::string> refused = {
        "''",    "'" + longest + "k'", "'a b'",   "'a,b'",   "'a''b'",  "'a\\b'",
        "'a/b'", "'\u00fcber'",        "E'a\\n'", "E'\\na'", "E'a\\t'", "'a+b'",
        "'(a)'"};
    const std::vector<std::string> accepted = {"'" + longest + "'", "'Az09_|*.-'", "'-'"};
    // Replica mode skips the reference triggers (schema/0004), not the CHECK constraints.
    const std::string receipt =
        "SET LOCAL session_replication_role = replica; "
        "INSERT INTO callback_receipts (source, received_at, peer, body, outcome, chain, "
        "out_trade_no) VALUES ('generic', now(), 'p', '', 'malformed', sha256(''), ";
    const auto event = [](const std::string& out_trade_no, const std::string& account_id) {
        return "SET LOCAL session_replication_role = replica; "
               "INSERT INTO ledger_events (out_trade_no, event_type, source, account_id, amount, "
               "currency, occurred_at, receipt_id) VALUES (" +
               out_trade_no + ", 'ORDER_CREATED', 'api', " + account_id +
               ", 100, 'CNY', now(), nextval('callback_receipts_id_seq'))";
    };
    for (const std::string& key : refused) {
        EXPECT_NE(Refusal(receipt + key + ")").find("callback_receipts_out_trade_no_check"),
                  std::string::npos)
            << key;
        EXPECT_NE(Refusal(event(key, "'acct'")).find("ledger_events_out_trade_no_check"),
                  std::string::npos)
            << key;
        EXPECT_NE(Refusal(event("'ORD-9'", key)).find("ledger_events_account_id_check"),
                  std::string::npos)
            << key;
    }
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events"), "1");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts"), "1");
    int n = 0;
    for (const std::string& key : accepted) {
        EXPECT_EQ(Refusal(receipt + key + ")"), "") << key;
        EXPECT_EQ(Refusal(event(key, "'acct'")), "") << key;
        EXPECT_EQ(Refusal(event("'ACC-" + std::to_string(++n) + "'", key)), "") << key;
    }
    EXPECT_EQ(Refusal(receipt + "NULL)"), "");  // A receipt may name no order.
}

TEST_F(AppendOnlyPgTest, ProjectionsStayWritableForRebuild) {
    EXPECT_EQ(Refusal("UPDATE orders SET status = status"), "");
    EXPECT_EQ(Refusal("UPDATE balances SET balance = balance"), "");
}

}  // namespace
}  // namespace payledger::ledger
