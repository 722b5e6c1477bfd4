// PostgreSQL tests of the ledger side of subscriptions (ledger/subscriptions/subscriptions.hpp,
// schema/0010) and of the feed notifier's poll (ledger/read/feed_notifier.hpp):
// - the cursor is a compare-and-set: of two concurrent advances from one cursor exactly one
//   wins, a stale one changes nothing, and an admin's rewind makes a deliverer's advance fail;
// - fencing (schema/0012): once another process has taken the lease token, a former holder
//   stores no outcome (advance, failure, disable), and an admin's moves need no token; a lease
//   takes a token only while its own session lives (and so holds the lock);
// - rewind, enable and disable write change rows with the right from/to/why, the table is
//   append-only, and a reader paging the changes by id never skips one that commits late;
// - the lease: a name held by one session cannot be taken by another until the holder releases
//   it, closes its connection, or its backend is terminated;
// - ReadMatchingBatch returns the matching events consecutively, and its scanned_to never
//   passes a seq that a writer holding the writer lock has yet to commit;
// - ReadLag, exact and bounded; the service role's grants; a commit by another connection
//   wakes a notifier's waiter through the poll within a second.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ledger/pg/conninfo.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/pg/migrate.hpp"
#include "ledger/read/feed_notifier.hpp"
#include "ledger/read/reads.hpp"
#include "ledger/subscriptions/subscriptions.hpp"
#include "ledger/write/writer.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger {
namespace {

using projections::EventFilter;

using projections::EventType;
using testing::TestDatabase;

constexpr projections::TimeMicros kSubTime = 1'800'000'000'000'000;

Delivery SubOrder(const std::string& out_trade_no, const std::string& account_id) {
    return testing::OrderRegistration(
        out_trade_no, {.account_id = account_id,
                       .receipt = {.received_at = kSubTime, .body = "order " + out_trade_no}});
}

Delivery SubClose(const std::string& out_trade_no) {
    return testing::VerifiedCallback(
        out_trade_no, EventType::kPaymentClosed,
        {.receipt = {.received_at = kSubTime, .body = "close " + out_trade_no}});
}

std::vector<std::int64_t> SeqsOf(const std::vector<projections::Event>& events) {
    std::vector<std::int64_t> seqs;
    for (const projections::Event& event : events) seqs.push_back(event.seq);
    return seqs;
}

std::vector<std::int64_t> SubIds(const TestDatabase& db, const std::string& sql) {
    auto connection = db.Connect();
    pqxx::read_transaction tx{*connection};
    std::vector<std::int64_t> ids;
    for (const pqxx::row& row : tx.exec(sql)) ids.push_back(row[0].as<std::int64_t>());
    return ids;
}

// Sessions of this test database waiting for a lock of any kind, counted by PostgreSQL.
int SubLockWaiters(const TestDatabase& db) {
    return std::stoi(
        db.Scalar("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                  "WHERE a.datname = current_database() AND NOT l.granted"));
}

class SubscriptionsPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        connection_ = db_.Connect();
    }

    void Write(const std::vector<Delivery>& deliveries) {
        for (const DeliveryResult& result : WriteBatch(*connection_, deliveries)) {
            ASSERT_EQ(result.outcome, projections::Outcome::kAppended) << result.message;
        }
    }

    std::optional<SubscriptionState> Read(const std::string& name) {
        pqxx::read_transaction tx{*connection_};
        return ReadSubscription(tx, name);
    }

    std::vector<SubscriptionChange> Changes(std::int64_t after = 0) {
        pqxx::read_transaction tx{*connection_};
        return ReadChanges(tx, after, kPageSizeMax);
    }

    TestDatabase db_;
    std::unique_ptr<pqxx::connection> connection_;
};

TEST_F(SubscriptionsPgTest, EnsureStartsAtTheBeginningOrTheHeadAndKeepsAnExistingCursor) {
    Write({SubOrder("E-1", "a"), SubOrder("E-2", "a"), SubOrder("E-3", "a")});
    const SubscriptionState beginning =
        EnsureSubscription(*connection_, "from-start", SubscriptionStart::kBeginning);
    EXPECT_EQ(beginning.name, "from-start");
    EXPECT_EQ(beginning.after, 0);
    EXPECT_FALSE(beginning.disabled);
    EXPECT_EQ(beginning.consecutive_failures, 0);
    EXPECT_EQ(beginning.last_error, std::nullopt);
    EXPECT_EQ(beginning.next_attempt_at, std::nullopt);
    const SubscriptionState now =
        EnsureSubscription(*connection_, "from-now", SubscriptionStart::kNow);
    EXPECT_EQ(now.after, 3);
    Write({SubOrder("E-4", "a")});
    EXPECT_EQ(EnsureSubscription(*connection_, "from-now", SubscriptionStart::kNow), now);
    EXPECT_EQ(EnsureSubscription(*connection_, "from-start", SubscriptionStart::kNow), beginning);
    EXPECT_EQ(Read("from-now"), now);
    EXPECT_EQ(Read("nobody"), std::nullopt);
    EXPECT_EQ(Read("bad name"), std::nullopt);  // Not a key: no such row can exist.
    pqxx::read_transaction tx{*connection_};
    const std::vector<SubscriptionState> both =
        ReadSubscriptions(tx, {"from-start", "nobody", "from-now", "x y"});
    ASSERT_EQ(both.size(), 2U);
    EXPECT_EQ(both[0], now);  // Name order.
    EXPECT_EQ(both[1], beginning);
}

TEST_F(SubscriptionsPgTest, OfTwoConcurrentAdvancesFromOneCursorExactlyOneWins) {
    for (int round = 0; round < 10; ++round) {
        const std::string name = "cas-" + std::to_string(round);
        (void)EnsureSubscription(*connection_, name, SubscriptionStart::kBeginning);
        // Both advances queue behind a row lock held here, so they run at the same moment.
        auto holder = db_.Connect();
        pqxx::work hold{*holder};
        hold.exec_params("SELECT 1 FROM subscriptions WHERE name = $1 FOR UPDATE", name);
        auto first = std::async(std::launch::async, [&] {
            auto c = db_.Connect();
            return AdvanceCursor(*c, name, kLeaseTokenNone, 0, 5, kSubTime);
        });
        auto second = std::async(std::launch::async, [&] {
            auto c = db_.Connect();
            return AdvanceCursor(*c, name, kLeaseTokenNone, 0, 7, kSubTime);
        });
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
        while (SubLockWaiters(db_) < 2 && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds{1});  // Poll pace.
        }
        ASSERT_EQ(SubLockWaiters(db_), 2);
        hold.commit();
        const bool first_won = first.get();
        const bool second_won = second.get();
        ASSERT_NE(first_won, second_won) << "round " << round;
        EXPECT_EQ(Read(name)->after, first_won ? 5 : 7);
        // A stale deliverer, still at 0, changes nothing, forward or back.
        EXPECT_FALSE(AdvanceCursor(*connection_, name, kLeaseTokenNone, 0, 9, kSubTime));
        EXPECT_FALSE(AdvanceCursor(*connection_, name, kLeaseTokenNone, 1, 3, kSubTime));
        EXPECT_EQ(Read(name)->after, first_won ? 5 : 7);
    }
}

