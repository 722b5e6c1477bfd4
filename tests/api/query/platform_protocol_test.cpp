// Tests of api/query/platform_protocol.hpp without a network: each platform's request as its API
// documents it (WeChat Pay v3's published signing example as a known answer, the signature
// verified with the public half of the key that made it), and each answer verified before it is
// read: signed answers of every state mapped as docs/query.md's table says, probes, unsigned v2
// successes and forged Alipay answers refused as bad signatures, answers about another order or
// merchant refused as mismatches, transport failures and 5xx counted as failures. The requests
// and answers are also checked by the platforms' own SDKs (tests/platform_sdks/).
#include "api/query/platform_protocol.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/channels/alipay_form.hpp"
#include "api/channels/platform_crypto.hpp"
#include "api/channels/wechat_v2_xml.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "api/http/json_output.hpp"
#include "ledger/base/bytes.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::EventType;
using projections::Outcome;

// 2024-05-01T02:30:15Z.
constexpr projections::TimeMicros kAskedAt = 1714530615LL * 1'000'000;
constexpr const char* kPlatformSerial = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1";

struct Keys {
    PrivateKey merchant = GenerateRsaKey();
    PrivateKey platform = GenerateRsaKey();
};

const Keys& TestKeys() {
    static const Keys keys;
    return keys;
}

WechatV3Config V3Config() {
    WechatV3Config config{
        .appid = "wxd678efh567hg6787", .mchid = "1230000109", .api_v3_key = std::string(32, 'k')};
    config.platform_public_keys[kPlatformSerial] = TestKeys().platform.Public();
    config.query =
        WechatV3QueryConfig{.endpoint = {.api_base = "https://api.mch.weixin.qq.com"},
                            .merchant_private_key = TestKeys().merchant,
                            .merchant_serial = "1DDE55AD98ED71D6EDD4A4A16996DE7B47773A8C"};
    return config;
}

WechatV2Config V2Config() {
    return WechatV2Config{.appid = "wx2421b1c4370ec43b",
                          .mch_id = "10000100",
                          .api_key = "192006250b4c09247ec02edce69f6a2d",
                          .query = QueryEndpoint{.api_base = "https://api.mch.weixin.qq.com"}};
}

AlipayConfig AlipayTestConfig() {
    AlipayConfig config{.app_id = "2014072300007148",
                        .alipay_public_key = TestKeys().platform.Public()};
    config.query =
        AlipayQueryConfig{.endpoint = {.api_base = "https://openapi.alipay.com/gateway.do"},
                          .app_private_key = TestKeys().merchant};
    return config;
}

const RequestMoment kAskMoment{.now = kAskedAt, .nonce = "593BEC0C930BF1AFEB40B4A08C8FB242"};

// ---- requests ---------------------------------------------------------------------------------

// WeChat Pay's own example of what a request signature covers (the APIv3 signing guide: a GET of
// /v3/certificates at 1554208460 with nonce 593BEC0C930BF1AFEB40B4A08C8FB242, and its POST of
// /v3/pay/transactions/jsapi with a JSON body).
TEST(WechatV3RequestTest, TheSignedMessageIsWechatPaysExample) {
    EXPECT_EQ(WechatV3RequestMessage("GET", "/v3/certificates", 1554208460,
                                     "593BEC0C930BF1AFEB40B4A08C8FB242", ""),
              "GET\n/v3/certificates\n1554208460\n593BEC0C930BF1AFEB40B4A08C8FB242\n\n");
    EXPECT_EQ(WechatV3RequestMessage("POST", "/v3/pay/transactions/jsapi", 1554208460,
                                     "593BEC0C930BF1AFEB40B4A08C8FB242",
                                     R"({"appid":"wxd678efh567hg6787"})"),
              "POST\n/v3/pay/transactions/jsapi\n1554208460\n593BEC0C930BF1AFEB40B4A08C8FB242\n"
              R"({"appid":"wxd678efh567hg6787"})"
              "\n");
}

