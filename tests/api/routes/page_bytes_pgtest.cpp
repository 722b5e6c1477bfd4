// Pages bounded in bytes: a page of /v1/events, /v1/receipts (with and without an
// outcome) and an order's receipts ends early, before the item whose JSON would take the body
// past 8 MiB (at least one item always), and its cursor goes on from the last item returned.
// Hostile bodies: 200 receipts of 64 KiB of control bytes, each escaped as \u00XX (6 bytes a
// byte, ~384 KiB of JSON a receipt), inserted in the old inline form. Every page of every
// walk, forwards and backwards with the largest limit, is at most 8 MiB and no smaller than it
// must be (the next item would not have fitted), and the walk meets every receipt exactly
// once. Every auditor read says where it was served from (Payledger-Read-From: primary,
// without a replica). PageBuilder's rule is also checked alone, with a small budget. The
// whole service runs in-process on a free port.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/routes/route_helpers.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::api::page_bytes_test {
namespace {

using nlohmann::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::kAuditorToken;
using testing::TestDatabase;
using testing::TestService;

constexpr int kHostileReceiptCount = 200;
constexpr std::size_t kPageBytesMax = 8 * 1024 * 1024;
// The most a page's cursor can add to it ("prev_before" and 19 digits).
constexpr std::size_t kCursorBytesMax = 40;
constexpr const char* kNewest = "9223372036854775807";

class PageBytesPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        service_ = std::make_unique<TestService>(testing::TestConfig(db_.url()), db_.name());
        client_ = std::make_unique<HttpClient>(service_->port());
        ASSERT_EQ(service_->CreateOrder(*client_, "BIG-1", "acct-big", 100).status, 201);
        // Bytes 0x01 to 0x07: control characters that JSON escapes as \u0001 ... \u0007.
        auto connection = db_.Connect();
        pqxx::work tx{*connection};
        tx.exec(
            "INSERT INTO callback_receipts (source, received_at, peer, body, outcome, chain, "
            "out_trade_no) SELECT 'generic', now(), 'p', "
            "decode(repeat(lpad(to_hex(1 + i % 7), 2, '0'), 65536), 'hex'), 'malformed', "
            "sha256(''), 'BIG-1' FROM generate_series(1, " +
            std::to_string(kHostileReceiptCount) + ") AS i");
        tx.commit();
    }

    std::vector<std::int64_t> Ids(const std::string& sql) {
        std::vector<std::int64_t> ids;
        auto connection = db_.Connect();
        pqxx::read_transaction tx{*connection};
        for (const pqxx::row& row : tx.exec(sql)) ids.push_back(row[0].as<std::int64_t>());
        return ids;
    }

    // One page, checked: 200, at most 8 MiB, served from the primary.
    json Page(const std::string& target, std::size_t* body_bytes) {
        const HttpResult r = client_->Get(target, kAuditorToken);
        EXPECT_EQ(r.status, 200) << target;
        EXPECT_LE(r.body.size(), kPageBytesMax) << target;
        const auto read_from = r.headers.find("Payledger-Read-From");
        EXPECT_TRUE(read_from != r.headers.end() && read_from->second == "primary") << target;
        *body_bytes = r.body.size();
        return r.Json();
    }

    // Walks `path` (with `query` appended) forwards from 0, or backwards from the newest,
    // with the largest limit; checks each page and returns every position met, in the order
    // met. `cut_pages` receives the number of pages that held fewer than the limit.
    std::vector<std::int64_t> Walk(const std::string& path, const std::string& query,
                                   bool backwards, int* cut_pages) {
        constexpr int kLimit = 1000;
        std::vector<std::int64_t> met;
        std::string cursor = backwards ? kNewest : "0";
        std::size_t previous_bytes = 0;
        *cut_pages = 0;
        for (int pages = 0; pages < 10'000; ++pages) {
            std::size_t bytes = 0;
            const json page = Page(path + (backwards ? "?before=" : "?after=") + cursor +
                                       "&limit=" + std::to_string(kLimit) + query,
                                   &bytes);
            const json& items = page["receipts"];
            std::vector<std::int64_t> ids;
            for (const json& item : items) ids.push_back(item["id"].get<std::int64_t>());
            EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
            const char* cursor_name = backwards ? "prev_before" : "next_after";
            if (ids.empty()) {
                EXPECT_EQ(page[cursor_name].dump(), cursor);
                return met;
            }
            // The previous page ended only because this page's nearest item did not fit.
            if (previous_bytes > 0) {
                const json& nearest = backwards ? items.back() : items.front();
                EXPECT_GT(previous_bytes + 1 + nearest.dump().size() + kCursorBytesMax,
                          kPageBytesMax)
                    << "a page ended before it had to";
            }
            if (ids.size() < static_cast<std::size_t>(kLimit)) ++*cut_pages;
            EXPECT_EQ(page[cursor_name], backwards ? ids.front() : ids.back());
            if (backwards) {
                met.insert(met.end(), ids.rbegin(), ids.rend());
            } else {
                met.insert(met.end(), ids.begin(), ids.end());
            }
            cursor = std::to_string(backwards ? ids.front() : ids.back());
            previous_bytes = bytes;
        }
        ADD_FAILURE() << "the walk did not end";
        return met;
    }

    // Walks both ways and checks that each meets exactly `expected` (ascending), once each.
    void ExpectEveryReceiptOnce(const std::string& path, const std::string& query,
                                const std::vector<std::int64_t>& expected) {
        int cut_pages = 0;
        const std::vector<std::int64_t> forwards = Walk(path, query, false, &cut_pages);
        EXPECT_EQ(forwards, expected) << path << query;
        // ~384 KiB a receipt: about 21 to a page of 8 MiB, so a walk is many cut pages.
        EXPECT_GE(cut_pages, kHostileReceiptCount / 25) << path << query;
        std::vector<std::int64_t> backwards = Walk(path, query, true, &cut_pages);
        std::reverse(backwards.begin(), backwards.end());
        EXPECT_EQ(backwards, expected) << path << query;
        EXPECT_GE(cut_pages, kHostileReceiptCount / 25) << path << query;
    }

    TestDatabase db_;
    std::unique_ptr<TestService> service_;
    std::unique_ptr<HttpClient> client_;
};

