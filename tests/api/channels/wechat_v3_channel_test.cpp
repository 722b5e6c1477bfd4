// Tests of the WeChat Pay v3 channel (docs/platforms.md) without a database: envelopes signed
// by test-only platform keys; Verify() checked for the verdict, the event and the receipt,
// Answer() for its answers. Refusals are tables: forged signatures, unknown serials, stale
// timestamps, other merchants, malformed resources, duplicate JSON keys; the signature is checked
// before anything is parsed or decrypted.

#include "api/channels/wechat_v3_channel.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "ledger/base/bytes.hpp"
#include "projections/decide.hpp"
#include "projections/validate.hpp"
#include "tests/api/channels/platform_channel_fixture.hpp"
#include "tests/api/channels/platform_fixtures.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::EventType;
using projections::Outcome;

// A v3 envelope `body` signed by `key` as `serial` at `unix_seconds`.
SimulatedNotice V3Signed(std::string body, std::int64_t unix_seconds,
                         const std::string& serial = testing::kV3Serial,
                         const PrivateKey& key = testing::TestPlatformKey(0)) {
    SimulatedNotice notice{.target = "/v1/callbacks/wechat/v3", .body = std::move(body)};
    const std::string timestamp = std::to_string(unix_seconds);
    notice.headers = {
        {"Wechatpay-Serial", serial},
        {"Wechatpay-Timestamp", timestamp},
        {"Wechatpay-Nonce", "9f2c1a7e5b3d4c6a"},
        {"Wechatpay-Signature",
         ledger::Base64Encode(RsaSha256Sign(
             key, WechatV3SignatureMessage(timestamp, "9f2c1a7e5b3d4c6a", notice.body)))}};
    return notice;
}

// The envelope of `event_type` around `plaintext`, encrypted with `api_v3_key`.
json V3Envelope(const std::string& event_type, const std::string& plaintext,
                const std::string& api_v3_key = testing::kV3ApiKey) {
    const std::string sealed =
        Aes256GcmEncrypt(api_v3_key, "n0nce12chars", "transaction", plaintext);
    return {{"id", "EV-1"},
            {"event_type", event_type},
            {"resource_type", "encrypt-resource"},
            {"resource",
             {{"algorithm", "AEAD_AES_256_GCM"},
              {"ciphertext", ledger::Base64Encode(sealed)},
              {"associated_data", "transaction"},
              {"nonce", "n0nce12chars"}}}};
}

// A v3 notice of `event_type` around `resource`, encrypted with `api_v3_key` and signed by
// `key` as `serial` at `unix_seconds`.
SimulatedNotice V3Notice(const std::string& event_type, const json& resource,
                         std::int64_t unix_seconds, const std::string& serial = testing::kV3Serial,
                         const PrivateKey& key = testing::TestPlatformKey(0),
                         const std::string& api_v3_key = testing::kV3ApiKey) {
    return V3Signed(V3Envelope(event_type, resource.dump(), api_v3_key).dump(), unix_seconds,
                    serial, key);
}

json V3Transaction() {
    return {{"mchid", testing::kV3MchId},
            {"appid", testing::kV3AppId},
            {"out_trade_no", "ORD-1"},
            {"transaction_id", "4200000000202405010000000001"},
            {"trade_state", "SUCCESS"},
            {"success_time", "2024-05-01T10:30:15+08:00"},
            {"amount", {{"total", 1999}, {"currency", "CNY"}}}};
}

void SetHeader(SimulatedNotice& notice, const std::string& name, const std::string& value) {
    for (auto& [header, text] : notice.headers) {
        if (header == name) text = value;
    }
}

