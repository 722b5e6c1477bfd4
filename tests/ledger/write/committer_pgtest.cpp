// The committer's effects against the real PostgreSQL: a batch is answered
// only after its transaction, outside the retries. An answer (`done`) that throws after the
// commit must neither write the batch again (one receipt per delivery) nor answer any delivery
// twice, and the other deliveries of its batch are answered as usual. The batch is made
// deterministic by holding the writer lock while it queues; the throw comes from the `done`
// callback itself, the committer's own injection point. A throw from the full-queue and the
// stopping answers, which run on the caller's thread, stays in the committer too. The byte budget:
// with the committer held at the writer lock, 64 KiB deliveries queue until the next would pass
// queue_bytes_max; that one is answered unavailable at once, on the caller's thread, and nothing of
// it is stored; the queued ones are written after. Answers run on the answer thread: a slow one
// does not hold up the next batch's write.
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

#include "ledger/write/committer.hpp"
#include "projections/assert.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger::committer_pgtest {
namespace {

using projections::Outcome;
using testing::OrderRegistration;
using testing::TestDatabase;

constexpr std::size_t kBatchSize = 8;
constexpr std::size_t kThrowingIndex = 2;  // Answered ones before it, unanswered ones after.

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
        committer.Submit(OrderRegistration("ORD-PLUG"),
                         [plug](DeliveryResult r) { plug->set_value(r); });
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
            committer.Submit(OrderRegistration("ORD-" + std::to_string(i)),
                             answers.For(i, i == kThrowingIndex ? fail : std::function<void()>{}));
        }
        hold.commit();
        ASSERT_EQ(plug.get().outcome, Outcome::kAppended);
        answers.AwaitEveryDelivery();
        committer.Stop();  // Joins the committer: every answer it would give has been given.

        for (std::size_t i = 0; i < kBatchSize; ++i) {
            ASSERT_EQ(answers.results()[i].size(), 1u) << "delivery " << i << " answered twice";
            EXPECT_EQ(answers.results()[i][0].outcome, Outcome::kAppended) << i;
            EXPECT_FALSE(answers.results()[i][0].failure) << i;
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
        Delivery delivery = OrderRegistration(out_trade_no);
        delivery.receipt.body = std::string(kBodyBytes, 'x');
        return delivery;
    };
    Delivery probe = large("ORD-X");
    RenderForWrite(probe);  // As Submit does before it counts.
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
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts JOIN receipt_bodies AS b "
                         "USING (body_sha256) WHERE length(b.body) = " +
                         std::to_string(kBodyBytes)),
              std::to_string(fitting));
}

TEST_F(CommitterPgTest, ASlowAnswerDoesNotHoldUpTheNextBatchAndAnswersKeepCommitOrder) {
    // Answers run on the committer's answer thread, one task per batch: while the
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

    committer.Submit(OrderRegistration("ORD-SLOW"), [&, released](const DeliveryResult&) {
        record("ORD-SLOW");
        released.wait();
    });
    ASSERT_TRUE(await_answers(1)) << "the first delivery was never answered";
    committer.Submit(OrderRegistration("ORD-NEXT"),
                     [&](const DeliveryResult&) { record("ORD-NEXT"); });
    // Its receipt is committed while the first answer still runs.
    bool written = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (!written && std::chrono::steady_clock::now() < deadline) {
        written = db_.Scalar(
                      "SELECT count(*) FROM callback_receipts WHERE out_trade_no = "
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

TEST_F(CommitterPgTest, ACacheThatDropsGenerationsFreesThemAsideAndStillDecidesRight) {
    // A cache of 4 orders (two generations of 2) over 12 orders: every second order drops a
    // generation, which the committer frees on a thread of its own (DisposeDropped) while it
    // writes the next batch; under ThreadSanitizer (thread_tests) that hand-over is checked.
    // Without the prefetch thread: it reads a submitted order's state beside the writer, and
    // when it wins the race the batch plans from the cache, so the writer's reads counted below
    // would depend on timing (3 instead of 4 once under ThreadSanitizer).
    Committer committer{{.url = db_.url(),
                         .session = testing::PatientSession(db_.name()),
                         .cache_orders_max = 4,
                         .prefetch = false}};
    const auto submit = [&](const std::string& out_trade_no) {
        auto answer = std::make_shared<std::promise<DeliveryResult>>();
        std::future<DeliveryResult> result = answer->get_future();
        committer.Submit(OrderRegistration(out_trade_no),
                         [answer](DeliveryResult r) { answer->set_value(r); });
        return result.get();
    };
    for (int i = 0; i < 12; ++i) {
        ASSERT_EQ(submit("ORD-" + std::to_string(i)).outcome, Outcome::kAppended) << i;
    }
    const std::uint64_t reads = committer.stats().state_reads.load();
    EXPECT_EQ(submit("ORD-11").outcome, Outcome::kDuplicate);  // Remembered: no read.
    EXPECT_EQ(committer.stats().state_reads.load(), reads);
    EXPECT_EQ(submit("ORD-0").outcome, Outcome::kDuplicate);  // Dropped long ago: read.
    EXPECT_EQ(committer.stats().state_reads.load(), reads + 1);
    committer.Stop();  // Waits for the last disposal too.
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events"), "12");
    EXPECT_EQ(committer.stats().failures.load(), 0u);
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
    EXPECT_NO_THROW(committer.Submit(OrderRegistration("ORD-1"), throwing));
    committer.Stop();
    EXPECT_NO_THROW(committer.Submit(OrderRegistration("ORD-2"), throwing));
    ASSERT_EQ(answers.size(), 2u);
    EXPECT_EQ(answers[0].outcome, Outcome::kUnavailable);
    EXPECT_EQ(answers[0].message, "the write queue is full");
    EXPECT_EQ(answers[1].outcome, Outcome::kUnavailable);
    EXPECT_EQ(answers[1].message, "the service is stopping");
    EXPECT_EQ(committer.stats().answer_failures.load(), 2u);
}

}  // namespace
}  // namespace payledger::ledger::committer_pgtest