TEST(WechatV3RequestTest, QueryAndCloseAreSignedWithTheMerchantKey) {
    const WechatV3Config config = V3Config();
    const PlatformRequest query =
        WechatV3Request(config, QueryAction::kQuery, "ORD*1|2", kAskMoment);
    EXPECT_EQ(query.method, "GET");
    EXPECT_EQ(query.target, "/v3/pay/transactions/out-trade-no/ORD%2A1%7C2?mchid=1230000109");
    EXPECT_EQ(query.url, "https://api.mch.weixin.qq.com" + query.target);
    EXPECT_EQ(query.body, "");
    const PlatformRequest close = WechatV3Request(config, QueryAction::kClose, "ORD-1", kAskMoment);
    EXPECT_EQ(close.method, "POST");
    EXPECT_EQ(close.target, "/v3/pay/transactions/out-trade-no/ORD-1/close");
    EXPECT_EQ(close.body, R"({"mchid":"1230000109"})");
    for (const PlatformRequest* request : {&query, &close}) {
        std::string authorization;
        for (const auto& [name, value] : request->headers) {
            if (name == "Authorization") authorization = value;
        }
        const std::string prefix =
            "WECHATPAY2-SHA256-RSA2048 "
            "mchid=\"1230000109\",nonce_str=\"593BEC0C930BF1AFEB40B4A08C8FB242\","
            "timestamp=\"1714530615\",serial_no=\"1DDE55AD98ED71D6EDD4A4A16996DE7B47773A8C\","
            "signature=\"";
        ASSERT_TRUE(authorization.starts_with(prefix)) << authorization;
        const std::string signature =
            authorization.substr(prefix.size(), authorization.size() - prefix.size() - 1);
        const std::optional<std::string> raw = ledger::Base64Decode(signature);
        ASSERT_TRUE(raw.has_value());
        EXPECT_TRUE(
            RsaSha256Verify(TestKeys().merchant.Public(),
                            WechatV3RequestMessage(request->method, request->target, 1714530615,
                                                   kAskMoment.nonce, request->body),
                            *raw));
    }
}

TEST(WechatV3RequestTest, PathEscapeIsGosUrlPathEscape) {
    EXPECT_EQ(PathEscape("AZaz09-_.~"), "AZaz09-_.~");
    EXPECT_EQ(PathEscape("a*b|c d/e?f"), "a%2Ab%7Cc%20d%2Fe%3Ff");
    EXPECT_EQ(PathEscape("$&+:=@"), "$&+:=@");
}

TEST(WechatV2RequestTest, TheXmlIsSignedAsNotificationsAre) {
    for (const WechatV2SignType sign_type :
         {WechatV2SignType::kMd5, WechatV2SignType::kHmacSha256}) {
        WechatV2Config config = V2Config();
        config.sign_type = sign_type;
        const PlatformRequest request =
            WechatV2Request(config, QueryAction::kQuery, "ORD-1", kAskMoment);
        EXPECT_EQ(request.url, "https://api.mch.weixin.qq.com/pay/orderquery");
        const Checked<PlatformFields> fields = ParseFlatXml(request.body, "xml");
        ASSERT_TRUE(fields.ok()) << request.body;
        EXPECT_EQ(FieldOr(*fields, "out_trade_no"), "ORD-1");
        EXPECT_EQ(FieldOr(*fields, "nonce_str"), kAskMoment.nonce);
        EXPECT_EQ(FieldOr(*fields, "sign"), WechatV2Sign(*fields, config.api_key, sign_type));
        EXPECT_EQ(fields->contains("sign_type"), sign_type == WechatV2SignType::kHmacSha256);
    }
    EXPECT_EQ(WechatV2Request(V2Config(), QueryAction::kClose, "ORD-1", kAskMoment).url,
              "https://api.mch.weixin.qq.com/pay/closeorder");
}

