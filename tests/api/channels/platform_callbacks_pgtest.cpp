// The WeChat Pay v2, WeChat Pay v3 and Alipay callbacks end to end (docs/platforms.md): the whole
// service runs in-process on a free port against the real PostgreSQL, with the three platform
// sections of tests/api/channels/platform_fixtures.hpp; notices are built and signed by
// api::BuildNotice (what `payledger simulate` posts) with test-only keys. Each channel is run
// through the same table: valid → appended with its exact success answer, resend → duplicate with
// the same answer, wrong amount / excessive refund / other merchant → 422, forged → 401 with the
// receipt still recorded, unknown order → 404, each failure in the platform's format. Alipay's
// TRADE_FINISHED after TRADE_SUCCESS must land as a duplicate. Cross-checks
// (docs/platforms.md#cross-checks): a refund naming another order total or payment is 422, and the
// ECB block-splicing attack on two stored WeChat v2 refund notices ends in mismatch.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/channels/alipay_form.hpp"
#include "api/channels/platform_crypto.hpp"
#include "api/channels/wechat_v2_xml.hpp"
#include "ledger/base/bytes.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"
#include "tests/api/channels/platform_fixtures.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::kAuditorToken;
using testing::TestDatabase;
using testing::TestService;

constexpr std::int64_t kOrderAmount = 1999;  // Every order of these tests.

constexpr const char* kV2Success =
    "<xml><return_code><![CDATA[SUCCESS]]></return_code><return_msg><![CDATA[OK]]></return_msg>"
    "</xml>";

class PlatformCallbacksPgTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        service_ = std::make_unique<TestService>(config_);
        client_ = std::make_unique<HttpClient>(service_->port());
    }

    SimulatedNotice Notice(const std::string& out_trade_no, const std::string& kind = "payment",
                           std::int64_t amount = 1999, const Config* config = nullptr) const {
        return BuildNotice(config ? *config : config_, {.channel = GetParam(),
                                                        .out_trade_no = out_trade_no,
                                                        .kind = kind,
                                                        .amount = amount,
                                                        .order_amount = kOrderAmount});
    }

    HttpResult Post(const SimulatedNotice& notice) {
        const std::map<std::string, std::string> headers(notice.headers.begin(),
                                                         notice.headers.end());
        return client_->Post(notice.target, notice.body, headers);
    }

    void CreateOrder(const std::string& out_trade_no, std::int64_t amount = 1999) {
        const HttpResult created = service_->CreateOrder(*client_, out_trade_no, "acct-1", amount);
        ASSERT_EQ(created.status, 201) << created.body;
    }

    std::string EventCount(const std::string& out_trade_no) {
        return db_.Scalar("SELECT count(*) FROM ledger_events WHERE out_trade_no = '" +
                          out_trade_no + "'");
    }

    json Audit(const std::string& target) { return client_->Get(target, kAuditorToken).Json(); }

    // The exact success answer of the channel under test (docs/platforms.md#answers).
    void ExpectSuccess(const HttpResult& result) const {
        if (GetParam() == "wechat_v2") {
            EXPECT_EQ(result.status, 200);
            EXPECT_EQ(result.body, kV2Success);
        } else if (GetParam() == "wechat_v3") {
            EXPECT_EQ(result.status, 204) << result.body;
            EXPECT_TRUE(result.body.empty());
        } else {
            EXPECT_EQ(result.status, 200);
            EXPECT_EQ(result.body, "success");
        }
    }

    // A failure with `status`, in the channel's failure format.
    void ExpectFailure(const HttpResult& result, int status) const {
        EXPECT_EQ(result.status, status) << result.body;
        if (GetParam() == "wechat_v2") {
            EXPECT_EQ(result.body.rfind("<xml><return_code><![CDATA[FAIL]]></return_code>", 0), 0u)
                << result.body;
        } else if (GetParam() == "wechat_v3") {
            EXPECT_EQ(result.Json().value("code", ""), "FAIL") << result.body;
            EXPECT_FALSE(result.Json().value("message", "").empty());
        } else {
            EXPECT_EQ(result.body, "failure");
        }
    }

    TestDatabase db_;
    Config config_ = testing::WithPlatforms(testing::TestConfig(db_.url()));
    std::unique_ptr<TestService> service_;
    std::unique_ptr<HttpClient> client_;
};

