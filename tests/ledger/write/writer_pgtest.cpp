// The write path (docs/write-path.md#group-commit): WriteBatch and the group-commit
// Committer against the real PostgreSQL. Covers appended/duplicate/conflict/unknown_order/
// mismatch, copies of one callback in one batch, rejected deliveries that only write a
// receipt, the conditional projection update as a second line of defence, the writer lock
// taken before any insert, one bad delivery not failing its batch, and reconnecting.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "ledger/pg/database.hpp"
#include "ledger/read/reads.hpp"
#include "ledger/write/committer.hpp"
#include "ledger/write/writer.hpp"
#include "projections/assert.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger {
namespace {

using projections::EventType;
using projections::Outcome;
using testing::TestDatabase;

constexpr const char* kHeaders = R"({"X-Test":"1"})";

Delivery Order(const std::string& out_trade_no, std::int64_t amount,
               const std::string& account_id = "acct-1") {
    return testing::OrderRegistration(
        out_trade_no,
        {.account_id = account_id, .amount = amount, .receipt = {.headers = kHeaders}});
}

Delivery Callback(const std::string& out_trade_no, EventType type,
                  std::optional<std::string> transaction_id, std::int64_t amount) {
    return testing::VerifiedCallback(out_trade_no, type,
                                     {.amount = amount,
                                      .currency = amount == 0 ? "" : "CNY",
                                      .transaction_id = std::move(transaction_id),
                                      .receipt = {.headers = kHeaders}});
}

Delivery Payment(const std::string& out_trade_no, const std::string& transaction_id,
                 std::int64_t amount) {
    return Callback(out_trade_no, EventType::kPaymentSucceeded, transaction_id, amount);
}

// A delivery refused before the ledger: its receipt alone.
Delivery Rejected(const std::string& out_trade_no, Outcome verdict, std::string message,
                  projections::Source source = projections::Source::kGeneric) {
    return testing::Refusal(out_trade_no, {.source = source,
                                           .outcome = verdict,
                                           .message = std::move(message),
                                           .receipt = {.headers = kHeaders}});
}

class WriterPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        connection_ = db_.Connect();
    }

    std::vector<DeliveryResult> Write(std::vector<Delivery> deliveries) {
        return WriteBatch(*connection_, deliveries);
    }

    std::string Count(const std::string& table) {
        return db_.Scalar("SELECT count(*) FROM " + table);
    }

    TestDatabase db_;
    std::unique_ptr<pqxx::connection> connection_;
};

TEST_F(WriterPgTest, OrderThenPaymentUpdatesOrderAndBalance) {
    const auto created = Write({Order("ORD-1", 1999)});
    ASSERT_EQ(created[0].outcome, Outcome::kAppended);
    ASSERT_TRUE(created[0].order.has_value());
    EXPECT_EQ(created[0].order->status, "WAIT_PAY");
    const auto paid = Write({Payment("ORD-1", "TX-1", 1999)});
    EXPECT_EQ(paid[0].outcome, Outcome::kAppended);
    EXPECT_EQ(paid[0].seq, created[0].seq + 1);
    EXPECT_EQ(db_.Scalar("SELECT status || ' ' || paid_amount || ' ' || seq FROM orders"),
              "PAID 1999 " + std::to_string(paid[0].seq));
    EXPECT_EQ(db_.Scalar("SELECT balance FROM balances WHERE account_id = 'acct-1'"), "1999");
    EXPECT_EQ(db_.Scalar("SELECT account_id FROM ledger_events WHERE event_type = "
                         "'PAYMENT_SUCCEEDED'"),
              "acct-1");
    EXPECT_EQ(db_.Scalar("SELECT receipt_id FROM ledger_events WHERE seq = " +
                         std::to_string(paid[0].seq)),
              std::to_string(paid[0].receipt_id));
}

TEST_F(WriterPgTest, TwoCopiesInOneBatchGiveAppendedThenDuplicate) {
    (void)Write({Order("ORD-1", 500)});
    const auto results = Write({Payment("ORD-1", "TX-1", 500), Payment("ORD-1", "TX-1", 500)});
    EXPECT_EQ(results[0].outcome, Outcome::kAppended);
    EXPECT_EQ(results[1].outcome, Outcome::kDuplicate);
    EXPECT_EQ(results[1].seq, results[0].seq);
    EXPECT_EQ(Count("ledger_events"), "2");
    EXPECT_EQ(Count("callback_receipts"), "3");
    EXPECT_EQ(db_.Scalar("SELECT balance FROM balances"), "500");
    EXPECT_EQ(db_.Scalar("SELECT string_agg(outcome || ':' || coalesce(seq::text, '-'), ',' "
                         "ORDER BY id) FROM callback_receipts"),
              "appended:1,appended:2,duplicate:2");
}

