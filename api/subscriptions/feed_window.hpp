#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "api/log.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/read/feed_notifier.hpp"
#include "ledger/subscriptions/subscriptions.hpp"
#include "projections/event.hpp"

namespace payledger::api {

// How many events a FeedWindow keeps by default: 10 000 of about 500 bytes each, some 5 MB.
inline constexpr std::size_t kFeedWindowEventsMaxDefault = 10'000;

// One event as a webhook carries it: what a filter looks at, and its JSON text (EventJson,
// as GET /v1/events shows it), serialized once however many subscriptions send it.
struct FeedItem {
    std::int64_t seq = 0;
    projections::EventType event_type = projections::EventType::kOrderCreated;
    std::string account_id{};
    std::string json{};
};
using FeedItemPtr = std::shared_ptr<const FeedItem>;

[[nodiscard]] FeedItemPtr MakeFeedItem(const projections::Event& event);

// Whether `filter` delivers `item`: the same test as ledger::ReadMatchingBatch's SQL (an empty
// set does not filter).
[[nodiscard]] bool Matches(const projections::EventFilter& filter, const FeedItem& item);

// What FeedWindow::Take found after a cursor: as ledger::MatchingBatch, from memory.
struct FeedSlice {
    std::vector<FeedItemPtr> items{};  // 0..limit matching events, ascending seq.
    // Every event with seq <= scanned_to that is, or will ever be, committed was examined: a
    // later Take (or read) from scanned_to misses nothing.
    std::int64_t scanned_to = 0;
    // Nothing in the window lies beyond scanned_to: wait for it to grow (WaitForEnd).
    bool caught_up = false;
};

// The newest events of the feed, read from PostgreSQL once for all of a process's
// subscriptions (docs/subscriptions.md#inside-serve). Without it each delivery thread read, checked
// with the durability barrier and serialized every event again: three subscriptions tripled
// that work on the primary, which the write path shares.
//
// One thread follows the feed: woken by the FeedNotifier (a commit of this process, or the
// shared poll), it waits `linger` for more commits to gather, reads every event after the
// window's end (ledger::ReadEventsAfter, the feed's page, up to read_max at a time), waits for the
// synchronous standbys (ledger::AwaitSynchronousStandbys: nothing a failover could take back
// enters the window, docs/api.md#what-a-reader-is-shown), and only then appends them and
// moves the end. The window holds the events in (begin, end], at most events_max of them; the
// oldest leave first. It starts empty at the head of the moment it first reads.
//
// A delivery thread whose cursor lies inside the window takes its batch from memory (Take);
// one behind the window (a subscription catching up, a rewind) reads PostgreSQL itself as
// before; one ahead of it (the window is catching up) waits for the window (WaitForEnd).
// Events are immutable once committed, so a window of them never goes stale; a failed read
// or barrier appends nothing, and the thread connects again and reads from the same end.
//
// A window that no delivery thread asked for (Take, WaitForEnd) within `dormant_after` (2 min)
// goes dormant: it drops its events and its session and reads nothing until the next Take or
// WaitForEnd, then starts again, empty, at the head. So a process whose subscriptions another
// process delivers (it holds none of their leases), or whose subscriptions all wait (disabled,
// backing off), costs the primary nothing.
//
// Thread-safe.
class FeedWindow {
public:
    struct Options {
        std::string database_url{};
        ledger::SessionSettings session{};
        std::size_t events_max = kFeedWindowEventsMaxDefault;
        // Events read per statement. REQUIRES: 0 < read_max <= ledger::kPageSizeMax.
        std::int64_t read_max = 1'000;
        // How long after a wake-up the thread waits before it reads, so that the events of
        // many commits come in one read (as Kafka's linger.ms); the delivery threads' own
        // linger then finds the window grown. 0 turns it off.
        std::chrono::milliseconds linger{10};
        // How long the thread waits for the notifier before it reads anyway.
        std::chrono::milliseconds idle_recheck{1'000};
        // After a failed read or barrier, before connecting again.
        std::chrono::milliseconds retry{1'000};
        // Without a Take or WaitForEnd for this long (a WaitForEnd counts for as long as it
        // waits), the window goes dormant (above). Longer than a delivery thread's longest
        // step while it holds a lease — its idle wait (idle_recheck) or a POST (at most 60 s,
        // kSubscriptionTimeoutMax) — so that only a thread that waits for its lease, its back-off
        // or an admin lets it rest. REQUIRES: > idle_recheck.
        std::chrono::milliseconds dormant_after{120'000};
    };

    FeedWindow(Options options, ledger::FeedNotifier& notifier, Log log);
    ~FeedWindow();  // Stop().
    FeedWindow(const FeedWindow&) = delete;
    FeedWindow& operator=(const FeedWindow&) = delete;

    void Start();
    // Ends the thread; WaitForEnd returns at once from then on. Idempotent.
    void Stop();

    // Up to `limit` events after `after` that `filter` delivers, from memory; nullopt when
    // the window does not hold what follows `after` (after < begin, or after > end, or
    // nothing read yet, or dormant, which this call ends): the caller reads PostgreSQL, or
    // waits for the window (WaitForEnd). REQUIRES: limit > 0.
    [[nodiscard]] std::optional<FeedSlice> Take(std::int64_t after,
                                                const projections::EventFilter& filter,
                                                std::int64_t limit) const;
    // Blocks until the window's end is at least `end`, the deadline passes or the window
    // stops; true in the first case. Ends a dormancy, as Take.
    bool WaitForEnd(std::int64_t end, std::chrono::steady_clock::time_point deadline) const;
    // Blocks until the window is dormant, the deadline passes or the window stops; true in
    // the first case. For tests: it does not count as asking for the window.
    bool WaitDormant(std::chrono::steady_clock::time_point deadline) const;

    // The window's bounds, (begin, end]; {-1, -1} before the first read and while dormant.
    [[nodiscard]] std::pair<std::int64_t, std::int64_t> Bounds() const;

private:
    void Run();
    // One read; returns whether it reached the head.
    bool ReadMore();
    // Waits up to `duration`, ending early on Stop.
    void Pause(std::chrono::milliseconds duration);
    // When nothing asked for the window within dormant_after: drops it and the session, and
    // waits for a Take, a WaitForEnd or Stop.
    void RestWhileUnwanted();
    // A Take or WaitForEnd: keeps the window awake, or wakes it. REQUIRES: mutex_ held.
    void MarkWanted() const;

    const Options options_;
    ledger::FeedNotifier& notifier_;
    const Log log_;
    std::thread thread_{};
    std::unique_ptr<pqxx::connection> connection_{};  // The thread's own.

    mutable std::mutex mutex_;
    mutable std::condition_variable grown_;   // The end moved, the window went dormant, Stop.
    mutable std::condition_variable wanted_;  // A dormant window was asked for, Stop.
    bool stopping_ = false;                   // Guarded by mutex_.
    mutable bool dormant_ = false;            // Guarded by mutex_.
    mutable int waiters_ = 0;                 // In WaitForEnd. Guarded by mutex_.
    // The last Take or WaitForEnd (the start, before any). Guarded by mutex_.
    mutable std::chrono::steady_clock::time_point wanted_at_ = std::chrono::steady_clock::now();
    std::int64_t begin_ = -1;          // Guarded by mutex_.
    std::int64_t end_ = -1;            // Guarded by mutex_.
    std::deque<FeedItemPtr> items_{};  // Guarded by mutex_; ascending seq, all in (begin_, end_].
};

}  // namespace payledger::api