TEST_F(PageBytesPgTest, EveryReceiptPageStaysWithin8MiBAndTheWalkMeetsEachReceiptOnce) {
    const std::vector<std::int64_t> all = Ids("SELECT id FROM callback_receipts ORDER BY id");
    ASSERT_EQ(all.size(), static_cast<std::size_t>(kHostileReceiptCount + 1));  // And the order's.
    ExpectEveryReceiptOnce("/v1/receipts", "", all);
    ExpectEveryReceiptOnce("/v1/orders/BIG-1/receipts", "", all);
    ExpectEveryReceiptOnce(
        "/v1/receipts", "&outcome=malformed",
        Ids("SELECT id FROM callback_receipts WHERE outcome = 'malformed' ORDER BY id"));
}

TEST_F(PageBytesPgTest, EveryAuditorReadSaysItWasServedFromThePrimary) {
    for (const char* target :
         {"/v1/orders/BIG-1", "/v1/orders/BIG-1/events", "/v1/accounts/acct-big/balances",
          "/v1/events", "/v1/events?before=9223372036854775807", "/v1/reconciliations",
          "/v1/orders/NONE-1", "/v1/receipts?limit=1"}) {
        const HttpResult r = client_->Get(target, kAuditorToken);
        EXPECT_TRUE(r.status == 200 || r.status == 404) << target << ": " << r.status;
        const auto read_from = r.headers.find("Payledger-Read-From");
        ASSERT_NE(read_from, r.headers.end()) << target;
        EXPECT_EQ(read_from->second, "primary") << target;
    }
    const HttpResult exported =
        client_->Send(boost::beast::http::verb::get, "/v1/events", {},
                      {{"Authorization", std::string("Bearer ") + kAuditorToken},
                       {"Accept", "application/x-ndjson"}});
    EXPECT_EQ(exported.status, 200);
    EXPECT_EQ(exported.headers.count("Payledger-Read-From"), 1u);
    EXPECT_EQ(exported.headers.at("Payledger-Read-From"), "primary");
    // A refused request read nothing and says nothing of it.
    const HttpResult refused = client_->Get("/v1/events?limit=0", kAuditorToken);
    EXPECT_EQ(refused.status, 400);
    EXPECT_EQ(refused.headers.count("Payledger-Read-From"), 0u);
}

