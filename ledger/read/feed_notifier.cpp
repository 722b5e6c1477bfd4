#include "ledger/read/feed_notifier.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "ledger/read/reads.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// The longest single sleep: a deadline further away (or time_point::max()) is reached in
// steps, so no clock arithmetic can overflow.
constexpr std::chrono::hours kSleepMax{1};

FeedNotifier::Clock::time_point SleepUntil(FeedNotifier::Clock::time_point deadline) {
    return std::min(deadline, FeedNotifier::Clock::now() + kSleepMax);
}

}  // namespace

FeedNotifier::FeedNotifier(Options options, Post post) : options_(options), post_(std::move(post)) {
    PAYLEDGER_ASSERT(options_.waiters_max > 0);
    PAYLEDGER_ASSERT(options_.poll_interval.count() > 0);
    PAYLEDGER_ASSERT(options_.poll_interval <= kPollIntervalMax);
    PAYLEDGER_ASSERT(post_ != nullptr);
    dispatcher_ = std::thread([this] { Dispatch(); });
}

FeedNotifier::~FeedNotifier() { Stop(); }

void FeedNotifier::Committed(std::int64_t seq) {
    std::int64_t head = head_.load(std::memory_order_acquire);
    while (seq > head) {
        if (head_.compare_exchange_weak(head, seq, std::memory_order_acq_rel)) {
            Signal();
            return;
        }
    }
}

void FeedNotifier::Signal() {
    {
        // The head (or the waiters) changed before this lock is taken, so a sleeper either saw
        // the change when it checked or is already asleep and gets the notification.
        const std::lock_guard lock{signal_mutex_};
        ++signals_;
    }
    signal_.notify_all();
}

std::optional<std::int64_t> FeedNotifier::WaitBeyond(std::int64_t after,
                                                     Clock::time_point deadline) {
    std::unique_lock lock{signal_mutex_};
    for (;;) {
        if (stopping_) return std::nullopt;
        const std::int64_t head = Head();
        if (head > after) return head;
        if (Clock::now() >= deadline) return std::nullopt;
        signal_.wait_until(lock, SleepUntil(deadline));
    }
}

std::optional<FeedNotifier::WaiterId> FeedNotifier::AddWaiter(std::int64_t after,
                                                              Clock::time_point deadline,
                                                              Callback callback) {
    PAYLEDGER_ASSERT(callback != nullptr);
    WaiterId id = 0;
    bool at_once = false;
    bool earliest = false;
    {
        const std::lock_guard lock{waiters_mutex_};
        if (refusing_) {
            stats_.refused_waiters.fetch_add(1, std::memory_order_relaxed);
            return std::nullopt;
        }
        if (Head() > after) {
            // Nothing to wait for, so nothing counted against waiters_max. Never registered:
            // Cancel(id) answers false.
            at_once = true;
            id = next_id_++;
        } else if (waiters_.size() >= options_.waiters_max) {
            stats_.refused_waiters.fetch_add(1, std::memory_order_relaxed);
            return std::nullopt;
        } else {
            id = next_id_++;
            waiters_.emplace(
                id, Waiter{.after = after, .deadline = deadline, .callback = std::move(callback)});
            by_after_.emplace(after, id);
            by_deadline_.emplace(deadline, id);
            earliest = by_deadline_.begin()->second == id;
        }
    }
    if (at_once) {
        post_([callback = std::move(callback)] { callback(WaitEnd::kHeadMoved); });
        return id;
    }
    // The notifier's thread sleeps until the earliest deadline: a new earliest must wake it.
    // And the head may have passed `after` since it was checked above, after the thread last
    // looked at the waiters: it must look again.
    if (earliest || Head() > after) Signal();
    return id;
}

bool FeedNotifier::Cancel(WaiterId id) {
    Callback dropped;
    {
        const std::lock_guard lock{waiters_mutex_};
        const auto it = waiters_.find(id);
        if (it == waiters_.end()) return false;
        by_after_.erase({it->second.after, id});
        by_deadline_.erase({it->second.deadline, id});
        dropped = std::move(it->second.callback);
        waiters_.erase(it);
    }
    // `dropped` (and what it holds: a session, say) is destroyed here, outside the lock.
    return true;
}

std::size_t FeedNotifier::WaiterCount() const {
    const std::lock_guard lock{waiters_mutex_};
    return waiters_.size();
}

