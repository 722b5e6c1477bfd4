// Reading the feeds backwards (before=, docs/api.md#feeds-and-paging): /v1/events, /v1/receipts
// (with and without an outcome) and an order's receipts answer the at most `limit` positions
// just below `before`, in ascending order, with prev_before (the first position, or `before`
// itself for an empty page) instead of next_after. Every page is compared with what
// PostgreSQL holds; walking backwards from the newest visits every row exactly once. Edges:
// an empty ledger, a page of exactly `limit`, before=0, after and before together, negative,
// non-numeric and overflowing cursors. The whole service runs in-process on a free port.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::kAuditorToken;
using testing::TestDatabase;
using testing::TestService;

constexpr const char* kNewest = "9223372036854775807";  // INT64_MAX: the newest page.

class FeedBeforePgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        service_ = std::make_unique<TestService>(testing::TestConfig(db_.url()), db_.name());
        client_ = std::make_unique<HttpClient>(service_->port());
    }

    json Page(const std::string& target) {
        const HttpResult r = client_->Get(target, kAuditorToken);
        EXPECT_EQ(r.status, 200) << target << ": " << r.body;
        return r.Json();
    }

    // Positions (seq or id) of `items`, in the order answered.
    static std::vector<std::int64_t> Positions(const json& items, const char* field) {
        std::vector<std::int64_t> positions;
        for (const json& item : items) positions.push_back(item[field].get<std::int64_t>());
        return positions;
    }

    std::vector<std::int64_t> Ids(const std::string& sql) {
        std::vector<std::int64_t> ids;
        auto connection = db_.Connect();
        pqxx::read_transaction tx{*connection};
        for (const pqxx::row& row : tx.exec(sql)) ids.push_back(row[0].as<std::int64_t>());
        return ids;
    }

    // Walks `path` (a feed, with `query` appended to each request) backwards from the newest
    // page, `limit` at a time, checking every page; returns every position in ascending order.
    std::vector<std::int64_t> WalkBackwards(const std::string& path, const std::string& query,
                                            const char* key, const char* field, int limit) {
        std::vector<std::int64_t> all;
        std::string before = kNewest;
        for (int pages = 0; pages < 1000; ++pages) {
            const json page =
                Page(path + "?before=" + before + "&limit=" + std::to_string(limit) + query);
            EXPECT_FALSE(page.contains("next_after")) << page.dump();
            const std::vector<std::int64_t> positions = Positions(page[key], field);
            EXPECT_LE(positions.size(), static_cast<std::size_t>(limit));
            EXPECT_TRUE(std::is_sorted(positions.begin(), positions.end())) << page.dump();
            if (positions.empty()) {
                EXPECT_EQ(page["prev_before"].dump(), before);  // `before` itself.
                return all;
            }
            EXPECT_LT(positions.back(), std::stoll(before));  // Strictly below `before`.
            EXPECT_EQ(page["prev_before"], positions.front());
            all.insert(all.begin(), positions.begin(), positions.end());
            before = std::to_string(positions.front());
        }
        ADD_FAILURE() << "the walk did not end";
        return all;
    }

    TestDatabase db_;
    std::unique_ptr<TestService> service_;
    std::unique_ptr<HttpClient> client_;
};

TEST_F(FeedBeforePgTest, AnEmptyLedgerAnswersEmptyPagesWithBeforeItself) {
    for (const char* feed : {"events", "receipts"}) {
        const json newest = Page(std::string("/v1/") + feed + "?before=" + kNewest);
        EXPECT_TRUE(newest[feed].empty()) << newest.dump();
        EXPECT_EQ(newest["prev_before"].dump(), kNewest);
        EXPECT_FALSE(newest.contains("next_after"));
        const json low = Page(std::string("/v1/") + feed + "?before=7&limit=3");
        EXPECT_TRUE(low[feed].empty());
        EXPECT_EQ(low["prev_before"], 7);
    }
    EXPECT_EQ(Page("/v1/receipts?before=0&outcome=conflict")["prev_before"], 0);
}

