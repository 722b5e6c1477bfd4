// PostgreSQL tests of a subscription's deliverer (api/subscriptions/deliverer.hpp) in this
// process, around its lease:
// - fencing: when the lease is taken over while a POST is in flight (the holder's lease session
//   ended), whatever that POST's answer turns out to be, its former holder stores none of it:
//   the new holder's record stands (schema/0012, ledger::TakeLeaseToken);
// - Stop() does not wait for a receiver that never answers: the POST in flight is cancelled,
//   nothing of it is stored, and the lease is free for the next holder at once.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "api/subscriptions/deliverer.hpp"
#include "api/subscriptions/webhook_signature.hpp"
#include "ledger/read/feed_notifier.hpp"
#include "ledger/subscriptions/subscriptions.hpp"
#include "ledger/write/writer.hpp"
#include "projections/assert.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"
#include "support/webhook_receiver.hpp"

namespace payledger::api {
namespace {

using testing::ReceivedRequest;
using testing::ReceiverAnswer;
using testing::TestDatabase;
using testing::WebhookReceiver;

constexpr auto kLeasePatience = std::chrono::seconds{60};

// The log lines of one deliverer, for the test to wait on.
class LogLines {
public:
    Log Sink() {
        return [this](const std::string& level, const std::string& line) {
            const std::lock_guard lock{mutex_};
            lines_.push_back(level + " " + line);
            changed_.notify_all();
        };
    }
    // Waits for a line holding `text`; false after kLeasePatience.
    bool WaitFor(const std::string& text) {
        std::unique_lock lock{mutex_};
        return changed_.wait_for(lock, kLeasePatience, [&] {
            for (const std::string& line : lines_) {
                if (line.find(text) != std::string::npos) return true;
            }
            return false;
        });
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<std::string> lines_;
};

class DelivererLeasePgTest : public ::testing::Test {
protected:
    void SetUp() override {
        PAYLEDGER_REQUIRE_DATABASE(db_);
        auto connection = db_.Connect();
        std::vector<ledger::Delivery> orders;
        for (int i = 0; i < 3; ++i) {
            orders.push_back(testing::OrderRegistration("LEASE-" + std::to_string(i)));
        }
        for (const ledger::DeliveryResult& result : ledger::WriteBatch(*connection, orders)) {
            ASSERT_EQ(result.outcome, projections::Outcome::kAppended) << result.message;
        }
    }

    SubscriptionConfig Config(unsigned short port, std::chrono::seconds timeout) const {
        Checked<WebhookSecret> secret =
            ParseWebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo=");
        PAYLEDGER_ASSERT(secret.ok());
        return {.name = "fenced",
                .url = "http://127.0.0.1:" + std::to_string(port) + "/hook",
                .secrets = {*secret},
                .timeout = timeout};
    }

    SubscriptionDeliverer::Options Options(const std::string& who) const {
        return {.database_url = db_.url(),
                .session = testing::PatientSession(db_.name() + "_" + who),
                .lease_retry = std::chrono::milliseconds{50},
                .window_events_max = 0};
    }

    std::optional<ledger::SubscriptionState> Stored() const {
        auto connection = db_.Connect();
        pqxx::read_transaction tx{*connection};
        return ledger::ReadSubscription(tx, "fenced");
    }

    // Polls the stored state until `done` holds; false after kLeasePatience.
    template <typename Done>
    bool AwaitStored(Done done) const {
        const auto deadline = std::chrono::steady_clock::now() + kLeasePatience;
        while (std::chrono::steady_clock::now() < deadline) {
            const std::optional<ledger::SubscriptionState> state = Stored();
            if (state && done(*state)) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds{10});  // Poll pace.
        }
        return false;
    }

    TestDatabase db_;
    ledger::FeedNotifier notifier_{{}, [](std::function<void()> task) { task(); }};
};

TEST_F(DelivererLeasePgTest, AnAnswerThatComesAfterTheLeaseWasTakenOverStoresNothing) {
    // The first request (process A's) is never answered, until A's timeout; every later one
    // (process B's) is 503 with a long Retry-After.
    std::atomic<int> requests{0};
    WebhookReceiver receiver{[&](const ReceivedRequest&) {
        if (requests.fetch_add(1) == 0) return ReceiverAnswer{.never_answer = true};
        return ReceiverAnswer{.status = 503, .headers = {{"Retry-After", "300"}}};
    }};
    LogLines a_log;
    SubscriptionDeliverer a{
        {Config(receiver.port(), std::chrono::seconds{10})}, Options("a"), notifier_, a_log.Sink()};
    a.Start();
    ASSERT_TRUE(receiver.WaitForRequests(1, kLeasePatience));

    // A's lease session ends while its POST waits (a partition, a killed backend): the lock is
    // free, and B takes the subscription over.
    ASSERT_EQ(db_.Scalar("SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l "
                         "JOIN pg_stat_activity a USING (pid) WHERE a.datname = current_database() "
                         "AND l.locktype = 'advisory' AND l.granted AND l.classid = " +
                         std::to_string(ledger::kSubscriptionLeaseLockClass)),
              "1");
    LogLines b_log;
    SubscriptionDeliverer b{
        {Config(receiver.port(), std::chrono::seconds{10})}, Options("b"), notifier_, b_log.Sink()};
    b.Start();
    ASSERT_TRUE(AwaitStored([](const ledger::SubscriptionState& state) {
        return state.consecutive_failures == 1;
    })) << "B's failure was never stored";
    const ledger::SubscriptionState b_stored = *Stored();
    ASSERT_TRUE(b_stored.last_error.has_value());
    EXPECT_NE(b_stored.last_error->find("503"), std::string::npos) << *b_stored.last_error;

    // A's POST times out now, at the cursor B's failure was stored at: without fencing A would
    // count it over B's (two failures, A's error, A's shorter back-off).
    ASSERT_TRUE(a_log.WaitFor("the delivery's outcome was not stored"));
    EXPECT_EQ(*Stored(), b_stored);
    EXPECT_EQ(b.counters("fenced")->failures.load(), 1U);
    EXPECT_EQ(a.counters("fenced")->delivered_events.load(), 0U);
}

TEST_F(DelivererLeasePgTest, StopCancelsAPostInFlightAndFreesTheLeaseAtOnce) {
    WebhookReceiver receiver{
        [](const ReceivedRequest&) { return ReceiverAnswer{.never_answer = true}; }};
    LogLines log;
    const std::chrono::seconds timeout{60};
    SubscriptionDeliverer deliverer{
        {Config(receiver.port(), timeout)}, Options("stopping"), notifier_, log.Sink()};
    deliverer.Start();
    ASSERT_TRUE(receiver.WaitForRequests(1, kLeasePatience));
    const auto before = std::chrono::steady_clock::now();
    deliverer.Stop();
    // Not the receiver's minute: the POST was cancelled.
    EXPECT_LT(std::chrono::steady_clock::now() - before, timeout / 2);
    // Nothing of the cancelled attempt was stored, and the lease is free for the next holder.
    const std::optional<ledger::SubscriptionState> state = Stored();
    ASSERT_TRUE(state);
    EXPECT_EQ(state->after, 0);
    EXPECT_EQ(state->consecutive_failures, 0);
    EXPECT_EQ(state->last_attempt_at, std::nullopt);
    ledger::SubscriptionLease next{db_.url(), testing::PatientSession(db_.name() + "_next")};
    EXPECT_TRUE(next.TryAcquire("fenced"));
}

}  // namespace
}  // namespace payledger::api
