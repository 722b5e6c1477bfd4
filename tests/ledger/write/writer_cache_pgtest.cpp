// Batches planned from the writer's memory of its own last batch (WriterCache), in
// one round trip. The cache must never decide differently from a read under the writer lock:
// random batches give the same answers and the same rows as on a database written without
// one; another writer in between (a second payledger on the same database) is noticed, by the
// check under the lock (and, were it missing, by the receipts' primary key, which the next id
// would collide with), also when it only wrote a rejected receipt (the chain's head) or when
// the next batch reads anyway; any failure makes it forget; and it stays within its bound.
// The prefetch (PrefetchState: orders read outside the lock, WriterCache::Learn) lets a batch
// of orders the cache never saw go in one round trip, and a snapshot of another ledger, or one
// taken before another writer's batch, is never learned, or is caught by the check.
// The cache's own logic, which needs no database, is tested in writer_cache_test.cpp.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <map>
#include <random>
#include <thread>
#include <tuple>

#include "ledger/integrity/audit.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/write/writer.hpp"
#include "projections/assert.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger::writer_cache_pgtest {
namespace {

using projections::EventType;
using projections::Outcome;
using projections::Source;
using testing::TestDatabase;

constexpr const char* kHeaders = R"({"X-Test":"1"})";

Delivery Deliver(const std::string& out_trade_no, EventType type, Source source,
                 std::int64_t amount, std::optional<std::string> transaction_id,
                 const std::string& account_id = "") {
    return testing::VerifiedCallback(out_trade_no, type,
                                     {.source = source,
                                      .account_id = account_id,
                                      .amount = type == EventType::kPaymentClosed ? 0 : amount,
                                      .transaction_id = std::move(transaction_id),
                                      .receipt = {.headers = kHeaders}});
}

Delivery Order(const std::string& out_trade_no, std::int64_t amount,
               const std::string& account_id = "acct-1") {
    return testing::OrderRegistration(
        out_trade_no,
        {.account_id = account_id, .amount = amount, .receipt = {.headers = kHeaders}});
}

Delivery Payment(const std::string& out_trade_no, const std::string& transaction_id,
                 std::int64_t amount) {
    return Deliver(out_trade_no, EventType::kPaymentSucceeded, Source::kGeneric, amount,
                   transaction_id);
}

Delivery Close(const std::string& out_trade_no) {
    return Deliver(out_trade_no, EventType::kPaymentClosed, Source::kGeneric, 0, std::nullopt);
}

Delivery Rejected(const std::string& out_trade_no) {
    return testing::Refusal(
        out_trade_no,
        {.outcome = Outcome::kMalformed, .message = "not JSON", .receipt = {.body = "not JSON"}});
}

// What both databases must hold alike: every column but recorded_at (the server's clock).
constexpr const char* kLedgerDumpSql = R"sql(
SELECT concat_ws(E'\n',
  (SELECT string_agg(concat_ws(' ', id, source, outcome, seq, out_trade_no, message,
                               encode(chain, 'hex'), encode(coalesce(body_sha256, sha256(body)), 'hex')), E'\n' ORDER BY id)
   FROM callback_receipts),
  (SELECT string_agg(concat_ws(' ', seq, out_trade_no, event_type, account_id, amount, currency,
                               transaction_id, receipt_id, data::text), E'\n' ORDER BY seq)
   FROM ledger_events),
  (SELECT string_agg(concat_ws(' ', out_trade_no, account_id, amount, currency, status,
                               transaction_id, paid_amount, refunded_amount, anomalies::text, seq),
                     E'\n' ORDER BY out_trade_no)
   FROM orders),
  (SELECT string_agg(concat_ws(' ', account_id, currency, balance), E'\n'
                     ORDER BY account_id, currency)
   FROM balances))
)sql";

std::string Describe(const DeliveryResult& result) {
    std::string out = std::string(projections::ToString(result.outcome)) + " seq " +
                      std::to_string(result.seq) + " receipt " + std::to_string(result.receipt_id) +
                      " " + result.message;
    if (result.order) {
        out += " order " + result.order->status + " " + std::to_string(result.order->paid_amount) +
               " " + std::to_string(result.order->refunded_amount) + " " +
               std::to_string(result.order->seq);
    }
    return out;
}

