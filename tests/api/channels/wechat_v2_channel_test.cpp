// Tests of the WeChat Pay v2 channel (docs/platforms.md) without a database: notices built by
// api::BuildNotice or signed by hand for the cases simulate never sends; Verify() checked for the
// verdict, the event handed to the ledger and the receipt, Answer() for the exact XML answers.
// Refusals are tables: tampered bodies, wrong keys, other merchants, truncated XML, XXE, entity
// expansion, text outside the root. Strict parsing: references to control characters, repeated
// elements. Cross-checks: the claims each refund hands the ledger, and the ECB block splice of two
// refund notices.

#include "api/channels/wechat_v2_channel.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/channels/wechat_v2_xml.hpp"
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

constexpr const char* kV2Success =
    "<xml><return_code><![CDATA[SUCCESS]]></return_code><return_msg><![CDATA[OK]]></return_msg>"
    "</xml>";

SimulatedNotice V2Xml(const std::string& body) {
    return {.target = "/v1/callbacks/wechat/v2", .headers = {}, .body = body};
}

SimulatedNotice V2Signed(PlatformFields fields, const std::string& key = testing::kV2ApiKey) {
    fields["sign"] = WechatV2Sign(fields, key, WechatV2SignType::kMd5);
    return V2Xml(WechatV2Xml(fields, "xml"));
}

PlatformFields V2Payment() {
    return {{"appid", testing::kV2AppId},
            {"mch_id", testing::kV2MchId},
            {"nonce_str", "Qz81kLm20aPpXv6"},
            {"return_code", "SUCCESS"},
            {"result_code", "SUCCESS"},
            {"out_trade_no", "ORD-1"},
            {"transaction_id", "4200000000202405010000000001"},
            {"total_fee", "1999"},
            {"time_end", "20240501103015"}};
}

TEST_F(PlatformChannelTest, WechatV2PaymentBecomesAPaymentEvent) {
    const SimulatedNotice notice = Notice("wechat_v2");
    const ledger::Delivery delivery = Deliver(v2_, notice);
    ExpectVerdict(delivery, Outcome::kAppended);
    ASSERT_TRUE(delivery.event);
    EXPECT_EQ(delivery.event->event_type, EventType::kPaymentSucceeded);
    EXPECT_EQ(delivery.event->source, projections::Source::kWechatV2);
    EXPECT_EQ(delivery.event->amount, 1999);
    EXPECT_EQ(delivery.event->currency, "CNY");
    EXPECT_EQ(delivery.event->occurred_at, now_ * 1'000'000);
    EXPECT_EQ(json::parse(delivery.event->data).at("trade_type"), "JSAPI");
    EXPECT_EQ(delivery.receipt.out_trade_no, "ORD-1");
    EXPECT_EQ(delivery.receipt.body, notice.body);
    EXPECT_EQ(delivery.receipt.source, projections::Source::kWechatV2);
}

TEST_F(PlatformChannelTest, WechatV2ReadsTheProvidersExampleLayout) {
    PlatformFields fields = V2Payment();
    fields["fee_type"] = "CNY";
    fields["sign"] = WechatV2Sign(fields, testing::kV2ApiKey, WechatV2SignType::kMd5);
    std::string body = WechatV2Xml(fields, "xml");
    for (std::size_t at = body.find("><"); at != std::string::npos; at = body.find("><", at + 3)) {
        if (body.compare(at, 3, "><!") != 0 && body.compare(at, 3, "></") != 0) {
            body.insert(at + 1, "\n");  // Newlines between fields, as WeChat writes.
        }
    }
    const ledger::Delivery delivery = Deliver(v2_, V2Xml(body));
    ExpectVerdict(delivery, Outcome::kAppended);
    ASSERT_TRUE(delivery.event);
    EXPECT_EQ(delivery.event->transaction_id, "4200000000202405010000000001");
    EXPECT_EQ(projections::FormatRfc3339(delivery.event->occurred_at), "2024-05-01T02:30:15Z");
}