TEST_F(PlatformChannelTest, WechatV3PaymentBecomesAPaymentEvent) {
    const ledger::Delivery delivery = Deliver(v3_, Notice("wechat_v3"));
    ExpectVerdict(delivery, Outcome::kAppended);
    ASSERT_TRUE(delivery.event);
    EXPECT_EQ(delivery.event->event_type, EventType::kPaymentSucceeded);
    EXPECT_EQ(delivery.event->amount, 1999);
    EXPECT_EQ(delivery.event->currency, "CNY");
    EXPECT_EQ(delivery.event->occurred_at, now_ * 1'000'000);
    EXPECT_TRUE(json::parse(delivery.event->data).contains("id"));
    EXPECT_EQ(delivery.receipt.out_trade_no, "ORD-1");
    EXPECT_NE(delivery.receipt.headers.find("Wechatpay-Serial"), std::string::npos);
    EXPECT_NE(delivery.receipt.headers.find("Wechatpay-Signature"), std::string::npos);
}

TEST_F(PlatformChannelTest, WechatV3ChoosesTheKeyBySerial) {
    ExpectVerdict(Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", V3Transaction(), now_,
                                        testing::kV3PublicKeyId, testing::TestPlatformKey(1))),
                  Outcome::kAppended);
    ExpectVerdict(Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", V3Transaction(), now_,
                                        testing::kV3Serial, testing::TestPlatformKey(1))),
                  Outcome::kBadSignature);
    ExpectVerdict(Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", V3Transaction(), now_,
                                        "0123456789ABCDEF", testing::TestPlatformKey(0))),
                  Outcome::kBadSignature);
}

TEST_F(PlatformChannelTest, WechatV3TimestampMustBeWithinTheWindow) {
    for (const std::int64_t skew : {-300, -1, 0, 1, 300}) {
        ExpectVerdict(Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", V3Transaction(), now_ + skew)),
                      Outcome::kAppended);
    }
    for (const std::int64_t skew : {-100000, -301, 301, 100000}) {
        ExpectVerdict(Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", V3Transaction(), now_ + skew)),
                      Outcome::kBadSignature);
    }
}

TEST_F(PlatformChannelTest, WechatV3RefusesForgedNoticesCleanly) {
    SimulatedNotice tampered = Notice("wechat_v3");
    tampered.body.insert(tampered.body.size() - 1, " ");
    const ledger::Delivery delivery = Deliver(v3_, tampered);
    ExpectVerdict(delivery, Outcome::kBadSignature);
    // Nothing is decrypted before the signature holds, so the order inside the
    // resource is never read: the receipt names none.
    EXPECT_FALSE(delivery.receipt.out_trade_no.has_value());
    ExpectVerdict(Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", V3Transaction(), now_,
                                        testing::kV3Serial, testing::TestPlatformKey(3))),
                  Outcome::kBadSignature);
    for (const auto& [header, value] : std::vector<std::pair<std::string, std::string>>{
             {"Wechatpay-Signature", "WECHATPAY/SIGNTEST/9B1A2C3D4E5F60718293A4B5C6D7E8F9"},
             {"Wechatpay-Signature", "not base64"},
             {"Wechatpay-Signature", ""},
             {"Wechatpay-Timestamp", "-1"},
             {"Wechatpay-Timestamp", "soon"},
             {"Wechatpay-Nonce", ""},
             {"Wechatpay-Serial", ""},
             {"Wechatpay-Signature-Type", "WECHATPAY2-SM2-WITH-SM3"}}) {
        SimulatedNotice notice = Notice("wechat_v3");
        SetHeader(notice, header, value);
        if (header == "Wechatpay-Signature-Type") notice.headers.emplace_back(header, value);
        ExpectVerdict(Deliver(v3_, notice), Outcome::kBadSignature);
    }
    // Signed by WeChat but not encrypted with our APIv3 key.
    ExpectVerdict(
        Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", V3Transaction(), now_, testing::kV3Serial,
                              testing::TestPlatformKey(0), "0123456789abcdef0123456789abcdef")),
        Outcome::kBadSignature);
}

TEST_F(PlatformChannelTest, WechatV3OtherMerchantIsMismatch) {
    for (const char* field : {"mchid", "appid"}) {
        json resource = V3Transaction();
        resource[field] = "other";
        ExpectVerdict(Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", resource, now_)),
                      Outcome::kMismatch);
    }
    json without_appid = V3Transaction();
    without_appid.erase("appid");
    ExpectVerdict(Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", without_appid, now_)),
                  Outcome::kAppended);
}