TEST(AlipayRequestTest, TheFormIsSignedRsa2OverEveryFieldButSign) {
    const PlatformRequest request =
        AlipayRequest(AlipayTestConfig(), QueryAction::kQuery, "ORD-1", kAskMoment);
    EXPECT_EQ(request.url, "https://openapi.alipay.com/gateway.do");
    const Checked<PlatformFields> form = DecodeForm(request.body);
    ASSERT_TRUE(form.ok());
    EXPECT_EQ(FieldOr(*form, "method"), "alipay.trade.query");
    EXPECT_EQ(FieldOr(*form, "timestamp"), "2024-05-01 10:30:15");  // Asia/Shanghai.
    EXPECT_EQ(FieldOr(*form, "biz_content"), R"({"out_trade_no":"ORD-1"})");
    EXPECT_EQ(FieldOr(*form, "sign_type"), "RSA2");
    const std::string content = AlipayRequestSignContent(*form);
    EXPECT_NE(content.find("&sign_type=RSA2&"), std::string::npos) << content;  // Signed too.
    EXPECT_EQ(content.find("&sign="), std::string::npos);
    const std::optional<std::string> sign = ledger::Base64Decode(FieldOr(*form, "sign"));
    ASSERT_TRUE(sign.has_value());
    EXPECT_TRUE(RsaSha256Verify(TestKeys().merchant.Public(), content, *sign));
    EXPECT_EQ(
        FieldOr(
            *DecodeForm(
                AlipayRequest(AlipayTestConfig(), QueryAction::kClose, "ORD-1", kAskMoment).body),
            "method"),
        "alipay.trade.close");
}

// ---- answers ----------------------------------------------------------------------------------

AskedExchange Exchange(QueryChannel channel, QueryAction action, int status, std::string body,
                       std::vector<std::pair<std::string, std::string>> headers = {}) {
    AskedExchange exchange{.channel = channel,
                           .action = action,
                           .out_trade_no = "ORD-1",
                           .request = {.method = "GET", .target = "/asked"},
                           .received_at = kAskedAt,
                           .peer = "api.example:443"};
    exchange.result.status = status;
    exchange.result.answer_body = std::move(body);
    exchange.result.answer_headers = std::move(headers);
    return exchange;
}

// A v3 answer signed by the platform key, as WeChat signs it (`probe`: a signature probe).
AskedExchange SignedV3(QueryAction action, int status, const std::string& body, bool probe = false,
                       std::int64_t at = 1714530615) {
    const std::string timestamp = std::to_string(at);
    const std::string nonce = "ANSWERNONCE0123456789";
    std::string signature = ledger::Base64Encode(
        RsaSha256Sign(TestKeys().platform, WechatV3SignatureMessage(timestamp, nonce, body)));
    if (probe) signature = "WECHATPAY/SIGNTEST/" + signature;
    return Exchange(QueryChannel::kWechatV3, action, status, body,
                    {{"wechatpay-timestamp", timestamp},
                     {"wechatpay-nonce", nonce},
                     {"wechatpay-serial", kPlatformSerial},
                     {"wechatpay-signature", signature},
                     {"request-id", "08F78BB5AF0610F1"}});
}

std::string V3Transaction(const std::string& state, const std::string& out_trade_no = "ORD-1",
                          const std::string& mchid = "1230000109") {
    return Dump(json{{"appid", "wxd678efh567hg6787"},
                     {"mchid", mchid},
                     {"out_trade_no", out_trade_no},
                     {"transaction_id", "4200000985202103031441826014"},
                     {"trade_type", "NATIVE"},
                     {"trade_state", state},
                     {"success_time", "2024-05-01T10:29:00+08:00"},
                     {"amount", {{"total", 1999}, {"currency", "CNY"}}}});
}