TEST_F(SubscriptionsPgTest, ARewindMakesTheDeliverersStaleAdvanceFail) {
    (void)EnsureSubscription(*connection_, "hooks", SubscriptionStart::kBeginning);
    ASSERT_TRUE(AdvanceCursor(*connection_, "hooks", kLeaseTokenNone, 0, 30, kSubTime));
    // The deliverer holds the batch (30, 60]; the admin rewinds meanwhile.
    const std::optional<SubscriptionState> rewound = Rewind(*connection_, "hooks", 10);
    ASSERT_TRUE(rewound);
    EXPECT_EQ(rewound->after, 10);
    EXPECT_FALSE(AdvanceCursor(*connection_, "hooks", kLeaseTokenNone, 30, 60, kSubTime));
    EXPECT_EQ(Read("hooks")->after, 10);
    // From what is stored, it goes on.
    EXPECT_TRUE(AdvanceCursor(*connection_, "hooks", kLeaseTokenNone, 10, 20, kSubTime));
    // Forward too (skipping what a receiver can never take).
    EXPECT_EQ(Rewind(*connection_, "hooks", 45)->after, 45);
    EXPECT_FALSE(AdvanceCursor(*connection_, "hooks", kLeaseTokenNone, 20, 25, kSubTime));
    const std::vector<SubscriptionChange> changes = Changes();
    ASSERT_EQ(changes.size(), 2U);
    EXPECT_EQ(changes[0].name, "hooks");
    EXPECT_EQ(changes[0].from, 30);
    EXPECT_EQ(changes[0].to, 10);
    EXPECT_EQ(changes[0].why, ChangeWhy::kRewind);
    EXPECT_EQ(changes[1].from, 20);
    EXPECT_EQ(changes[1].to, 45);
    EXPECT_GT(changes[1].id, changes[0].id);
    EXPECT_EQ(Rewind(*connection_, "nobody", 1), std::nullopt);
    EXPECT_EQ(Changes().size(), 2U);
}

TEST_F(SubscriptionsPgTest, OnlyTheLastTakenLeaseTokenStoresAnOutcome) {
    (void)EnsureSubscription(*connection_, "fenced", SubscriptionStart::kBeginning);
    (void)EnsureSubscription(*connection_, "other", SubscriptionStart::kBeginning);
    // Process A takes the lease, sends (0, 5]; its session dies, B takes the lease over.
    const std::int64_t a = TakeLeaseToken(*connection_, "fenced");
    EXPECT_EQ(a, kLeaseTokenNone + 1);
    auto other_process = db_.Connect();
    const std::int64_t b = TakeLeaseToken(*other_process, "fenced");
    EXPECT_EQ(b, a + 1);
    // Tokens are per subscription.
    EXPECT_EQ(TakeLeaseToken(*connection_, "other"), kLeaseTokenNone + 1);
    // B's failure is stored; whatever A's answer was, A stores none of it, at the same cursor.
    ASSERT_TRUE(
        RecordFailure(*other_process, "fenced", b, 0, "status 503", kSubTime, kSubTime + 9));
    EXPECT_FALSE(
        RecordFailure(*connection_, "fenced", a, 0, "timeout", kSubTime + 1, kSubTime + 2));
    EXPECT_FALSE(AdvanceCursor(*connection_, "fenced", a, 0, 5, kSubTime + 1));
    EXPECT_FALSE(DisableAfterGone(*connection_, "fenced", a, 0, kSubTime + 1));
    std::optional<SubscriptionState> state = Read("fenced");
    ASSERT_TRUE(state);
    EXPECT_EQ(state->after, 0);
    EXPECT_FALSE(state->disabled);
    EXPECT_EQ(state->consecutive_failures, 1);
    EXPECT_EQ(state->last_error, "status 503");
    EXPECT_EQ(state->next_attempt_at, kSubTime + 9);
    EXPECT_TRUE(Changes().empty());  // A's refused disable recorded nothing.
    // B, the holder, goes on.
    ASSERT_TRUE(AdvanceCursor(*other_process, "fenced", b, 0, 5, kSubTime + 10));
    ASSERT_TRUE(DisableAfterGone(*other_process, "fenced", b, 5, kSubTime + 11));
    EXPECT_EQ(Read("fenced")->after, 5);
    EXPECT_EQ(Changes().size(), 1U);
    // An admin's moves need no token and leave it as it is.
    EXPECT_EQ(Enable(*connection_, "fenced")->after, 5);
    EXPECT_EQ(Rewind(*connection_, "fenced", 2)->after, 2);
    EXPECT_TRUE(AdvanceCursor(*other_process, "fenced", b, 2, 5, kSubTime + 12));
    EXPECT_EQ(db_.Scalar("SELECT lease_token FROM subscriptions WHERE name = 'fenced'"),
              std::to_string(b));
}

