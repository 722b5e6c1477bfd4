// Plan-proof SQL against the real PostgreSQL: on a database that was never
// analyzed, the write path must not scan `ledger_events`, `orders`, `balances` or
// `callback_receipts` sequentially. A fresh service's session prepares its statements while
// the tables are empty and runs them a few times (PostgreSQL then settles on a generic plan,
// which nothing invalidates while no ANALYZE or VACUUM runs); then 50 000 orders arrive; then
// the same session writes batches of payments, copies, new orders, unknown orders and rejected
// deliveries, and reads orders back as the reads do. Autovacuum is off for the four tables, so
// the result cannot depend on its timing. The counters come from pg_stat_user_tables, flushed
// with pg_stat_force_next_flush() by every session that touched the tables (the flush happens
// before the call's answer, so no waiting), and the index-scan counters must have moved, so
// the test cannot pass on counters that were never flushed.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>

#include "ledger/pg/database.hpp"
#include "ledger/read/reads.hpp"
#include "ledger/write/writer.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger::write_plans_pgtest {
namespace {

using projections::EventType;
using projections::Outcome;
using testing::TestDatabase;

constexpr int kWarmUpBatches = 10;  // More than the plan cache's 5 custom plans.
// Two sizes, 20 000 and 50 000 orders, are checked: a plan that is fine at one size can turn into a
// scan at the other.
constexpr int kStageOrders[] = {20'000, 50'000};
// Per stage: small batches, and batches as large as 64 keep-alive connections make.
constexpr int kSmallBatches = 50;
constexpr int kSmallBatchPayments = 10;
constexpr int kLargeBatches = 10;
constexpr int kLargeBatchPayments = 64;
constexpr int kBatchesPerStage = kSmallBatches + kLargeBatches;
constexpr const char* kTables[] = {"ledger_events", "orders", "balances", "callback_receipts"};

std::int64_t AmountOf(int order) { return 100 + order % 900; }

Delivery NewOrder(const std::string& out_trade_no, std::int64_t amount) {
    return testing::OrderRegistration(out_trade_no, {.account_id = "acct-new", .amount = amount});
}

Delivery Payment(const std::string& out_trade_no, std::int64_t amount) {
    return testing::VerifiedCallback(out_trade_no, EventType::kPaymentSucceeded,
                                     {.amount = amount, .transaction_id = "TX-" + out_trade_no});
}

Delivery Rejected(const std::string& out_trade_no) { return testing::Refusal(out_trade_no); }

struct ScanCounts {
    std::int64_t seq_scan = 0;
    std::int64_t idx_scan = 0;
};

class WritePlansPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        PAYLEDGER_REQUIRE_DATABASE(db_);
        admin_ = db_.Connect();
        writer_ = db_.Connect();
        pqxx::nontransaction tx{*admin_};
        for (const char* table : kTables) {
            tx.exec0(std::string("ALTER TABLE ") + table + " SET (autovacuum_enabled = false)");
        }
    }

    // The orders LOAD-(first + 1) ... LOAD-(first + n), as the write path stores them, in one
    // statement per table, with no ANALYZE; ids and seqs follow those already taken. The
    // accounts make 100 balance rows.
    void LoadOrders(int first, int n) {
        pqxx::work tx{*admin_};
        const pqxx::row last = tx.exec1(
            "SELECT (SELECT last_value FROM callback_receipts_id_seq), "
            "(SELECT last_value FROM ledger_events_seq_seq)");
        const std::string id = std::to_string(last[0].as<std::int64_t>() - first) + " + i";
        const std::string seq = std::to_string(last[1].as<std::int64_t>() - first) + " + i";
        const std::string rows = "FROM generate_series(" + std::to_string(first + 1) + ", " +
                                 std::to_string(first + n) + ") AS i";
        // One statement: each table's rows name the other's (schema/0004).
        tx.exec0(
            "WITH r AS (INSERT INTO callback_receipts (id, source, received_at, peer, body, "
            "outcome, seq, out_trade_no, chain) SELECT " +
            id + ", 'api', now(), '127.0.0.1:9', convert_to('load', 'UTF8'), 'appended', " + seq +
            ", 'LOAD-' || i, sha256(convert_to('load' || i, 'UTF8')) " + rows +
            ") INSERT INTO ledger_events (seq, out_trade_no, event_type, source, account_id, "
            "amount, currency, occurred_at, receipt_id) SELECT " +
            seq +
            ", 'LOAD-' || i, 'ORDER_CREATED', 'api', 'acct-' || i % 100, 100 + i % 900, "
            "'CNY', now(), " +
            id + " " + rows);
        tx.exec0(
            "INSERT INTO orders (out_trade_no, account_id, amount, currency, status, "
            "paid_amount, refunded_amount, seq) SELECT 'LOAD-' || i, 'acct-' || i % 100, "
            "100 + i % 900, 'CNY', 'WAIT_PAY', 0, 0, " +
            seq + " " + rows);
        tx.exec0(
            "INSERT INTO balances (account_id, currency, balance) "
            "SELECT 'acct-' || i, 'CNY', 0 FROM generate_series(0, 99) AS i "
            "ON CONFLICT DO NOTHING");
        tx.exec1(
            "SELECT setval('callback_receipts_id_seq', (SELECT max(id) FROM callback_receipts)), "
            "setval('ledger_events_seq_seq', (SELECT max(seq) FROM ledger_events))");
        tx.commit();
    }

    // Makes `connection`'s pending table statistics visible to other sessions now.
    static void FlushStats(pqxx::connection& connection) {
        pqxx::nontransaction tx{connection};
        tx.exec("SELECT pg_stat_force_next_flush()");
    }

    std::map<std::string, ScanCounts> Counts() {
        FlushStats(*admin_);
        FlushStats(*writer_);
        pqxx::work tx{*admin_};  // A new transaction: a fresh statistics snapshot.
        std::map<std::string, ScanCounts> counts;
        for (const pqxx::row& row :
             tx.exec("SELECT relname, coalesce(seq_scan, 0), coalesce(idx_scan, 0) "
                     "FROM pg_stat_user_tables WHERE relname IN ('ledger_events', 'orders', "
                     "'balances', 'callback_receipts')")) {
            counts[row[0].as<std::string>()] = {.seq_scan = row[1].as<std::int64_t>(),
                                                .idx_scan = row[2].as<std::int64_t>()};
        }
        return counts;
    }

    // What the service does for an order: the write, then the reads of the result.
    void WriteAndRead(const std::vector<Delivery>& deliveries, const std::string& out_trade_no) {
        const std::vector<DeliveryResult> results = WriteBatch(*writer_, deliveries);
        ASSERT_EQ(results.size(), deliveries.size());
        pqxx::read_transaction tx{*writer_};
        ASSERT_TRUE(ReadOrder(tx, out_trade_no).has_value()) << out_trade_no;
        EXPECT_FALSE(ReadOrderEvents(tx, out_trade_no).empty()) << out_trade_no;
        EXPECT_FALSE(ReadOrderReceipts(tx, out_trade_no, 0, kPageSizeMax).empty()) << out_trade_no;
    }

    TestDatabase db_;
    std::unique_ptr<pqxx::connection> admin_;
    std::unique_ptr<pqxx::connection> writer_;

    // Pays the next `payments` loaded orders in one batch, with a copy (duplicate), a new
    // order, an unknown order and a rejected delivery; then reads the result back.
    void WriteBatchOfPayments(int payments, int& next_order) {
        std::vector<Delivery> deliveries;
        std::string last;
        for (int i = 0; i < payments; ++i, ++next_order) {
            last = "LOAD-" + std::to_string(next_order);
            deliveries.push_back(Payment(last, AmountOf(next_order)));
        }
        deliveries.push_back(deliveries.front());
        deliveries.push_back(NewOrder("NEW-" + std::to_string(next_order), 500));
        deliveries.push_back(Payment("NONE-" + std::to_string(next_order), 500));
        deliveries.push_back(Rejected(last));
        WriteAndRead(deliveries, last);
        pqxx::read_transaction tx{*writer_};
        EXPECT_EQ(ReadBalances(tx, "acct-new").size(), 1u);
    }
};