TEST_F(PlatformChannelTest, WechatV2HmacSha256FollowsTheConfiguredSignType) {
    Config hmac = config_;
    hmac.wechat_v2->sign_type = WechatV2SignType::kHmacSha256;
    const WechatV2Channel channel{*hmac.wechat_v2};
    ExpectVerdict(Deliver(channel, Notice("wechat_v2", "payment", 1999, &hmac)),
                  Outcome::kAppended);
    PlatformFields fields = V2Payment();  // No sign_type: the configured type applies.
    fields["sign"] = WechatV2Sign(fields, testing::kV2ApiKey, WechatV2SignType::kHmacSha256);
    ExpectVerdict(Deliver(channel, V2Xml(WechatV2Xml(fields, "xml"))), Outcome::kAppended);
    // An MD5 notice to an HMAC merchant, and a notice naming the other type, both fail.
    ExpectVerdict(Deliver(channel, Notice("wechat_v2")), Outcome::kBadSignature);
    ExpectVerdict(Deliver(v2_, Notice("wechat_v2", "payment", 1999, &hmac)),
                  Outcome::kBadSignature);
}

TEST_F(PlatformChannelTest, WechatV2RefusesForgedNotices) {
    SimulatedNotice tampered = Notice("wechat_v2");
    tampered.body.replace(tampered.body.find("<total_fee>1999"), 15, "<total_fee>1");
    const ledger::Delivery delivery = Deliver(v2_, tampered);
    ExpectVerdict(delivery, Outcome::kBadSignature);
    EXPECT_EQ(delivery.receipt.out_trade_no, "ORD-1");  // As the unverified body claims.
    ExpectVerdict(Deliver(v2_, V2Signed(V2Payment(), "0123456789abcdef0123456789abcdef")),
                  Outcome::kBadSignature);
    ExpectVerdict(Deliver(v2_, V2Xml(WechatV2Xml(V2Payment(), "xml"))), Outcome::kBadSignature);
    PlatformFields lower = V2Payment();
    lower["sign"] = WechatV2Sign(lower, testing::kV2ApiKey, WechatV2SignType::kMd5);
    for (char& c : lower["sign"]) c = static_cast<char>(std::tolower(c));
    ExpectVerdict(Deliver(v2_, V2Xml(WechatV2Xml(lower, "xml"))), Outcome::kBadSignature);
}

TEST_F(PlatformChannelTest, WechatV2OtherMerchantIsMismatch) {
    for (const char* field : {"appid", "mch_id"}) {
        PlatformFields fields = V2Payment();
        fields[field] = "other";
        ExpectVerdict(Deliver(v2_, V2Signed(fields)), Outcome::kMismatch);
    }
}

TEST_F(PlatformChannelTest, WechatV2FailuresAreIgnored) {
    PlatformFields failed = V2Payment();
    failed["result_code"] = "FAIL";
    failed["err_code"] = "NOTENOUGH";
    ExpectVerdict(Deliver(v2_, V2Signed(failed)), Outcome::kIgnored);
    const PlatformFields communication = {{"return_code", "FAIL"}, {"return_msg", "SIGNERROR"}};
    ExpectVerdict(Deliver(v2_, V2Signed(communication)), Outcome::kIgnored);
}

// A missing signature is bad_signature; an unsigned body that says return_code FAIL
// must not be acknowledged as a platform notice it cannot prove to be.
TEST_F(PlatformChannelTest, WechatV2UnsignedFailIsBadSignature) {
    ExpectVerdict(Deliver(v2_, V2Xml("<xml><return_code><![CDATA[FAIL]]></return_code>"
                                     "<return_msg><![CDATA[SIGNERROR]]></return_msg></xml>")),
                  Outcome::kBadSignature);
    // A refund notice is judged only once its req_info decrypts with the API key.
    const auto refund = [](const std::string& req_info) {
        return V2Xml(WechatV2Xml({{"return_code", "FAIL"},
                                  {"appid", testing::kV2AppId},
                                  {"mch_id", testing::kV2MchId},
                                  {"req_info", req_info}},
                                 "xml"));
    };
    ExpectVerdict(Deliver(v2_, refund("QUFBQQ==")), Outcome::kBadSignature);
    const std::string inner =
        "<root><out_trade_no>ORD-1</out_trade_no><refund_status>SUCCESS</refund_status></root>";
    ExpectVerdict(Deliver(v2_, refund(ledger::Base64Encode(
                                   Aes256EcbEncrypt(Md5HexLower(testing::kV2ApiKey), inner)))),
                  Outcome::kIgnored);
}

