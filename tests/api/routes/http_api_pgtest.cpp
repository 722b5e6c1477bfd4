// The HTTP API end to end: every outcome (docs/events.md#outcomes) with its status
// and body, authentication, the 64 KiB limit, raw bodies returned byte for byte, reads,
// feeds, health, metrics, and recovery after the database drops the service's sessions.
// The whole service runs in-process on a free port against the real PostgreSQL.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>

#include "api/http/json_output.hpp"
#include "ledger/base/bytes.hpp"
#include "ledger/integrity/checkpoint.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::kAdminToken;
using testing::kAuditorToken;
using testing::kMerchantToken;
using testing::TestDatabase;
using testing::TestService;

class HttpApiPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        service_ = std::make_unique<TestService>(testing::TestConfig(db_.url()), db_.name());
        client_ = std::make_unique<HttpClient>(service_->port());
    }

    HttpResult Audit(const std::string& target) { return client_->Get(target, kAuditorToken); }

    std::string Count(const std::string& table) {
        return db_.Scalar("SELECT count(*) FROM " + table);
    }

    void ExpectError(const HttpResult& result, int status, const std::string& outcome) {
        EXPECT_EQ(result.status, status) << result.body;
        const json body = result.Json();
        EXPECT_EQ(body.value("code", ""), "FAIL") << result.body;
        EXPECT_EQ(body.value("outcome", ""), outcome) << result.body;
        EXPECT_FALSE(body.value("message", "").empty()) << result.body;
    }

    TestDatabase db_;
    std::unique_ptr<TestService> service_;
    std::unique_ptr<HttpClient> client_;
};

// GET /v1/openapi.yaml answers the repository's api/openapi.yaml byte for byte, to anyone,
// with an ETag that revalidates to 304.
TEST_F(HttpApiPgTest, TheOpenApiDescriptionIsServedAsCompiledIn) {
    std::ifstream file(std::string(PAYLEDGER_SOURCE_DIR) + "/api/openapi.yaml", std::ios::binary);
    ASSERT_TRUE(file) << "api/openapi.yaml not found";
    const std::string expected{std::istreambuf_iterator<char>(file), {}};
    const HttpResult description = client_->Get("/v1/openapi.yaml");
    ASSERT_EQ(description.status, 200);
    EXPECT_EQ(description.headers.at("Content-Type"), "application/yaml");
    EXPECT_TRUE(description.body == expected) << "the served description differs from the file";
    const std::string etag = description.headers.at("ETag");
    ASSERT_EQ(etag.size(), 34u) << etag;  // A quoted strong tag of 32 hex digits.
    const HttpResult again = client_->Send(boost::beast::http::verb::get, "/v1/openapi.yaml", {},
                                           {{"If-None-Match", etag}});
    EXPECT_EQ(again.status, 304);
    EXPECT_TRUE(again.body.empty());
    EXPECT_EQ(client_->Send(boost::beast::http::verb::post, "/v1/openapi.yaml").status, 405);
}

TEST_F(HttpApiPgTest, CreateOrderAppendsThenDuplicatesThenConflicts) {
    const HttpResult created = service_->CreateOrder(*client_, "ORD-1", "acct-1", 1999);
    EXPECT_EQ(created.status, 201) << created.body;
    const json order = created.Json();
    EXPECT_EQ(order["status"], "WAIT_PAY");
    EXPECT_EQ(order["amount"], 1999);
    EXPECT_EQ(order["paid_amount"], 0);
    EXPECT_EQ(order["anomalies"], json::array());
    EXPECT_TRUE(order["transaction_id"].is_null());
    EXPECT_EQ(order["seq"], 1);

    const HttpResult again = service_->CreateOrder(*client_, "ORD-1", "acct-1", 1999);
    EXPECT_EQ(again.status, 200);
    EXPECT_EQ(again.Json(), order);

    const HttpResult other = service_->CreateOrder(*client_, "ORD-1", "acct-1", 2000);
    ExpectError(other, 409, "conflict");
    EXPECT_EQ(other.Json()["seq"], 1);
    EXPECT_EQ(Count("ledger_events"), "1");
    EXPECT_EQ(Count("callback_receipts"), "3");
}

