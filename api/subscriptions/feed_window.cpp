#include "api/subscriptions/feed_window.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <pqxx/nontransaction>
#include <utility>

#include "api/http/json_output.hpp"
#include "ledger/read/durability.hpp"
#include "ledger/read/reads.hpp"
#include "projections/assert.hpp"

namespace payledger::api {

FeedItemPtr MakeFeedItem(const projections::Event& event) {
    return std::make_shared<const FeedItem>(FeedItem{.seq = event.seq,
                                                     .event_type = event.event_type,
                                                     .account_id = event.account_id,
                                                     .json = Dump(EventJson(event))});
}

bool Matches(const projections::EventFilter& filter, const FeedItem& item) {
    return projections::Matches(filter, item.event_type, item.account_id);
}

FeedWindow::FeedWindow(Options options, ledger::FeedNotifier& notifier, Log log)
    : options_(std::move(options)), notifier_(notifier), log_(std::move(log)) {
    PAYLEDGER_ASSERT(options_.read_max > 0 && options_.read_max <= ledger::kPageSizeMax);
    PAYLEDGER_ASSERT(options_.events_max > 0);
    PAYLEDGER_ASSERT(options_.dormant_after > options_.idle_recheck);
}

FeedWindow::~FeedWindow() { Stop(); }

void FeedWindow::Start() {
    PAYLEDGER_ASSERT(!thread_.joinable());
    {
        std::lock_guard lock{mutex_};
        wanted_at_ = std::chrono::steady_clock::now();
    }
    thread_ = std::thread([this] { Run(); });
}

void FeedWindow::Stop() {
    {
        std::lock_guard lock{mutex_};
        stopping_ = true;
    }
    grown_.notify_all();
    wanted_.notify_all();
    if (thread_.joinable()) thread_.join();
}

std::optional<FeedSlice> FeedWindow::Take(std::int64_t after,
                                          const projections::EventFilter& filter,
                                          std::int64_t limit) const {
    PAYLEDGER_ASSERT(limit > 0);
    std::lock_guard lock{mutex_};
    MarkWanted();
    if (end_ < 0 || after < begin_ || after > end_) return std::nullopt;
    FeedSlice slice;
    auto it =
        std::upper_bound(items_.begin(), items_.end(), after,
                         [](std::int64_t seq, const FeedItemPtr& item) { return seq < item->seq; });
    for (; it != items_.end() && std::cmp_less(slice.items.size(), limit); ++it) {
        if (Matches(filter, **it)) slice.items.push_back(*it);
    }
    // A full batch examined exactly up to its last event; a shorter one the whole window.
    slice.scanned_to = std::cmp_equal(slice.items.size(), limit) ? slice.items.back()->seq : end_;
    slice.caught_up = slice.scanned_to >= end_;
    return slice;
}

bool FeedWindow::WaitForEnd(std::int64_t end,
                            std::chrono::steady_clock::time_point deadline) const {
    std::unique_lock lock{mutex_};
    MarkWanted();
    // A waiter keeps the window awake for as long as it waits.
    ++waiters_;
    const bool reached =
        grown_.wait_until(lock, deadline, [&] { return stopping_ || end_ >= end; }) && !stopping_;
    --waiters_;
    MarkWanted();
    return reached;
}

bool FeedWindow::WaitDormant(std::chrono::steady_clock::time_point deadline) const {
    std::unique_lock lock{mutex_};
    return grown_.wait_until(lock, deadline, [&] { return stopping_ || dormant_; }) && !stopping_;
}

void FeedWindow::MarkWanted() const {
    wanted_at_ = std::chrono::steady_clock::now();
    if (dormant_) {
        dormant_ = false;
        wanted_.notify_all();
    }
}

void FeedWindow::RestWhileUnwanted() {
    {
        std::lock_guard lock{mutex_};
        if (stopping_ || waiters_ > 0 ||
            std::chrono::steady_clock::now() - wanted_at_ < options_.dormant_after) {
            return;
        }
        // Dropped events are only copies; the next start reads the head again (ReadMore).
        items_.clear();
        begin_ = end_ = -1;
        dormant_ = true;
    }
    grown_.notify_all();
    connection_.reset();  // Only this thread uses it.
    std::unique_lock lock{mutex_};
    wanted_.wait(lock, [&] { return stopping_ || !dormant_; });
    // Awake for at least dormant_after from now, however long the first read takes.
    wanted_at_ = std::chrono::steady_clock::now();
}

std::pair<std::int64_t, std::int64_t> FeedWindow::Bounds() const {
    std::lock_guard lock{mutex_};
    return {begin_, end_};
}

void FeedWindow::Pause(std::chrono::milliseconds duration) {
    if (duration <= std::chrono::milliseconds::zero()) return;
    std::unique_lock lock{mutex_};
    // A timed wait, not a synchronisation: Stop ends it early.
    grown_.wait_for(lock, duration, [&] { return stopping_; });
}

bool FeedWindow::ReadMore() {
    // The end is always confirmed by the standbys: a new session, even on a new primary after
    // a failover, reads on from it.
    if (connection_ == nullptr || ledger::IdleSessionEnded(*connection_)) {
        connection_ = ledger::Connect(options_.database_url, options_.session);
    }
    const std::int64_t from = [&] {
        std::lock_guard lock{mutex_};
        return end_;
    }();
    if (from < 0) {
        // The first read: the window starts empty at the head. Subscriptions behind it read
        // PostgreSQL until they reach it.
        std::int64_t head = 0;
        {
            pqxx::nontransaction tx{*connection_};
            head = ledger::ReadFeedHead(tx);
        }
        // The window never reads at or below its end again: the head must be one that no
        // failover can take back (and give its seq to another event).
        ledger::AwaitSynchronousStandbys(*connection_);
        std::lock_guard lock{mutex_};
        begin_ = end_ = head;
        grown_.notify_all();
        return false;
    }
    // Every event, no filter: the feed's own page (an Index Scan of the primary key from
    // `from`, a prepared statement). Because every writer holds the writer lock until it
    // commits, an event with a smaller seq than the newest visible is visible too: a page
    // shorter than read_max holds everything committed after `from`, and its last seq is the
    // head. Under bench/subscriptions' load (pg_stat_statements, about 80 events a read) this
    // took 0.5-0.7 ms a read, ledger::ReadMatchingBatch (which a filter needs) 1.2-1.5 ms: its
    // bound on the head left the planner a bitmap scan and a sort.
    std::vector<projections::Event> events;
    {
        pqxx::nontransaction tx{*connection_};
        events = ledger::ReadEventsAfter(tx, from, options_.read_max);
    }
    std::vector<FeedItemPtr> items;
    items.reserve(events.size());
    for (const projections::Event& event : events) items.push_back(MakeFeedItem(event));
    // docs/api.md#what-a-reader-is-shown: only what the synchronous standbys hold.
    if (!items.empty()) ledger::AwaitSynchronousStandbys(*connection_);
    {
        std::lock_guard lock{mutex_};
        PAYLEDGER_ASSERT(end_ == from);  // Only this thread moves it.
        if (!items.empty()) end_ = items.back()->seq;
        for (FeedItemPtr& item : items) items_.push_back(std::move(item));
        while (items_.size() > options_.events_max) {
            begin_ = items_.front()->seq;
            items_.pop_front();
        }
    }
    grown_.notify_all();
    return std::cmp_less(events.size(), options_.read_max);
}

void FeedWindow::Run() {
    const auto stopping = [&] {
        std::lock_guard lock{mutex_};
        return stopping_;
    };
    while (!stopping()) {
        RestWhileUnwanted();
        if (stopping()) break;
        try {
            if (!ReadMore()) continue;  // More to read: at once.
            const std::int64_t end = Bounds().second;
            // Caught up: wait for a commit beyond the end (a hint), then for more to gather.
            if (notifier_.WaitBeyond(end,
                                     ledger::FeedNotifier::Clock::now() + options_.idle_recheck)) {
                Pause(options_.linger);
            }
        } catch (const std::exception& error) {
            connection_.reset();
            log_("warning", Dump(nlohmann::json{{"msg", "subscriptions' feed read failed"},
                                                {"error", error.what()}}));
            Pause(options_.retry);
        }
    }
}

}  // namespace payledger::api
