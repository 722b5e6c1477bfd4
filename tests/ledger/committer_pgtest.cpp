// The committer's effects (issue 10 point 2) against the real PostgreSQL: a batch is answered
// only after its transaction, outside the retries. An answer (`done`) that throws after the
// commit must neither write the batch again (one receipt per delivery) nor answer any delivery
// twice, and the other deliveries of its batch are answered as usual. The batch is made
// deterministic by holding the writer lock while it queues; the throw comes from the `done`
// callback itself, the committer's own injection point. A throw from the full-queue and the
// stopping answers, which run on the caller's thread, stays in the committer too. The byte
// budget (issue 11 point 2): with the committer held at the writer lock, 64 KiB deliveries
// queue until the next would pass queue_bytes_max; that one is answered unavailable at once,
// on the caller's thread, and nothing of it is stored; the queued ones are written after.
// Answers run on the answer thread: a slow one does not hold up the next batch's write.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ledger/committer.hpp"
#include "projections/assert.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger {
namespace {

using projections::Outcome;
using testing::TestDatabase;

constexpr projections::TimeMicros kTime = 1'700'000'000'000'000;
constexpr std::size_t kBatchSize = 8;
constexpr std::size_t kThrowingIndex = 2;  // Answered ones before it, unanswered ones after.

Delivery Order(const std::string& out_trade_no) {
    return Delivery{.receipt = Receipt{.source = projections::Source::kApi,
                                       .received_at = kTime,
                                       .peer = "127.0.0.1:9",
                                       .headers = "{}",
                                       .body = "body of " + out_trade_no,
                                       .out_trade_no = out_trade_no},
                    .event = projections::Event{.out_trade_no = out_trade_no,
                                                .event_type = projections::EventType::kOrderCreated,
                                                .source = projections::Source::kApi,
                                                .account_id = "acct-1",
                                                .amount = 100,
                                                .currency = "CNY",
                                                .occurred_at = kTime}};
}

// Every answer of every delivery, so that a second answer is seen, not just the first.
class Answers {
public:
    explicit Answers(std::size_t count) : results_(count) {}

    // The `done` of delivery `index`; on its first call it records, then runs `fail`.
    Committer::Done For(std::size_t index, std::function<void()> fail = {}) {
        return [this, index, fail = std::move(fail)](DeliveryResult result) {
            bool first = false;
            {
                std::lock_guard lock{mutex_};
                first = results_[index].empty();
                results_[index].push_back(std::move(result));
                answered_.notify_all();  // Under the lock: the waiter may destroy this.
            }
            if (first && fail) fail();
        };
    }

    // Waits (up to a deadline, then fails the test) until every delivery has an answer.
    void AwaitEveryDelivery() {
        std::unique_lock lock{mutex_};
        const bool all = answered_.wait_for(lock, std::chrono::seconds{60}, [this] {
            for (const auto& answers : results_) {
                if (answers.empty()) return false;
            }
            return true;
        });
        ASSERT_TRUE(all) << "a delivery was never answered";
    }

    // REQUIRES: the committer is stopped, so no answer can still arrive.
    const std::vector<std::vector<DeliveryResult>>& results() const { return results_; }

private:
    std::mutex mutex_;
    std::condition_variable answered_;
    std::vector<std::vector<DeliveryResult>> results_;
};

class CommitterPgTest : public ::testing::Test {
protected:
    void SetUp() override { PAYLEDGER_REQUIRE_DATABASE(db_); }

    // Takes the writer lock in `hold` and sends `committer` to wait for it with a first
    // delivery (ORD-PLUG), so that what is submitted next queues behind it. The plug's
    // answer comes through the future once `hold` ends.
    std::future<DeliveryResult> PlugWriterLock(Committer& committer, pqxx::work& hold) {
        hold.exec_params("SELECT pg_advisory_xact_lock($1)", kWriterLockKey);
        auto plug = std::make_shared<std::promise<DeliveryResult>>();
        std::future<DeliveryResult> answer = plug->get_future();
        committer.Submit(Order("ORD-PLUG"), [plug](DeliveryResult r) { plug->set_value(r); });
        testing::AwaitLockWaiters(db_, testing::kAdvisoryWaitersSql);
        return answer;
    }