TEST_P(PlatformCallbacksPgTest, ValidNoticeAppendsAndItsResendIsADuplicate) {
    CreateOrder("ORD-1");
    const SimulatedNotice notice = Notice("ORD-1");
    ExpectSuccess(Post(notice));
    ExpectSuccess(Post(notice));           // The same bytes again.
    ExpectSuccess(Post(Notice("ORD-1")));  // A new nonce, the same payment.
    EXPECT_EQ(EventCount("ORD-1"), "2");
    const json order = Audit("/v1/orders/ORD-1");
    EXPECT_EQ(order["status"], "PAID");
    EXPECT_EQ(order["paid_amount"], 1999);
    const json events = Audit("/v1/orders/ORD-1/events")["events"];
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[1]["source"], GetParam());
    EXPECT_EQ(events[1]["event_type"], "PAYMENT_SUCCEEDED");
    EXPECT_TRUE(events[1]["data"].is_object());
    const json receipts = Audit("/v1/orders/ORD-1/receipts")["receipts"];
    ASSERT_EQ(receipts.size(), 4u);
    EXPECT_EQ(receipts[1]["outcome"], "appended");
    EXPECT_EQ(receipts[1]["body"], notice.body);
    EXPECT_EQ(receipts[2]["outcome"], "duplicate");
    EXPECT_EQ(receipts[3]["outcome"], "duplicate");
    EXPECT_EQ(receipts[2]["seq"], receipts[1]["seq"]);
}

TEST_P(PlatformCallbacksPgTest, WrongAmountIsMismatchAndAppendsNothing) {
    CreateOrder("ORD-2");
    ExpectFailure(Post(Notice("ORD-2", "payment", 1500)), 422);
    EXPECT_EQ(EventCount("ORD-2"), "1");
    EXPECT_EQ(Audit("/v1/orders/ORD-2/receipts")["receipts"][1]["outcome"], "mismatch");
}

TEST_P(PlatformCallbacksPgTest, RefundWithinTheOrderAppendsAndALargerOneIsMismatch) {
    CreateOrder("ORD-3");
    ExpectSuccess(Post(Notice("ORD-3")));
    ExpectFailure(Post(Notice("ORD-3", "refund", 5000)), 422);
    EXPECT_EQ(EventCount("ORD-3"), "2");
    ExpectSuccess(Post(Notice("ORD-3", "refund", 500)));
    const json order = Audit("/v1/orders/ORD-3");
    EXPECT_EQ(order["status"], "REFUNDED");
    EXPECT_EQ(order["refunded_amount"], 500);
    EXPECT_EQ(Audit("/v1/orders/ORD-3/events")["events"][2]["currency"], "CNY");
}

// The cross-checks over HTTP: a refund notice that names another order total, or another
// payment than the stored one, is 422 and appends nothing; one that names the right ones
// appends.
TEST_P(PlatformCallbacksPgTest, RefundNamingAnotherTotalOrPaymentIsMismatch) {
    CreateOrder("ORD-8");
    SimulateOptions payment{.channel = GetParam(),
                            .out_trade_no = "ORD-8",
                            .amount = kOrderAmount,
                            .transaction_id = "4200000000202611300000000808"};
    ExpectSuccess(Post(BuildNotice(config_, payment)));
    // Simulate's refund names the payment number it derives for ORD-8, not the stored one.
    ExpectFailure(Post(Notice("ORD-8", "refund", 500)), 422);
    CreateOrder("ORD-9");
    ExpectSuccess(Post(Notice("ORD-9")));
    SimulateOptions refund{.channel = GetParam(),
                           .out_trade_no = "ORD-9",
                           .kind = "refund",
                           .amount = 500,
                           .order_amount = 5000};
    ExpectFailure(Post(BuildNotice(config_, refund)), 422);
    EXPECT_EQ(EventCount("ORD-8"), "2");
    EXPECT_EQ(EventCount("ORD-9"), "2");
    for (const char* order : {"/v1/orders/ORD-8/receipts", "/v1/orders/ORD-9/receipts"}) {
        const json receipts = Audit(order)["receipts"];
        ASSERT_EQ(receipts.size(), 3u) << order;
        EXPECT_EQ(receipts[2]["outcome"], "mismatch") << order;
    }
    ExpectSuccess(Post(Notice("ORD-9", "refund", 500)));  // The order's own total and payment.
    EXPECT_EQ(Audit("/v1/orders/ORD-9")["status"], "REFUNDED");
}