TEST_F(FeedBeforePgTest, EventsPageBackwardsFromTheNewestInAscendingOrder) {
    for (int i = 1; i <= 5; ++i) {
        ASSERT_EQ(service_->CreateOrder(*client_, "ORD-" + std::to_string(i), "acct", 10).status,
                  201);
    }
    json page = Page(std::string("/v1/events?limit=2&before=") + kNewest);
    EXPECT_EQ(Positions(page["events"], "seq"), (std::vector<std::int64_t>{4, 5}));
    EXPECT_EQ(page["events"][1]["out_trade_no"], "ORD-5");
    EXPECT_EQ(page["prev_before"], 4);
    page = Page("/v1/events?limit=2&before=4");
    EXPECT_EQ(Positions(page["events"], "seq"), (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(page["prev_before"], 2);
    page = Page("/v1/events?limit=2&before=2");
    EXPECT_EQ(Positions(page["events"], "seq"), (std::vector<std::int64_t>{1}));
    EXPECT_EQ(page["prev_before"], 1);
    page = Page("/v1/events?limit=2&before=1");
    EXPECT_TRUE(page["events"].empty());
    EXPECT_EQ(page["prev_before"], 1);

    // Exactly `limit` positions below `before`, and the default limit (100) over fewer.
    page = Page("/v1/events?before=6&limit=5");
    EXPECT_EQ(Positions(page["events"], "seq"), (std::vector<std::int64_t>{1, 2, 3, 4, 5}));
    EXPECT_EQ(page["prev_before"], 1);
    EXPECT_EQ(Positions(Page("/v1/events?before=5&limit=4")["events"], "seq"),
              (std::vector<std::int64_t>{1, 2, 3, 4}));
    EXPECT_EQ(Page(std::string("/v1/events?before=") + kNewest)["events"].size(), 5u);

    // Forwards paging is unchanged: next_after, no prev_before.
    page = Page("/v1/events?after=3");
    EXPECT_EQ(page["next_after"], 5);
    EXPECT_FALSE(page.contains("prev_before"));

    const std::vector<std::int64_t> all = Ids("SELECT seq FROM ledger_events ORDER BY seq");
    for (int limit : {1, 2, 3, 5, 1000}) {
        EXPECT_EQ(WalkBackwards("/v1/events", "", "events", "seq", limit), all) << limit;
    }
}

TEST_F(FeedBeforePgTest, ReceiptsPageBackwardsWithAndWithoutAnOutcome) {
    // Appended, duplicate, conflict and malformed receipts, interleaved.
    for (int i = 1; i <= 4; ++i) {
        const std::string order = "ORD-" + std::to_string(i);
        ASSERT_EQ(service_->CreateOrder(*client_, order, "acct", 10).status, 201);
        ASSERT_EQ(service_->CreateOrder(*client_, order, "acct", 10).status, 200);
        ASSERT_EQ(service_->CreateOrder(*client_, order, "acct", 11).status, 409);
        ASSERT_EQ(service_->PostGeneric(*client_, "not json " + order).status, 400);
    }
    EXPECT_EQ(WalkBackwards("/v1/receipts", "", "receipts", "id", 3),
              Ids("SELECT id FROM callback_receipts ORDER BY id"));
    for (const char* outcome : {"appended", "duplicate", "conflict", "malformed", "mismatch"}) {
        const std::vector<std::int64_t> expected =
            Ids(std::string("SELECT id FROM callback_receipts WHERE outcome = '") + outcome +
                "' ORDER BY id");
        for (int limit : {1, 3, 4}) {
            EXPECT_EQ(WalkBackwards("/v1/receipts", std::string("&outcome=") + outcome, "receipts",
                                    "id", limit),
                      expected)
                << outcome << " " << limit;
        }
    }
    // The newest conflict first on the page's last place; each receipt is whole.
    const json page = Page(std::string("/v1/receipts?outcome=conflict&limit=2&before=") + kNewest);
    ASSERT_EQ(page["receipts"].size(), 2u);
    EXPECT_EQ(page["receipts"][1]["out_trade_no"], "ORD-4");
    EXPECT_EQ(page["receipts"][1]["outcome"], "conflict");
    EXPECT_EQ(page["receipts"][0]["out_trade_no"], "ORD-3");
    EXPECT_TRUE(page["receipts"][1].contains("body"));
}

TEST_F(FeedBeforePgTest, AnOrdersReceiptsPageBackwards) {
    ASSERT_EQ(service_->CreateOrder(*client_, "ORD-1", "acct", 100).status, 201);
    ASSERT_EQ(service_->CreateOrder(*client_, "ORD-2", "acct", 100).status, 201);
    for (int i = 0; i < 5; ++i) {  // Forged deliveries naming ORD-1, and one naming ORD-2.
        ASSERT_EQ(service_
                      ->PostGeneric(*client_, testing::GenericPayment("ORD-1", "TX", 100),
                                    std::nullopt, "a-wrong-secret-of-16-characters")
                      .status,
                  401);
    }
    ASSERT_EQ(service_
                  ->PostGeneric(*client_, testing::GenericPayment("ORD-2", "TX", 100), std::nullopt,
                                "a-wrong-secret-of-16-characters")
                  .status,
              401);
    const std::vector<std::int64_t> expected =
        Ids("SELECT id FROM callback_receipts WHERE out_trade_no = 'ORD-1' ORDER BY id");
    ASSERT_EQ(expected.size(), 6u);
    for (int limit : {1, 2, 6, 7}) {
        EXPECT_EQ(WalkBackwards("/v1/orders/ORD-1/receipts", "", "receipts", "id", limit), expected)
            << limit;
    }
    const json page =
        Page("/v1/orders/ORD-1/receipts?limit=2&before=" + std::to_string(expected[3]));
    EXPECT_EQ(Positions(page["receipts"], "id"),
              (std::vector<std::int64_t>{expected[1], expected[2]}));
    EXPECT_EQ(page["prev_before"], expected[1]);
    EXPECT_EQ(client_->Get("/v1/orders/NO-SUCH/receipts?before=10", kAuditorToken).status, 404);
}

TEST_F(FeedBeforePgTest, BadCursorsAndBothDirectionsAre400) {
    ASSERT_EQ(service_->CreateOrder(*client_, "ORD-1", "acct", 100).status, 201);
    for (const std::string path : {"/v1/events", "/v1/receipts", "/v1/orders/ORD-1/receipts"}) {
        for (const char* query :
             {"?after=0&before=10", "?before=10&after=0", "?before=5&after=5", "?before=-1",
              "?before=abc", "?before=1e3", "?before=", "?before=+5", "?before=9223372036854775808",
              "?before=10&limit=0", "?before=10&limit=1001"}) {
            const HttpResult r = client_->Get(path + query, kAuditorToken);
            EXPECT_EQ(r.status, 400) << path << query << ": " << r.body;
            EXPECT_EQ(r.Json().value("outcome", ""), "malformed") << r.body;
        }
    }
    EXPECT_EQ(client_->Get("/v1/receipts?before=10&outcome=nope", kAuditorToken).status, 400);
    // Lists that are not read backwards refuse before= rather than ignore it.
    for (const char* target : {"/v1/orders/ORD-1?before=5", "/v1/orders/ORD-1/events?before=5",
                               "/v1/accounts/acct/balances?before=5"}) {
        EXPECT_EQ(client_->Get(target, kAuditorToken).status, 400) << target;
    }
    EXPECT_EQ(client_->Get("/v1/orders/ORD-1/events", kAuditorToken).status, 200);
    EXPECT_EQ(client_->Get("/v1/events?before=10").status, 401);  // No token: still 401.
}

}  // namespace
}  // namespace payledger::api