TEST_F(HttpApiPgTest, CreateOrderRefusesMalformedInputAndKeepsTheReceipt) {
    const std::map<std::string, std::string> auth = {
        {"Authorization", std::string("Bearer ") + kMerchantToken}};
    const char* bodies[] = {
        "not json",
        R"([1,2])",
        R"({"out_trade_no":"ORD 1","account_id":"a","amount":1,"currency":"CNY"})",
        R"({"out_trade_no":"ORD-1","account_id":"","amount":1,"currency":"CNY"})",
        R"({"out_trade_no":"ORD-1","account_id":"a","amount":19.99,"currency":"CNY"})",
        R"({"out_trade_no":"ORD-1","account_id":"a","amount":"1999","currency":"CNY"})",
        R"({"out_trade_no":"ORD-1","account_id":"a","amount":1.999e3,"currency":"CNY"})",
        R"({"out_trade_no":"ORD-1","account_id":"a","amount":0,"currency":"CNY"})",
        R"({"out_trade_no":"ORD-1","account_id":"a","amount":10000000000001,"currency":"CNY"})",
        R"({"out_trade_no":"ORD-1","account_id":"a","amount":18446744073709551615,"currency":"CNY"})",
        R"({"out_trade_no":"ORD-1","account_id":"a","amount":100,"currency":"cny"})",
        R"({"out_trade_no":"ORD-1","account_id":"a","amount":100})",
    };
    for (const char* body : bodies) {
        ExpectError(client_->Post("/v1/orders", body, auth), 400, "malformed");
    }
    EXPECT_EQ(Count("ledger_events"), "0");
    EXPECT_EQ(Count("callback_receipts"), std::to_string(std::size(bodies)));
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts WHERE outcome = 'malformed'"),
              std::to_string(std::size(bodies)));
}

TEST_F(HttpApiPgTest, GenericCallbackEveryOutcomeAndStatus) {
    ASSERT_EQ(service_->CreateOrder(*client_, "ORD-1", "acct-1", 1999).status, 201);
    const std::string payment = testing::GenericPayment("ORD-1", "TX-1", 1999);

    HttpResult r = service_->PostGeneric(*client_, payment);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.Json(), (json{{"code", "SUCCESS"}, {"outcome", "appended"}, {"seq", 2}}));
    r = service_->PostGeneric(*client_, payment);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.Json(), (json{{"code", "SUCCESS"}, {"outcome", "duplicate"}, {"seq", 2}}));

    ExpectError(service_->PostGeneric(*client_, testing::GenericPayment("ORD-1", "TX-2", 1999)),
                409, "conflict");
    ExpectError(service_->PostGeneric(*client_, testing::GenericPayment("ORD-9", "TX-9", 1999)),
                404, "unknown_order");
    ASSERT_EQ(service_->CreateOrder(*client_, "ORD-2", "acct-1", 500).status, 201);
    ExpectError(service_->PostGeneric(*client_, testing::GenericPayment("ORD-2", "TX-3", 501)), 422,
                "mismatch");
    ExpectError(
        service_->PostGeneric(*client_, testing::GenericPayment("ORD-2", "TX-3", 500, "USD")), 422,
        "mismatch");
    ExpectError(service_->PostGeneric(*client_, payment, testing::UnixNow() - 301), 401,
                "bad_signature");
    ExpectError(service_->PostGeneric(*client_, payment, std::nullopt, "wrong-secret-000000000"),
                401, "bad_signature");
    ExpectError(client_->Post("/v1/callbacks/generic", payment), 401, "bad_signature");
    ExpectError(service_->PostGeneric(*client_, R"({"event_type":"PAYMENT_SUCCEEDED"})"), 400,
                "malformed");

    EXPECT_EQ(Count("ledger_events"), "3");
    EXPECT_EQ(db_.Scalar("SELECT balance FROM balances"), "1999");
    // Every delivery that reached the service is a receipt: 2 orders + 10 callbacks.
    EXPECT_EQ(Count("callback_receipts"), "12");
    EXPECT_EQ(db_.Scalar("SELECT string_agg(outcome, ',' ORDER BY id) FROM callback_receipts "
                         "WHERE source = 'generic'"),
              "appended,duplicate,conflict,unknown_order,mismatch,mismatch,bad_signature,"
              "bad_signature,bad_signature,malformed");
}

