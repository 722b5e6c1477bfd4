// FeedNotifier without a database: thread waiters wake when a larger seq commits and time out
// otherwise; asynchronous waiters are bounded, each callback runs exactly once (woken, timed
// out, or never after a successful Cancel), and 10 000 of them time out on the notifier's one
// thread, with the process's thread count unchanged (/proc/self/status); a smaller seq wakes
// nobody; a poll that fails is logged and wakes nobody; Stop answers what is pending.
// The poll against a real database is in tests/ledger/subscriptions/subscriptions_pgtest.cpp.

#include "ledger/read/feed_notifier.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace payledger::ledger {
namespace {

using Clock = FeedNotifier::Clock;
using WaitEnd = FeedNotifier::WaitEnd;
using std::chrono::milliseconds;

// An executor with one thread, standing in for the Asio pool that serve posts to.
class OneThreadExecutor {
public:
    OneThreadExecutor() : thread_([this] { Run(); }) {}
    ~OneThreadExecutor() {
        {
            const std::lock_guard lock{mutex_};
            stopping_ = true;
        }
        ready_.notify_all();
        thread_.join();
    }
    FeedNotifier::Post Post() {
        return [this](std::function<void()> task) {
            {
                const std::lock_guard lock{mutex_};
                tasks_.push_back(std::move(task));
            }
            ready_.notify_one();
        };
    }

private:
    void Run() {
        std::unique_lock lock{mutex_};
        for (;;) {
            ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
            if (tasks_.empty()) return;  // Stopping, and everything posted has run.
            std::function<void()> task = std::move(tasks_.front());
            tasks_.pop_front();
            lock.unlock();
            task();
            lock.lock();
        }
    }

    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::function<void()>> tasks_;
    bool stopping_ = false;
    std::thread thread_;
};

// Records every callback by waiter tag: how many times, and how it ended.
class CallbackLog {
public:
    FeedNotifier::Callback For(int tag) {
        return [this, tag](WaitEnd end) {
            {
                const std::lock_guard lock{mutex_};
                ++calls_[tag];
                ends_[tag] = end;
                ++total_;
            }
            changed_.notify_all();
        };
    }
    // Waits (up to 30 s) until `count` callbacks have run; false on the deadline.
    bool AwaitTotal(int count) {
        std::unique_lock lock{mutex_};
        return changed_.wait_for(lock, std::chrono::seconds{30}, [&] { return total_ >= count; });
    }
    int Calls(int tag) {
        const std::lock_guard lock{mutex_};
        return calls_[tag];
    }
    WaitEnd End(int tag) {
        const std::lock_guard lock{mutex_};
        return ends_.at(tag);
    }
    int Total() {
        const std::lock_guard lock{mutex_};
        return total_;
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::map<int, int> calls_;
    std::map<int, WaitEnd> ends_;
    int total_ = 0;
};

int ThreadCount() {
    std::ifstream status{"/proc/self/status"};
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
    }
    ADD_FAILURE() << "no Threads: line in /proc/self/status";
    return -1;
}

TEST(FeedNotifier, ThreadWaiterWakesWhenALargerSeqCommits) {
    OneThreadExecutor executor;
    FeedNotifier notifier{{}, executor.Post()};
    // Many rounds, so that Committed lands both before and during the wait; a lost wake-up
    // would show as a wait that lasts until its 30 s deadline.
    for (std::int64_t round = 1; round <= 200; ++round) {
        const auto started = Clock::now();
        auto waiter = std::async(std::launch::async, [&] {
            return notifier.WaitBeyond(round - 1, Clock::now() + std::chrono::seconds{30});
        });
        notifier.Committed(round);
        const std::optional<std::int64_t> head = waiter.get();
        ASSERT_EQ(head, round);
        ASSERT_LT(Clock::now() - started, std::chrono::seconds{5});
    }
    EXPECT_EQ(notifier.Head(), 200);
}

TEST(FeedNotifier, ThreadWaiterTimesOutWithoutANewSeq) {
    OneThreadExecutor executor;
    FeedNotifier notifier{{}, executor.Post()};
    notifier.Committed(10);
    const auto started = Clock::now();
    EXPECT_EQ(notifier.WaitBeyond(10, started + milliseconds{100}), std::nullopt);
    EXPECT_GE(Clock::now() - started, milliseconds{100});
    // Already beyond: no wait at all.
    EXPECT_EQ(notifier.WaitBeyond(9, Clock::now() + std::chrono::hours{1}), 10);
}

TEST(FeedNotifier, ASmallerOrEqualSeqWakesNobody) {
    CallbackLog record;  // Outlives the executor, which may still run callbacks.
    OneThreadExecutor executor;
    FeedNotifier notifier{{}, executor.Post()};
    notifier.Committed(10);
    ASSERT_TRUE(notifier.AddWaiter(10, Clock::now() + milliseconds{300}, record.For(1)));
    auto waiter = std::async(std::launch::async, [&] {
        return notifier.WaitBeyond(10, Clock::now() + milliseconds{300});
    });
    notifier.Committed(7);
    notifier.Committed(10);
    EXPECT_EQ(waiter.get(), std::nullopt);
    ASSERT_TRUE(record.AwaitTotal(1));
    EXPECT_EQ(record.End(1), WaitEnd::kTimedOut);
    EXPECT_EQ(notifier.Head(), 10);
}

TEST(FeedNotifier, AsyncWaitersAreBoundedAndEachCallbackRunsOnce) {
    CallbackLog record;  // Outlives the executor, which may still run callbacks.
    OneThreadExecutor executor;
    FeedNotifier notifier{{.waiters_max = 3}, executor.Post()};
    const auto deadline = Clock::now() + std::chrono::seconds{30};
    for (int tag = 0; tag < 3; ++tag) {
        ASSERT_TRUE(notifier.AddWaiter(5 + tag, deadline, record.For(tag)));
    }
    EXPECT_FALSE(notifier.AddWaiter(5, deadline, record.For(99)));  // waiters_max + 1.
    EXPECT_EQ(notifier.stats().refused_waiters.load(), 1U);
    EXPECT_EQ(notifier.WaiterCount(), 3U);
    // One wait already satisfied is answered at once and takes no place.
    notifier.Committed(6);  // Beyond 5 only.
    ASSERT_TRUE(record.AwaitTotal(1));
    EXPECT_EQ(record.End(0), WaitEnd::kHeadMoved);
    ASSERT_TRUE(notifier.AddWaiter(0, deadline, record.For(3)));
    ASSERT_TRUE(record.AwaitTotal(2));
    EXPECT_EQ(record.End(3), WaitEnd::kHeadMoved);
    EXPECT_TRUE(notifier.AddWaiter(6, deadline, record.For(4)));  // A place is free again.
    notifier.Committed(100);
    ASSERT_TRUE(record.AwaitTotal(5));
    // Further commits call nobody again.
    notifier.Committed(200);
    notifier.Committed(300);
    EXPECT_EQ(notifier.WaiterCount(), 0U);
    notifier.Stop();
    for (int tag : {0, 1, 2, 3, 4}) {
        EXPECT_EQ(record.Calls(tag), 1) << tag;
        EXPECT_EQ(record.End(tag), WaitEnd::kHeadMoved) << tag;
    }
    EXPECT_EQ(record.Calls(99), 0);
    EXPECT_EQ(record.Total(), 5);
}

TEST(FeedNotifier, CancelledWaiterIsNeverCalled) {
    CallbackLog record;  // Outlives the executor, which may still run callbacks.
    OneThreadExecutor executor;
    FeedNotifier notifier{{}, executor.Post()};
    const std::optional<FeedNotifier::WaiterId> cancelled =
        notifier.AddWaiter(0, Clock::now() + milliseconds{50}, record.For(1));
    const std::optional<FeedNotifier::WaiterId> kept =
        notifier.AddWaiter(0, Clock::now() + milliseconds{50}, record.For(2));
    ASSERT_TRUE(cancelled && kept);
    EXPECT_TRUE(notifier.Cancel(*cancelled));
    EXPECT_FALSE(notifier.Cancel(*cancelled));
    ASSERT_TRUE(record.AwaitTotal(1));
    EXPECT_EQ(record.End(2), WaitEnd::kTimedOut);
    EXPECT_FALSE(notifier.Cancel(*kept));  // Already answered.
    notifier.Stop();
    EXPECT_EQ(record.Calls(1), 0);
    EXPECT_EQ(record.Total(), 1);
}

TEST(FeedNotifier, TenThousandTimeoutsNeedNoThreadEach) {
    CallbackLog record;  // Outlives the executor, which may still run callbacks.
    OneThreadExecutor executor;
    FeedNotifier notifier{{.waiters_max = 10'000}, executor.Post()};
    const int threads_before = ThreadCount();
    const auto now = Clock::now();
    // The first deadline is far enough that none has passed when the 10 001st is refused,
    // even under a sanitizer on a loaded machine (adding them took over 50 ms under TSan).
    constexpr milliseconds kFirst{2'000};
    for (int tag = 0; tag < 10'000; ++tag) {
        ASSERT_TRUE(notifier.AddWaiter(0, now + kFirst + milliseconds{tag % 200}, record.For(tag)));
    }
    EXPECT_EQ(ThreadCount(), threads_before);
    ASSERT_LT(Clock::now() - now, kFirst) << "too slow to test the bound";
    EXPECT_FALSE(notifier.AddWaiter(0, now + kFirst, record.For(-1)));
    ASSERT_TRUE(record.AwaitTotal(10'000)) << record.Total();
    EXPECT_EQ(ThreadCount(), threads_before);
    EXPECT_GE(Clock::now() - now, kFirst + milliseconds{199});
    for (int tag = 0; tag < 10'000; ++tag) {
        ASSERT_EQ(record.Calls(tag), 1) << tag;
        ASSERT_EQ(record.End(tag), WaitEnd::kTimedOut) << tag;
    }
    EXPECT_EQ(notifier.WaiterCount(), 0U);
}

TEST(FeedNotifier, ExactlyOnceUnderConcurrentCommitsTimeoutsAndCancels) {
    CallbackLog record;  // Outlives the executor, which may still run callbacks.
    OneThreadExecutor executor;
    FeedNotifier notifier{{.waiters_max = 100'000}, executor.Post()};
    constexpr int kThreads = 4;
    constexpr int kPerThread = 2'000;
    std::atomic<int> cancelled{0};
    std::vector<std::thread> adders;
    for (int t = 0; t < kThreads; ++t) {
        adders.emplace_back([&, t] {
            for (int i = 0; i < kPerThread; ++i) {
                const int tag = t * kPerThread + i;
                const std::optional<FeedNotifier::WaiterId> id = notifier.AddWaiter(
                    tag, Clock::now() + milliseconds{tag % 3 == 0 ? 1 : 20'000}, record.For(tag));
                ASSERT_TRUE(id);
                if (tag % 7 == 0 && notifier.Cancel(*id)) cancelled.fetch_add(1);
            }
        });
    }
    std::thread committer([&] {
        for (std::int64_t seq = 1; seq <= kThreads * kPerThread + 1; seq += 13) {
            notifier.Committed(seq);
        }
        notifier.Committed(kThreads * kPerThread + 1);
    });
    for (std::thread& adder : adders) adder.join();
    committer.join();
    const int expected = kThreads * kPerThread - cancelled.load();
    ASSERT_TRUE(record.AwaitTotal(expected)) << record.Total() << " of " << expected;
    notifier.Stop();
    int called = 0;
    for (int tag = 0; tag < kThreads * kPerThread; ++tag) {
        const int calls = record.Calls(tag);
        ASSERT_LE(calls, 1) << tag;
        called += calls;
    }
    EXPECT_EQ(called, expected);
    EXPECT_EQ(record.Total(), expected);
}

TEST(FeedNotifier, StopAnswersPendingWaitsAndRefusesNewOnes) {
    CallbackLog record;  // Outlives the executor, which may still run callbacks.
    OneThreadExecutor executor;
    FeedNotifier notifier{{}, executor.Post()};
    ASSERT_TRUE(notifier.AddWaiter(0, Clock::now() + std::chrono::hours{1}, record.For(1)));
    auto thread_waiter = std::async(
        std::launch::async, [&] { return notifier.WaitBeyond(0, Clock::time_point::max()); });
    notifier.Stop();
    EXPECT_EQ(thread_waiter.get(), std::nullopt);
    ASSERT_TRUE(record.AwaitTotal(1));
    EXPECT_EQ(record.End(1), WaitEnd::kTimedOut);
    EXPECT_FALSE(notifier.AddWaiter(0, Clock::now() + std::chrono::hours{1}, record.For(2)));
    EXPECT_EQ(notifier.WaitBeyond(0, Clock::now() + std::chrono::hours{1}), std::nullopt);
    notifier.Stop();  // Idempotent.
    EXPECT_EQ(record.Total(), 1);
}

TEST(FeedNotifier, AFailingPollIsLoggedAndWakesNobody) {
    CallbackLog record;  // Outlives the executor, which may still run callbacks.
    std::mutex mutex;    // These outlive the notifier, whose poll logs into them.
    std::condition_variable logged;
    std::vector<std::string> messages;
    OneThreadExecutor executor;
    FeedNotifier notifier{{.poll_interval = milliseconds{20}}, executor.Post()};
    ASSERT_TRUE(notifier.AddWaiter(0, Clock::now() + std::chrono::hours{1}, record.For(1)));
    notifier.StartPolling(
        []() -> std::unique_ptr<pqxx::connection> {
            throw pqxx::broken_connection("the test's database is unreachable");
        },
        [&](const std::string& level, const std::string& json) {
            EXPECT_EQ(level, "warning");
            {
                const std::lock_guard lock{mutex};
                messages.push_back(json);
            }
            logged.notify_all();
        });
    {
        std::unique_lock lock{mutex};
        ASSERT_TRUE(
            logged.wait_for(lock, std::chrono::seconds{30}, [&] { return messages.size() >= 3; }));
        EXPECT_NE(messages[0].find("unreachable"), std::string::npos) << messages[0];
    }
    EXPECT_GE(notifier.stats().poll_failures.load(), 3U);
    EXPECT_EQ(notifier.stats().polls.load(), 0U);
    EXPECT_EQ(notifier.Head(), 0);
    EXPECT_EQ(record.Total(), 0);
    notifier.Stop();
    ASSERT_TRUE(record.AwaitTotal(1));
    EXPECT_EQ(record.End(1), WaitEnd::kTimedOut);
}

}  // namespace
}  // namespace payledger::ledger