TEST_P(PlatformCallbacksPgTest, OtherMerchantIsMismatch) {
    CreateOrder("ORD-4");
    Config other = config_;
    other.wechat_v2->mch_id = "1900009999";
    other.wechat_v3->mchid = "1900009999";
    other.alipay->app_id = "2021000000009999";
    ExpectFailure(Post(Notice("ORD-4", "payment", 1999, &other)), 422);
    EXPECT_EQ(EventCount("ORD-4"), "1");
}

TEST_P(PlatformCallbacksPgTest, BadSignatureIs401AndTheReceiptIsKept) {
    CreateOrder("ORD-5");
    Config forger = config_;
    forger.wechat_v2->api_key = "0123456789abcdef0123456789abcdef";
    forger.wechat_v3->simulate_private_key = testing::TestPlatformKey(3);
    forger.alipay->simulate_private_key = testing::TestPlatformKey(3);
    ExpectFailure(Post(Notice("ORD-5", "payment", 1999, &forger)), 401);
    EXPECT_EQ(EventCount("ORD-5"), "1");
    const json forged = Audit("/v1/receipts?outcome=bad_signature")["receipts"];
    ASSERT_EQ(forged.size(), 1u);
    EXPECT_EQ(forged[0]["source"], GetParam());
    EXPECT_TRUE(forged[0]["seq"].is_null());
    const json receipts = Audit("/v1/orders/ORD-5/receipts")["receipts"];
    if (GetParam() == "wechat_v3") {
        // v3 decrypts nothing before the signature holds, and the order number is
        // inside the encrypted resource: the forged receipt names no order.
        EXPECT_TRUE(forged[0]["out_trade_no"].is_null());
        EXPECT_EQ(receipts.size(), 1u);
        return;
    }
    EXPECT_EQ(forged[0]["out_trade_no"], "ORD-5");  // As the unverified body claims.
    ASSERT_EQ(receipts.size(), 2u);
    EXPECT_EQ(receipts[1]["outcome"], "bad_signature");
}

TEST_P(PlatformCallbacksPgTest, UnknownOrderIs404InThePlatformFormat) {
    ExpectFailure(Post(Notice("ORD-NONE")), 404);
    EXPECT_EQ(EventCount("ORD-NONE"), "0");
}

INSTANTIATE_TEST_SUITE_P(Channels, PlatformCallbacksPgTest,
                         ::testing::Values("wechat_v2", "wechat_v3", "alipay"));

class PlatformOnlyPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
    }
    TestDatabase db_;
};