    // Queues kBatchSize new orders as one batch (the writer lock is held elsewhere until all
    // are queued) and makes the answer of the one at kThrowingIndex run `fail` after the
    // commit. Then checks that nothing but that one answer was affected.
    void ExpectThrowingAnswerChangesNothing(const std::function<void()>& fail) {
        Committer committer{{.url = db_.url(), .session = testing::PatientSession(db_.name())}};
        auto holder = db_.Connect();
        pqxx::work hold{*holder};
        // The next deliveries queue behind the plug and go in one batch.
        std::future<DeliveryResult> plug = PlugWriterLock(committer, hold);
        Answers answers{kBatchSize};
        for (std::size_t i = 0; i < kBatchSize; ++i) {
            committer.Submit(Order("ORD-" + std::to_string(i)),
                             answers.For(i, i == kThrowingIndex ? fail : std::function<void()>{}));
        }
        hold.commit();
        ASSERT_EQ(plug.get().outcome, Outcome::kAppended);
        answers.AwaitEveryDelivery();
        committer.Stop();  // Joins the committer: every answer it would give has been given.

        for (std::size_t i = 0; i < kBatchSize; ++i) {
            ASSERT_EQ(answers.results()[i].size(), 1u) << "delivery " << i << " answered twice";
            EXPECT_EQ(answers.results()[i][0].outcome, Outcome::kAppended) << i;
            EXPECT_FALSE(answers.results()[i][0].internal_error) << i;
        }
        // Written once: one receipt and one event per delivery, the plug's batch and one more.
        EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts"),
                  std::to_string(kBatchSize + 1));
        EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts WHERE outcome <> "
                             "'appended'"),
                  "0");
        EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events"), std::to_string(kBatchSize + 1));
        EXPECT_EQ(committer.stats().batches.load(), 2u);
        EXPECT_EQ(committer.stats().failures.load(), 0u);
        EXPECT_EQ(committer.stats().answer_failures.load(), 1u);
    }

    TestDatabase db_;
};

TEST_F(CommitterPgTest, AnswerThatFailsAnInvariantAfterTheCommitChangesNothingElse) {
    // As an answer's own PAYLEDGER_ASSERT would (the create-order answer asserts the order).
    ExpectThrowingAnswerChangesNothing([] { throw InvariantError("the answer's invariant"); });
}

TEST_F(CommitterPgTest, AnswerThatThrowsAnyExceptionAfterTheCommitChangesNothingElse) {
    ExpectThrowingAnswerChangesNothing([] { throw std::runtime_error("the client is gone"); });
}