TEST_F(HttpApiPgTest, ClosePaymentAndRefundThroughGeneric) {
    ASSERT_EQ(service_->CreateOrder(*client_, "ORD-1", "acct-1", 1000).status, 201);
    ASSERT_EQ(
        service_->PostGeneric(*client_, testing::GenericPayment("ORD-1", "TX-1", 1000)).status,
        200);
    const std::string refund =
        R"({"event_type":"REFUND_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"RF-1","amount":300,"occurred_at":"2026-11-29T08:30:00+08:00"})";
    EXPECT_EQ(service_->PostGeneric(*client_, refund).status, 200);
    ExpectError(
        service_->PostGeneric(
            *client_,
            R"({"event_type":"REFUND_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"RF-2","amount":100})"),
        409, "conflict");
    const std::string close = R"({"event_type":"PAYMENT_CLOSED","out_trade_no":"ORD-1"})";
    EXPECT_EQ(service_->PostGeneric(*client_, close).status, 200);
    EXPECT_EQ(service_->PostGeneric(*client_, close).Json()["outcome"], "duplicate");

    const json order = Audit("/v1/orders/ORD-1").Json();
    EXPECT_EQ(order["status"], "REFUNDED");
    EXPECT_EQ(order["refunded_amount"], 300);
    EXPECT_EQ(order["anomalies"], json::array({"paid_after_close"}));
    EXPECT_EQ(Audit("/v1/accounts/acct-1/balances").Json(),
              (json{{"account_id", "acct-1"},
                    {"balances", json::array({{{"currency", "CNY"}, {"balance", 700}}})}}));
    const json events = Audit("/v1/orders/ORD-1/events").Json()["events"];
    ASSERT_EQ(events.size(), 4u);
    EXPECT_EQ(events[2]["event_type"], "REFUND_SUCCEEDED");
    EXPECT_EQ(events[2]["currency"], "CNY");  // Taken from the order.
    EXPECT_EQ(events[2]["occurred_at"], "2026-11-29T00:30:00Z");
    EXPECT_TRUE(events[3]["amount"].is_null());
    for (const char* key :
         {"seq", "out_trade_no", "event_type", "source", "account_id", "amount", "currency",
          "transaction_id", "occurred_at", "recorded_at", "receipt_id", "data"}) {
        EXPECT_TRUE(events[0].contains(key)) << key;
    }
}

TEST_F(HttpApiPgTest, ReceiptsReturnRawBodiesByteForByte) {
    ASSERT_EQ(service_->CreateOrder(*client_, "ORD-1", "acct-1", 100).status, 201);
    const std::string spaced =
        "{ \"event_type\" : \"PAYMENT_SUCCEEDED\",\n\t\"out_trade_no\":"
        "\"ORD-1\", \"transaction_id\":\"TX-1\", \"amount\":100 ,"
        " \"note\":\"测试\" }";
    EXPECT_EQ(service_->PostGeneric(*client_, spaced).status, 200);
    const std::string binary = std::string("{\"out_trade_no\":\"ORD-1\",\"x\":\"\xff\xfe\"}");
    ExpectError(service_->PostGeneric(*client_, binary), 400, "malformed");

    const json receipts = Audit("/v1/orders/ORD-1/receipts").Json()["receipts"];
    ASSERT_EQ(receipts.size(), 2u);
    EXPECT_EQ(receipts[1]["body"], spaced);
    EXPECT_EQ(receipts[1]["outcome"], "appended");
    EXPECT_EQ(receipts[1]["seq"], 2);
    // A body that is not UTF-8 cannot be read as JSON, so it names no order; the global
    // feed returns it in base64, byte for byte.
    const json malformed = Audit("/v1/receipts?outcome=malformed").Json()["receipts"];
    ASSERT_EQ(malformed.size(), 1u);
    EXPECT_FALSE(malformed[0].contains("body"));
    EXPECT_EQ(malformed[0]["body_base64"], ledger::Base64Encode(binary));
    EXPECT_TRUE(malformed[0]["seq"].is_null());
    EXPECT_TRUE(malformed[0]["out_trade_no"].is_null());
    for (const char* key : {"id", "source", "received_at", "outcome", "seq", "out_trade_no"}) {
        EXPECT_TRUE(receipts[0].contains(key)) << key;
    }
}