TEST_F(WritePlansPgTest, NeverAnalyzedTablesAreNeverScannedSequentially) {
    // A fresh service: its statements are planned and run while the tables are empty.
    for (int i = 0; i < kWarmUpBatches; ++i) {
        const std::string key = "WARM-" + std::to_string(i);
        WriteAndRead({NewOrder(key, 100), Payment(key, 100), Payment(key, 100), Rejected(key),
                      Payment("NONE-" + key, 100)},
                     key);
    }
    int loaded = 0;
    int next_order = 1;
    for (const int orders : kStageOrders) {
        SCOPED_TRACE(std::to_string(orders) + " orders");
        LoadOrders(loaded, orders - loaded);
        loaded = orders;
        ASSERT_EQ(db_.Scalar("SELECT count(*) FROM pg_class WHERE relname IN ('ledger_events', "
                             "'orders', 'balances', 'callback_receipts') AND reltuples >= 0"),
                  "0")
            << "the tables must look never analyzed";

        const std::map<std::string, ScanCounts> before = Counts();
        const auto started = std::chrono::steady_clock::now();
        for (int batch = 0; batch < kSmallBatches; ++batch) {
            WriteBatchOfPayments(kSmallBatchPayments, next_order);
        }
        for (int batch = 0; batch < kLargeBatches; ++batch) {
            WriteBatchOfPayments(kLargeBatchPayments, next_order);
        }
        const auto elapsed = std::chrono::steady_clock::now() - started;
        const std::map<std::string, ScanCounts> after = Counts();
        std::cout << orders << " orders: " << kBatchesPerStage << " batches with reads in "
                  << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
                  << " ms\n";

        for (const char* table : kTables) {
            SCOPED_TRACE(table);
            ASSERT_EQ(after.count(table), 1u);
            EXPECT_EQ(after.at(table).seq_scan - before.at(table).seq_scan, 0)
                << "sequential scans of " << table << " by the write path";
        }
        // The counters were flushed and counted: the batches looked their rows up by index.
        EXPECT_GE(after.at("orders").idx_scan - before.at("orders").idx_scan, kBatchesPerStage);
        EXPECT_GE(after.at("ledger_events").idx_scan - before.at("ledger_events").idx_scan,
                  kBatchesPerStage);
    }
    const int paid =
        static_cast<int>(std::size(kStageOrders)) *
            (kSmallBatches * kSmallBatchPayments + kLargeBatches * kLargeBatchPayments) +
        kWarmUpBatches;
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM orders WHERE status = 'PAID'"),
              std::to_string(paid));
}

}  // namespace
}  // namespace payledger::ledger::write_plans_pgtest