TEST_F(WriterPgTest, OrderAndItsPaymentInOneBatch) {
    const auto results = Write({Order("ORD-1", 700), Payment("ORD-1", "TX-1", 700)});
    EXPECT_EQ(results[0].outcome, Outcome::kAppended);
    EXPECT_EQ(results[1].outcome, Outcome::kAppended);
    EXPECT_EQ(db_.Scalar("SELECT status FROM orders"), "PAID");
    EXPECT_EQ(db_.Scalar("SELECT balance FROM balances"), "700");
}

TEST_F(WriterPgTest, DifferentFingerprintIsConflictAndAppendsNothing) {
    (void)Write({Order("ORD-1", 500), Payment("ORD-1", "TX-1", 500)});
    const auto results = Write({Payment("ORD-1", "TX-OTHER", 500)});
    EXPECT_EQ(results[0].outcome, Outcome::kConflict);
    EXPECT_EQ(results[0].seq, 2);
    EXPECT_EQ(Count("ledger_events"), "2");
    EXPECT_EQ(db_.Scalar("SELECT outcome || ' ' || (seq IS NULL) FROM callback_receipts "
                         "ORDER BY id DESC LIMIT 1"),
              "conflict true");
    EXPECT_EQ(db_.Scalar("SELECT balance FROM balances"), "500");
}

TEST_F(WriterPgTest, UnknownOrderAndMismatchWriteOnlyTheReceipt) {
    (void)Write({Order("ORD-1", 500)});
    const auto results = Write({Payment("ORD-NONE", "TX-1", 500), Payment("ORD-1", "TX-1", 501)});
    EXPECT_EQ(results[0].outcome, Outcome::kUnknownOrder);
    EXPECT_EQ(results[1].outcome, Outcome::kMismatch);
    EXPECT_NE(results[1].message.find("501"), std::string::npos);
    EXPECT_EQ(Count("ledger_events"), "1");
    EXPECT_EQ(Count("callback_receipts"), "3");
    EXPECT_EQ(db_.Scalar("SELECT status FROM orders"), "WAIT_PAY");
}

// The bodies of a batch travel in one binary parameter, each receipt naming its slice: every
// receipt gets exactly its own bytes, empty, binary and the largest allowed included.
TEST_F(WriterPgTest, EveryReceiptOfABatchKeepsExactlyItsBytes) {
    std::vector<Delivery> batch;
    const std::vector<std::string> bodies = {std::string("\x00", 1), "", std::string(65536, '\xfe'),
                                             "{\"a\":\"\\u0000\"}",
                                             std::string("\r\n\x00\xff\\x41", 7)};
    for (std::size_t i = 0; i < bodies.size(); ++i) {
        Delivery rejected = Rejected("ORD-" + std::to_string(i), Outcome::kMalformed, "malformed");
        rejected.receipt.body = bodies[i];
        batch.push_back(std::move(rejected));
    }
    batch.push_back(Order("ORD-9", 500));
    const auto results = Write(batch);
    ASSERT_EQ(results.size(), bodies.size() + 1);
    EXPECT_EQ(results.back().outcome, Outcome::kAppended);
    pqxx::read_transaction tx{*connection_};
    for (std::size_t i = 0; i < bodies.size(); ++i) {
        const std::vector<Receipt> receipts =
            ReadOrderReceipts(tx, "ORD-" + std::to_string(i), 0, kPageSizeMax);
        ASSERT_EQ(receipts.size(), 1u) << i;
        EXPECT_EQ(receipts[0].body, bodies[i]) << i;
        EXPECT_EQ(receipts[0].id, results[i].receipt_id);
    }
    const std::vector<Receipt> order = ReadOrderReceipts(tx, "ORD-9", 0, kPageSizeMax);
    ASSERT_EQ(order.size(), 1u);
    EXPECT_EQ(order[0].body, "body of ORD-9");
}

