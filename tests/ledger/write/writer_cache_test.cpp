// Tests of ledger/write/writer_cache.hpp without a database: the cache's own logic (its bound of
// two generations, what it drops and hands over, what it forgets on Clear or when another writer's
// batch came in between, and the form in which RememberCommitted keeps a batch's events), and
// what it learns from a prefetch (Learn: only a snapshot of the ledger it knows, or of the one
// before its last batch without the orders that batch named), and which stored bodies it vouches
// for (StoredBodies: only those its own batches stored, only while the ledger is the one it
// knows, at most its bound). That
// a batch planned from it decides as one planned from a read is proved against PostgreSQL in
// writer_cache_pgtest.cpp.
#include "ledger/write/writer_cache.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace payledger::ledger {
namespace {

using projections::Event;
using projections::EventType;

// Remembers a batch that wrote one event to order ORD-i, planned on the ids it left.
class Remembering {
public:
    explicit Remembering(WriterCache& cache) : cache_(cache) {}

    void Order(int i) {
        const std::string key = "ORD-" + std::to_string(i);
        std::map<std::string, std::vector<Event>> events;
        events[key].push_back(Event{.seq = i, .out_trade_no = key, .receipt_id = i});
        cache_.Remember(before_, i + 1, i + 1, head_, std::move(events));
        before_ = {.next_seq = i + 1, .next_receipt_id = i + 1};
    }