TEST_F(HttpApiPgTest, BearerTokensAndRoles) {
    ExpectError(client_->Get("/v1/orders/ORD-1"), 401, "bad_signature");
    ExpectError(client_->Get("/v1/orders/ORD-1", "not-a-token"), 401, "bad_signature");
    ExpectError(client_->Get("/v1/orders/ORD-1", kMerchantToken), 403, "bad_signature");
    ExpectError(client_->Post("/v1/orders", "{}",
                              {{"Authorization", std::string("Bearer ") + kAuditorToken}}),
                403, "bad_signature");
    ExpectError(client_->Post("/v1/orders", "{}", {{"Authorization", "Basic abc"}}), 401,
                "bad_signature");
    // Requests refused before authentication are not deliveries.
    EXPECT_EQ(Count("callback_receipts"), "0");
    ExpectError(client_->Get("/v1/orders/ORD-1", kAdminToken), 404, "unknown_order");
    ExpectError(client_->Get("/v1/orders/ORD-1", kAuditorToken), 404, "unknown_order");
}

TEST_F(HttpApiPgTest, BodiesOver64KiBAre413WithoutAReceipt) {
    const std::string big(70'000, 'x');
    HttpResult r = client_->Post("/v1/orders", big,
                                 {{"Authorization", std::string("Bearer ") + kMerchantToken}});
    ExpectError(r, 413, "malformed");
    r = service_->PostGeneric(*client_, big);
    ExpectError(r, 413, "malformed");
    EXPECT_EQ(Count("callback_receipts"), "0");
    // Exactly 64 KiB is read and judged (malformed JSON, with a receipt).
    ExpectError(service_->PostGeneric(*client_, std::string(64 * 1024, ' ')), 400, "malformed");
    EXPECT_EQ(Count("callback_receipts"), "1");
}

TEST_F(HttpApiPgTest, ReadsRefuseInvalidKeysAndUnknownOrders) {
    ExpectError(Audit("/v1/orders/ORD%201"), 400, "malformed");
    ExpectError(Audit("/v1/orders/ORD-404/events"), 404, "unknown_order");
    ExpectError(Audit("/v1/orders/ORD-404/receipts"), 404, "unknown_order");
    ExpectError(Audit("/v1/accounts/nobody/balances"), 404, "unknown_order");
    ExpectError(Audit("/v1/nothing"), 404, "malformed");
    ExpectError(client_->Send(boost::beast::http::verb::delete_, "/v1/orders/ORD-1"), 405,
                "malformed");
    ExpectError(client_->Get("/v1/callbacks/generic"), 405, "malformed");
    ExpectError(client_->Post("/v1/callbacks/stripe", "{}"), 404, "malformed");
    // Percent-encoded keys are decoded once.
    ASSERT_EQ(service_->CreateOrder(*client_, "A|B*C.D", "acct", 5).status, 201);
    EXPECT_EQ(Audit("/v1/orders/A%7CB%2AC.D").status, 200);
}

TEST_F(HttpApiPgTest, FeedsPageInOrderAndRefuseBadParameters) {
    for (int i = 1; i <= 5; ++i) {
        ASSERT_EQ(service_->CreateOrder(*client_, "ORD-" + std::to_string(i), "acct", 10).status,
                  201);
    }
    json page = Audit("/v1/events?after=0&limit=2").Json();
    ASSERT_EQ(page["events"].size(), 2u);
    EXPECT_EQ(page["events"][0]["seq"], 1);
    EXPECT_EQ(page["next_after"], 2);
    page = Audit("/v1/events?after=2&limit=1000").Json();
    EXPECT_EQ(page["events"].size(), 3u);
    EXPECT_EQ(page["next_after"], 5);
    page = Audit("/v1/events?after=5").Json();
    EXPECT_EQ(page["events"].size(), 0u);
    EXPECT_EQ(page["next_after"], 5);

    (void)service_->PostGeneric(*client_, "junk");
    page = Audit("/v1/receipts?outcome=malformed").Json();
    ASSERT_EQ(page["receipts"].size(), 1u);
    EXPECT_EQ(page["receipts"][0]["id"], 6);
    EXPECT_EQ(page["next_after"], 6);
    EXPECT_EQ(Audit("/v1/receipts?after=3&limit=2").Json()["next_after"], 5);

    for (const char* target :
         {"/v1/events?after=-1", "/v1/events?after=abc", "/v1/events?limit=1001",
          "/v1/events?limit=0", "/v1/receipts?outcome=nope", "/v1/receipts?outcome=unavailable",
          "/v1/receipts?after=1e3"}) {
        ExpectError(Audit(target), 400, "malformed");
    }
}

TEST_F(HttpApiPgTest, HealthReadinessAndMetrics) {
    EXPECT_EQ(client_->Get("/healthz").status, 200);
    EXPECT_EQ(client_->Get("/readyz").status, 200);
    ASSERT_EQ(service_->CreateOrder(*client_, "ORD-1", "acct", 10).status, 201);
    (void)service_->PostGeneric(*client_, "junk");
    const HttpResult metrics = client_->Get("/metrics");
    EXPECT_EQ(metrics.status, 200);
    EXPECT_NE(metrics.headers.at("Content-Type").find("text/plain"), std::string::npos);
    for (const char* line :
         {"payledger_deliveries_total{channel=\"api\",outcome=\"appended\"} 1\n",
          "payledger_deliveries_total{channel=\"generic\",outcome=\"malformed\"} 1\n",
          "payledger_request_duration_seconds_count ", "payledger_db_pool_connections{state=",
          "payledger_db_pool_waiting ", "payledger_writer_lock_wait_seconds_total ",
          // Two batches: the order's read the state (the committer knew nothing yet), the
          // junk's was planned from what the first left (WriterCache), in one round trip.
          "payledger_commit_batches_total 2\n", "payledger_commit_state_reads_total 1\n"}) {
        EXPECT_NE(metrics.body.find(line), std::string::npos) << line;
    }
    // The order's batch was committed: its two round trips took time, its plan at least
    // none (the counters sum microseconds).
    for (const auto& [step, least] : std::initializer_list<std::pair<const char*, double>>{
             {"read", 1e-6}, {"plan", 0}, {"write", 1e-6}}) {
        const std::string name =
            std::string("payledger_commit_step_seconds_total{step=\"") + step + "\"} ";
        const std::size_t at = metrics.body.find(name);
        ASSERT_NE(at, std::string::npos) << name;
        EXPECT_GE(std::stod(metrics.body.substr(at + name.size())), least) << name;
    }
}

TEST_F(HttpApiPgTest, RecoversByItselfWhenTheDatabaseDropsItsSessions) {
    ASSERT_EQ(service_->CreateOrder(*client_, "ORD-1", "acct", 10).status, 201);
    ASSERT_EQ(Audit("/v1/orders/ORD-1").status, 200);
    db_.Scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name = '" +
        db_.name() + "' AND pid <> pg_backend_pid()");
    // A read on a dropped session may answer 503 once; the pool then reconnects.
    int unavailable = 0;
    for (int i = 0; i < 8; ++i) {
        const HttpResult r = Audit("/v1/orders/ORD-1");
        if (r.status == 503) {
            ++unavailable;
            EXPECT_EQ(r.Json()["outcome"], "unavailable");
        } else {
            EXPECT_EQ(r.status, 200);
        }
    }
    EXPECT_LE(unavailable, 4);  // At most once per pooled connection.
    EXPECT_EQ(Audit("/v1/orders/ORD-1").status, 200);
    EXPECT_EQ(service_->CreateOrder(*client_, "ORD-2", "acct", 10).status, 201);
    EXPECT_EQ(client_->Get("/readyz").status, 200);
}

