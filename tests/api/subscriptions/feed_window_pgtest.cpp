// PostgreSQL tests of the subscriptions' shared feed window (api/subscriptions/feed_window.hpp):
// - it starts empty at the head, and every event committed later enters it, each once, in seq
//   order, with the JSON text GET /v1/events shows;
// - a Take from any cursor inside it, with any filter, returns exactly the events that
//   ledger::ReadMatchingBatch returns from PostgreSQL for that cursor and filter, and a cursor
//   outside it (behind its oldest event, ahead of its end) gets nullopt: the caller reads
//   PostgreSQL;
// - it keeps at most events_max events, the oldest leaving first;
// - WaitForEnd returns once a commit told to the notifier has entered the window, and at once
//   after Stop;
// - a window nobody asks for rests (reads nothing) and a Take or WaitForEnd wakes it, empty,
//   at the head.
// And DeliveryBody writes from the window's texts exactly what nlohmann::json would dump.

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "api/http/json_output.hpp"
#include "api/subscriptions/deliverer.hpp"
#include "api/subscriptions/feed_window.hpp"
#include "ledger/read/feed_notifier.hpp"
#include "ledger/read/reads.hpp"
#include "ledger/subscriptions/subscriptions.hpp"
#include "ledger/write/writer.hpp"
#include "projections/validate.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"

namespace payledger::api {
namespace {

using projections::EventType;
using testing::TestDatabase;

constexpr projections::TimeMicros kWindowTime = 1'800'000'000'000'000;
constexpr auto kPatience = std::chrono::seconds{10};

ledger::Delivery WindowOrder(const std::string& out_trade_no, const std::string& account_id) {
    return testing::OrderRegistration(
        out_trade_no, {.account_id = account_id,
                       .receipt = {.received_at = kWindowTime, .body = "order " + out_trade_no}});
}

ledger::Delivery WindowClose(const std::string& out_trade_no) {
    return testing::VerifiedCallback(
        out_trade_no, EventType::kPaymentClosed,
        {.receipt = {.received_at = kWindowTime, .body = "close " + out_trade_no}});
}

std::chrono::steady_clock::time_point Deadline() {
    return std::chrono::steady_clock::now() + kPatience;
}

class FeedWindowPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        connection_ = db_.Connect();
    }

    // Appends the deliveries and tells the notifier, as the committer does after COMMIT.
    std::int64_t Write(const std::vector<ledger::Delivery>& deliveries) {
        std::int64_t last = 0;
        for (const ledger::DeliveryResult& result : ledger::WriteBatch(*connection_, deliveries)) {
            EXPECT_EQ(result.outcome, projections::Outcome::kAppended) << result.message;
            last = std::max(last, result.seq);
        }
        notifier_.Committed(last);
        return last;
    }

    FeedWindow::Options WindowOptions(std::size_t events_max) const {
        return {.database_url = db_.url(), .events_max = events_max, .linger = {}};
    }

    std::vector<std::int64_t> Seqs(const std::vector<FeedItemPtr>& items) {
        std::vector<std::int64_t> seqs;
        for (const FeedItemPtr& item : items) seqs.push_back(item->seq);
        return seqs;
    }

    TestDatabase db_;
    std::unique_ptr<pqxx::connection> connection_;
    ledger::FeedNotifier notifier_{{}, [](std::function<void()> task) { task(); }};
    Log log_ = [](const std::string&, const std::string&) {};
};