TEST_F(SubscriptionsPgTest, AnAdvanceIsCommittedAsynchronouslyAndLeavesTheSessionSynchronous) {
    (void)EnsureSubscription(*connection_, "async", SubscriptionStart::kBeginning);
    const auto setting = [&] {
        pqxx::nontransaction tx{*connection_};
        return tx.exec("SELECT current_setting('synchronous_commit')")[0][0].as<std::string>();
    };
    ASSERT_EQ(setting(), "on");
    ASSERT_TRUE(AdvanceCursor(*connection_, "async", kLeaseTokenNone, 0, 3, kSubTime));
    EXPECT_FALSE(AdvanceCursor(*connection_, "async", kLeaseTokenNone, 0, 5, kSubTime));
    // The durability barrier on this session (ledger/read/durability.hpp) waits for the standbys
    // only while synchronous_commit is on: the advance's own setting must not outlive it.
    EXPECT_EQ(setting(), "on");
    // Committed: another session sees it.
    EXPECT_EQ(Read("async")->after, 3);
    // A refused advance (a non-existent subscription changes nothing; a bad value is refused
    // by the server) leaves the session usable, outside any transaction block.
    EXPECT_FALSE(AdvanceCursor(*connection_, "nobody", kLeaseTokenNone, 0, 1, kSubTime));
    EXPECT_THROW((void)AdvanceCursor(*connection_, std::string("bad\0name", 8), kLeaseTokenNone, 3,
                                     4, kSubTime),
                 pqxx::sql_error);
    EXPECT_EQ(setting(), "on");
    EXPECT_TRUE(AdvanceCursor(*connection_, "async", kLeaseTokenNone, 3, 4, kSubTime));
}

TEST_F(SubscriptionsPgTest, FailuresCountOnlyAtTheExpectedCursorAndAnAdvanceClearsThem) {
    (void)EnsureSubscription(*connection_, "flaky", SubscriptionStart::kBeginning);
    const projections::TimeMicros attempt = kSubTime + 123'456;  // Microseconds kept exactly.
    ASSERT_TRUE(RecordFailure(*connection_, "flaky", kLeaseTokenNone, 0, "status 500", attempt,
                              attempt + 1'000'001));
    ASSERT_TRUE(RecordFailure(*connection_, "flaky", kLeaseTokenNone, 0,
                              std::string(5000, 'x') + "\xff", attempt + 1, attempt + 2'000'000));
    EXPECT_FALSE(
        RecordFailure(*connection_, "flaky", kLeaseTokenNone, 7, "stale", attempt, attempt));
    std::optional<SubscriptionState> state = Read("flaky");
    ASSERT_TRUE(state);
    EXPECT_EQ(state->consecutive_failures, 2);
    ASSERT_TRUE(state->last_error);
    EXPECT_EQ(state->last_error->size(), kSubscriptionErrorBytesMax);
    EXPECT_EQ(state->last_attempt_at, attempt + 1);
    EXPECT_EQ(state->next_attempt_at, attempt + 2'000'000);
    ASSERT_TRUE(AdvanceCursor(*connection_, "flaky", kLeaseTokenNone, 0, 4, attempt + 3));
    state = Read("flaky");
    EXPECT_EQ(state->after, 4);
    EXPECT_EQ(state->consecutive_failures, 0);
    EXPECT_EQ(state->last_error, std::nullopt);
    EXPECT_EQ(state->last_attempt_at, attempt + 3);
    EXPECT_EQ(state->next_attempt_at, std::nullopt);
}