// A merchant token given as an object registers orders for its accounts only
// (docs/security.md#tenants).
TEST(HttpApiScopedTokenTest, AScopedMerchantTokenRegistersOrdersOnlyForItsAccounts) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    api::Config config = testing::TestConfig(db.url());
    const std::string scoped = "merchant-token-scoped-to-shop-1";
    config.merchant_tokens.push_back({.token = scoped, .accounts = {{"shop-1"}}});
    TestService service{std::move(config), db.name()};
    HttpClient client{service.port()};
    const auto create = [&](const std::string& token, const std::string& order,
                            const std::string& account) {
        return client.Post("/v1/orders",
                           Dump(json{{"out_trade_no", order},
                                     {"account_id", account},
                                     {"amount", 100},
                                     {"currency", "CNY"}}),
                           {{"Authorization", "Bearer " + token}});
    };
    EXPECT_EQ(create(scoped, "ORD-1", "shop-1").status, 201);
    const HttpResult other = create(scoped, "ORD-2", "shop-2");
    EXPECT_EQ(other.status, 403) << other.body;
    EXPECT_NE(other.body.find("shop-2"), std::string::npos) << other.body;
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM ledger_events WHERE out_trade_no = 'ORD-2'"), "0");
    // A plain token may register for any account.
    EXPECT_EQ(create(kMerchantToken, "ORD-2", "shop-2").status, 201);
}