    [[nodiscard]] bool Knows(const std::string& key) {
        ChainValue head{};
        return cache_.StateFor({key}, head).has_value();
    }

private:
    WriterCache& cache_;
    projections::LedgerState before_{.next_seq = 1, .next_receipt_id = 1};
    ChainValue head_{};
};

TEST(WriterCacheTest, KeepsAtMostItsBoundAndTheNewestOrders) {
    WriterCache cache{4};  // Two generations of 2.
    ChainValue head{};
    EXPECT_FALSE(cache.StateFor({}, head).has_value());  // Knows nothing yet.
    projections::LedgerState before{.next_seq = 1, .next_receipt_id = 1};
    for (int i = 1; i <= 10; ++i) {
        const std::string key = "ORD-" + std::to_string(i);
        std::map<std::string, std::vector<Event>> events;
        events[key].push_back(Event{.seq = i, .out_trade_no = key, .receipt_id = i});
        cache.Remember(before, i + 1, i + 1, head, std::move(events));
        before = {.next_seq = i + 1, .next_receipt_id = i + 1};
        EXPECT_LE(cache.size(), 4u);
    }
    const std::optional<projections::LedgerState> newest = cache.StateFor({"ORD-10"}, head);
    ASSERT_TRUE(newest.has_value());
    EXPECT_EQ(newest->next_seq, 11);
    EXPECT_EQ(newest->events.at("ORD-10").front().seq, 10);
    EXPECT_FALSE(cache.StateFor({"ORD-1"}, head).has_value());
    EXPECT_FALSE(cache.StateFor({"ORD-10", "ORD-1"}, head).has_value());  // Needs them all.
    // A batch planned on other next ids than the cache's: another writer came in between.
    std::map<std::string, std::vector<Event>> events;
    events["ORD-11"];
    cache.Remember({.next_seq = 50, .next_receipt_id = 60}, 50, 61, head, std::move(events));
    EXPECT_EQ(cache.size(), 1u);
    EXPECT_FALSE(cache.StateFor({"ORD-10"}, head).has_value());
    EXPECT_TRUE(cache.StateFor({"ORD-11"}, head).has_value());
}

TEST(WriterCacheTest, HandsWhatItDropsToItsOwnerAndKeepsAtMostTwoUntaken) {
    // A dropped generation is freed by the owner, off the committer's path (Committer::
    // DisposeDropped); one nobody takes is freed at a later drop, so memory stays bounded.
    WriterCache cache{4};  // Two generations of 2.
    Remembering remember{cache};
    remember.Order(1);
    remember.Order(2);  // The newer is full: it becomes the older, which was empty.
    EXPECT_TRUE(cache.TakeDropped().empty());
    remember.Order(3);
    remember.Order(4);  // Full again: ORD-1 and ORD-2's generation is dropped.
    std::vector<WriterCache::Generation> dropped = cache.TakeDropped();
    ASSERT_EQ(dropped.size(), 1u);
    EXPECT_EQ(dropped[0].size(), 2u);
    EXPECT_TRUE(dropped[0].contains("ORD-1"));
    EXPECT_TRUE(cache.TakeDropped().empty());  // Taken once.
    EXPECT_EQ(cache.size(), 2u);
    for (int i = 5; i <= 12; ++i) remember.Order(i);  // Four drops, none taken.
    EXPECT_EQ(cache.TakeDropped().size(), 2u);
    remember.Order(13);
    cache.Clear();  // Both generations: ORD-13, and ORD-11 and ORD-12.
    dropped = cache.TakeDropped();
    ASSERT_EQ(dropped.size(), 2u);
    EXPECT_EQ(dropped[0].size() + dropped[1].size(), 3u);
    EXPECT_EQ(cache.size(), 0u);
}

TEST(WriterCacheTest, AnOrderNamedAgainMovesToTheNewerGenerationAndOutlivesTheOthers) {
    WriterCache cache{4};  // Two generations of 2.
    Remembering remember{cache};
    remember.Order(1);
    remember.Order(2);  // Both in the older generation now.
    remember.Order(1);  // Named again: moved to the newer, so ORD-2 alone is in the older.
    EXPECT_EQ(cache.size(), 2u);
    remember.Order(3);  // The newer (ORD-1, ORD-3) is full: the older (ORD-2) is dropped.
    EXPECT_TRUE(remember.Knows("ORD-1"));
    EXPECT_TRUE(remember.Knows("ORD-3"));
    EXPECT_FALSE(remember.Knows("ORD-2"));
    const std::vector<WriterCache::Generation> dropped = cache.TakeDropped();
    ASSERT_EQ(dropped.size(), 1u);
    EXPECT_EQ(dropped[0].size(), 1u);
    EXPECT_TRUE(dropped[0].contains("ORD-2"));
}

TEST(WriterCacheTest, ClearForgetsUntilTheNextCommittedBatch) {
    WriterCache cache{1000};
    Remembering remember{cache};
    remember.Order(1);
    ASSERT_TRUE(cache.valid());
    ChainValue head{};
    head[0] = 7;
    std::map<std::string, std::vector<Event>> none;
    none["ORD-2"];  // Known to have no events.
    cache.Remember({.next_seq = 2, .next_receipt_id = 2}, 2, 3, head, std::move(none));
    ChainValue got{};
    std::optional<projections::LedgerState> state = cache.StateFor({"ORD-1", "ORD-2"}, got);
    ASSERT_TRUE(state.has_value());
    EXPECT_EQ(state->next_seq, 2);
    EXPECT_EQ(state->next_receipt_id, 3);
    EXPECT_EQ(got, head);
    EXPECT_EQ(state->events.size(), 1u);  // An order without events has no entry.
    cache.Clear();
    EXPECT_FALSE(cache.valid());
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_FALSE(cache.StateFor({}, got).has_value());  // Not even the ids.
    // The next committed batch makes it valid again, knowing that batch's orders only.
    std::map<std::string, std::vector<Event>> events;
    events["ORD-3"];
    cache.Remember({.next_seq = 9, .next_receipt_id = 9}, 9, 10, head, std::move(events));
    EXPECT_TRUE(cache.valid());
    EXPECT_TRUE(cache.StateFor({"ORD-3"}, got).has_value());
    EXPECT_FALSE(cache.StateFor({"ORD-1"}, got).has_value());
}

TEST(WriterCacheTest, RememberCommittedKeepsEventsAsTheDatabaseStoresThem) {
    WriterCache cache{1000};
    const std::string nul_currency = std::string("CN") + '\0';
    const Event stored{.seq = 1,
                       .out_trade_no = "ORD-1",
                       .account_id = "acct-1",
                       .amount = 500,
                       .currency = "CNY",
                       .recorded_at = 123,
                       .receipt_id = 1,
                       .data = R"({"kept":"in the database, not here"})"};
    const projections::LedgerState state{
        .next_seq = 2, .next_receipt_id = 2, .events = {{"ORD-1", {stored}}}};
    projections::BatchPlan plan{.last_receipt_id = 3, .last_seq = 3};
    plan.events.push_back(Event{.seq = 2,
                                .out_trade_no = "ORD-1",
                                .event_type = EventType::kPaymentSucceeded,
                                .amount = 500,
                                .currency = nul_currency,
                                .transaction_id = std::string("TX") + '\0',
                                .receipt_id = 2,
                                .data = R"({"a":1})"});
    plan.events.push_back(Event{.seq = 3,
                                .out_trade_no = "ORD-2",
                                .event_type = EventType::kOrderCreated,
                                .amount = 700,
                                .currency = "CNY",
                                .receipt_id = 3});
    ChainValue head{};
    head[31] = 1;
    RememberCommitted(cache, {"ORD-1", "ORD-2", "ORD-3"}, state, plan, head);

    ChainValue got{};
    const std::optional<projections::LedgerState> after =
        cache.StateFor({"ORD-1", "ORD-2", "ORD-3"}, got);
    ASSERT_TRUE(after.has_value());
    EXPECT_EQ(after->next_seq, 4);  // Past the last event appended.
    EXPECT_EQ(after->next_receipt_id, 4);
    EXPECT_EQ(got, head);
    ASSERT_EQ(after->events.at("ORD-1").size(), 2u);
    const Event& kept = after->events.at("ORD-1")[0];
    EXPECT_EQ(kept.amount, 500);
    EXPECT_EQ(kept.recorded_at, 0);  // Not read by the plan: not kept.
    // An ORDER_CREATED's data is kept (what its registration said: a repeat's answer shows
    // it); any other event's is not read from the cache.
    EXPECT_EQ(kept.data, kept.event_type == EventType::kOrderCreated
                             ? std::string(R"({"kept":"in the database, not here"})")
                             : std::string());
    const Event& paid = after->events.at("ORD-1")[1];
    EXPECT_EQ(paid.currency, "CN\xEF\xBF\xBD");  // NUL as the database stores it: U+FFFD.
    EXPECT_EQ(paid.transaction_id, "TX\xEF\xBF\xBD");
    EXPECT_EQ(after->events.at("ORD-2").size(), 1u);
    EXPECT_FALSE(after->events.contains("ORD-3"));  // Named, known to have none.

    // A batch that appended nothing leaves the next seq where it was.
    RememberCommitted(cache, {"ORD-3"}, {.next_seq = 4, .next_receipt_id = 4},
                      projections::BatchPlan{.last_receipt_id = 4}, head);
    const std::optional<projections::LedgerState> later = cache.StateFor({"ORD-3"}, got);
    ASSERT_TRUE(later.has_value());
    EXPECT_EQ(later->next_seq, 4);
    EXPECT_EQ(later->next_receipt_id, 5);
}

TEST(WriterCacheTest, LearnsOnlyFromASnapshotOfTheLedgerItKnowsOrTheOneBeforeItsLastBatch) {
    WriterCache cache{100};
    ChainValue h1{};
    h1[0] = 1;
    ChainValue h2{};
    h2[0] = 2;
    ChainValue h3{};
    h3[0] = 3;
    const auto none = [](std::initializer_list<const char*> keys) {
        std::map<std::string, std::vector<Event>> events;
        for (const char* key : keys) events[key];
        return events;
    };
    // This writer's batch that wrote `key` at `seq`, leaving the ledger at `after_head`.
    const auto batch = [&](const std::string& key, std::int64_t seq, const ChainValue& after_head) {
        std::map<std::string, std::vector<Event>> events;
        events[key].push_back(Event{.seq = seq, .out_trade_no = key, .receipt_id = seq});
        cache.Remember({.next_seq = seq, .next_receipt_id = seq}, seq + 1, seq + 1, after_head,
                       std::move(events));
    };
    EXPECT_EQ(cache.Learn(h1, none({"A"})), 0u);           // Knows no ledger yet.
    batch("ORD-1", 1, h1);                                 // The ledger at h1.
    EXPECT_EQ(cache.Learn(h2, none({"A"})), 0u);           // Another ledger's snapshot.
    EXPECT_EQ(cache.Learn(h1, none({"A", "ORD-1"})), 1u);  // A; ORD-1 it knows already.
    batch("ORD-2", 2, h2);                                 // This writer's next batch: h1 -> h2.
    // A snapshot from before that batch: what it did not name is still true, ORD-2 is not.
    EXPECT_EQ(cache.Learn(h1, none({"B", "ORD-2"})), 1u);
    ChainValue head{};
    const std::optional<projections::LedgerState> b = cache.StateFor({"B", "ORD-2"}, head);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->events.at("ORD-2").size(), 1u);  // Its own batch's, not the snapshot's none.
    EXPECT_EQ(cache.Learn(h2, none({"C"})), 1u);  // The ledger it knows now.
    // Another writer in between (a batch not planned on what the cache knew): only now counts.
    cache.Remember({.next_seq = 7, .next_receipt_id = 7}, 8, 8, h3, none({"ORD-7"}));
    EXPECT_FALSE(cache.StateFor({"A"}, head).has_value());  // Forgot what it knew...
    EXPECT_EQ(cache.Learn(h2, none({"D"})), 0u);            // ...and the ledger before.
    EXPECT_EQ(cache.Learn(h3, none({"D"})), 1u);            // The ledger it read, it knows.
    cache.Clear();
    EXPECT_EQ(cache.Learn(h3, none({"E"})), 0u);  // After a Clear it knows no ledger.
}