TEST(WechatV3AnswerTest, EveryStateMapsAsTheTableSays) {
    const WechatV3Config config = V3Config();
    struct Case {
        std::string state;
        AnswerKind kind;
        std::optional<EventType> event;
    };
    for (const Case& c : std::vector<Case>{
             {"SUCCESS", AnswerKind::kFinal, EventType::kPaymentSucceeded},
             {"REFUND", AnswerKind::kFinal, EventType::kPaymentSucceeded},
             {"CLOSED", AnswerKind::kFinal, EventType::kPaymentClosed},
             {"REVOKED", AnswerKind::kFinal, EventType::kPaymentClosed},
             {"NOTPAY", AnswerKind::kNotFinal, std::nullopt},
             {"USERPAYING", AnswerKind::kNotFinal, std::nullopt},
             {"PAYERROR", AnswerKind::kNotFinal, std::nullopt},
         }) {
        const PlatformAnswer answer =
            ReadWechatV3Answer(config, SignedV3(QueryAction::kQuery, 200, V3Transaction(c.state)));
        EXPECT_EQ(answer.kind, c.kind) << c.state;
        EXPECT_EQ(answer.answer, c.state);
        EXPECT_EQ(answer.delivery.has_value(), c.event.has_value()) << c.state;
        if (!c.event) continue;
        const ledger::Delivery& delivery = *answer.delivery;
        ASSERT_TRUE(delivery.event.has_value());
        EXPECT_EQ(delivery.event->event_type, *c.event);
        EXPECT_EQ(delivery.event->source, projections::Source::kWechatV3Query);
        EXPECT_EQ(delivery.receipt.source, projections::Source::kWechatV3Query);
        EXPECT_EQ(delivery.receipt.out_trade_no, "ORD-1");
        EXPECT_TRUE(delivery.receipt.signature_verified);
        EXPECT_EQ(delivery.receipt.peer, "api.example:443");
        const json headers = json::parse(delivery.receipt.headers);
        EXPECT_EQ(headers["Payledger-Request"], "GET /asked");
        EXPECT_EQ(headers["Wechatpay-Serial"], kPlatformSerial);
        if (*c.event == EventType::kPaymentSucceeded) {
            // The notification's fingerprint: its late notification is a duplicate.
            EXPECT_EQ(delivery.event->amount, 1999);
            EXPECT_EQ(delivery.event->currency, "CNY");
            EXPECT_EQ(delivery.event->transaction_id, "4200000985202103031441826014");
            EXPECT_EQ(delivery.event->occurred_at,
                      projections::ParseRfc3339("2024-05-01T10:29:00+08:00"));
        }
    }
    const PlatformAnswer missing = ReadWechatV3Answer(
        config,
        SignedV3(QueryAction::kQuery, 404, R"({"code":"ORDER_NOT_EXIST","message":"订单不存在"})"));
    EXPECT_EQ(missing.kind, AnswerKind::kNotFinal);
    EXPECT_EQ(missing.answer, "ORDER_NOT_EXIST");
}

TEST(WechatV3AnswerTest, ProbesForgeriesAndStaleAnswersAreBadSignatures) {
    const WechatV3Config config = V3Config();
    const std::string body = V3Transaction("SUCCESS");
    AskedExchange tampered = SignedV3(QueryAction::kQuery, 200, body);
    tampered.result.answer_body = V3Transaction("SUCCESS", "ORD-1", "1230000109") + " ";
    AskedExchange unknown_serial = SignedV3(QueryAction::kQuery, 200, body);
    unknown_serial.result.answer_headers[2].second = "PUB_KEY_ID_0000";
    AskedExchange unsigned_answer =
        Exchange(QueryChannel::kWechatV3, QueryAction::kQuery, 200, body);
    for (const AskedExchange& exchange :
         {SignedV3(QueryAction::kQuery, 200, body, /*probe=*/true), tampered, unknown_serial,
          unsigned_answer, SignedV3(QueryAction::kQuery, 200, body, false, 1714530615 - 301)}) {
        const PlatformAnswer answer = ReadWechatV3Answer(config, exchange);
        EXPECT_EQ(answer.kind, AnswerKind::kBadSignature);
        ASSERT_TRUE(answer.delivery.has_value());
        EXPECT_EQ(answer.delivery->outcome, Outcome::kBadSignature);
        EXPECT_FALSE(answer.delivery->event.has_value());
    }
}