// An order's receipts are paged like the feeds; no response grows with the history
// that strangers can add to an order beyond one page.
TEST_F(HttpApiPgTest, AnOrdersReceiptsArePaged) {
    ASSERT_EQ(service_->CreateOrder(*client_, "ORD-1", "acct", 100).status, 201);
    for (int i = 0; i < 5; ++i) {  // Forged deliveries that name ORD-1: stored, never applied.
        const HttpResult forged =
            service_->PostGeneric(*client_, testing::GenericPayment("ORD-1", "TX", 100),
                                  std::nullopt, "a-wrong-secret-of-16-characters");
        ASSERT_EQ(forged.status, 401) << forged.body;
    }
    std::vector<std::int64_t> ids;
    std::int64_t after = 0;
    for (int page = 0; page < 10; ++page) {
        const HttpResult r =
            Audit("/v1/orders/ORD-1/receipts?limit=2&after=" + std::to_string(after));
        ASSERT_EQ(r.status, 200) << r.body;
        const json body = r.Json();
        ASSERT_LE(body["receipts"].size(), 2u);
        if (body["receipts"].empty()) {
            EXPECT_EQ(body["next_after"], after);
            break;
        }
        for (const json& receipt : body["receipts"]) ids.push_back(receipt["id"]);
        EXPECT_EQ(body["next_after"], ids.back());
        after = body["next_after"];
    }
    ASSERT_EQ(ids.size(), 6u);  // The order's creation and the five forgeries, in order.
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    EXPECT_EQ(Audit("/v1/orders/ORD-1/receipts").Json()["receipts"].size(), 6u);
    EXPECT_EQ(Audit("/v1/orders/ORD-1/receipts?limit=1001").status, 400);
    EXPECT_EQ(Audit("/v1/orders/ORD-1/receipts?after=-1").status, 400);
    EXPECT_EQ(Audit("/v1/orders/NO-SUCH/receipts").status, 404);
}

// POST /v1/admin/verify runs one at a time (it reads the whole ledger); a second call while one
// runs gets 429. The first is held inside its snapshot by a lock the test takes on ledger_events.
TEST_F(HttpApiPgTest, AdminVerifyRunsOneAtATime) {
    ASSERT_EQ(service_->CreateOrder(*client_, "ORD-1", "acct", 100).status, 201);
    auto holder = db_.Connect();
    pqxx::work lock{*holder};
    lock.exec("LOCK TABLE ledger_events IN ACCESS EXCLUSIVE MODE");
    HttpResult first;
    std::thread running([&] {
        HttpClient client{service_->port()};
        first = client.Send(boost::beast::http::verb::post, "/v1/admin/verify", "",
                            {{"Authorization", std::string("Bearer ") + kAdminToken}});
    });
    testing::AwaitLockWaiters(db_,
                              "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING "
                              "(pid) WHERE a.datname = current_database() AND l.locktype = "
                              "'relation' AND NOT l.granted");
    const HttpResult second =
        client_->Send(boost::beast::http::verb::post, "/v1/admin/verify", "",
                      {{"Authorization", std::string("Bearer ") + kAdminToken}});
    ExpectError(second, 429, "rate_limited");
    lock.abort();
    running.join();
    EXPECT_EQ(first.status, 200) << first.body;
    EXPECT_EQ(first.Json()["ok"], true) << first.body;
    // Once it has finished, the next call runs.
    const HttpResult third =
        client_->Send(boost::beast::http::verb::post, "/v1/admin/verify", "",
                      {{"Authorization", std::string("Bearer ") + kAdminToken}});
    EXPECT_EQ(third.status, 200) << third.body;
}