TEST(WriterCachePgTest, RandomBatchesDecideAsOnADatabaseWrittenWithoutCache) {
    TestDatabase plain_db;
    if (!plain_db.available()) GTEST_SKIP() << "no test database";
    TestDatabase cached_db;
    auto plain = plain_db.Connect();
    auto cached = cached_db.Connect();
    WriterCache cache{16};  // Two generations of 8, of the 12 orders used: some batches read.

    std::mt19937 random{20261202};
    const auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(random); };
    std::size_t from_cache = 0;
    std::size_t read = 0;
    for (int b = 0; b < 150; ++b) {
        std::vector<Delivery> batch;
        const int size = 1 + pick(6);
        for (int i = 0; i < size; ++i) {
            const std::string key = "ORD-" + std::to_string(pick(12));
            const std::int64_t amount = 100 * (1 + pick(3));  // Sometimes not the order's.
            switch (pick(7)) {
                case 0:
                    batch.push_back(Order(key, amount, "acct-" + std::to_string(pick(3))));
                    break;
                case 1:
                case 2:
                    batch.push_back(Payment(key, "TX-" + std::to_string(pick(2)), amount));
                    break;
                case 3:
                    batch.push_back(Close(key));
                    break;
                case 4:
                    batch.push_back(Deliver(key, EventType::kRefundSucceeded, Source::kGeneric,
                                            amount, "RF-" + std::to_string(pick(2))));
                    break;
                case 5:
                    batch.push_back(Rejected(key));
                    break;
                default:
                    batch.push_back(Order(key, 200));
                    break;
            }
        }
        const std::vector<DeliveryResult> expected = WriteBatch(*plain, batch);
        BatchStats stats;
        const std::vector<DeliveryResult> got = WriteBatch(*cached, batch, &stats, &cache);
        (stats.state_read ? read : from_cache) += 1;
        ASSERT_EQ(got.size(), expected.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(Describe(got[i]), Describe(expected[i]))
                << "batch " << b << ", delivery " << i;
            ASSERT_EQ(got[i].order, expected[i].order) << "batch " << b << ", delivery " << i;
        }
        ASSERT_LE(cache.size(), 16u);
    }
    // Both paths ran: the test proves the cache, not only the read.
    EXPECT_GT(from_cache, 40u) << read << " read";
    EXPECT_GT(read, 10u) << from_cache << " from the cache";
    EXPECT_EQ(cached_db.Scalar(kLedgerDumpSql), plain_db.Scalar(kLedgerDumpSql));
    EXPECT_TRUE(Audit(cached_db.url()).ok());
}

class WriterCacheTwoWritersPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        mine_ = db_.Connect();
        other_ = db_.Connect();
    }

    // This writer's batch, through its cache.
    DeliveryResult Mine(Delivery delivery) {
        stats_ = BatchStats{};
        return WriteBatch(*mine_, std::span(&delivery, 1), &stats_, &cache_).front();
    }
    // Another writer's (another payledger on the same database, without this one's cache).
    DeliveryResult Other(Delivery delivery) {
        return WriteBatch(*other_, std::span(&delivery, 1)).front();
    }

    TestDatabase db_;
    std::unique_ptr<pqxx::connection> mine_;
    std::unique_ptr<pqxx::connection> other_;
    WriterCache cache_{1000};
    BatchStats stats_;
};

TEST_F(WriterCacheTwoWritersPgTest, AnOrderChangedByAnotherWriterIsReadAgain) {
    (void)Mine(Order("ORD-1", 500));
    EXPECT_EQ(Mine(Order("ORD-1", 500)).outcome, Outcome::kDuplicate);
    EXPECT_FALSE(stats_.state_read);  // Known: written in one round trip.
    EXPECT_EQ(Other(Close("ORD-1")).outcome, Outcome::kAppended);
    // The cache still says WAIT_PAY; the ledger says CLOSED, and so must the answer.
    const DeliveryResult again = Mine(Order("ORD-1", 500));
    EXPECT_EQ(again.outcome, Outcome::kDuplicate);
    ASSERT_TRUE(again.order.has_value());
    EXPECT_EQ(again.order->status, "CLOSED");
    EXPECT_TRUE(stats_.state_read);
    EXPECT_TRUE(Audit(db_.url()).ok());
}

TEST_F(WriterCacheTwoWritersPgTest, AReceiptOfAnotherWriterMovesTheChainsHead) {
    (void)Mine(Order("ORD-1", 500));
    EXPECT_EQ(Other(Rejected("ORD-1")).outcome, Outcome::kMalformed);  // No event: only a receipt.
    EXPECT_EQ(Mine(Payment("ORD-1", "TX-1", 500)).outcome, Outcome::kAppended);
    EXPECT_TRUE(stats_.state_read);
    EXPECT_EQ(Mine(Payment("ORD-1", "TX-1", 500)).outcome, Outcome::kDuplicate);
    EXPECT_FALSE(stats_.state_read);
    const AuditReport report = Audit(db_.url());
    EXPECT_TRUE(report.ok()) << FormatAuditReport(report);
    EXPECT_EQ(report.receipts, 4);
}