// WeChat signs the values it wrote (docs/platforms.md#apiv2-signature); the parser must hand back
// exactly those bytes: a "\r\n" inside CDATA (XML end-of-line handling would make it "\n") and a
// value of spaces written without CDATA (dropped as formatting whitespace by default) both verify.
TEST_F(PlatformChannelTest, WechatV2VerifiesTheValuesExactlyAsWritten) {
    PlatformFields crlf = V2Payment();
    crlf["attach"] = "line 1\r\nline 2\r";
    ExpectVerdict(Deliver(v2_, V2Signed(crlf)), Outcome::kAppended);
    PlatformFields spaces = V2Payment();
    spaces["attach"] = "  ";
    SimulatedNotice bare = V2Signed(spaces);
    const std::string cdata = "<attach><![CDATA[  ]]></attach>";
    ASSERT_NE(bare.body.find(cdata), std::string::npos);
    bare.body.replace(bare.body.find(cdata), cdata.size(), "<attach>  </attach>");
    ExpectVerdict(Deliver(v2_, bare), Outcome::kAppended);
}

// Text before or after the root element, or after a NUL byte, makes the body malformed XML;
// pugixml alone would drop it silently. An XML declaration and line breaks are fine.
TEST_F(PlatformChannelTest, WechatV2RefusesTextOutsideTheRootElement) {
    const std::string valid = Notice("wechat_v2").body;
    ExpectVerdict(
        Deliver(v2_, V2Xml("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + valid + "\n")),
        Outcome::kAppended);
    for (const std::string& body :
         {"junk" + valid, valid + "junk", valid + std::string(1, '\0') + "<xml></xml>",
          valid + "<![CDATA[junk]]>"}) {
        ExpectVerdict(Deliver(v2_, V2Xml(body)), Outcome::kMalformed);
    }
}

TEST_F(PlatformChannelTest, WechatV2RefusesMalformedXml) {
    const std::string valid = Notice("wechat_v2").body;
    const std::string laughs =
        "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol1 "
        "\"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\"><!ENTITY lol2 "
        "\"&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;\">]><xml><attach>&lol2;"
        "</attach></xml>";
    const std::vector<std::string> bodies = {
        "",
        "not xml",
        valid.substr(0, valid.size() / 2),
        "<?xml version=\"1.0\"?><!DOCTYPE xml [<!ENTITY xxe SYSTEM \"file:///etc/passwd\">]>"
        "<xml><attach>&xxe;</attach></xml>",
        "<!doctype xml><xml></xml>",
        laughs,
        "<root><return_code>SUCCESS</return_code></root>",
        "<xml><a>1</a></xml><xml><a>1</a></xml>",
        "<xml><a>1</a><a>2</a></xml>",
        "<xml><a><b>1</b></a></xml>",
        "<xml>text<a>1</a></xml>",
    };
    for (const std::string& body : bodies) {
        ExpectVerdict(Deliver(v2_, V2Xml(body)), Outcome::kMalformed);
    }
    for (const auto& [field, value] :
         std::vector<std::pair<std::string, std::string>>{{"total_fee", "19.99"},
                                                          {"total_fee", "0"},
                                                          {"total_fee", "-1"},
                                                          {"time_end", "2024-05-01"},
                                                          {"out_trade_no", "bad key!"},
                                                          {"fee_type", "cny"},
                                                          {"transaction_id", "has space"},
                                                          {"result_code", "MAYBE"}}) {
        PlatformFields fields = V2Payment();
        fields[field] = value;
        ExpectVerdict(Deliver(v2_, V2Signed(fields)), Outcome::kMalformed);
    }
}

TEST_F(PlatformChannelTest, WechatV2RefundDecryptsReqInfo) {
    const ledger::Delivery delivery = Deliver(v2_, Notice("wechat_v2", "refund", 500));
    ExpectVerdict(delivery, Outcome::kAppended);
    ASSERT_TRUE(delivery.event);
    EXPECT_EQ(delivery.event->event_type, EventType::kRefundSucceeded);
    EXPECT_EQ(delivery.event->amount, 500);
    EXPECT_EQ(delivery.event->currency, "");  // The ledger gives it the order's.
    EXPECT_TRUE(delivery.event->transaction_id->starts_with("5030"));
    EXPECT_EQ(delivery.event->occurred_at, now_ * 1'000'000);
    EXPECT_EQ(delivery.receipt.out_trade_no, "ORD-1");
}

TEST_F(PlatformChannelTest, WechatV2RefundThatDoesNotDecryptIsBadSignature) {
    const auto refund = [](const std::string& req_info) {
        return V2Xml(WechatV2Xml({{"return_code", "SUCCESS"},
                                  {"appid", testing::kV2AppId},
                                  {"mch_id", testing::kV2MchId},
                                  {"req_info", req_info}},
                                 "xml"));
    };
    const std::string inner =
        "<root><out_trade_no>ORD-1</out_trade_no><refund_status>"
        "SUCCESS</refund_status></root>";
    const std::string other_key = Md5HexLower("another-api-key");
    for (const std::string& req_info :
         {std::string("not base64!"), std::string("QUFBQQ=="),
          ledger::Base64Encode(Aes256EcbEncrypt(other_key, inner)),
          ledger::Base64Encode(Aes256EcbEncrypt(Md5HexLower(testing::kV2ApiKey), "not xml"))}) {
        ExpectVerdict(Deliver(v2_, refund(req_info)), Outcome::kBadSignature);
    }
    const std::string key = Md5HexLower(testing::kV2ApiKey);
    for (const char* status : {"CHANGE", "REFUNDCLOSE"}) {
        const std::string closed = "<root><out_trade_no>ORD-1</out_trade_no><refund_status>" +
                                   std::string(status) + "</refund_status></root>";
        ExpectVerdict(Deliver(v2_, refund(ledger::Base64Encode(Aes256EcbEncrypt(key, closed)))),
                      Outcome::kIgnored);
    }
}

TEST_F(PlatformChannelTest, WechatV2AnswersInItsXml) {
    for (const Outcome outcome : {Outcome::kAppended, Outcome::kDuplicate, Outcome::kIgnored}) {
        const Response response = v2_.Answer({.outcome = outcome, .seq = 3});
        EXPECT_EQ(response.result(), http::status::ok);
        EXPECT_EQ(response.body(), kV2Success);
    }
    const Response mismatch = v2_.Answer({.outcome = Outcome::kMismatch, .message = "amount"});
    EXPECT_EQ(mismatch.result(), http::status::unprocessable_entity);
    EXPECT_EQ(mismatch.body(),
              "<xml><return_code><![CDATA[FAIL]]></return_code><return_msg><![CDATA[mismatch: "
              "amount]]></return_msg></xml>");
    EXPECT_EQ(v2_.Answer({.outcome = Outcome::kBadSignature}).result(), http::status::unauthorized);
    EXPECT_EQ(v2_.Answer({.outcome = Outcome::kUnavailable}).result(),
              http::status::service_unavailable);
    const Response internal = v2_.Answer(
        {.outcome = Outcome::kUnavailable, .failure = ledger::FailureKind::kInvariantBroken});
    EXPECT_EQ(internal.result(), http::status::internal_server_error);
    EXPECT_NE(internal.body().find("FAIL"), std::string::npos);
}

// ---- Strict parsing and cross-checks in WeChat Pay v2 ----------------------------------------

// A refund notice of the merchant whose req_info is `plaintext` under AES-256-ECB with the
// MD5 of the API key (docs/platforms.md#apiv2-refund-notices).
SimulatedNotice V2Refund(const std::string& plaintext) {
    return V2Xml(WechatV2Xml({{"return_code", "SUCCESS"},
                              {"appid", testing::kV2AppId},
                              {"mch_id", testing::kV2MchId},
                              {"nonce_str", "n1"},
                              {"req_info", ledger::Base64Encode(Aes256EcbEncrypt(
                                               Md5HexLower(testing::kV2ApiKey), plaintext))}},
                             "xml"));
}

PlatformFields V2RefundFields() {
    return {{"out_refund_no", "R-1"},     {"out_trade_no", "ORD-1"},
            {"refund_fee", "500"},        {"refund_id", "50300000000000000001"},
            {"refund_status", "SUCCESS"}, {"success_time", "2024-05-02 10:00:00"},
            {"total_fee", "1999"},        {"transaction_id", "4200000000202405010000000001"}};
}

// `body` with `element` inserted before the closing tag of its root.
std::string WithElement(std::string body, const std::string& root, const std::string& element) {
    body.insert(body.rfind("</" + root + ">"), element);
    return body;
}

// pugixml turns "&#0;" into a NUL that ends the value, and its unsigned arithmetic wraps
// "&#4294967296;" to 0: each of these references must make the notice malformed, never a
// shorter value that some signature might match.
TEST_F(PlatformChannelTest, WechatV2CharacterReferencesToControlCharactersAreMalformed) {
    const std::string payment = V2Signed(V2Payment()).body;
    const std::string refund = WechatV2Xml(V2RefundFields(), "root");
    for (const std::string reference :
         {"&#0;",          "&#1;",          "&#8;",     "&#11;",    "&#12;",      "&#31;",
          "&#x0;",         "&#x1f;",        "&#x1F;",   "&#0000;",  "&#x00000;",  "&#4294967296;",
          "&#4294967305;", "&#x100000000;", "&#xD800;", "&#xFFFE;", "&#x110000;", "&#;",
          "&#x;",          "&#12",          "&#X41;",   "&#x4G;",   "&bogus;",    "&"}) {
        SCOPED_TRACE(reference);
        const std::string element = "<attach>x" + reference + "y</attach>";
        const std::string body = WithElement(payment, "xml", element);
        const Checked<PlatformFields> parsed = ParseFlatXml(body, "xml");
        ASSERT_FALSE(parsed.ok());
        EXPECT_EQ(parsed.refusal().outcome, Outcome::kMalformed);
        ExpectVerdict(Deliver(v2_, V2Xml(body)), Outcome::kMalformed);
        // Inside a refund's req_info too: it decrypted, so it is malformed, not unsigned.
        ExpectVerdict(Deliver(v2_, V2Refund(WithElement(refund, "root", element))),
                      Outcome::kMalformed);
    }
}

// Tab, LF, CR and every other XML character may be referenced; the predefined entities are
// decoded; the signature covers the decoded value, as WeChat signs the value it meant.
TEST_F(PlatformChannelTest, WechatV2DecodesReferencesToXmlCharacters) {
    const std::string value = "a\tb\nc\rd A\xe4\xbd\xa0<&>\"'";  // U+4F60 in UTF-8.
    PlatformFields fields = V2Payment();
    fields["attach"] = value;
    SimulatedNotice notice = V2Signed(fields);
    const std::size_t start = notice.body.find("<attach>");
    const std::size_t end = notice.body.find("</attach>");
    ASSERT_NE(start, std::string::npos);
    notice.body.replace(start, end - start,
                        "<attach>a&#9;b&#10;c&#13;d&#x20;&#x41;&#20320;&lt;&amp;&gt;&quot;&apos;");
    const ledger::Delivery delivery = Deliver(v2_, notice);
    ExpectVerdict(delivery, Outcome::kAppended);
    ASSERT_TRUE(delivery.event);
    EXPECT_EQ(json::parse(delivery.event->data).at("attach"), value);
    // CDATA is verbatim: a reference inside it is text, not a character.
    const Checked<PlatformFields> cdata =
        ParseFlatXml("<xml><attach><![CDATA[&#0;]]></attach></xml>", "xml");
    ASSERT_TRUE(cdata.ok());
    EXPECT_EQ(cdata->at("attach"), "&#0;");
}

// A field given twice is malformed, in the notice and in a refund's plaintext alike
// (never first-wins or last-wins).
TEST_F(PlatformChannelTest, WechatV2RepeatedFieldsAreMalformed) {
    const ledger::Delivery payment = Deliver(
        v2_, V2Xml(WithElement(V2Signed(V2Payment()).body, "xml", "<total_fee>1</total_fee>")));
    ExpectVerdict(payment, Outcome::kMalformed);
    EXPECT_NE(payment.message.find("appears twice"), std::string::npos) << payment.message;
    const std::string refund = WechatV2Xml(V2RefundFields(), "root");
    ExpectVerdict(Deliver(v2_, V2Refund(WithElement(refund, "root", "<refund_fee>1</refund_fee>"))),
                  Outcome::kMalformed);
}

// The refund's total_fee and transaction_id go to the ledger as claims about the order
// and its payment; without them a spliced plaintext could not be checked, so both are required.
TEST_F(PlatformChannelTest, WechatV2RefundNamesItsOrderTotalAndPaymentForTheLedger) {
    const ledger::Delivery delivery = Deliver(v2_, V2Refund(WechatV2Xml(V2RefundFields(), "root")));
    ExpectVerdict(delivery, Outcome::kAppended);
    EXPECT_EQ(delivery.claims.order_amount, 1999);
    EXPECT_EQ(delivery.claims.payment_transaction_id, "4200000000202405010000000001");
    EXPECT_EQ(delivery.event->amount, 500);
    for (const auto& [field, value] :
         std::vector<std::pair<std::string, std::string>>{{"total_fee", ""},
                                                          {"total_fee", "19.99"},
                                                          {"total_fee", "0"},
                                                          {"transaction_id", ""},
                                                          {"transaction_id", "has space"}}) {
        SCOPED_TRACE(field + "=" + value);
        PlatformFields fields = V2RefundFields();
        if (value.empty()) {
            fields.erase(field);
        } else {
            fields[field] = value;
        }
        ExpectVerdict(Deliver(v2_, V2Refund(WechatV2Xml(fields, "root"))), Outcome::kMalformed);
    }
}

// AES-ECB encrypts each 16-byte block alone (docs/platforms.md#cross-checks), so blocks of two
// refund notices of one merchant can be spliced: here the order number of ORD-A's failed refund
// with the refund, total and payment of ORD-B's. The channel cannot tell (it decrypts and parses);
// the claims it hands over are B's, and the ledger's cross-checks refuse them for ORD-A.
TEST_F(PlatformChannelTest, WechatV2SplicedRefundBlocksCarryClaimsTheLedgerRefuses) {
    PlatformFields a = V2RefundFields();
    a["out_trade_no"] = "ORD-A";
    a["refund_status"] = "REFUNDCLOSE";
    a["refund_fee"] = "100";
    a["transaction_id"] = "420000000020240501000000000A";
    PlatformFields b = V2RefundFields();
    b["out_trade_no"] = "ORD-B";
    b["refund_fee"] = "800";
    b["refund_id"] = "5030000000000000000B";
    b["total_fee"] = "5000";
    b["transaction_id"] = "420000000020240501000000000B";
    std::size_t boundary_a = 0;
    std::size_t boundary_b = 0;
    const std::string plain_a = testing::AlignedRefundPlaintext(a, boundary_a);
    const std::string plain_b = testing::AlignedRefundPlaintext(b, boundary_b);
    ASSERT_EQ(boundary_a, boundary_b);
    ASSERT_EQ(boundary_a % testing::kAesBlockBytes, 0u);
    const std::string key = Md5HexLower(testing::kV2ApiKey);
    const std::string sealed_a = Aes256EcbEncrypt(key, plain_a);
    const std::string sealed_b = Aes256EcbEncrypt(key, plain_b);
    const std::string spliced = sealed_a.substr(0, boundary_a) + sealed_b.substr(boundary_a);
    const std::string expected = plain_a.substr(0, boundary_a) + plain_b.substr(boundary_a);
    ASSERT_EQ(Aes256EcbDecrypt(key, spliced), expected);  // The splice decrypts cleanly.

    SimulatedNotice notice = V2Refund(plain_b);
    const std::string req_info = ledger::Base64Encode(sealed_b);
    notice.body.replace(notice.body.find(req_info), req_info.size(), ledger::Base64Encode(spliced));
    const ledger::Delivery delivery = Deliver(v2_, notice);
    ExpectVerdict(delivery, Outcome::kAppended);
    ASSERT_TRUE(delivery.event);
    EXPECT_EQ(delivery.event->out_trade_no, "ORD-A");
    EXPECT_EQ(delivery.event->amount, 800);
    EXPECT_EQ(delivery.claims.order_amount, 5000);

    const projections::Event created{.seq = 1,
                                     .out_trade_no = "ORD-A",
                                     .event_type = EventType::kOrderCreated,
                                     .account_id = "acct-1",
                                     .amount = 1999,
                                     .currency = "CNY"};
    projections::Event paid = created;
    paid.seq = 2;
    paid.event_type = EventType::kPaymentSucceeded;
    paid.transaction_id = a.at("transaction_id");  // ORD-A's own payment.
    const std::vector<projections::Event> stored{created, paid};
    const projections::Decision decision =
        projections::Decide(stored, *delivery.event, delivery.claims);
    EXPECT_EQ(decision.outcome, Outcome::kMismatch) << decision.message;
    // Even a splice that keeps B's total but names A's order fails on the payment's number.
    projections::Claims total_only = delivery.claims;
    total_only.order_amount = 1999;
    EXPECT_EQ(projections::Decide(stored, *delivery.event, total_only).outcome, Outcome::kMismatch);
}

}  // namespace
}  // namespace payledger::api