TEST_F(SubscriptionsPgTest, DisableAndEnableAreRecordedWithTheCursor) {
    (void)EnsureSubscription(*connection_, "gone", SubscriptionStart::kBeginning);
    ASSERT_TRUE(AdvanceCursor(*connection_, "gone", kLeaseTokenNone, 0, 12, kSubTime));
    EXPECT_FALSE(
        DisableAfterGone(*connection_, "gone", kLeaseTokenNone, 11, kSubTime));  // A stale cursor.
    EXPECT_TRUE(Changes().empty());
    ASSERT_TRUE(DisableAfterGone(*connection_, "gone", kLeaseTokenNone, 12, kSubTime + 5));
    std::optional<SubscriptionState> state = Read("gone");
    EXPECT_TRUE(state->disabled);
    EXPECT_EQ(state->after, 12);
    EXPECT_EQ(state->last_attempt_at, kSubTime + 5);
    EXPECT_FALSE(
        DisableAfterGone(*connection_, "gone", kLeaseTokenNone, 12, kSubTime));  // Already.
    // Nothing delivers while disabled.
    EXPECT_FALSE(AdvanceCursor(*connection_, "gone", kLeaseTokenNone, 12, 13, kSubTime));
    EXPECT_FALSE(RecordFailure(*connection_, "gone", kLeaseTokenNone, 12, "x", kSubTime, kSubTime));
    // A rewind does not enable.
    EXPECT_TRUE(Rewind(*connection_, "gone", 8)->disabled);
    state = Enable(*connection_, "gone");
    ASSERT_TRUE(state);
    EXPECT_FALSE(state->disabled);
    EXPECT_EQ(state->consecutive_failures, 0);
    EXPECT_EQ(state->after, 8);
    EXPECT_EQ(Enable(*connection_, "gone"), state);  // Enabled already: nothing recorded.
    EXPECT_EQ(Enable(*connection_, "nobody"), std::nullopt);
    EXPECT_TRUE(AdvanceCursor(*connection_, "gone", kLeaseTokenNone, 8, 13, kSubTime));

    const std::vector<SubscriptionChange> changes = Changes();
    ASSERT_EQ(changes.size(), 3U);
    EXPECT_EQ(changes[0].why, ChangeWhy::kDisabledGone);
    EXPECT_EQ(changes[0].from, 12);
    EXPECT_EQ(changes[0].to, 12);
    EXPECT_EQ(changes[1].why, ChangeWhy::kRewind);
    EXPECT_EQ(changes[1].from, 12);
    EXPECT_EQ(changes[1].to, 8);
    EXPECT_EQ(changes[2].why, ChangeWhy::kEnabled);
    EXPECT_EQ(changes[2].from, 8);
    EXPECT_EQ(changes[2].to, 8);
    EXPECT_EQ(db_.Scalar("SELECT string_agg(why, ',' ORDER BY id) FROM subscription_changes"),
              "disabled: 410,rewind,enabled");
    // Paging: after and before.
    EXPECT_EQ(Changes(changes[0].id).size(), 2U);
    pqxx::read_transaction tx{*connection_};
    const std::vector<SubscriptionChange> below = ReadChangesBefore(tx, changes[2].id, 1);
    ASSERT_EQ(below.size(), 1U);
    EXPECT_EQ(below[0], changes[1]);
}

TEST_F(SubscriptionsPgTest, TheChangesTableRefusesUpdateDeleteAndTruncate) {
    (void)EnsureSubscription(*connection_, "audited", SubscriptionStart::kBeginning);
    ASSERT_TRUE(Rewind(*connection_, "audited", 3));
    for (const char* sql : {"UPDATE subscription_changes SET \"to\" = 0",
                            "DELETE FROM subscription_changes", "TRUNCATE subscription_changes"}) {
        pqxx::work tx{*connection_};
        EXPECT_THROW(tx.exec(sql), pqxx::insufficient_privilege) << sql;
    }
    EXPECT_EQ(Changes().size(), 1U);
}