TEST_F(CommitterPgTest, DeliveryOverTheByteBudgetIsAnsweredUnavailableAtOnce) {
    constexpr std::size_t kBodyBytes = 64 * 1024;
    constexpr std::size_t kBudgetBytes = 1024 * 1024;
    Committer committer{{.url = db_.url(),
                         .session = testing::PatientSession(db_.name()),
                         .queue_bytes_max = kBudgetBytes}};
    const auto large = [&](const std::string& out_trade_no) {
        Delivery delivery = Order(out_trade_no);
        delivery.receipt.body = std::string(kBodyBytes, 'x');
        return delivery;
    };
    Delivery probe = large("ORD-X");
    PrepareForWrite(probe);  // As Submit does before it counts.
    const std::size_t fitting = kBudgetBytes / Committer::QueuedBytes(probe);
    ASSERT_GE(fitting, 2u);

    auto holder = db_.Connect();
    pqxx::work hold{*holder};
    std::future<DeliveryResult> plug = PlugWriterLock(committer, hold);

    Answers answers{fitting};
    for (std::size_t i = 0; i < fitting; ++i) {
        committer.Submit(large("ORD-" + std::to_string(i)), answers.For(i));
    }
    EXPECT_EQ(committer.stats().queue_depth.load(), fitting);
    EXPECT_LE(committer.stats().queue_bytes.load(), kBudgetBytes);
    // One more would pass the budget: answered before Submit returns, while the lock is held.
    bool answered_at_once = false;
    DeliveryResult refused;
    committer.Submit(large("ORD-OVER"), [&](DeliveryResult r) {
        answered_at_once = true;
        refused = std::move(r);
    });
    ASSERT_TRUE(answered_at_once);
    EXPECT_EQ(refused.outcome, Outcome::kUnavailable);
    EXPECT_EQ(refused.message, "the write queue is full");
    EXPECT_EQ(committer.stats().queue_full_refusals.load(), 1u);

    hold.commit();
    ASSERT_EQ(plug.get().outcome, Outcome::kAppended);
    answers.AwaitEveryDelivery();
    committer.Stop();
    for (std::size_t i = 0; i < fitting; ++i) {
        ASSERT_EQ(answers.results()[i].size(), 1u) << i;
        EXPECT_EQ(answers.results()[i][0].outcome, Outcome::kAppended) << i;
    }
    EXPECT_EQ(committer.stats().queue_bytes.load(), 0u);
    // The refused delivery left nothing behind; the queued ones were stored whole.
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts WHERE out_trade_no = "
                         "'ORD-OVER'"),
              "0");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts WHERE length(body) = " +
                         std::to_string(kBodyBytes)),
              std::to_string(fitting));
}

TEST_F(CommitterPgTest, ASlowAnswerDoesNotHoldUpTheNextBatchAndAnswersKeepCommitOrder) {
    // Answers run on the committer's answer thread, one task per batch (issue 10): while the
    // first batch's answer is still running, the next batch is written and committed.
    Committer committer{{.url = db_.url(), .session = testing::PatientSession(db_.name())}};
    std::mutex mutex;
    std::condition_variable answered;
    std::vector<std::string> order;  // Guarded by mutex.
    const auto record = [&](const std::string& name) {
        std::lock_guard lock{mutex};
        order.push_back(name);
        answered.notify_all();
    };
    const auto await_answers = [&](std::size_t count) {
        std::unique_lock lock{mutex};
        return answered.wait_for(lock, std::chrono::seconds{60},
                                 [&] { return order.size() >= count; });
    };
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();

    committer.Submit(Order("ORD-SLOW"), [&, released](const DeliveryResult&) {
        record("ORD-SLOW");
        released.wait();
    });
    ASSERT_TRUE(await_answers(1)) << "the first delivery was never answered";
    committer.Submit(Order("ORD-NEXT"), [&](const DeliveryResult&) { record("ORD-NEXT"); });
    // Its receipt is committed while the first answer still runs.
    bool written = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (!written && std::chrono::steady_clock::now() < deadline) {
        written = db_.Scalar("SELECT count(*) FROM callback_receipts WHERE out_trade_no = "
                             "'ORD-NEXT'") == "1";
        if (!written) std::this_thread::sleep_for(std::chrono::milliseconds{1});  // Poll pace.
    }
    std::size_t answered_while_blocked = 0;
    {
        std::lock_guard lock{mutex};
        answered_while_blocked = order.size();
    }
    release.set_value();  // Before any assertion, so that Stop() cannot hang.
    EXPECT_TRUE(written) << "the next batch waited for the previous batch's answer";
    EXPECT_EQ(answered_while_blocked, 1u);
    ASSERT_TRUE(await_answers(2)) << "the second delivery was never answered";
    committer.Stop();
    EXPECT_EQ(order, (std::vector<std::string>{"ORD-SLOW", "ORD-NEXT"}));
    EXPECT_EQ(committer.stats().batches.load(), 2u);
}