// The same paid trade is announced again months later as TRADE_FINISHED
// (docs/platforms.md#trade-statuses).
TEST_F(PlatformOnlyPgTest, AlipayTradeFinishedAfterTradeSuccessIsADuplicate) {
    TestService service{testing::WithPlatforms(testing::TestConfig(db_.url()))};
    HttpClient client{service.port()};
    ASSERT_EQ(service.CreateOrder(client, "ORD-6", "acct-1", 8880).status, 201);
    PlatformFields fields = {{"app_id", testing::kAlipayAppId},
                             {"notify_time", "2024-05-01 10:30:20"},
                             {"out_trade_no", "ORD-6"},
                             {"trade_no", "2024050122001400000000000006"},
                             {"trade_status", "TRADE_SUCCESS"},
                             {"total_amount", "88.8"},
                             {"gmt_payment", "2024-05-01 10:30:15"},
                             {"sign_type", "RSA2"}};
    const auto post = [&](PlatformFields notice) {
        notice["sign"] = ledger::Base64Encode(
            RsaSha256Sign(testing::TestPlatformKey(2), AlipaySignContent(notice)));
        return client.Post("/v1/callbacks/alipay", EncodeForm(notice),
                           {{"Content-Type", "application/x-www-form-urlencoded"}});
    };
    EXPECT_EQ(post(fields).body, "success");
    fields["trade_status"] = "TRADE_FINISHED";
    fields["notify_time"] = "2024-08-01 10:30:20";
    EXPECT_EQ(post(fields).body, "success");
    fields["trade_status"] = "TRADE_CLOSED";
    fields["refund_fee"] = "88.80";
    fields["gmt_refund"] = "2024-05-03 10:00:00";
    fields["out_biz_no"] = "RF-6";
    EXPECT_EQ(post(fields).body, "success");
    const json receipts = client.Get("/v1/orders/ORD-6/receipts", kAuditorToken).Json()["receipts"];
    ASSERT_EQ(receipts.size(), 4u);
    EXPECT_EQ(receipts[1]["outcome"], "appended");
    EXPECT_EQ(receipts[2]["outcome"], "duplicate");
    EXPECT_EQ(receipts[3]["outcome"], "appended");
    const json order = client.Get("/v1/orders/ORD-6", kAuditorToken).Json();
    EXPECT_EQ(order["status"], "REFUNDED");
    EXPECT_EQ(order["paid_amount"], 8880);
    EXPECT_EQ(order["refunded_amount"], 8880);
}