TEST(WechatV3AnswerTest, AnotherOrderOrMerchantIsAMismatchAndFailuresAreNotStored) {
    const WechatV3Config config = V3Config();
    for (const std::string& body :
         {V3Transaction("SUCCESS", "ORD-2"), V3Transaction("SUCCESS", "ORD-1", "999")}) {
        const PlatformAnswer answer =
            ReadWechatV3Answer(config, SignedV3(QueryAction::kQuery, 200, body));
        EXPECT_EQ(answer.kind, AnswerKind::kRefused) << body;
        ASSERT_TRUE(answer.delivery.has_value());
        EXPECT_EQ(answer.delivery->outcome, Outcome::kMismatch);
    }
    AskedExchange timeout = Exchange(QueryChannel::kWechatV3, QueryAction::kQuery, 0, "");
    timeout.result.failure = WebhookFailure::kTimeout;
    AskedExchange too_large = Exchange(QueryChannel::kWechatV3, QueryAction::kQuery, 200, "");
    too_large.result.failure = WebhookFailure::kReceive;
    for (const auto& [exchange, words] : std::vector<std::pair<AskedExchange, std::string>>{
             {timeout, "timeout"},
             {too_large, "answer too large"},
             {SignedV3(QueryAction::kQuery, 503, "{}"), "http 503"}}) {
        const PlatformAnswer answer = ReadWechatV3Answer(config, exchange);
        EXPECT_EQ(answer.kind, AnswerKind::kFailed);
        EXPECT_EQ(answer.answer, words);
        EXPECT_FALSE(answer.delivery.has_value());
    }
}

TEST(WechatV3AnswerTest, ACloseIsConfirmedBy204AndRefusedWhenPaid) {
    const WechatV3Config config = V3Config();
    const PlatformAnswer closed =
        ReadWechatV3Answer(config, SignedV3(QueryAction::kClose, 204, ""));
    EXPECT_EQ(closed.kind, AnswerKind::kClosed);
    ASSERT_TRUE(closed.delivery.has_value());
    EXPECT_EQ(closed.delivery->event->event_type, EventType::kPaymentClosed);
    EXPECT_EQ(closed.delivery->event->source, projections::Source::kWechatV3Close);
    const PlatformAnswer paid = ReadWechatV3Answer(
        config, SignedV3(QueryAction::kClose, 400, R"({"code":"ORDER_PAID","message":"已支付"})"));
    EXPECT_EQ(paid.kind, AnswerKind::kClosePaid);
    EXPECT_FALSE(paid.delivery.has_value());
}

// A v2 answer as WeChat sends it: signed with the API key (unless `unsigned_answer`).
AskedExchange SignedV2(QueryAction action, PlatformFields fields, bool unsigned_answer = false) {
    const WechatV2Config config = V2Config();
    fields.emplace("return_code", "SUCCESS");
    fields.emplace("appid", config.appid);
    fields.emplace("mch_id", config.mch_id);
    fields.emplace("nonce_str", "5K8264ILTKCH16CQ2502SI8ZNMTM67VS");
    if (!unsigned_answer) fields["sign"] = WechatV2Sign(fields, config.api_key, config.sign_type);
    return Exchange(QueryChannel::kWechatV2, action, 200, WechatV2Xml(fields, "xml"));
}