TEST_F(WriterPgTest, RejectedDeliveryIsRecordedWithItsBytes) {
    Delivery rejected = Rejected("ORD-1", Outcome::kBadSignature, "signature does not match");
    rejected.receipt.body = std::string("\xff\x00\x01 raw", 6);
    const auto results = Write({rejected});
    EXPECT_EQ(results[0].outcome, Outcome::kBadSignature);
    pqxx::read_transaction tx{*connection_};
    const std::vector<Receipt> receipts = ReadOrderReceipts(tx, "ORD-1", 0, kPageSizeMax);
    ASSERT_EQ(receipts.size(), 1u);
    EXPECT_EQ(receipts[0].body, rejected.receipt.body);
    EXPECT_EQ(receipts[0].outcome, Outcome::kBadSignature);
    EXPECT_EQ(receipts[0].message, "signature does not match");
    EXPECT_EQ(receipts[0].headers, R"({"X-Test": "1"})");
    EXPECT_FALSE(receipts[0].seq.has_value());
}

TEST_F(WriterPgTest, NulBytesFromTheWireCannotMakeAReceiptUnstorable) {
    // PostgreSQL text and jsonb refuse U+0000; found by fuzzing (tests/fuzz/regressions).
    Delivery rejected =
        Rejected("ORD-1", Outcome::kMalformed, std::string("the form repeats the field a\0", 30),
                 projections::Source::kAlipay);
    rejected.receipt.headers = R"({"X-Nul":"a\u0000b","X-Literal":"\\u0000"})";
    rejected.receipt.peer = std::string("peer\0", 5);
    (void)Write({Order("ORD-1", 100)});
    Delivery paid = Payment("ORD-1", "TX-1", 100);
    paid.event->data = R"({"attach":"a\u0000b"})";
    const auto results = Write({rejected, paid});
    EXPECT_EQ(results[0].outcome, Outcome::kMalformed);
    EXPECT_EQ(results[1].outcome, Outcome::kAppended);
    EXPECT_EQ(db_.Scalar("SELECT headers->>'X-Nul' FROM callback_receipts WHERE outcome = "
                         "'malformed'"),
              "a\uFFFDb");
    EXPECT_EQ(db_.Scalar("SELECT headers->>'X-Literal' FROM callback_receipts WHERE outcome = "
                         "'malformed'"),
              "\\u0000");  // Text that only looks like the escape is kept as it is.
    EXPECT_EQ(db_.Scalar("SELECT data->>'attach' FROM ledger_events WHERE seq = 2"), "a\uFFFDb");
}

TEST_F(WriterPgTest, TextsThatNeedEscapesAreStoredAsGivenPreparedOrNot) {
    // The writer makes its texts storable itself (bound as binary parameters), ahead
    // of the batch (RenderForWrite, as the committer does) or in it: both must store the same
    // texts, and quotes, backslashes and invalid UTF-8 must not break the parameters.
    const std::string quoted = "a \"quoted\" \\ back\tslash 'single' \u00e9t\u00e9 \x01";
    const std::string invalid_utf8 = "peer \xff\xfe";
    for (const bool rendered : {false, true}) {
        const std::string key = rendered ? "ORD-P" : "ORD-U";
        (void)Write({Order(key, 100)});
        Delivery rejected = Rejected(key, Outcome::kMalformed, quoted);
        rejected.receipt.peer = invalid_utf8;
        rejected.receipt.headers = R"({"X-Quote":"say \"hi\"","X-Slash":"c:\\d"})";
        Delivery paid = Payment(key, "TX-" + quoted, 100);
        paid.event->data = R"({"attach":"\"x\" \\ \u00fc"})";
        if (rendered) {
            RenderForWrite(rejected);
            RenderForWrite(paid);
        }
        const auto results = Write({rejected, paid});
        ASSERT_EQ(results[1].outcome, Outcome::kAppended) << results[1].message;
        const std::string receipt =
            "FROM callback_receipts WHERE out_trade_no = '" + key + "' AND outcome = 'malformed'";
        EXPECT_EQ(db_.Scalar("SELECT message " + receipt), quoted) << rendered;
        EXPECT_EQ(db_.Scalar("SELECT peer " + receipt), "peer \uFFFD\uFFFD") << rendered;
        EXPECT_EQ(db_.Scalar("SELECT headers->>'X-Quote' " + receipt), "say \"hi\"") << rendered;
        EXPECT_EQ(db_.Scalar("SELECT headers->>'X-Slash' " + receipt), "c:\\d") << rendered;
        const std::string event = "FROM ledger_events WHERE out_trade_no = '" + key +
                                  "' AND event_type = 'PAYMENT_SUCCEEDED'";
        EXPECT_EQ(db_.Scalar("SELECT transaction_id " + event), "TX-" + quoted) << rendered;
        EXPECT_EQ(db_.Scalar("SELECT data->>'attach' " + event), "\"x\" \\ \u00fc") << rendered;
    }
}