TEST_F(WriterCacheTwoWritersPgTest, ABatchThatReadsAfterAnotherWriterForgetsTheRest) {
    (void)Mine(Order("ORD-1", 500));
    (void)Other(Close("ORD-1"));
    // ORD-3 is unknown, so this batch reads, and its read shows that someone wrote since:
    // what the cache held of ORD-1 may be old, and must not be used.
    (void)Mine(Order("ORD-3", 300));
    EXPECT_TRUE(stats_.state_read);
    const DeliveryResult again = Mine(Order("ORD-1", 500));
    ASSERT_TRUE(again.order.has_value());
    EXPECT_EQ(again.order->status, "CLOSED");
    EXPECT_TRUE(stats_.state_read);
    EXPECT_EQ(Mine(Order("ORD-3", 300)).outcome, Outcome::kDuplicate);
    EXPECT_FALSE(stats_.state_read);
}

TEST_F(WriterCacheTwoWritersPgTest, TheCheckUnderTheLockRefusesALedgerElsewhere) {
    (void)Other(Order("ORD-1", 500));  // Next seq 2, next receipt id 2.
    const std::string head = pqxx::binarystring(pqxx::nontransaction{*other_}.exec(
                                                    "SELECT chain FROM callback_receipts")[0][0])
                                 .str();
    const auto begin = [&](std::int64_t next_seq, std::int64_t next_receipt_id,
                           const std::string& expected_head) {
        pqxx::work tx{*mine_};
        return tx
            .exec_params("SELECT payledger_writer_begin($1, $2, $3, $4)", kWriterLockKey, next_seq,
                         next_receipt_id, pqxx::binarystring(expected_head))[0][0]
            .as<std::int64_t>();
    };
    EXPECT_GE(begin(2, 2, head), 0);  // The lock wait, in microseconds.
    // Either sequence elsewhere, as after another writer's batch, even one rolled back; or the
    // same ids with another head, as when a failover lost this writer's last commit and
    // another writer's batch brought the sequences back to the same values.
    std::string other_head = head;
    other_head[0] = static_cast<char>(other_head[0] ^ 1);
    for (const auto& [next_seq, next_receipt_id, expected_head] :
         std::initializer_list<std::tuple<std::int64_t, std::int64_t, std::string>>{
             {2, 3, head}, {3, 2, head}, {1, 2, head}, {2, 2, other_head}}) {
        try {
            (void)begin(next_seq, next_receipt_id, expected_head);
            FAIL() << "accepted " << next_seq << ", " << next_receipt_id;
        } catch (const pqxx::sql_error& e) {
            EXPECT_EQ(e.sqlstate(), "PLD01");
        }
    }
}

TEST_F(WriterCacheTwoWritersPgTest, APrefetchedOrderIsWrittenInOneRoundTrip) {
    (void)Other(Order("ORD-1", 500));  // Registered by another process: the cache never saw it.
    (void)Mine(Order("ORD-2", 200));   // The cache now knows the ledger, not ORD-1.
    ASSERT_TRUE(stats_.state_read);
    auto prefetcher = db_.Connect();
    EXPECT_EQ(PrefetchState(*prefetcher, {"ORD-1", "ORD-2", "ORD-9"}, cache_), 2u);  // 1 and 9.
    EXPECT_EQ(Mine(Payment("ORD-1", "TX-1", 500)).outcome, Outcome::kAppended);
    EXPECT_FALSE(stats_.state_read);  // Planned from what the prefetch read: one round trip.
    EXPECT_EQ(Mine(Payment("ORD-9", "TX-9", 900)).outcome, Outcome::kUnknownOrder);
    EXPECT_FALSE(stats_.state_read);
    const AuditReport report = Audit(db_.url());
    EXPECT_TRUE(report.ok()) << FormatAuditReport(report);
}

TEST_F(WriterCacheTwoWritersPgTest, ASnapshotFromBeforeAnotherWritersBatchIsNotLearned) {
    (void)Mine(Order("ORD-1", 500));
    (void)Other(Order("ORD-3", 300));  // Unknown to the cache...
    (void)Mine(Order("ORD-2", 200));   // ...which reads it into its view of the ledger.
    auto prefetcher = db_.Connect();
    // A prefetch's snapshot, then another writer's batch and two of this writer's.
    pqxx::work snapshot{*prefetcher, "prefetch"};
    snapshot.exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    (void)snapshot.exec("SELECT 1");  // The snapshot is taken here.
    (void)Other(Order("ORD-4", 400));
    (void)Mine(Order("ORD-6", 600));  // Reads (another writer wrote): knows the ledger after ORD-4.
    ASSERT_TRUE(stats_.state_read);
    (void)Mine(Order("ORD-5", 500));  // This writer's batch, after the snapshot.
    // Read as the prefetch would, in the old snapshot: ORD-5 had no event then.
    const std::string head =
        pqxx::binarystring(snapshot.exec("SELECT chain FROM callback_receipts ORDER BY id DESC "
                                         "LIMIT 1")[0][0])
            .str();
    snapshot.commit();
    ChainValue snapshot_head{};
    std::copy(head.begin(), head.end(), snapshot_head.begin());
    std::map<std::string, std::vector<projections::Event>> seen;
    seen["ORD-4"];  // Not there yet in that snapshot.
    seen["ORD-5"];
    // The snapshot is from before ORD-4 (another writer's): neither is learned.
    EXPECT_EQ(cache_.Learn(snapshot_head, seen), 0u);
    EXPECT_EQ(Mine(Payment("ORD-4", "TX-4", 400)).outcome, Outcome::kAppended);
    EXPECT_TRUE(stats_.state_read);
}