TEST_F(FeedWindowPgTest, StartsAtTheHeadAndTakesWhatPostgresWouldReadForEveryCursorAndFilter) {
    for (int i = 0; i < 5; ++i) Write({WindowOrder("W-old-" + std::to_string(i), "shop-a")});
    FeedWindow window{WindowOptions(1'000), notifier_, log_};
    window.Start();
    ASSERT_TRUE(window.WaitForEnd(5, Deadline()));
    EXPECT_EQ(window.Bounds(), std::make_pair(std::int64_t{5}, std::int64_t{5}));
    EXPECT_EQ(window.Take(4, {}, 10), std::nullopt);  // Behind the window: read PostgreSQL.
    EXPECT_EQ(window.Take(6, {}, 10), std::nullopt);  // Ahead of it.

    // 30 more events: orders of two shops, some closed.
    for (int i = 0; i < 15; ++i) {
        const std::string id = "W-" + std::to_string(i);
        std::vector<ledger::Delivery> batch{WindowOrder(id, i % 3 == 0 ? "shop-b" : "shop-a")};
        batch.push_back(WindowClose(id));
        Write(batch);
    }
    ASSERT_TRUE(window.WaitForEnd(35, Deadline()));
    EXPECT_EQ(window.Bounds(), std::make_pair(std::int64_t{5}, std::int64_t{35}));

    const std::vector<projections::EventFilter> filters = {
        {},
        {.event_types = {EventType::kPaymentClosed}},
        {.accounts = {"shop-b"}},
        {.event_types = {EventType::kOrderCreated}, .accounts = {"shop-a"}},
        {.event_types = {EventType::kRefundSucceeded}},
    };
    for (std::size_t f = 0; f < filters.size(); ++f) {
        for (std::int64_t after = 5; after <= 35; ++after) {
            for (const std::int64_t limit : {1, 3, 100}) {
                const std::optional<FeedSlice> slice = window.Take(after, filters[f], limit);
                ASSERT_TRUE(slice.has_value()) << after;
                pqxx::read_transaction tx{*connection_};
                const ledger::MatchingBatch read =
                    ledger::ReadMatchingBatch(tx, after, filters[f], limit);
                std::vector<std::int64_t> expected;
                for (const projections::Event& event : read.events) expected.push_back(event.seq);
                EXPECT_EQ(Seqs(slice->items), expected) << "filter " << f << " after " << after;
                EXPECT_EQ(slice->scanned_to, read.scanned_to)
                    << "filter " << f << " after " << after;
                EXPECT_EQ(slice->caught_up, read.caught_up());
            }
        }
    }
    // Each event's text is the feed's own.
    pqxx::read_transaction tx{*connection_};
    const std::vector<projections::Event> feed = ledger::ReadEventsAfter(tx, 5, 100);
    const std::optional<FeedSlice> all = window.Take(5, {}, 100);
    ASSERT_TRUE(all.has_value());
    ASSERT_EQ(all->items.size(), feed.size());
    for (std::size_t i = 0; i < feed.size(); ++i) {
        EXPECT_EQ(all->items[i]->json, Dump(EventJson(feed[i])));
        EXPECT_EQ(all->items[i]->account_id, feed[i].account_id);
        EXPECT_EQ(all->items[i]->event_type, feed[i].event_type);
    }
    window.Stop();
    EXPECT_FALSE(window.WaitForEnd(36, Deadline()));  // At once after Stop.
}

TEST_F(FeedWindowPgTest, KeepsAtMostEventsMaxTheOldestLeavingFirst) {
    Write({WindowOrder("K-0", "shop-a")});
    FeedWindow window{WindowOptions(4), notifier_, log_};
    window.Start();
    ASSERT_TRUE(window.WaitForEnd(1, Deadline()));
    for (int i = 1; i <= 10; ++i) Write({WindowOrder("K-" + std::to_string(i), "shop-a")});
    ASSERT_TRUE(window.WaitForEnd(11, Deadline()));
    // Events 8..11 are held: the window is (7, 11].
    EXPECT_EQ(window.Bounds(), std::make_pair(std::int64_t{7}, std::int64_t{11}));
    EXPECT_EQ(window.Take(6, {}, 100), std::nullopt);
    const std::optional<FeedSlice> slice = window.Take(7, {}, 100);
    ASSERT_TRUE(slice.has_value());
    EXPECT_EQ(Seqs(slice->items), (std::vector<std::int64_t>{8, 9, 10, 11}));
    EXPECT_TRUE(slice->caught_up);
}

TEST_F(FeedWindowPgTest, AWindowNobodyAsksForRestsAndATakeWakesItAtTheHead) {
    Write({WindowOrder("D-0", "shop-a")});
    FeedWindow::Options options = WindowOptions(1'000);
    // Long enough that the steps below, between one Take or WaitForEnd and the next, never
    // let it rest on a slow machine (a sanitizer build).
    options.dormant_after = std::chrono::milliseconds{2'000};
    options.idle_recheck = std::chrono::milliseconds{50};
    FeedWindow window{options, notifier_, log_};
    window.Start();
    ASSERT_TRUE(window.WaitDormant(Deadline()));
    EXPECT_EQ(window.Bounds(), std::make_pair(std::int64_t{-1}, std::int64_t{-1}));
    // Resting, it reads nothing of what is committed meanwhile.
    Write({WindowOrder("D-1", "shop-a"), WindowOrder("D-2", "shop-a")});
    EXPECT_EQ(window.Bounds(), std::make_pair(std::int64_t{-1}, std::int64_t{-1}));
    // A Take wakes it: nothing from memory yet (the caller reads PostgreSQL), and the window
    // starts again, empty, at the head.
    EXPECT_EQ(window.Take(1, {}, 10), std::nullopt);
    ASSERT_TRUE(window.WaitForEnd(3, Deadline()));
    EXPECT_EQ(window.Bounds(), std::make_pair(std::int64_t{3}, std::int64_t{3}));
    EXPECT_EQ(window.Take(1, {}, 10), std::nullopt);  // Behind it now: PostgreSQL.
    Write({WindowOrder("D-3", "shop-a")});
    ASSERT_TRUE(window.WaitForEnd(4, Deadline()));
    const std::optional<FeedSlice> slice = window.Take(3, {}, 10);
    ASSERT_TRUE(slice.has_value());
    EXPECT_EQ(Seqs(slice->items), (std::vector<std::int64_t>{4}));
    // Unasked again, it rests again; a WaitForEnd wakes it as a Take does.
    ASSERT_TRUE(window.WaitDormant(Deadline()));
    Write({WindowOrder("D-4", "shop-a")});
    ASSERT_TRUE(window.WaitForEnd(5, Deadline()));
    EXPECT_EQ(window.Bounds(), std::make_pair(std::int64_t{5}, std::int64_t{5}));
    window.Stop();
    EXPECT_FALSE(window.WaitDormant(Deadline()));  // At once after Stop.
}

TEST(DeliveryBodyTest, WritesWhatTheJsonLibraryWouldDump) {
    projections::Event first{.seq = 7,
                             .out_trade_no = "O-\"1\"",
                             .event_type = EventType::kPaymentSucceeded,
                             .account_id = "shop-a",
                             .amount = 100,
                             .currency = "CNY",
                             .transaction_id = "T-1",
                             .occurred_at = kWindowTime,
                             .recorded_at = kWindowTime + 1,
                             .receipt_id = 3,
                             .data = R"({"k":"v\u00e9"})"};
    projections::Event second = first;
    second.seq = 9;
    second.event_type = EventType::kPaymentClosed;
    const std::string name = "ship\"ping";
    nlohmann::json items = nlohmann::json::array({EventJson(first), EventJson(second)});
    const std::string expected =
        Dump(nlohmann::json{{"type", "ledger.events"},
                            {"timestamp", projections::FormatRfc3339(kWindowTime)},
                            {"data", {{"subscription", name}, {"events", items}}}});
    EXPECT_EQ(DeliveryBody(name, {MakeFeedItem(first), MakeFeedItem(second)}, kWindowTime),
              expected);
}

}  // namespace
}  // namespace payledger::api