TEST_F(WriterPgTest, RefundCreditsBackOnlyWithAPayment) {
    (void)Write({Order("ORD-1", 1000), Order("ORD-2", 300)});
    (void)Write({Callback("ORD-1", EventType::kRefundSucceeded, "RF-1", 400)});
    EXPECT_EQ(db_.Scalar("SELECT balance FROM balances"), "0");
    EXPECT_EQ(db_.Scalar("SELECT anomalies::text FROM orders WHERE out_trade_no = 'ORD-1'"),
              "{refund_without_payment}");
    (void)Write({Payment("ORD-1", "TX-1", 1000), Payment("ORD-2", "TX-2", 300)});
    EXPECT_EQ(db_.Scalar("SELECT balance FROM balances"), "900");
    EXPECT_EQ(db_.Scalar("SELECT status FROM orders WHERE out_trade_no = 'ORD-1'"), "REFUNDED");
}

TEST_F(WriterPgTest, TamperedProjectionAbortsTheAppend) {
    (void)Write({Order("ORD-1", 500)});
    db_.Scalar("UPDATE orders SET seq = 999 WHERE out_trade_no = 'ORD-1' RETURNING 1");
    const Delivery payment = Payment("ORD-1", "TX-1", 500);
    EXPECT_THROW((void)WriteBatch(*connection_, std::span(&payment, 1)), InvariantError);
    EXPECT_EQ(Count("ledger_events"), "1");  // Rolled back: no event, no receipt.
    EXPECT_EQ(Count("callback_receipts"), "1");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM balances WHERE balance <> 0"), "0");
}

TEST_F(WriterPgTest, PaymentCreditIsRefusedWhenTheRowAlreadyHasOne) {
    (void)Write({Order("ORD-1", 500)});
    // A projection row that claims a payment the events do not have.
    db_.Scalar("UPDATE orders SET transaction_id = 'GHOST' RETURNING 1");
    const Delivery payment = Payment("ORD-1", "TX-1", 500);
    EXPECT_THROW((void)WriteBatch(*connection_, std::span(&payment, 1)), InvariantError);
    EXPECT_EQ(Count("ledger_events"), "1");
}

TEST_F(WriterPgTest, EventAppendedBehindTheWritersBackAbortsTheBatch) {
    (void)Write({Order("ORD-1", 500)});
    // A session that ignores the writer lock appends ORD-1's payment and has not
    // committed yet: the writer's read cannot see it, so its plan appends one too, and its
    // insert waits on the intruder's row. Replica mode skips the receipt reference checks.
    auto intruder_connection = db_.Connect();
    pqxx::work intruder{*intruder_connection};
    intruder.exec(
        "SET LOCAL session_replication_role = replica; "
        "INSERT INTO ledger_events (seq, out_trade_no, event_type, source, account_id, amount, "
        "currency, transaction_id, occurred_at, receipt_id) "
        "VALUES (nextval('ledger_events_seq_seq'), 'ORD-1', 'PAYMENT_SUCCEEDED', 'generic', "
        "'acct-1', 500, 'CNY', 'TX-0', now(), nextval('callback_receipts_id_seq'))");

    auto writer_connection = db_.Connect();
    std::promise<std::exception_ptr> failed;
    std::thread writer([&] {
        const Delivery payment = Payment("ORD-1", "TX-1", 500);
        try {
            (void)WriteBatch(*writer_connection, std::span(&payment, 1));
            failed.set_value(nullptr);
        } catch (...) {
            failed.set_value(std::current_exception());
        }
    });
    testing::AwaitLockWaiters(db_, testing::kRowWaitersSql);
    intruder.commit();
    const std::exception_ptr error = failed.get_future().get();
    writer.join();
    // The second event for (ORD-1, PAYMENT_SUCCEEDED) is refused by the UNIQUE constraint and
    // the batch rolled back as an invariant error, as a row count other than the plan's is.
    ASSERT_TRUE(error);
    EXPECT_THROW(std::rethrow_exception(error), InvariantError);
    EXPECT_EQ(db_.Scalar("SELECT transaction_id FROM ledger_events WHERE out_trade_no = 'ORD-1' "
                         "AND event_type = 'PAYMENT_SUCCEEDED'"),
              "TX-0");
    EXPECT_EQ(Count("callback_receipts"), "1");  // The writer's receipt was rolled back too.
    EXPECT_EQ(db_.Scalar("SELECT transaction_id IS NULL FROM orders"), "t");
}

