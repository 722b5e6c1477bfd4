#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ledger/base/log.hpp"

namespace payledger::ledger {

// The one mechanism behind everything that waits for the feed to grow: the subscriptions'
// delivery threads and the long-polls of GET /v1/events?wait=. It knows the newest committed
// seq it has been told of (the head) and wakes the waiters that wait beyond a smaller one.
//
// Two sources tell it: this process's committer, after each COMMIT (Committed, at once), and a
// shared poll (StartPolling) that reads max(seq) once per poll_interval on one connection, so
// that commits of other processes, or of the primary as a replica replays them, are found
// within that interval. One query per interval per process, whatever the number of waiters.
//
// A wake-up is a hint, never a promise: the head may have been read on the primary while the
// waiter reads a replica that is behind, or the new events may not match its filter. A woken
// waiter re-reads; when it finds nothing new it waits again, beyond the same seq, with what is
// left of its deadline. Nothing here wakes a waiter without the head having grown past its
// `after`, and a failed poll wakes nobody.
//
// Thread-safe. Callbacks are only ever handed to `post`, and never while a lock of the
// notifier is held.
class FeedNotifier {
public:
    using Clock = std::chrono::steady_clock;
    // Runs a task on an executor of the caller's (an Asio strand or pool, say). Must not throw.
    // It may run the task before returning (tests do): no lock is held when it is called.
    using Post = std::function<void(std::function<void()>)>;
    // A connection to read the head from (the primary, or a replica for a replica's reads).
    // May throw; the poll logs it and tries again at the next interval.
    using ConnectionFactory = std::function<std::unique_ptr<pqxx::connection>()>;

    // How an asynchronous wait ended. kHeadMoved is a hint (above): re-read.
    enum class WaitEnd { kHeadMoved, kTimedOut };
    using Callback = std::function<void(WaitEnd)>;
    using WaiterId = std::uint64_t;

    static constexpr std::chrono::milliseconds kPollIntervalMax{1000};

    struct Options {
        // Asynchronous waiters at once; AddWaiter refuses more (the caller answers 503).
        std::size_t waiters_max = 10'000;
        // REQUIRES: 0 < poll_interval <= kPollIntervalMax (a commit of another process must
        // be found within a second).
        std::chrono::milliseconds poll_interval = kPollIntervalMax;
    };

    // Starts the notifier's one thread, which ends asynchronous waits (woken or timed out)
    // and hands their callbacks to `post`. No poll runs until StartPolling.
    FeedNotifier(Options options, Post post);
    // Stop().
    ~FeedNotifier();
    FeedNotifier(const FeedNotifier&) = delete;
    FeedNotifier& operator=(const FeedNotifier&) = delete;

    // `seq` has committed. Call it only after the COMMIT returned. A seq not above the head
    // changes nothing. Cheap and never blocks on waiters: an atomic maximum, a short critical
    // section and a notify. Any thread.
    void Committed(std::int64_t seq);

    // The newest committed seq known (0 until told).
    [[nodiscard]] std::int64_t Head() const { return head_.load(std::memory_order_acquire); }

    // Blocks until the head is beyond `after` and returns it, or returns nullopt at `deadline`
    // or when the notifier stops. The head returned is a hint (above).
    [[nodiscard]] std::optional<std::int64_t> WaitBeyond(std::int64_t after,
                                                         Clock::time_point deadline);

    // Registers an asynchronous wait beyond `after` until `deadline`, without a thread of its
    // own. `callback` is posted exactly once: kHeadMoved as soon as the head is beyond `after`
    // (at once when it already is), else kTimedOut at the deadline or when the notifier stops
    // -- unless Cancel removes it first. Returns nullopt, and never calls `callback`, when
    // waiters_max waits are pending or the notifier has stopped.
    [[nodiscard]] std::optional<WaiterId> AddWaiter(std::int64_t after, Clock::time_point deadline,
                                                    Callback callback);
    // Removes a pending wait. True: its callback will never run (it is destroyed here, outside
    // the notifier's locks). False: it has run or is posted already.
    bool Cancel(WaiterId id);
    // Asynchronous waits pending now.
    [[nodiscard]] std::size_t WaiterCount() const;

    // Starts the shared poll: a thread that, every poll_interval, reads
    // `SELECT coalesce(max(seq), 0) FROM ledger_events` on a connection from `connect` (kept
    // and reused; after a failure, dropped and made again at the next interval) and passes it
    // to Committed. Failures go to `log` as warnings, at most one line per failing interval.
    // REQUIRES: not polling already.
    void StartPolling(ConnectionFactory connect, Log log);

    // Stops the poll and the notifier's thread: every pending asynchronous wait is posted
    // kTimedOut, thread waiters return nullopt, and later waits are refused (AddWaiter) or
    // return at once (WaitBeyond). Idempotent.
    void Stop();

    struct Stats {
        std::atomic<std::uint64_t> polls{0};
        std::atomic<std::uint64_t> poll_failures{0};
        std::atomic<std::uint64_t> refused_waiters{0};  // AddWaiter at waiters_max.
    };
    [[nodiscard]] const Stats& stats() const { return stats_; }

private:
    struct Waiter {
        std::int64_t after = 0;
        Clock::time_point deadline{};
        Callback callback{};
    };

    void Dispatch();  // The notifier's thread.
    void Poll(const ConnectionFactory& connect, const Log& log);
    // Takes, under waiters_mutex_, the waits that have ended: beyond `head`, or due by `now`.
    std::vector<std::pair<Callback, WaitEnd>> TakeEnded(std::int64_t head, Clock::time_point now);
    // Wakes the notifier's thread and the thread waiters.
    void Signal();

    const Options options_;
    const Post post_;
    std::atomic<std::int64_t> head_{0};

    // Guards only the hand-over to sleeping threads (the committer holds it for an instant).
    mutable std::mutex signal_mutex_;
    std::condition_variable signal_;     // The notifier's thread and the thread waiters.
    std::condition_variable poll_stop_;  // The poll's thread, woken only to stop.
    std::uint64_t signals_ = 0;          // Guarded by signal_mutex_: bumped by every Signal().
    bool stopping_ = false;              // Guarded by signal_mutex_.

    // The asynchronous waits, indexed three ways.
    mutable std::mutex waiters_mutex_;
    std::unordered_map<WaiterId, Waiter> waiters_;                  // Guarded by waiters_mutex_.
    std::set<std::pair<std::int64_t, WaiterId>> by_after_;          // Likewise.
    std::set<std::pair<Clock::time_point, WaiterId>> by_deadline_;  // Likewise.
    WaiterId next_id_ = 1;                                          // Likewise.
    bool refusing_ = false;                                         // Likewise: stopped.

    std::mutex stop_mutex_;  // Serialises Stop() and StartPolling().
    std::thread dispatcher_;
    std::thread poller_;
    Stats stats_;
};

}  // namespace payledger::ledger