// PageBuilder alone: items of a known size against a small budget.
json Item(int n) { return {{"n", n}, {"pad", std::string(40, 'x')}}; }

std::size_t ItemBytes() { return Item(1).dump().size(); }

json Body(const Response& response) { return json::parse(response.body()); }

TEST(PageBuilder, ForwardsThePageEndsBeforeTheItemThatDoesNotFitAndTheCursorGoesOn) {
    const PageQuery query{.after = 0};
    const std::size_t fixed = Body(PageBuilder("items", query).Finish()).dump().size();
    // Room for two items and a comma, the cursor's largest digits included, not three.
    const std::size_t budget = fixed + 2 * ItemBytes() + 1 + 40;
    PageBuilder page{"items", query, budget};
    EXPECT_TRUE(page.Add(Item(1), 1));
    EXPECT_TRUE(page.Add(Item(2), 2));
    EXPECT_FALSE(page.Add(Item(3), 3));
    EXPECT_EQ(page.size(), 2u);
    const Response response = page.Finish();
    EXPECT_LE(response.body().size(), budget);
    const json body = Body(response);
    ASSERT_EQ(body["items"].size(), 2u);
    EXPECT_EQ(body["items"][1]["n"], 2);
    EXPECT_EQ(body["next_after"], 2);
}

TEST(PageBuilder, BackwardsThePageKeepsTheItemsNearestBeforeInAscendingOrder) {
    const PageQuery query{.before = 100};
    const std::size_t fixed = Body(PageBuilder("items", query).Finish()).dump().size();
    const std::size_t budget = fixed + 2 * ItemBytes() + 1 + 40;
    PageBuilder page{"items", query, budget};
    EXPECT_TRUE(page.Add(Item(9), 9));  // Offered nearest `before` first.
    EXPECT_TRUE(page.Add(Item(8), 8));
    EXPECT_FALSE(page.Add(Item(7), 7));
    const json body = Body(page.Finish());
    ASSERT_EQ(body["items"].size(), 2u);
    EXPECT_EQ(body["items"][0]["n"], 8);
    EXPECT_EQ(body["items"][1]["n"], 9);
    EXPECT_EQ(body["prev_before"], 8);  // The next page is below 8: 7 is not skipped.
}

TEST(PageBuilder, OneItemIsAlwaysAnsweredAndAnEmptyPageKeepsItsCursor) {
    PageBuilder tiny{"items", PageQuery{.after = 5}, 10};
    EXPECT_TRUE(tiny.Add(Item(6), 6));  // Larger than the budget alone: still answered.
    EXPECT_FALSE(tiny.Add(Item(7), 7));
    EXPECT_EQ(Body(tiny.Finish())["next_after"], 6);
    EXPECT_EQ(Body(PageBuilder("items", PageQuery{.after = 5}).Finish()),
              json({{"items", json::array()}, {"next_after", 5}}));
    EXPECT_EQ(Body(PageBuilder("items", PageQuery{.before = 5}).Finish()),
              json({{"items", json::array()}, {"prev_before", 5}}));
}

TEST(PageBuilder, ThePageAnswersTheReadFromHeader) {
    EXPECT_EQ(ReadFromValue({}), "primary");
    EXPECT_EQ(ReadFromValue({.replica = true, .lag_seconds = 0.25}), "replica; lag=0.250");
    EXPECT_EQ(ReadFromValue({.replica = true, .lag_seconds = 12.3456}), "replica; lag=12.346");
    EXPECT_EQ(ReadFromValue({.replica = true, .lag_seconds = 0}), "replica; lag=0.000");
}

}  // namespace
}  // namespace payledger::api::page_bytes_test