// The ECB block-splicing attack on WeChat v2 refund notices, end to end. An auditor
// (or anyone who reads the receipts) holds two encrypted refund notices of the merchant:
// ORD-A's refund that failed (REFUNDCLOSE, ignored) and ORD-B's that succeeded. Splicing the
// blocks up to ORD-A's out_trade_no with ORD-B's remaining blocks gives a req_info that
// decrypts under the merchant's key to ORD-A with ORD-B's refund, total and payment. Posted,
// it must be refused (mismatch), never appended, and ORD-A stays unrefunded.
TEST_F(PlatformOnlyPgTest, WechatV2SplicedRefundBlocksAreMismatchNeverAppended) {
    TestService service{testing::WithPlatforms(testing::TestConfig(db_.url()))};
    HttpClient client{service.port()};
    const auto post = [&](const SimulatedNotice& notice) {
        return client.Post(notice.target, notice.body, {{"Content-Type", "text/xml"}});
    };
    ASSERT_EQ(service.CreateOrder(client, "ORD-A", "acct-1", 1999).status, 201);
    ASSERT_EQ(service.CreateOrder(client, "ORD-B", "acct-2", 5000).status, 201);
    for (const auto& [order, amount] : {std::pair{"ORD-A", 1999}, std::pair{"ORD-B", 5000}}) {
        ASSERT_EQ(
            post(BuildNotice(service.config(),
                             {.channel = "wechat_v2", .out_trade_no = order, .amount = amount}))
                .status,
            200);
    }
    const auto payment_of = [&](const std::string& order) {
        return client.Get("/v1/orders/" + order, kAuditorToken)
            .Json()["transaction_id"]
            .get<std::string>();
    };
    const auto refund_notice = [](const PlatformFields& refund, std::size_t& boundary) {
        const std::string plaintext = testing::AlignedRefundPlaintext(refund, boundary);
        return SimulatedNotice{
            .target = "/v1/callbacks/wechat/v2",
            .body = WechatV2Xml({{"return_code", "SUCCESS"},
                                 {"appid", testing::kV2AppId},
                                 {"mch_id", testing::kV2MchId},
                                 {"nonce_str", "n1"},
                                 {"req_info", ledger::Base64Encode(Aes256EcbEncrypt(
                                                  Md5HexLower(testing::kV2ApiKey), plaintext))}},
                                "xml")};
    };
    PlatformFields a = {{"out_trade_no", "ORD-A"},
                        {"refund_fee", "1999"},
                        {"refund_id", "5030000000000000000A"},
                        {"refund_status", "REFUNDCLOSE"},
                        {"total_fee", "1999"},
                        {"transaction_id", payment_of("ORD-A")}};
    PlatformFields b = {{"out_trade_no", "ORD-B"},
                        {"refund_fee", "1500"},
                        {"refund_id", "5030000000000000000B"},
                        {"refund_status", "SUCCESS"},
                        {"success_time", "2024-05-02 10:00:00"},
                        {"total_fee", "5000"},
                        {"transaction_id", payment_of("ORD-B")}};
    std::size_t boundary = 0;
    std::size_t boundary_b = 0;
    const SimulatedNotice notice_a = refund_notice(a, boundary);
    const SimulatedNotice notice_b = refund_notice(b, boundary_b);
    ASSERT_EQ(boundary, boundary_b);
    EXPECT_EQ(post(notice_a).status, 200);  // ignored: the refund failed.
    EXPECT_EQ(post(notice_b).status, 200);  // appended.

    // The attacker's view: the stored receipts of both orders, as an auditor reads them.
    const auto sealed_of = [&](const std::string& order) {
        const json receipts =
            client.Get("/v1/orders/" + order + "/receipts", kAuditorToken).Json()["receipts"];
        const Checked<PlatformFields> fields =
            ParseFlatXml(receipts.back()["body"].get<std::string>(), "xml");
        EXPECT_TRUE(fields.ok());
        return ledger::Base64Decode(fields->at("req_info")).value_or("");
    };
    const std::string sealed_a = sealed_of("ORD-A");
    const std::string sealed_b = sealed_of("ORD-B");
    ASSERT_EQ(boundary % testing::kAesBlockBytes, 0u);
    ASSERT_GT(sealed_a.size(), boundary);
    const std::string spliced = sealed_a.substr(0, boundary) + sealed_b.substr(boundary);
    SimulatedNotice forged = notice_b;
    const std::string original = ledger::Base64Encode(sealed_b);
    forged.body.replace(forged.body.find(original), original.size(), ledger::Base64Encode(spliced));

    const HttpResult result = post(forged);
    EXPECT_EQ(result.status, 422) << result.body;
    EXPECT_NE(result.body.find("mismatch"), std::string::npos) << result.body;
    const json order = client.Get("/v1/orders/ORD-A", kAuditorToken).Json();
    EXPECT_EQ(order["status"], "PAID");
    EXPECT_EQ(order["refunded_amount"], 0);
    const json receipts = client.Get("/v1/orders/ORD-A/receipts", kAuditorToken).Json()["receipts"];
    ASSERT_EQ(receipts.size(), 4u);  // Created, paid, the failed refund, the splice.
    EXPECT_EQ(receipts[3]["outcome"], "mismatch");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events WHERE out_trade_no = 'ORD-A'"), "2");
}

TEST_F(PlatformOnlyPgTest, AlipayCloseClosesTheOrder) {
    TestService service{testing::WithPlatforms(testing::TestConfig(db_.url()))};
    HttpClient client{service.port()};
    ASSERT_EQ(service.CreateOrder(client, "ORD-7", "acct-1", 100).status, 201);
    const SimulatedNotice notice = BuildNotice(
        service.config(), {.channel = "alipay", .out_trade_no = "ORD-7", .kind = "close"});
    EXPECT_EQ(client.Post(notice.target, notice.body).body, "success");
    EXPECT_EQ(client.Get("/v1/orders/ORD-7", kAuditorToken).Json()["status"], "CLOSED");
}

TEST_F(PlatformOnlyPgTest, UnconfiguredChannelsAreNotServed) {
    TestService service{testing::TestConfig(db_.url())};
    HttpClient client{service.port()};
    for (const char* path : {"/v1/callbacks/wechat/v2", "/v1/callbacks/wechat/v3",
                             "/v1/callbacks/alipay", "/v1/callbacks/wechat"}) {
        EXPECT_EQ(client.Post(path, "x").status, 404) << path;
    }
    EXPECT_EQ(client.Post("/v1/callbacks/generic", "x").status, 401);
}

}  // namespace
}  // namespace payledger::api