TEST_F(PlatformChannelTest, WechatV3RefundAndIgnoredStates) {
    const ledger::Delivery refund = Deliver(v3_, Notice("wechat_v3", "refund", 700));
    ExpectVerdict(refund, Outcome::kAppended);
    ASSERT_TRUE(refund.event);
    EXPECT_EQ(refund.event->event_type, EventType::kRefundSucceeded);
    EXPECT_EQ(refund.event->amount, 700);
    EXPECT_EQ(refund.event->currency, "");
    EXPECT_TRUE(refund.event->transaction_id->starts_with("5030"));
    json closed = V3Transaction();
    closed["refund_status"] = "CLOSED";
    for (const char* type : {"REFUND.ABNORMAL", "REFUND.CLOSED", "TRANSACTION.FAIL"}) {
        ExpectVerdict(Deliver(v3_, V3Notice(type, closed, now_)), Outcome::kIgnored);
    }
    json unpaid = V3Transaction();
    unpaid["trade_state"] = "NOTPAY";
    ExpectVerdict(Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", unpaid, now_)), Outcome::kIgnored);
}

TEST_F(PlatformChannelTest, WechatV3RefusesMalformedResources) {
    const std::vector<std::pair<std::string, json>> changes = {
        {"amount", {{"total", 19.99}}}, {"amount", {{"total", "1999"}}},
        {"amount", {{"total", 0}}},     {"amount", {{"total", 1999}, {"currency", "cny"}}},
        {"out_trade_no", "bad key!"},   {"success_time", "2024-05-01 10:30:15"},
        {"transaction_id", ""},         {"mchid", nullptr},
        {"trade_state", nullptr},       {"trade_state", 1}};
    for (const auto& [field, value] : changes) {
        json resource = V3Transaction();
        if (value.is_null()) {
            resource.erase(field);
        } else {
            resource[field] = value;
        }
        ExpectVerdict(Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", resource, now_)),
                      Outcome::kMalformed);
    }
    SimulatedNotice signed_junk = Notice("wechat_v3");
    signed_junk.body = "not json";
    SetHeader(signed_junk, "Wechatpay-Signature",
              ledger::Base64Encode(RsaSha256Sign(
                  testing::TestPlatformKey(0),
                  WechatV3SignatureMessage(std::to_string(now_), "n", signed_junk.body))));
    SetHeader(signed_junk, "Wechatpay-Timestamp", std::to_string(now_));
    SetHeader(signed_junk, "Wechatpay-Nonce", "n");
    ExpectVerdict(Deliver(v3_, signed_junk), Outcome::kMalformed);
}

// WeChat v3 verifies the signature over the raw bytes before it parses or decrypts
// anything. A body that would be malformed is bad_signature when its signature fails, and
// malformed only once signed; a forged notice's resource is never opened (its receipt names
// no order, while a signed one names the order inside the resource).
TEST_F(PlatformChannelTest, WechatV3VerifiesTheSignatureBeforeParsingOrDecrypting) {
    const std::string resource = V3Transaction().dump();
    std::string duplicate_envelope = V3Envelope("TRANSACTION.SUCCESS", resource).dump();
    duplicate_envelope.insert(1, R"("event_type":"REFUND.SUCCESS",)");
    const std::string duplicate_resource =
        V3Envelope("TRANSACTION.SUCCESS", R"({"out_trade_no":"ORD-2",)" + resource.substr(1))
            .dump();
    for (const std::string& body : {duplicate_envelope, duplicate_resource, std::string("{")}) {
        SCOPED_TRACE(body);
        ExpectVerdict(Deliver(v3_, V3Signed(body, now_)), Outcome::kMalformed);
        const ledger::Delivery forged =
            Deliver(v3_, V3Signed(body, now_, testing::kV3Serial, testing::TestPlatformKey(3)));
        ExpectVerdict(forged, Outcome::kBadSignature);
        EXPECT_FALSE(forged.receipt.out_trade_no.has_value());
    }
    const ledger::Delivery forged =
        Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", V3Transaction(), now_, testing::kV3Serial,
                              testing::TestPlatformKey(3)));
    ExpectVerdict(forged, Outcome::kBadSignature);
    EXPECT_FALSE(forged.receipt.out_trade_no.has_value());
    const ledger::Delivery stale =
        Deliver(v3_, V3Notice("TRANSACTION.SUCCESS", V3Transaction(), now_ - 301));
    ExpectVerdict(stale, Outcome::kBadSignature);
    EXPECT_FALSE(stale.receipt.out_trade_no.has_value());
    EXPECT_EQ(Deliver(v3_, Notice("wechat_v3")).receipt.out_trade_no, "ORD-1");
}