TEST_F(WriterPgTest, EveryWriteWaitsForTheWriterLock) {
    // Another session holds the ledger's writer lock.
    auto holder = db_.Connect();
    pqxx::work hold{*holder};
    hold.exec_params("SELECT pg_advisory_xact_lock($1)", kWriterLockKey);

    auto writer_connection = db_.Connect();
    std::promise<Outcome> done;
    std::thread writer([&] {
        Delivery rejected = Rejected("ORD-1", Outcome::kMalformed, "not JSON");
        done.set_value(WriteBatch(*writer_connection, std::span(&rejected, 1))[0].outcome);
    });
    // Synchronise on the database's own view: the writer is waiting for an advisory lock.
    testing::AwaitLockWaiters(db_, testing::kAdvisoryWaitersSql);
    auto observer = db_.Connect();
    {
        pqxx::nontransaction tx{*observer};
        EXPECT_GT(tx.exec(testing::kAdvisoryWaitersSql)[0][0].as<int>(), 0);
        EXPECT_EQ(tx.exec("SELECT count(*) FROM callback_receipts")[0][0].as<int>(), 0);
    }
    hold.commit();  // Releases the lock.
    EXPECT_EQ(done.get_future().get(), Outcome::kMalformed);
    writer.join();
    EXPECT_EQ(Count("callback_receipts"), "1");
}

TEST_F(WriterPgTest, CommitterStormOfOneCallbackAppendsOnce) {
    Committer committer{{.url = db_.url(), .session = testing::PatientSession(db_.name())}};
    std::promise<DeliveryResult> created;
    committer.Submit(Order("ORD-1", 1234), [&](DeliveryResult r) { created.set_value(r); });
    ASSERT_EQ(created.get_future().get().outcome, Outcome::kAppended);

    // The writer lock is held elsewhere while the copies arrive, so they queue and the batches
    // that follow are full ones: group commit, made deterministic.
    auto holder = db_.Connect();
    pqxx::work hold{*holder};
    hold.exec_params("SELECT pg_advisory_xact_lock($1)", kWriterLockKey);
    constexpr int kCopies = 300;
    std::vector<std::promise<DeliveryResult>> results(kCopies);
    std::vector<std::thread> senders;
    for (int t = 0; t < 6; ++t) {
        senders.emplace_back([&, t] {
            for (int i = t; i < kCopies; i += 6) {
                committer.Submit(Payment("ORD-1", "TX-1", 1234), [&, i](DeliveryResult r) {
                    results[static_cast<std::size_t>(i)].set_value(std::move(r));
                });
            }
        });
    }
    for (std::thread& sender : senders) sender.join();
    testing::AwaitLockWaiters(db_, testing::kAdvisoryWaitersSql);  // The committer waits.
    const std::uint64_t batches_before = committer.stats().batches.load();
    hold.commit();
    int appended = 0;
    int duplicate = 0;
    for (auto& result : results) {
        const DeliveryResult r = result.get_future().get();
        appended += r.outcome == Outcome::kAppended;
        duplicate += r.outcome == Outcome::kDuplicate;
    }
    EXPECT_EQ(appended, 1);
    EXPECT_EQ(duplicate, kCopies - 1);
    EXPECT_EQ(Count("ledger_events"), "2");
    EXPECT_EQ(db_.Scalar("SELECT balance FROM balances"), "1234");
    // The batch that was waiting for the lock, then the queue in batches of at most 256.
    EXPECT_LE(committer.stats().batches.load() - batches_before, 3u);
}