TEST_F(WriterCacheTwoWritersPgTest, AnotherWriterAfterThePrefetchIsCaughtByTheCheck) {
    (void)Mine(Order("ORD-1", 500));
    (void)Other(Order("ORD-2", 200));
    (void)Mine(Order("ORD-3", 300));  // Reads: the cache knows the ledger with ORD-2's.
    auto prefetcher = db_.Connect();
    EXPECT_EQ(PrefetchState(*prefetcher, {"ORD-2"}, cache_), 1u);
    (void)Other(Close("ORD-2"));  // After the prefetch: the cache's ORD-2 is now wrong.
    const DeliveryResult paid = Mine(Payment("ORD-2", "TX-2", 200));
    EXPECT_EQ(paid.outcome, Outcome::kAppended);  // A payment after a close is appended...
    EXPECT_TRUE(stats_.state_read);               // ...planned on what was read under the lock.
    ASSERT_TRUE(paid.order.has_value());
    EXPECT_EQ(paid.order->anomalies, std::vector<std::string>{"paid_after_close"});
    const AuditReport report = Audit(db_.url());
    EXPECT_TRUE(report.ok()) << FormatAuditReport(report);
}

TEST_F(WriterCacheTwoWritersPgTest, AFailedBatchForgetsEverything) {
    (void)Mine(Order("ORD-1", 500));
    ASSERT_TRUE(cache_.valid());
    db_.Scalar("UPDATE orders SET seq = 999 WHERE out_trade_no = 'ORD-1' RETURNING 1");
    EXPECT_THROW((void)Mine(Payment("ORD-1", "TX-1", 500)), InvariantError);
    EXPECT_FALSE(cache_.valid());
    EXPECT_EQ(cache_.size(), 0u);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts"), "1");  // Rolled back.
}

TEST_F(WriterCacheTwoWritersPgTest, ASessionLostInTheOneRoundTripForgetsAndTheRetryFindsTheCommit) {
    // The batch's whole block is on its way (BEGIN, the check under the lock, the write,
    // COMMIT) when this writer's end of the session is shut: the server still commits it once
    // the lock is free, while the writer saw only a lost session. In doubt: the cache must
    // forget, since it cannot know whether the payment is in the ledger; the platform's retry,
    // on a new session, reads the state and finds the payment a duplicate.
    (void)Mine(Order("ORD-1", 500));
    ASSERT_TRUE(cache_.valid());
    const int backend = mine_->backendpid();
    const int writer_socket = mine_->sock();  // Read here: the other thread leaves mine_ alone.
    auto holder = db_.Connect();
    pqxx::nontransaction{*holder}.exec("SELECT pg_advisory_lock(" + std::to_string(kWriterLockKey) +
                                       ")");
    std::thread cut([&] {
        testing::AwaitLockWaiters(db_, testing::kAdvisoryWaitersSql);  // At the check.
        ::shutdown(writer_socket, SHUT_RDWR);
        pqxx::nontransaction{*holder}.exec("SELECT pg_advisory_unlock(" +
                                           std::to_string(kWriterLockKey) + ")");
    });
    EXPECT_THROW((void)Mine(Payment("ORD-1", "TX-1", 500)), pqxx::in_doubt_error);
    cut.join();
    EXPECT_FALSE(cache_.valid());
    EXPECT_EQ(cache_.size(), 0u);
    // The server's session goes idle after its COMMIT, and ends when it finds the client gone.
    testing::AwaitSessionDone(db_, backend);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events WHERE event_type = "
                         "'PAYMENT_SUCCEEDED'"),
              "1");
    mine_ = db_.Connect();
    const DeliveryResult retry = Mine(Payment("ORD-1", "TX-1", 500));
    EXPECT_EQ(retry.outcome, Outcome::kDuplicate) << Describe(retry);
    EXPECT_TRUE(stats_.state_read);
    ASSERT_TRUE(retry.order.has_value());
    EXPECT_EQ(retry.order->status, "PAID");
    const AuditReport report = Audit(db_.url());
    EXPECT_TRUE(report.ok()) << FormatAuditReport(report);
    EXPECT_EQ(report.receipts, 3);
}

}  // namespace
}  // namespace payledger::ledger::writer_cache_pgtest