TEST(WechatV2AnswerTest, StatesMapAndAnUnsignedSuccessNeverCounts) {
    const WechatV2Config config = V2Config();
    const PlatformFields paid{
        {"result_code", "SUCCESS"},    {"out_trade_no", "ORD-1"},
        {"trade_state", "SUCCESS"},    {"transaction_id", "1008450740201411110005820873"},
        {"total_fee", "1999"},         {"fee_type", "CNY"},
        {"time_end", "20240501102900"}};
    const PlatformAnswer final_answer =
        ReadWechatV2Answer(config, SignedV2(QueryAction::kQuery, paid));
    EXPECT_EQ(final_answer.kind, AnswerKind::kFinal);
    ASSERT_TRUE(final_answer.delivery && final_answer.delivery->event);
    EXPECT_EQ(final_answer.delivery->event->amount, 1999);
    EXPECT_EQ(final_answer.delivery->event->transaction_id, "1008450740201411110005820873");
    EXPECT_EQ(final_answer.delivery->event->source, projections::Source::kWechatV2Query);

    const PlatformAnswer forged =
        ReadWechatV2Answer(config, SignedV2(QueryAction::kQuery, paid, /*unsigned_answer=*/true));
    EXPECT_EQ(forged.kind, AnswerKind::kBadSignature);
    ASSERT_TRUE(forged.delivery.has_value());
    EXPECT_FALSE(forged.delivery->event.has_value());

    PlatformFields notpay = paid;
    notpay["trade_state"] = "NOTPAY";
    EXPECT_EQ(ReadWechatV2Answer(config, SignedV2(QueryAction::kQuery, notpay)).kind,
              AnswerKind::kNotFinal);
    // ORDERNOTEXIST reports no state: WeChat may send it unsigned.
    const PlatformAnswer missing = ReadWechatV2Answer(
        config,
        SignedV2(QueryAction::kQuery, {{"result_code", "FAIL"}, {"err_code", "ORDERNOTEXIST"}},
                 /*unsigned_answer=*/true));
    EXPECT_EQ(missing.kind, AnswerKind::kNotFinal);
    EXPECT_EQ(missing.answer, "ORDERNOTEXIST");
    // A communication failure: the request did not get through.
    EXPECT_EQ(ReadWechatV2Answer(config, Exchange(QueryChannel::kWechatV2, QueryAction::kQuery, 200,
                                                  "<xml><return_code>FAIL</return_code>"
                                                  "<return_msg>签名错误</return_msg></xml>"))
                  .kind,
              AnswerKind::kFailed);
    PlatformFields other = paid;
    other["out_trade_no"] = "ORD-2";
    EXPECT_EQ(ReadWechatV2Answer(config, SignedV2(QueryAction::kQuery, other)).kind,
              AnswerKind::kRefused);
}

TEST(WechatV2AnswerTest, ClosesConfirmRefuseOrAskForAQuery) {
    const WechatV2Config config = V2Config();
    EXPECT_EQ(
        ReadWechatV2Answer(config, SignedV2(QueryAction::kClose, {{"result_code", "SUCCESS"}}))
            .kind,
        AnswerKind::kClosed);
    EXPECT_EQ(
        ReadWechatV2Answer(config, SignedV2(QueryAction::kClose,
                                            {{"result_code", "FAIL"}, {"err_code", "ORDERCLOSED"}}))
            .kind,
        AnswerKind::kClosed);
    EXPECT_EQ(
        ReadWechatV2Answer(config, SignedV2(QueryAction::kClose,
                                            {{"result_code", "FAIL"}, {"err_code", "ORDERPAID"}},
                                            /*unsigned_answer=*/true))
            .kind,
        AnswerKind::kClosePaid);
    // A close that would append, unsigned: never.
    EXPECT_EQ(ReadWechatV2Answer(config, SignedV2(QueryAction::kClose, {{"result_code", "SUCCESS"}},
                                                  /*unsigned_answer=*/true))
                  .kind,
              AnswerKind::kBadSignature);
}

// An Alipay answer signed over the exact text of its response member (`tamper` changes the text
// after signing).
AskedExchange SignedAlipay(QueryAction action, const json& response, bool tamper = false) {
    const std::string member = action == QueryAction::kQuery ? "alipay_trade_query_response"
                                                             : "alipay_trade_close_response";
    // Spaced as a server might write it: the signature covers these bytes, not a re-serialization.
    std::string text = response.dump(1);
    const std::string sign = ledger::Base64Encode(RsaSha256Sign(TestKeys().platform, text));
    if (tamper) text.replace(text.find("19.99"), 5, "10.99");
    return Exchange(QueryChannel::kAlipay, action, 200,
                    "{\"" + member + "\": " + text + ",\n\"sign\":\"" + sign + "\"}");
}