TEST(WriterCacheTest, ASnapshotSomeBatchesOldSkipsEveryOrderTheyNamed) {
    WriterCache cache{100};
    std::vector<ChainValue> heads(4);
    for (std::size_t i = 0; i < heads.size(); ++i) heads[i][0] = static_cast<std::uint8_t>(i + 1);
    // Batch i (0 ... 3) writes ORD-i and leaves the ledger at heads[i], each continuing the last.
    for (std::int64_t i = 0; i < 4; ++i) {
        const std::string key = "ORD-" + std::to_string(i);
        std::map<std::string, std::vector<Event>> events;
        events[key].push_back(Event{.seq = i + 1, .out_trade_no = key, .receipt_id = i + 1});
        cache.Remember({.next_seq = i + 1, .next_receipt_id = i + 1}, i + 2, i + 2,
                       heads[static_cast<std::size_t>(i)], std::move(events));
    }
    // A snapshot of the ledger at heads[0]: batches 1 to 3 came after it.
    std::map<std::string, std::vector<Event>> seen;
    for (const char* key : {"NEW", "ORD-1", "ORD-2", "ORD-3"}) seen[key];
    EXPECT_EQ(cache.Learn(heads[0], seen), 1u);
    ChainValue head{};
    const std::optional<projections::LedgerState> state =
        cache.StateFor({"NEW", "ORD-1", "ORD-2", "ORD-3"}, head);
    ASSERT_TRUE(state.has_value());
    for (const char* key : {"ORD-1", "ORD-2", "ORD-3"}) {
        EXPECT_EQ(state->events.at(key).size(), 1u) << key;  // The batches', not the snapshot's.
    }
    EXPECT_EQ(state->events.count("NEW"), 0u);  // Learned: an order without events.
}