json V3Refund() {
    return {{"mchid", testing::kV3MchId},
            {"out_trade_no", "ORD-1"},
            {"transaction_id", "4200000000202405010000000001"},
            {"out_refund_no", "R-1"},
            {"refund_id", "50300000000000000001"},
            {"refund_status", "SUCCESS"},
            {"success_time", "2024-05-02T10:00:00+08:00"},
            {"amount", {{"total", 1999}, {"refund", 500}}}};
}

// amount.total and transaction_id of a refund go to the ledger as claims; where the
// notice leaves one out there is nothing to check, where it names one it must be valid.
TEST_F(PlatformChannelTest, WechatV3RefundNamesItsOrderTotalAndPaymentForTheLedger) {
    const ledger::Delivery delivery = Deliver(v3_, V3Notice("REFUND.SUCCESS", V3Refund(), now_));
    ExpectVerdict(delivery, Outcome::kAppended);
    EXPECT_EQ(delivery.claims.order_amount, 1999);
    EXPECT_EQ(delivery.claims.payment_transaction_id, "4200000000202405010000000001");
    json bare = V3Refund();
    bare.erase("transaction_id");
    bare["amount"].erase("total");
    const ledger::Delivery unnamed = Deliver(v3_, V3Notice("REFUND.SUCCESS", bare, now_));
    ExpectVerdict(unnamed, Outcome::kAppended);
    EXPECT_FALSE(unnamed.claims.order_amount.has_value());
    EXPECT_FALSE(unnamed.claims.payment_transaction_id.has_value());
    for (const auto& [path, value] :
         std::vector<std::pair<std::string, json>>{{"/amount/total", "1999"},
                                                   {"/amount/total", 19.99},
                                                   {"/amount/total", 0},
                                                   {"/transaction_id", ""},
                                                   {"/transaction_id", 42}}) {
        SCOPED_TRACE(path + "=" + value.dump());
        json resource = V3Refund();
        resource[json::json_pointer(path)] = value;
        ExpectVerdict(Deliver(v3_, V3Notice("REFUND.SUCCESS", resource, now_)),
                      Outcome::kMalformed);
    }
}

TEST_F(PlatformChannelTest, WechatV3AnswersNoContentOrFailJson) {
    for (const Outcome outcome : {Outcome::kAppended, Outcome::kDuplicate, Outcome::kIgnored}) {
        const Response response = v3_.Answer({.outcome = outcome});
        EXPECT_EQ(response.result(), http::status::no_content);
        EXPECT_TRUE(response.body().empty());
    }
    const Response conflict = v3_.Answer({.outcome = Outcome::kConflict, .message = "x"});
    EXPECT_EQ(conflict.result(), http::status::conflict);
    EXPECT_EQ(json::parse(conflict.body()), (json{{"code", "FAIL"}, {"message", "conflict: x"}}));
    EXPECT_EQ(v3_.Answer({.outcome = Outcome::kMalformed}).result(), http::status::bad_request);
    EXPECT_EQ(v3_.Answer({.failure = ledger::FailureKind::kInvariantBroken}).result(),
              http::status::internal_server_error);
}

}  // namespace
}  // namespace payledger::api