TEST(AlipayAnswerTest, StatesMapOverTheExactSignedText) {
    const AlipayConfig config = AlipayTestConfig();
    const json paid = {{"code", "10000"},
                       {"msg", "Success"},
                       {"out_trade_no", "ORD-1"},
                       {"trade_no", "2013112011001004330000121536"},
                       {"trade_status", "TRADE_SUCCESS"},
                       {"total_amount", "19.99"},
                       {"send_pay_date", "2024-05-01 10:29:00"}};
    const PlatformAnswer final_answer =
        ReadAlipayAnswer(config, SignedAlipay(QueryAction::kQuery, paid));
    EXPECT_EQ(final_answer.kind, AnswerKind::kFinal);
    ASSERT_TRUE(final_answer.delivery && final_answer.delivery->event);
    EXPECT_EQ(final_answer.delivery->event->amount, 1999);
    EXPECT_EQ(final_answer.delivery->event->currency, "CNY");
    EXPECT_EQ(final_answer.delivery->event->transaction_id, "2013112011001004330000121536");
    EXPECT_EQ(ReadAlipayAnswer(config, SignedAlipay(QueryAction::kQuery, paid, true)).kind,
              AnswerKind::kBadSignature);
    json refunded = paid;
    refunded["trade_status"] = "TRADE_CLOSED";  // Paid, then refunded in full.
    EXPECT_EQ(ReadAlipayAnswer(config, SignedAlipay(QueryAction::kQuery, refunded))
                  .delivery->event->event_type,
              EventType::kPaymentSucceeded);
    json timed_out = refunded;
    timed_out.erase("send_pay_date");
    EXPECT_EQ(ReadAlipayAnswer(config, SignedAlipay(QueryAction::kQuery, timed_out))
                  .delivery->event->event_type,
              EventType::kPaymentClosed);
    json waiting = timed_out;
    waiting["trade_status"] = "WAIT_BUYER_PAY";
    EXPECT_EQ(ReadAlipayAnswer(config, SignedAlipay(QueryAction::kQuery, waiting)).kind,
              AnswerKind::kNotFinal);
    const json not_exist = {
        {"code", "40004"}, {"msg", "Business Failed"}, {"sub_code", "ACQ.TRADE_NOT_EXIST"}};
    EXPECT_EQ(ReadAlipayAnswer(config, SignedAlipay(QueryAction::kQuery, not_exist)).answer,
              "ACQ.TRADE_NOT_EXIST");
    EXPECT_EQ(ReadAlipayAnswer(config, SignedAlipay(QueryAction::kClose, not_exist)).kind,
              AnswerKind::kClosed);  // Never created: nothing to pay.
    const json status_error = {{"code", "40004"}, {"sub_code", "ACQ.TRADE_STATUS_ERROR"}};
    EXPECT_EQ(ReadAlipayAnswer(config, SignedAlipay(QueryAction::kClose, status_error)).kind,
              AnswerKind::kClosePaid);
    // Without sign, whatever it says: never a success.
    EXPECT_EQ(
        ReadAlipayAnswer(config, Exchange(QueryChannel::kAlipay, QueryAction::kQuery, 200,
                                          "{\"alipay_trade_query_response\":" + paid.dump() + "}"))
            .kind,
        AnswerKind::kBadSignature);
}

TEST(RawJsonMemberTest, FindsTheExactTextOfATopLevelMember) {
    EXPECT_EQ(RawJsonMember(R"({"a": {"x": "}\"", "y": [1, {"z": 2}]} , "b":1})", "a"),
              R"({"x": "}\"", "y": [1, {"z": 2}]})");
    EXPECT_EQ(RawJsonMember(R"({"b":{"a":1},"a":"text"})", "a"), "\"text\"");
    EXPECT_EQ(RawJsonMember(R"({"b":{"a":1}})", "a"), std::nullopt);  // Not at the top level.
    EXPECT_EQ(RawJsonMember(R"({"a":1,"a":2})", "a"), std::nullopt);  // A repeated key.
    EXPECT_EQ(RawJsonMember("not json", "a"), std::nullopt);
}

}  // namespace
}  // namespace payledger::api