TEST(HttpApiNoDatabaseTest, EveryChannelAnswers503WhileTheDatabaseIsDown) {
    TestService service{
        testing::TestConfig("postgresql://nobody@/nowhere?host=/nonexistent&connect_timeout=1")};
    HttpClient client{service.port()};
    const HttpResult order = service.CreateOrder(client, "ORD-1", "acct", 10);
    EXPECT_EQ(order.status, 503);
    EXPECT_EQ(order.Json()["outcome"], "unavailable");
    const HttpResult callback =
        service.PostGeneric(client, testing::GenericPayment("ORD-1", "TX", 10));
    EXPECT_EQ(callback.status, 503);
    const HttpResult ready = client.Get("/readyz");
    EXPECT_EQ(ready.status, 503);
    // That it is unreachable, never the driver's text (host, port, user).
    EXPECT_EQ(ready.Json()["message"], "the database is unreachable") << ready.body;
    EXPECT_EQ(ready.body.find("nonexistent"), std::string::npos) << ready.body;
    EXPECT_EQ(ready.body.find("nobody"), std::string::npos) << ready.body;
    EXPECT_EQ(client.Get("/healthz").status, 200);
    EXPECT_EQ(client.Get("/v1/orders/ORD-1", kAuditorToken).status, 503);
}

}  // namespace
}  // namespace payledger::api

namespace payledger::api {
namespace {

// RFC 8032's first test key (tests/ledger/integrity/checkpoint_test.cpp).
constexpr const char* kCheckpointKeyPem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
    "-----END PRIVATE KEY-----\n";

TEST_F(HttpApiPgTest, AuditCheckpointWithoutAKeyIsUnavailable) {
    const HttpResult result = Audit("/v1/audit/checkpoint");
    ExpectError(result, 503, "unavailable");
    EXPECT_NE(result.body.find("audit.signing_key"), std::string::npos) << result.body;
    EXPECT_EQ(client_->Get("/v1/audit/checkpoint", kMerchantToken).status, 403);
}

TEST_F(HttpApiPgTest, AuditCheckpointSignsTheHeadOfTheChain) {
    api::Config config = testing::TestConfig(db_.url());
    config.audit_signing_key_pem = kCheckpointKeyPem;
    TestService keyed{config, db_.name()};
    HttpClient client{keyed.port()};
    const HttpResult empty = client.Get("/v1/audit/checkpoint", kAuditorToken);
    ASSERT_EQ(empty.status, 200) << empty.body;
    EXPECT_EQ(empty.Json().at("receipt_id"), 0);
    EXPECT_EQ(empty.Json().at("chain"), std::string(64, '0'));

    const HttpResult created = client.Post(
        "/v1/orders",
        R"({"out_trade_no":"ORD-CP","account_id":"acct-1","amount":100,"currency":"CNY"})",
        {{"Authorization", std::string("Bearer ") + kMerchantToken}});
    ASSERT_EQ(created.status, 201) << created.body;
    const HttpResult head = client.Get("/v1/audit/checkpoint", kAuditorToken);
    ASSERT_EQ(head.status, 200) << head.body;
    const auto checkpoint = ledger::ParseCheckpointJson(head.body);
    ASSERT_TRUE(checkpoint.has_value()) << head.body;
    EXPECT_EQ(std::to_string(checkpoint->receipt_id),
              db_.Scalar("SELECT max(id) FROM callback_receipts"));
    EXPECT_EQ(
        checkpoint->chain,
        db_.Scalar("SELECT encode(chain, 'hex') FROM callback_receipts ORDER BY id DESC LIMIT 1"));
    const auto key = ledger::Ed25519Key::PrivateFromPem(kCheckpointKeyPem);
    EXPECT_TRUE(ledger::Ed25519Key::PublicFromPem(key.PublicPem()).Verifies(*checkpoint));
}

}  // namespace
}  // namespace payledger::api