TEST_F(SubscriptionsPgTest, AChangeThatCommitsLateIsNeverSkippedByAReaderPagingById) {
    (void)EnsureSubscription(*connection_, "paged", SubscriptionStart::kBeginning);
    (void)EnsureSubscription(*connection_, "other", SubscriptionStart::kBeginning);
    // An inserter that took the changes lock and its id, and has not committed yet (of
    // another subscription, so that no row lock orders the two).
    auto slow = db_.Connect();
    pqxx::work held{*slow};
    held.exec_params("SELECT pg_advisory_xact_lock($1)", kSubscriptionChangesLockKey);
    held.exec(
        "INSERT INTO subscription_changes (name, \"from\", \"to\", why) "
        "VALUES ('other', 0, 0, 'enabled')");
    // An admin's rewind meanwhile. It must wait for the held one to commit: had it taken the
    // next id and committed first, a reader would page past the held id.
    auto rewind = std::async(std::launch::async, [&] {
        auto c = db_.Connect();
        return Rewind(*c, "paged", 5);
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (SubLockWaiters(db_) == 0 &&
           rewind.wait_for(std::chrono::milliseconds{1}) != std::future_status::ready &&
           std::chrono::steady_clock::now() < deadline) {
    }
    std::vector<std::int64_t> seen;
    std::int64_t cursor = 0;
    const auto page = [&] {
        for (const SubscriptionChange& change : Changes(cursor)) {
            seen.push_back(change.id);
            cursor = change.id;
        }
    };
    page();
    held.commit();
    ASSERT_TRUE(rewind.get());
    page();
    EXPECT_EQ(seen, SubIds(db_, "SELECT id FROM subscription_changes ORDER BY id"));
    EXPECT_EQ(seen.size(), 2U);
}

TEST_F(SubscriptionsPgTest, ConcurrentChangesAreEachSeenOnceByAPagingReader) {
    constexpr int kAdmins = 4;
    constexpr int kMovesEach = 40;
    for (int i = 0; i < kAdmins; ++i) {
        (void)EnsureSubscription(*connection_, "s" + std::to_string(i),
                                 SubscriptionStart::kBeginning);
    }
    std::atomic<int> done{0};
    std::vector<std::thread> admins;
    for (int i = 0; i < kAdmins; ++i) {
        admins.emplace_back([&, i] {
            auto c = db_.Connect();
            const std::string name = "s" + std::to_string(i);
            for (int move = 1; move <= kMovesEach; ++move) {
                if (move % 3 == 0) {
                    (void)DisableAfterGone(*c, name, kLeaseTokenNone, Rewind(*c, name, move)->after,
                                           kSubTime);
                    (void)Enable(*c, name);
                } else {
                    (void)Rewind(*c, name, move);
                }
            }
            done.fetch_add(1);
        });
    }
    std::vector<std::int64_t> seen;
    std::int64_t cursor = 0;
    auto reader = db_.Connect();
    const auto page = [&] {
        pqxx::read_transaction tx{*reader};
        for (const SubscriptionChange& change : ReadChanges(tx, cursor, 7)) {
            seen.push_back(change.id);
            cursor = change.id;
        }
    };
    while (done.load() < kAdmins) page();
    for (std::thread& admin : admins) admin.join();
    for (;;) {  // Whatever committed after the last page.
        const std::size_t before = seen.size();
        page();
        if (seen.size() == before) break;
    }
    const std::vector<std::int64_t> all =
        SubIds(db_, "SELECT id FROM subscription_changes ORDER BY id");
    EXPECT_EQ(all.size(), static_cast<std::size_t>(kAdmins * (kMovesEach + 2 * (kMovesEach / 3))));
    EXPECT_EQ(seen, all);
}

TEST_F(SubscriptionsPgTest, MatchingBatchesAreConsecutiveAmongTheMatchingEvents) {
    // 30 orders on two accounts, every third one closed: both types, both accounts, mixed.
    std::vector<Delivery> deliveries;
    for (int i = 0; i < 30; ++i) {
        deliveries.push_back(SubOrder("M-" + std::to_string(i), i % 2 == 0 ? "shop-a" : "shop-b"));
    }
    Write(deliveries);
    deliveries.clear();
    for (int i = 0; i < 30; i += 3) deliveries.push_back(SubClose("M-" + std::to_string(i)));
    Write(deliveries);

    struct Case {
        EventFilter filter;
        std::string where;
    };
    const std::vector<Case> cases = {
        {{}, "true"},
        {{.event_types = {EventType::kPaymentClosed}}, "event_type = 'PAYMENT_CLOSED'"},
        {{.accounts = {"shop-b"}}, "account_id = 'shop-b'"},
        {{.event_types = {EventType::kOrderCreated}, .accounts = {"shop-a", "NULL"}},
         "event_type = 'ORDER_CREATED' AND account_id = 'shop-a'"},
        {{.event_types = {EventType::kRefundSucceeded}}, "false"},
    };
    std::vector<projections::Event> every;
    {
        pqxx::read_transaction tx{*connection_};
        every = ReadEventsAfter(tx, 0, 100);
    }
    ASSERT_EQ(every.size(), 40U);
    for (const Case& c : cases) {
        const std::vector<std::int64_t> expected =
            SubIds(db_, "SELECT seq FROM ledger_events WHERE " + c.where + " ORDER BY seq");
        // The SQL's twin in memory (projections/event_filter.hpp) picks the same events.
        std::vector<std::int64_t> matched;
        for (const projections::Event& event : every) {
            if (projections::Matches(c.filter, event.event_type, event.account_id)) {
                matched.push_back(event.seq);
            }
        }
        EXPECT_EQ(matched, expected) << c.where;
        std::vector<std::int64_t> seen;
        std::int64_t after = 0;
        int reads = 0;
        for (;;) {
            pqxx::read_transaction tx{*connection_};
            const MatchingBatch batch = ReadMatchingBatch(tx, after, c.filter, 3);
            ++reads;
            ASSERT_EQ(batch.head, 40);
            ASSERT_LE(batch.events.size(), 3U);
            ASSERT_GE(batch.scanned_to, after);
            if (batch.events.size() == 3) {
                EXPECT_EQ(batch.scanned_to, batch.events.back().seq);
            }
            for (const projections::Event& event : batch.events) {
                ASSERT_GT(event.seq, after);
                ASSERT_LE(event.seq, batch.scanned_to);
                seen.push_back(event.seq);
            }
            after = batch.scanned_to;
            if (batch.caught_up()) break;
            ASSERT_LT(reads, 100);
        }
        EXPECT_EQ(seen, expected) << c.where;
        EXPECT_EQ(after, 40) << c.where;
    }
    // The rows are the feed's own.
    pqxx::read_transaction tx{*connection_};
    const MatchingBatch all = ReadMatchingBatch(tx, 5, {}, 10);
    const std::vector<projections::Event> feed = ReadEventsAfter(tx, 5, 10);
    ASSERT_EQ(all.events.size(), feed.size());
    for (std::size_t i = 0; i < feed.size(); ++i) {
        EXPECT_EQ(all.events[i].seq, feed[i].seq);
        EXPECT_EQ(all.events[i].out_trade_no, feed[i].out_trade_no);
        EXPECT_EQ(all.events[i].event_type, feed[i].event_type);
        EXPECT_EQ(all.events[i].account_id, feed[i].account_id);
        EXPECT_EQ(all.events[i].amount, feed[i].amount);
        EXPECT_EQ(all.events[i].recorded_at, feed[i].recorded_at);
        EXPECT_EQ(all.events[i].receipt_id, feed[i].receipt_id);
        EXPECT_EQ(all.events[i].data, feed[i].data);
    }
}

TEST_F(SubscriptionsPgTest, AScanStopsAtItsBoundAndGoesOnFromThere) {
    std::vector<Delivery> deliveries;
    for (int i = 0; i < 12; ++i) deliveries.push_back(SubOrder("B-" + std::to_string(i), "a"));
    Write(deliveries);
    Write({SubClose("B-11")});  // seq 13, the only match.
    const EventFilter closes{.event_types = {EventType::kPaymentClosed}};
    pqxx::read_transaction tx{*connection_};
    MatchingBatch batch = ReadMatchingBatch(tx, 0, closes, 10, 5);
    EXPECT_TRUE(batch.events.empty());
    EXPECT_EQ(batch.scanned_to, 5);
    EXPECT_FALSE(batch.caught_up());
    batch = ReadMatchingBatch(tx, 5, closes, 10, 5);
    EXPECT_EQ(batch.scanned_to, 10);
    batch = ReadMatchingBatch(tx, 10, closes, 10, 5);
    EXPECT_EQ(SeqsOf(batch.events), (std::vector<std::int64_t>{13}));
    EXPECT_EQ(batch.scanned_to, 13);
    EXPECT_TRUE(batch.caught_up());
    // A cursor beyond the head (an admin's forward rewind) stays where it is.
    batch = ReadMatchingBatch(tx, 50, {}, 10);
    EXPECT_TRUE(batch.events.empty());
    EXPECT_EQ(batch.scanned_to, 50);
    EXPECT_EQ(batch.head, 13);
}

TEST_F(SubscriptionsPgTest, ScannedToNeverPassesASeqAWriterHasYetToCommit) {
    Write({SubOrder("HELD", "a"), SubOrder("W-2", "a"), SubOrder("W-3", "a")});
    // The writer's transaction takes the writer lock and seq 4 for the close of HELD, then
    // waits for HELD's order row, locked here: seq 4 is taken and not committed.
    auto holder = db_.Connect();
    pqxx::work hold{*holder};
    hold.exec("SELECT 1 FROM orders WHERE out_trade_no = 'HELD' FOR UPDATE");
    auto writer = std::async(std::launch::async, [&] {
        auto c = db_.Connect();
        return WriteBatch(*c, std::vector<Delivery>{SubClose("HELD")});
    });
    testing::AwaitLockWaiters(db_, testing::kRowWaitersSql);
    ASSERT_EQ(db_.Scalar("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                         "WHERE a.datname = current_database() AND l.locktype = 'advisory' "
                         "AND l.granted AND l.objid = " +
                         std::to_string(kWriterLockKey & 0xffffffff)),
              "1");  // The writer holds the writer lock while it waits.
    const EventFilter closes{.event_types = {EventType::kPaymentClosed}};
    std::int64_t after = 0;
    {
        pqxx::read_transaction tx{*connection_};
        const MatchingBatch batch = ReadMatchingBatch(tx, 0, closes, 10);
        EXPECT_TRUE(batch.events.empty());
        EXPECT_EQ(batch.head, 3);
        EXPECT_EQ(batch.scanned_to, 3);
        after = batch.scanned_to;
        const MatchingBatch all = ReadMatchingBatch(tx, 0, {}, 10);
        EXPECT_EQ(SeqsOf(all.events), (std::vector<std::int64_t>{1, 2, 3}));
        EXPECT_EQ(all.scanned_to, 3);
    }
    hold.commit();
    const std::vector<DeliveryResult> written = writer.get();
    ASSERT_EQ(written.size(), 1U);
    ASSERT_EQ(written[0].outcome, projections::Outcome::kAppended);
    ASSERT_EQ(written[0].seq, 4);
    pqxx::read_transaction tx{*connection_};
    const MatchingBatch batch = ReadMatchingBatch(tx, after, closes, 10);
    EXPECT_EQ(SeqsOf(batch.events), (std::vector<std::int64_t>{4}));
}

TEST_F(SubscriptionsPgTest, LagCountsTheMatchingEventsAfterTheCursor) {
    std::vector<Delivery> deliveries;
    for (int i = 0; i < 10; ++i) {
        deliveries.push_back(SubOrder("L-" + std::to_string(i), i < 5 ? "shop-a" : "shop-b"));
    }
    Write(deliveries);  // seq 1-5 shop-a, 6-10 shop-b.
    const projections::TimeMicros recorded = std::stoll(
        db_.Scalar("SELECT (extract(epoch FROM recorded_at) * 1000000)::bigint FROM ledger_events "
                   "WHERE seq = 7"));
    const projections::TimeMicros now = recorded + 2'500'000;
    const EventFilter shop_b{.accounts = {"shop-b"}};
    pqxx::read_transaction tx{*connection_};
    SubscriptionLag lag = ReadLag(tx, 6, shop_b, now);
    EXPECT_TRUE(lag.exact);
    EXPECT_EQ(lag.head, 10);
    EXPECT_EQ(lag.lag_events, 4);
    EXPECT_DOUBLE_EQ(lag.lag_seconds, 2.5);  // One batch: one recorded_at.
    lag = ReadLag(tx, 10, shop_b, now);
    EXPECT_EQ(lag.head, 10);
    EXPECT_EQ(lag.lag_events, 0);
    EXPECT_EQ(lag.lag_seconds, 0);
    lag = ReadLag(tx, 0, {.event_types = {EventType::kRefundSucceeded}}, now);
    EXPECT_EQ(lag.head, 0);  // Nothing matches: the cursor.
    EXPECT_EQ(lag.lag_events, 0);
    EXPECT_EQ(lag.lag_seconds, 0);
    // Exactly as many events as examined: still exact.
    lag = ReadLag(tx, 6, shop_b, now, 4);
    EXPECT_TRUE(lag.exact);
    EXPECT_EQ(lag.lag_events, 4);
    // Bounded: 3 of the 10 from each end.
    lag = ReadLag(tx, 0, shop_b, now, 3);
    EXPECT_FALSE(lag.exact);
    EXPECT_EQ(lag.lag_events, 0);  // None of seq 1-3 matches.
    EXPECT_EQ(lag.head, 10);       // Found from the newest end.
    EXPECT_GT(lag.lag_seconds, 0);
    lag = ReadLag(tx, 0, {.accounts = {"shop-a"}}, now, 3);
    EXPECT_FALSE(lag.exact);
    EXPECT_EQ(lag.lag_events, 3);  // At least.
    EXPECT_EQ(lag.head, 3);        // At most the true head (5).
}

TEST_F(SubscriptionsPgTest, ALeaseExcludesOtherSessionsUntilReleasedClosedOrTerminated) {
    SubscriptionLease first{db_.url(), {.application_name = db_.name() + "_lease1"}};
    auto second = std::make_unique<SubscriptionLease>(
        db_.url(), SessionSettings{.application_name = db_.name() + "_lease2"});
    EXPECT_TRUE(first.TryAcquire("fulfilment"));
    EXPECT_TRUE(first.TryAcquire("fulfilment"));  // Held already.
    EXPECT_FALSE(second->TryAcquire("fulfilment"));
    EXPECT_TRUE(second->TryAcquire("rebates"));
    EXPECT_FALSE(first.TryAcquire("rebates"));
    EXPECT_TRUE(first.Holds("fulfilment"));
    EXPECT_FALSE(first.Holds("rebates"));
    EXPECT_EQ(first.Held(), std::vector<std::string>{"fulfilment"});
    // Released: the other takes it.
    first.Release("fulfilment");
    EXPECT_FALSE(first.Holds("fulfilment"));
    EXPECT_TRUE(second->TryAcquire("fulfilment"));
    EXPECT_FALSE(first.TryAcquire("fulfilment"));
    // The holder's connection closed (a process that exits): the server frees its locks.
    second.reset();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    while (!first.TryAcquire("fulfilment") && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds{5});  // Poll pace.
    }
    EXPECT_TRUE(first.Holds("fulfilment"));
    EXPECT_TRUE(first.TryAcquire("rebates"));
    EXPECT_TRUE(first.Alive());

    // The holder's backend terminated (a failover, an admin): its lease is dead, the other
    // takes over.
    SubscriptionLease third{db_.url(), {.application_name = db_.name() + "_lease3"}};
    EXPECT_FALSE(third.TryAcquire("fulfilment"));
    ASSERT_EQ(db_.Scalar("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                         "WHERE application_name = '" +
                         db_.name() + "_lease1'"),
              "1");
    const auto later = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    while (!third.TryAcquire("fulfilment") && std::chrono::steady_clock::now() < later) {
        std::this_thread::sleep_for(std::chrono::milliseconds{5});  // Poll pace.
    }
    EXPECT_TRUE(third.Holds("fulfilment"));
    EXPECT_FALSE(first.Alive());
    EXPECT_FALSE(first.Holds("fulfilment"));
    EXPECT_TRUE(first.Held().empty());
    EXPECT_FALSE(first.TryAcquire("other"));  // Dead for good: make a new lease.
    EXPECT_TRUE(third.Alive());
}

TEST_F(SubscriptionsPgTest, ALeaseTakesATokenOnlyWhileItsSessionHoldsTheLock) {
    (void)EnsureSubscription(*connection_, "tokens", SubscriptionStart::kBeginning);
    SubscriptionLease first{db_.url(), {.application_name = db_.name() + "_token1"}};
    EXPECT_EQ(first.TakeToken("tokens"), std::nullopt);  // Not held: no token.
    ASSERT_TRUE(first.TryAcquire("tokens"));
    EXPECT_EQ(first.TakeToken("tokens"), kLeaseTokenNone + 1);
    // Its session ends (a partition, a killed backend); another process takes the lock over.
    ASSERT_EQ(db_.Scalar("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                         "WHERE application_name = '" +
                         db_.name() + "_token1'"),
              "1");
    SubscriptionLease second{db_.url(), {.application_name = db_.name() + "_token2"}};
    const auto later = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    while (!second.TryAcquire("tokens") && std::chrono::steady_clock::now() < later) {
        std::this_thread::sleep_for(std::chrono::milliseconds{5});  // Poll pace.
    }
    ASSERT_TRUE(second.Holds("tokens"));
    EXPECT_EQ(second.TakeToken("tokens"), kLeaseTokenNone + 2);
    // The first still believes it holds the lock (it has not looked), but its session is gone:
    // it takes no token, so it cannot fence the holder out.
    EXPECT_EQ(first.TakeToken("tokens"), std::nullopt);
    EXPECT_FALSE(first.Alive());
    EXPECT_EQ(db_.Scalar("SELECT lease_token FROM subscriptions WHERE name = 'tokens'"),
              std::to_string(kLeaseTokenNone + 2));
}

TEST(SubscriptionLeaseKeepalives, AreAddedWhereTheUrlDoesNotSetThem) {
    const std::map<std::string, std::string> options = ParseConninfo(WithLeaseKeepalives(
        "postgresql://svc@db1:5432,db2:5432/ledger?keepalives_idle=9&sslmode=require"));
    EXPECT_EQ(options.at("keepalives"), "1");
    EXPECT_EQ(options.at("keepalives_idle"), "9");  // The operator's own.
    EXPECT_EQ(options.at("keepalives_interval"), "5");
    EXPECT_EQ(options.at("keepalives_count"), "3");
    EXPECT_EQ(options.at("tcp_user_timeout"), "20000");
    EXPECT_EQ(options.at("host"), "db1,db2");
    EXPECT_EQ(options.at("port"), "5432,5432");
    EXPECT_EQ(options.at("sslmode"), "require");
    EXPECT_EQ(options.at("dbname"), "ledger");
    EXPECT_EQ(options.at("user"), "svc");
}

TEST_F(SubscriptionsPgTest, TheServiceRoleCanRunEveryOperation) {
    const std::string role = "svc_" + db_.name();
    {
        pqxx::nontransaction tx{*connection_};
        tx.exec("DROP ROLE IF EXISTS " + tx.quote_name(role));
        tx.exec("CREATE ROLE " + tx.quote_name(role) + " LOGIN");
    }
    GrantServiceRole(*connection_, role);
    {
        const std::string& url = db_.url();
        auto service =
            Connect(url + (url.find('?') == std::string::npos ? "?" : "&") + "user=" + role);
        (void)EnsureSubscription(*service, "granted", SubscriptionStart::kNow);
        const std::int64_t token = TakeLeaseToken(*service, "granted");
        EXPECT_TRUE(AdvanceCursor(*service, "granted", token, 0, 2, kSubTime));
        EXPECT_TRUE(RecordFailure(*service, "granted", token, 2, "e", kSubTime, kSubTime));
        EXPECT_TRUE(DisableAfterGone(*service, "granted", token, 2, kSubTime));
        EXPECT_TRUE(Enable(*service, "granted"));
        EXPECT_TRUE(Rewind(*service, "granted", 0));
        pqxx::read_transaction tx{*service};
        EXPECT_EQ(ReadChanges(tx, 0, 10).size(), 3U);
        (void)ReadMatchingBatch(tx, 0, {}, 10);
        (void)ReadLag(tx, 0, {}, kSubTime);
    }
    pqxx::nontransaction tx{*connection_};
    tx.exec("DROP OWNED BY " + tx.quote_name(role));
    tx.exec("DROP ROLE IF EXISTS " + tx.quote_name(role));
}

TEST_F(SubscriptionsPgTest, APollFindsAnotherConnectionsCommitWithinASecond) {
    std::promise<FeedNotifier::WaitEnd> ended;
    std::vector<std::string> failures;
    FeedNotifier notifier{{}, [](std::function<void()> task) { task(); }};
    notifier.StartPolling(
        [&] { return db_.Connect(); },
        [&](const std::string&, const std::string& json) { failures.push_back(json); });
    // Until the first poll has run, the head is 0 and any commit would wake at once.
    const auto first_poll = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    while (notifier.stats().polls.load() == 0 && std::chrono::steady_clock::now() < first_poll) {
        std::this_thread::sleep_for(std::chrono::milliseconds{5});  // Poll pace.
    }
    Write({SubOrder("P-1", "a")});
    const auto polled = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    while (notifier.Head() < 1 && std::chrono::steady_clock::now() < polled) {
        std::this_thread::sleep_for(std::chrono::milliseconds{5});  // Poll pace.
    }
    ASSERT_EQ(notifier.Head(), 1);
    ASSERT_TRUE(notifier.AddWaiter(1, FeedNotifier::Clock::now() + std::chrono::seconds{10},
                                   [&](FeedNotifier::WaitEnd end) { ended.set_value(end); }));
    auto thread_waiter = std::async(std::launch::async, [&] {
        return notifier.WaitBeyond(1, FeedNotifier::Clock::now() + std::chrono::seconds{10});
    });
    const auto committed = std::chrono::steady_clock::now();
    {
        auto other = db_.Connect();  // Not this notifier's committer: only the poll can tell.
        (void)WriteBatch(*other, std::vector<Delivery>{SubOrder("P-2", "a")});
    }
    std::future<FeedNotifier::WaitEnd> end = ended.get_future();
    ASSERT_EQ(end.wait_for(std::chrono::seconds{10}), std::future_status::ready);
    const auto waited = std::chrono::steady_clock::now() - committed;
    EXPECT_EQ(end.get(), FeedNotifier::WaitEnd::kHeadMoved);
    EXPECT_EQ(thread_waiter.get(), 2);
    EXPECT_LT(waited, std::chrono::milliseconds{1500});
    notifier.Stop();
    EXPECT_TRUE(failures.empty());
}

}  // namespace
}  // namespace payledger::ledger