TEST(WriterCacheTest, UnknownNamesTheOrdersItDoesNotKnow) {
    WriterCache cache{100};
    Remembering remembering{cache};
    remembering.Order(1);
    EXPECT_EQ(cache.Unknown({"ORD-1", "ORD-2", "ORD-3"}),
              (std::vector<std::string>{"ORD-2", "ORD-3"}));
}

// A body key whose first byte is `tag`.
Sha256Digest Digest(unsigned char tag) {
    Sha256Digest digest{};
    digest[0] = tag;
    return digest;
}

TEST(WriterCacheTest, VouchesOnlyForBodiesItsBatchesStoredWhileTheLedgerIsTheOneItKnows) {
    WriterCache cache{100};
    const projections::LedgerState before{.next_seq = 1, .next_receipt_id = 1};
    const projections::LedgerState after{.next_seq = 2, .next_receipt_id = 3};
    ChainValue head{};
    head[0] = 7;
    std::map<std::string, std::vector<Event>> events;
    events["ORD-1"];
    cache.Remember(before, 2, 3, head, std::move(events), {Digest(1), Digest(2)});
    const std::vector<Sha256Digest> asked{Digest(1), Digest(2), Digest(3)};
    EXPECT_EQ(cache.StoredBodies(asked, after, head), (WriterCache::Digests{Digest(1), Digest(2)}));

    // Another ledger than the one it knows: other next ids, or another chain's head (a failover
    // that took its batch back can reach the same ids), vouches for nothing.
    EXPECT_TRUE(cache.StoredBodies(asked, before, head).empty());
    EXPECT_TRUE(cache.StoredBodies(asked, {.next_seq = 2, .next_receipt_id = 4}, head).empty());
    ChainValue other = head;
    other[1] = 1;
    EXPECT_TRUE(cache.StoredBodies(asked, after, other).empty());

    // Another writer's batch came in between: forgotten, and only the new batch's are known.
    cache.Remember({.next_seq = 5, .next_receipt_id = 9}, 5, 10, head, {}, {Digest(3)});
    const projections::LedgerState now{.next_seq = 5, .next_receipt_id = 10};
    EXPECT_EQ(cache.StoredBodies(asked, now, head), (WriterCache::Digests{Digest(3)}));

    cache.Clear();
    EXPECT_TRUE(cache.StoredBodies(asked, now, head).empty());
}

TEST(WriterCacheTest, VouchesForAtMostItsBoundOfBodiesTheNewestFirst) {
    WriterCache cache{4};  // Two generations of 2.
    ChainValue head{};
    for (int i = 1; i <= 10; ++i) {
        cache.Remember({.next_seq = 1, .next_receipt_id = i}, 1, i + 1, head, {},
                       {Digest(static_cast<unsigned char>(i))});
    }
    std::vector<Sha256Digest> all;
    for (int i = 1; i <= 10; ++i) all.push_back(Digest(static_cast<unsigned char>(i)));
    const WriterCache::Digests known =
        cache.StoredBodies(all, {.next_seq = 1, .next_receipt_id = 11}, head);
    EXPECT_LE(known.size(), 4u);
    EXPECT_GE(known.size(), 2u);
    EXPECT_EQ(known.count(Digest(10)), 1u);
    EXPECT_EQ(known.count(Digest(1)), 0u);
}

}  // namespace
}  // namespace payledger::ledger