std::vector<std::pair<FeedNotifier::Callback, FeedNotifier::WaitEnd>> FeedNotifier::TakeEnded(
    std::int64_t head, Clock::time_point now) {
    std::vector<std::pair<Callback, WaitEnd>> ended;
    const std::lock_guard lock{waiters_mutex_};
    const auto take = [&](WaiterId id, WaitEnd end) {
        const auto it = waiters_.find(id);
        PAYLEDGER_ASSERT(it != waiters_.end());
        by_after_.erase({it->second.after, id});
        by_deadline_.erase({it->second.deadline, id});
        ended.emplace_back(std::move(it->second.callback), end);
        waiters_.erase(it);
    };
    while (!by_after_.empty() && by_after_.begin()->first < head) {
        take(by_after_.begin()->second, WaitEnd::kHeadMoved);
    }
    while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
        take(by_deadline_.begin()->second, WaitEnd::kTimedOut);
    }
    return ended;
}

void FeedNotifier::Dispatch() {
    std::uint64_t seen = 0;
    for (;;) {
        Clock::time_point wake = Clock::now() + kSleepMax;
        {
            const std::lock_guard lock{waiters_mutex_};
            if (!by_deadline_.empty()) wake = std::min(wake, by_deadline_.begin()->first);
        }
        {
            // A Signal() after `seen` was read (a new waiter, a new head) is not missed: the
            // counter differs and the wait returns at once.
            std::unique_lock lock{signal_mutex_};
            signal_.wait_until(lock, wake, [&] { return stopping_ || signals_ != seen; });
            if (stopping_) return;
            seen = signals_;
        }
        for (auto& [callback, end] : TakeEnded(Head(), Clock::now())) {
            post_([callback = std::move(callback), end = end] { callback(end); });
        }
    }
}

void FeedNotifier::StartPolling(ConnectionFactory connect, Log log) {
    PAYLEDGER_ASSERT(connect != nullptr);
    PAYLEDGER_ASSERT(log != nullptr);
    const std::lock_guard stop_lock{stop_mutex_};
    PAYLEDGER_ASSERT(!poller_.joinable());
    {
        const std::lock_guard lock{signal_mutex_};
        if (stopping_) return;
    }
    poller_ = std::thread(
        [this, connect = std::move(connect), log = std::move(log)] { Poll(connect, log); });
}

void FeedNotifier::Poll(const ConnectionFactory& connect, const Log& log) {
    std::unique_ptr<pqxx::connection> connection;
    Clock::time_point next = Clock::now();
    for (;;) {
        {
            std::unique_lock lock{signal_mutex_};
            if (poll_stop_.wait_until(lock, next, [&] { return stopping_; })) return;
        }
        // Intervals are counted from their starts, so a slow query does not stretch them.
        next += options_.poll_interval;
        if (next < Clock::now()) next = Clock::now() + options_.poll_interval;
        try {
            if (!connection) connection = connect();
            pqxx::nontransaction tx{*connection};
            const std::int64_t head = ReadFeedHead(tx);
            stats_.polls.fetch_add(1, std::memory_order_relaxed);
            Committed(head);
        } catch (const std::exception& error) {
            // Never a wake-up: the head stays as it was. The connection may be broken; the
            // next interval makes a new one.
            connection.reset();
            stats_.poll_failures.fetch_add(1, std::memory_order_relaxed);
            try {
                // The driver's text may hold any bytes: replaced where not UTF-8.
                log("warning",
                    nlohmann::json{{"msg", "the feed's poll failed"}, {"error", error.what()}}.dump(
                        -1, ' ', false, nlohmann::json::error_handler_t::replace));
            } catch (...) {
                // Logging must not end the poll.
            }
        }
    }
}

void FeedNotifier::Stop() {
    const std::lock_guard stop_lock{stop_mutex_};
    {
        const std::lock_guard lock{waiters_mutex_};
        refusing_ = true;
    }
    {
        const std::lock_guard lock{signal_mutex_};
        stopping_ = true;
    }
    signal_.notify_all();
    poll_stop_.notify_all();
    if (poller_.joinable()) poller_.join();
    if (dispatcher_.joinable()) dispatcher_.join();
    std::vector<Callback> pending;
    {
        const std::lock_guard lock{waiters_mutex_};
        for (auto& [id, waiter] : waiters_) pending.push_back(std::move(waiter.callback));
        waiters_.clear();
        by_after_.clear();
        by_deadline_.clear();
    }
    for (Callback& callback : pending) {
        post_([callback = std::move(callback)] { callback(WaitEnd::kTimedOut); });
    }
}

}  // namespace payledger::ledger