TEST_F(CommitterPgTest, OpeningThatFailsAfterItsCommitStillAnswersTheCommittedBatch) {
    // Issue 10: under load, the next batch is opened (BEGIN, the writer lock, the read) in the
    // round trip of this batch's write and COMMIT. When the opening fails after the COMMIT,
    // here by a cancel while its writer lock waits for another session, the committed batch
    // must be answered as committed, once, and the next batch opened again and written.
    // Batches of one: A, then N with M's opening, then M.
    std::promise<DeliveryResult> a_answer, n_answer, m_answer;  // Outlive the committer.
    const std::string writer_name = db_.name() + "-writer";
    Committer committer{{.url = db_.url(),
                         .session = testing::PatientSession(writer_name),
                         .batch_max = 1}};
    // An order row that another session inserts and has not committed: a batch that inserts
    // the same order waits for that session (PostgreSQL's unique check), until it rolls back.
    const auto block_order = [this](const std::string& out_trade_no) {
        auto connection = db_.Connect();
        auto tx = std::make_unique<pqxx::work>(*connection);
        tx->exec("INSERT INTO orders (out_trade_no, account_id, amount, currency, status, "
                 "paid_amount, refunded_amount, seq) VALUES (" +
                 tx->quote(out_trade_no) + ", 'acct-1', 100, 'CNY', 'WAIT_PAY', 0, 0, 1)");
        return std::make_pair(std::move(connection), std::move(tx));
    };
    auto [a_connection, a_block] = block_order("ORD-A");
    auto [n_connection, n_block] = block_order("ORD-N");
    const auto answer = [](std::promise<DeliveryResult>& promise) {
        return [&promise](DeliveryResult r) { promise.set_value(std::move(r)); };
    };
    committer.Submit(Order("ORD-A"), answer(a_answer));
    testing::AwaitLockWaiters(db_, testing::kRowWaitersSql);  // A waits for a_block.
    committer.Submit(Order("ORD-N"), answer(n_answer));
    committer.Submit(Order("ORD-M"), answer(m_answer));
    a_block->abort();  // A commits; N is opened on its own, written, and sent with M's opening.
    ASSERT_EQ(a_answer.get_future().get().outcome, Outcome::kAppended);
    testing::AwaitLockWaiters(db_, testing::kRowWaitersSql);  // N's write waits for n_block.

    // Another session asks for the writer lock while N holds it: granted at N's COMMIT, before
    // the opening sent after it, which then waits.
    auto other = db_.Connect();
    pqxx::work other_tx{*other};
    std::future<void> other_locked = std::async(std::launch::async, [&] {
        other_tx.exec_params("SELECT pg_advisory_xact_lock($1)", kWriterLockKey);
    });
    testing::AwaitLockWaiters(db_, testing::kAdvisoryWaitersSql);
    n_block->abort();
    other_locked.get();
    const std::string waiting_writer =
        "FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE a.datname = "
        "current_database() AND a.application_name = '" +
        writer_name + "' AND l.locktype = 'advisory' AND NOT l.granted";
    testing::AwaitLockWaiters(db_, ("SELECT count(*) " + waiting_writer).c_str());
    // The waiting statement is the string that wrote and committed N, then opened M.
    EXPECT_TRUE(db_.Scalar("SELECT a.query " + waiting_writer).starts_with("EXECUTE writer_write"));
    EXPECT_EQ(db_.Scalar("SELECT pg_cancel_backend(a.pid) " + waiting_writer), "t");

    std::future<DeliveryResult> n_result = n_answer.get_future();
    ASSERT_EQ(n_result.wait_for(std::chrono::seconds{60}), std::future_status::ready);
    const DeliveryResult n = n_result.get();
    EXPECT_EQ(n.outcome, Outcome::kAppended) << n.message;
    std::future<DeliveryResult> m_result = m_answer.get_future();
    EXPECT_EQ(m_result.wait_for(std::chrono::milliseconds{0}), std::future_status::timeout)
        << "M was written while the other session held the writer lock";
    other_tx.commit();  // M's own opening gets the lock now.
    EXPECT_EQ(m_result.get().outcome, Outcome::kAppended);
    committer.Stop();
    for (const char* key : {"ORD-A", "ORD-N", "ORD-M"}) {
        EXPECT_EQ(db_.Scalar(std::string("SELECT count(*) FROM callback_receipts WHERE "
                                         "out_trade_no = '") +
                             key + "'"),
                  "1")
            << key;
        EXPECT_EQ(db_.Scalar(std::string("SELECT status FROM orders WHERE out_trade_no = '") +
                             key + "'"),
                  "WAIT_PAY")
            << key;
    }
    EXPECT_EQ(committer.stats().failures.load(), 0u);
}