TEST_F(WriterPgTest, OneBadDeliveryDoesNotFailItsBatch) {
    Committer committer{{.url = db_.url()}};
    std::promise<DeliveryResult> created;
    committer.Submit(Order("ORD-1", 100), [&](DeliveryResult r) { created.set_value(r); });
    ASSERT_EQ(created.get_future().get().outcome, Outcome::kAppended);

    // A transaction_id over the schema's 128-byte CHECK: the database refuses that row. It
    // is a bug for a channel to let it through, so the answer is an internal error; the
    // deliveries queued with it must still commit.
    std::vector<Delivery> deliveries;
    for (int i = 2; i <= 5; ++i) deliveries.push_back(Order("ORD-" + std::to_string(i), 100));
    deliveries.insert(deliveries.begin() + 2, Payment("ORD-1", std::string(200, 'x'), 100));
    std::vector<std::promise<DeliveryResult>> results(deliveries.size());
    for (std::size_t i = 0; i < deliveries.size(); ++i) {
        committer.Submit(deliveries[i], [&, i](DeliveryResult r) { results[i].set_value(r); });
    }
    for (std::size_t i = 0; i < deliveries.size(); ++i) {
        const DeliveryResult r = results[i].get_future().get();
        if (i == 2) {
            EXPECT_TRUE(r.failure == FailureKind::kInvariantBroken);
        } else {
            EXPECT_EQ(r.outcome, Outcome::kAppended) << i;
        }
    }
    EXPECT_EQ(Count("orders"), "5");
    EXPECT_EQ(Count("ledger_events"), "5");
}

TEST_F(WriterPgTest, CommitterReconnectsAfterItsSessionIsKilled) {
    const std::string name = db_.name() + "_committer";
    // Without the prefetch thread: its read of an order the reconnect just forgot could land in
    // the cache before the batch, and the writer's reads counted below would depend on timing.
    Committer committer{
        {.url = db_.url(), .session = {.application_name = name}, .prefetch = false}};
    const auto submit = [&](Delivery delivery) {
        std::promise<DeliveryResult> result;
        committer.Submit(std::move(delivery), [&](DeliveryResult r) { result.set_value(r); });
        return result.get_future().get();
    };
    ASSERT_EQ(submit(Order("ORD-1", 100)).outcome, Outcome::kAppended);
    db_.Scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name = '" +
        name + "'");
    // The broken connection is noticed, nothing was committed, so the batch is retried on
    // a fresh connection and succeeds.
    EXPECT_EQ(submit(Order("ORD-2", 100)).outcome, Outcome::kAppended);
    EXPECT_EQ(Count("orders"), "2");
    // The committer remembers the orders it wrote (WriterCache): a batch naming only those is
    // planned from memory, without reading; a new session starts with nothing remembered, and
    // one the server ended while idle is replaced before the batch, not failed by it.
    EXPECT_EQ(submit(Payment("ORD-2", "TX-2", 100)).outcome, Outcome::kAppended);
    const std::uint64_t reads = committer.stats().state_reads;
    EXPECT_EQ(submit(Payment("ORD-2", "TX-2", 100)).outcome, Outcome::kDuplicate);
    EXPECT_EQ(committer.stats().state_reads, reads);
    // Waits until the session has ended (PostgreSQL 14's timeout argument), so that the
    // committer finds it ended rather than losing it with the batch in flight (in doubt: 503).
    db_.Scalar(
        "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
        "WHERE application_name = '" +
        name + "'");
    EXPECT_EQ(submit(Payment("ORD-2", "TX-2", 100)).outcome, Outcome::kDuplicate);
    EXPECT_EQ(committer.stats().state_reads, reads + 1);
}

TEST(CommitterTest, UnreachableDatabaseAnswersUnavailable) {
    Committer committer{
        {.url = "postgresql://nobody@/nowhere?host=/nonexistent&connect_timeout=1"}};
    std::promise<DeliveryResult> result;
    committer.Submit(Order("ORD-1", 100), [&](DeliveryResult r) { result.set_value(r); });
    const DeliveryResult r = result.get_future().get();
    EXPECT_EQ(r.outcome, Outcome::kUnavailable);
    EXPECT_TRUE(r.failure == FailureKind::kRetryable);
}

}  // namespace
}  // namespace payledger::ledger