TEST_F(CommitterPgTest, WriteThatFailsInTheRoundTripOfTheNextOpeningCommitsNothing) {
    // The other side of the test above: when the write itself fails, the string's COMMIT and
    // the next batch's opening are skipped. Nothing of the failed batch is stored, it is
    // answered as the one-by-one path answers a broken rule, and the next batch is written.
    std::promise<DeliveryResult> a_answer, bad_answer, m_answer;  // Outlive the committer.
    Committer committer{{.url = db_.url(),
                         .session = testing::PatientSession(db_.name()),
                         .batch_max = 1}};
    auto a_connection = db_.Connect();
    pqxx::work a_block{*a_connection};
    a_block.exec("INSERT INTO orders (out_trade_no, account_id, amount, currency, status, "
                 "paid_amount, refunded_amount, seq) "
                 "VALUES ('ORD-A', 'acct-1', 100, 'CNY', 'WAIT_PAY', 0, 0, 1)");
    const auto answer = [](std::promise<DeliveryResult>& promise) {
        return [&promise](DeliveryResult r) { promise.set_value(std::move(r)); };
    };
    committer.Submit(Order("ORD-A"), answer(a_answer));
    testing::AwaitLockWaiters(db_, testing::kRowWaitersSql);  // A waits for a_block.
    // The schema refuses an order's currency that is not three capitals (a channel's bug).
    Delivery bad = Order("ORD-BAD");
    bad.event->currency = "cny";
    committer.Submit(std::move(bad), answer(bad_answer));
    committer.Submit(Order("ORD-M"), answer(m_answer));
    a_block.abort();
    EXPECT_EQ(a_answer.get_future().get().outcome, Outcome::kAppended);
    const DeliveryResult refused = bad_answer.get_future().get();
    EXPECT_TRUE(refused.internal_error) << refused.message;
    EXPECT_EQ(m_answer.get_future().get().outcome, Outcome::kAppended);
    committer.Stop();
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts WHERE out_trade_no = 'ORD-BAD'"),
              "0");
    EXPECT_EQ(db_.Scalar("SELECT string_agg(out_trade_no, ',' ORDER BY seq) FROM ledger_events"),
              "ORD-A,ORD-M");
}

TEST(CommitterTest, ThrowingAnswersOfRefusedDeliveriesStayInTheCommitter) {
    // No database needed: a queue of zero refuses every delivery on the caller's thread.
    Committer committer{{.url = "postgresql://nobody@/nowhere?host=/nonexistent&connect_timeout=1",
                         .queue_max = 0}};
    std::vector<DeliveryResult> answers;
    const auto throwing = [&](DeliveryResult r) {
        answers.push_back(std::move(r));
        throw std::runtime_error("the client is gone");
    };
    EXPECT_NO_THROW(committer.Submit(Order("ORD-1"), throwing));
    committer.Stop();
    EXPECT_NO_THROW(committer.Submit(Order("ORD-2"), throwing));
    ASSERT_EQ(answers.size(), 2u);
    EXPECT_EQ(answers[0].outcome, Outcome::kUnavailable);
    EXPECT_EQ(answers[0].message, "the write queue is full");
    EXPECT_EQ(answers[1].outcome, Outcome::kUnavailable);
    EXPECT_EQ(answers[1].message, "the service is stopping");
    EXPECT_EQ(committer.stats().answer_failures.load(), 2u);
}

}  // namespace
}  // namespace payledger::ledger
