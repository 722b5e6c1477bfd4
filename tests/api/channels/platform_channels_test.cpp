// Tests of the WeChat Pay v2, WeChat Pay v3 and Alipay channels (docs/platforms.md) without a
// database: notices come from api::BuildNotice (the `payledger simulate` builder, signed with
// test-only keys generated in the process) or are built and signed by hand for the cases simulate
// never sends; Verify() is checked for the verdict, the event handed to the ledger and the receipt,
// and Answer() for the exact platform answers. Refusals are tables: tampered bodies, wrong keys,
// stale timestamps, unknown serials, other merchants, truncated XML, XXE, entity expansion, text
// outside the root, invalid base64, bad percent-encoding, a third decimal. Strict parsing:
// references to control characters, repeated XML elements and form fields, duplicate JSON keys,
// v3's signature before anything is parsed. Cross-checks: the claims each refund hands the ledger,
// Alipay's seller_id, and the ECB block splice of two v2 refund notices. Last, RunSimulate's URL
// for an IPv6 listen address.

#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/channels/alipay_channel.hpp"
#include "api/channels/alipay_form.hpp"
#include "api/channels/wechat_v2_channel.hpp"
#include "api/channels/wechat_v2_xml.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "ledger/base/bytes.hpp"
#include "projections/decide.hpp"
#include "projections/validate.hpp"
#include "tests/api/channels/platform_fixtures.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::EventType;
using projections::Outcome;
using testing::ToIncoming;
using testing::WithPlatforms;

constexpr const char* kV2Success =
    "<xml><return_code><![CDATA[SUCCESS]]></return_code><return_msg><![CDATA[OK]]></return_msg>"
    "</xml>";

class PlatformChannelTest : public ::testing::Test {
protected:
    ledger::Delivery Deliver(const Channel& channel, const SimulatedNotice& notice,
                             std::int64_t received_offset = 0) const {
        Incoming incoming = ToIncoming(notice, now_ + received_offset);
        return channel.Verify(incoming);
    }

    SimulatedNotice Notice(const std::string& channel, const std::string& kind = "payment",
                           std::int64_t amount = 1999, const Config* config = nullptr) const {
        return BuildNotice(config ? *config : config_, {.channel = channel,
                                                        .out_trade_no = "ORD-1",
                                                        .kind = kind,
                                                        .amount = amount,
                                                        .order_amount = 1999,
                                                        .unix_seconds = now_});
    }

    const std::int64_t now_ = testing::PlatformNowSeconds();
    const Config config_ = WithPlatforms(Config{});
    const WechatV2Channel v2_{*config_.wechat_v2};
    const WechatV3Channel v3_{*config_.wechat_v3};
    const AlipayChannel alipay_{*config_.alipay};
};

void ExpectVerdict(const ledger::Delivery& delivery, Outcome verdict) {
    EXPECT_EQ(delivery.outcome, verdict) << delivery.message;
    EXPECT_EQ(delivery.event.has_value(), verdict == Outcome::kAppended);
}

// ---- WeChat Pay v2 -----------------------------------------------------------------------

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

// ---- WeChat Pay v3 -----------------------------------------------------------------------

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

// ---- Alipay ------------------------------------------------------------------------------

PlatformFields AlipayPayment() {
    return {{"app_id", testing::kAlipayAppId},
            {"charset", "utf-8"},
            {"notify_type", "trade_status_sync"},
            {"notify_id", "ac05099524730693a8b330c5ecf72da9"},
            {"notify_time", "2024-05-01 10:30:20"},
            {"out_trade_no", "ORD-1"},
            {"trade_no", "2024050122001400000000000001"},
            {"trade_status", "TRADE_SUCCESS"},
            {"total_amount", "19.99"},
            {"gmt_payment", "2024-05-01 10:30:15"},
            {"subject", "测试"},
            {"body", ""}};
}

SimulatedNotice AlipaySigned(PlatformFields fields,
                             const PrivateKey& key = testing::TestPlatformKey(2)) {
    fields["sign_type"] = "RSA2";
    fields["sign"] = ledger::Base64Encode(RsaSha256Sign(key, AlipaySignContent(fields)));
    return {.target = "/v1/callbacks/alipay", .body = EncodeForm(fields)};
}

TEST_F(PlatformChannelTest, AlipaySignContentFollowsTheWorkedExample) {
    const Checked<PlatformFields> form = DecodeForm(
        "charset=utf-8&gmt_payment=2024-05-01+10%3A30%3A15&notify_type=trade_status_sync&subject="
        "%E6%B5%8B%E8%AF%95&total_amount=19.99&trade_status=TRADE_SUCCESS&out_trade_no=ORD-1&"
        "app_id=2021000000000001&body=&sign_type=RSA2&sign=Ab%2Bcd%3D%3D&fund_bill_list=%5B%7B%22"
        "amount%22%3A%2219.99%22%2C%22fundChannel%22%3A%22ALIPAYACCOUNT%22%7D%5D");
    ASSERT_TRUE(form.ok()) << form.refusal().message;
    EXPECT_EQ(form->at("sign"), "Ab+cd==");
    EXPECT_EQ(AlipaySignContent(*form),
              "app_id=2021000000000001&charset=utf-8&fund_bill_list=[{\"amount\":\"19.99\","
              "\"fundChannel\":\"ALIPAYACCOUNT\"}]&gmt_payment=2024-05-01 10:30:15&notify_type="
              "trade_status_sync&out_trade_no=ORD-1&subject=测试&total_amount=19.99&"
              "trade_status=TRADE_SUCCESS");
}

TEST_F(PlatformChannelTest, AlipayPaymentBecomesAPaymentEvent) {
    for (const SimulatedNotice& notice : {Notice("alipay"), AlipaySigned(AlipayPayment())}) {
        const ledger::Delivery delivery = Deliver(alipay_, notice);
        ExpectVerdict(delivery, Outcome::kAppended);
        ASSERT_TRUE(delivery.event);
        EXPECT_EQ(delivery.event->event_type, EventType::kPaymentSucceeded);
        EXPECT_EQ(delivery.event->amount, 1999);
        EXPECT_EQ(delivery.event->currency, "CNY");
        EXPECT_EQ(delivery.receipt.out_trade_no, "ORD-1");
    }
    const ledger::Delivery delivery = Deliver(alipay_, AlipaySigned(AlipayPayment()));
    EXPECT_EQ(delivery.event->transaction_id, "2024050122001400000000000001");
    EXPECT_EQ(projections::FormatRfc3339(delivery.event->occurred_at), "2024-05-01T02:30:15Z");
    EXPECT_EQ(json::parse(delivery.event->data).at("notify_id"),
              "ac05099524730693a8b330c5ecf72da9");
}

TEST_F(PlatformChannelTest, AlipayMapsTradeStatusesBySpecTable) {
    struct Row {
        const char* status;
        const char* refund_fee;
        std::optional<EventType> type;
        std::int64_t amount;
    };
    const Row rows[] = {
        {"TRADE_SUCCESS", nullptr, EventType::kPaymentSucceeded, 1999},
        {"TRADE_SUCCESS", "0.00", EventType::kPaymentSucceeded, 1999},
        {"TRADE_FINISHED", nullptr, EventType::kPaymentSucceeded, 1999},
        {"TRADE_FINISHED", "5.00", EventType::kPaymentSucceeded, 1999},
        {"TRADE_SUCCESS", "5.5", EventType::kRefundSucceeded, 550},
        {"TRADE_CLOSED", "19.99", EventType::kRefundSucceeded, 1999},
        {"TRADE_CLOSED", nullptr, EventType::kPaymentClosed, 0},
        {"WAIT_BUYER_PAY", nullptr, std::nullopt, 0},
    };
    for (const Row& row : rows) {
        PlatformFields fields = AlipayPayment();
        fields["trade_status"] = row.status;
        if (row.refund_fee) fields["refund_fee"] = row.refund_fee;
        const ledger::Delivery delivery = Deliver(alipay_, AlipaySigned(fields));
        ExpectVerdict(delivery, row.type ? Outcome::kAppended : Outcome::kIgnored);
        if (!row.type || !delivery.event) continue;
        EXPECT_EQ(delivery.event->event_type, *row.type) << row.status;
        EXPECT_EQ(delivery.event->amount, row.amount) << row.status;
    }
}

TEST_F(PlatformChannelTest, AlipayRefundAndCloseEvents) {
    PlatformFields refund = AlipayPayment();
    refund["refund_fee"] = "5.00";
    refund["gmt_refund"] = "2024-05-02 09:00:00.250";
    refund["out_biz_no"] = "RF-1";
    const ledger::Delivery delivery = Deliver(alipay_, AlipaySigned(refund));
    ExpectVerdict(delivery, Outcome::kAppended);
    ASSERT_TRUE(delivery.event);
    EXPECT_EQ(delivery.event->transaction_id, "RF-1");
    EXPECT_EQ(delivery.event->currency, "");
    EXPECT_EQ(projections::FormatRfc3339(delivery.event->occurred_at),
              "2024-05-02T01:00:00.250000Z");
    refund.erase("out_biz_no");
    EXPECT_EQ(Deliver(alipay_, AlipaySigned(refund)).event->transaction_id,
              "2024050122001400000000000001");
    const ledger::Delivery close = Deliver(alipay_, Notice("alipay", "close"));
    ExpectVerdict(close, Outcome::kAppended);
    ASSERT_TRUE(close.event);
    EXPECT_EQ(close.event->event_type, EventType::kPaymentClosed);
    EXPECT_FALSE(close.event->transaction_id.has_value());
    EXPECT_EQ(close.event->occurred_at, now_ * 1'000'000);
    ExpectVerdict(Deliver(alipay_, Notice("alipay", "refund", 300)), Outcome::kAppended);
}

TEST_F(PlatformChannelTest, AlipayVerifiesGbkNoticesOverTheirRawBytes) {
    PlatformFields fields = AlipayPayment();
    fields["charset"] = "gbk";
    fields["subject"] = "\xb2\xe2\xca\xd4";  // "测试" in GBK: not UTF-8.
    const SimulatedNotice notice = AlipaySigned(fields);
    EXPECT_NE(notice.body.find("subject=%B2%E2%CA%D4"), std::string::npos);
    ExpectVerdict(Deliver(alipay_, notice), Outcome::kAppended);
}

TEST_F(PlatformChannelTest, AlipayRefusesForgedNotices) {
    SimulatedNotice tampered = AlipaySigned(AlipayPayment());
    tampered.body.replace(tampered.body.find("total_amount=19.99"), 18, "total_amount=0.01");
    const ledger::Delivery delivery = Deliver(alipay_, tampered);
    ExpectVerdict(delivery, Outcome::kBadSignature);
    EXPECT_EQ(delivery.receipt.out_trade_no, "ORD-1");
    ExpectVerdict(Deliver(alipay_, AlipaySigned(AlipayPayment(), testing::TestPlatformKey(3))),
                  Outcome::kBadSignature);
    SimulatedNotice rsa1 = AlipaySigned(AlipayPayment());
    rsa1.body.replace(rsa1.body.find("sign_type=RSA2"), 14, "sign_type=RSA");
    ExpectVerdict(Deliver(alipay_, rsa1), Outcome::kBadSignature);
    SimulatedNotice unsigned_notice = AlipaySigned(AlipayPayment());
    unsigned_notice.body = EncodeForm(AlipayPayment());
    ExpectVerdict(Deliver(alipay_, unsigned_notice), Outcome::kBadSignature);
    // A sign whose "+" was not percent-encoded decodes to a space: not base64.
    SimulatedNotice plus = AlipaySigned(AlipayPayment());
    const Checked<PlatformFields> form = DecodeForm(plus.body);
    ASSERT_TRUE(form.ok());
    std::string raw_sign = form->at("sign");
    PlatformFields without_sign = *form;
    without_sign.erase("sign");
    plus.body = EncodeForm(without_sign) + "&sign=" + raw_sign;
    ExpectVerdict(Deliver(alipay_, plus), raw_sign.find('+') == std::string::npos
                                              ? Outcome::kAppended
                                              : Outcome::kBadSignature);
}

TEST_F(PlatformChannelTest, AlipayOtherAppIsMismatch) {
    PlatformFields fields = AlipayPayment();
    fields["app_id"] = "2021000000000002";
    ExpectVerdict(Deliver(alipay_, AlipaySigned(fields)), Outcome::kMismatch);
}

TEST_F(PlatformChannelTest, AlipayRefusesMalformedNotices) {
    for (const char* body : {"a=%", "a=%4", "a=%zz&b=1", "%G1=1", "=1&a=2", "a=1&a=2"}) {
        ExpectVerdict(Deliver(alipay_, {.target = "/v1/callbacks/alipay", .body = body}),
                      Outcome::kMalformed);
    }
    for (const auto& [field, value] :
         std::vector<std::pair<std::string, std::string>>{{"total_amount", "19.999"},
                                                          {"total_amount", "-19.99"},
                                                          {"total_amount", "1e3"},
                                                          {"total_amount", "0.00"},
                                                          {"trade_status", "TRADE_UNKNOWN"},
                                                          {"gmt_payment", "20240501103015"},
                                                          {"out_trade_no", "bad key!"},
                                                          {"trade_no", ""},
                                                          {"app_id", ""},
                                                          {"currency", "usd"}}) {
        PlatformFields fields = AlipayPayment();
        fields[field] = value;
        ExpectVerdict(Deliver(alipay_, AlipaySigned(fields)), Outcome::kMalformed);
    }
    PlatformFields refund = AlipayPayment();
    refund["refund_fee"] = "1.001";
    ExpectVerdict(Deliver(alipay_, AlipaySigned(refund)), Outcome::kMalformed);
}

// A refund's total_amount and trade_no go to the ledger as claims about the order and
// its payment; a total_amount that is not an amount is malformed.
TEST_F(PlatformChannelTest, AlipayRefundNamesItsOrderTotalAndTradeNoForTheLedger) {
    PlatformFields refund = AlipayPayment();
    refund["refund_fee"] = "5.00";
    refund["out_biz_no"] = "RF-1";
    const ledger::Delivery delivery = Deliver(alipay_, AlipaySigned(refund));
    ExpectVerdict(delivery, Outcome::kAppended);
    EXPECT_EQ(delivery.event->transaction_id, "RF-1");
    EXPECT_EQ(delivery.claims.order_amount, 1999);
    EXPECT_EQ(delivery.claims.payment_transaction_id, "2024050122001400000000000001");
    const ledger::Delivery payment = Deliver(alipay_, AlipaySigned(AlipayPayment()));
    EXPECT_FALSE(payment.claims.order_amount.has_value());  // A payment's total is its amount.
    refund["total_amount"] = "19.999";
    ExpectVerdict(Deliver(alipay_, AlipaySigned(refund)), Outcome::kMalformed);
}

// With alipay.seller_id configured, a notice's seller_id must be it.
TEST_F(PlatformChannelTest, AlipaySellerIdIsCheckedWhenConfigured) {
    AlipayConfig config = *config_.alipay;
    config.seller_id = "2088102176044281";
    const AlipayChannel channel{config};
    PlatformFields fields = AlipayPayment();
    fields["seller_id"] = "2088102176044281";
    ExpectVerdict(Deliver(channel, AlipaySigned(fields)), Outcome::kAppended);
    ExpectVerdict(Deliver(alipay_, AlipaySigned(fields)), Outcome::kAppended);
    fields["seller_id"] = "2088000000000001";
    const ledger::Delivery other = Deliver(channel, AlipaySigned(fields));
    ExpectVerdict(other, Outcome::kMismatch);
    EXPECT_NE(other.message.find("seller_id"), std::string::npos) << other.message;
    ExpectVerdict(Deliver(alipay_, AlipaySigned(fields)), Outcome::kAppended);  // Not configured.
    fields.erase("seller_id");
    ExpectVerdict(Deliver(channel, AlipaySigned(fields)), Outcome::kMalformed);
    Config simulated = config_;
    simulated.alipay = config;
    ExpectVerdict(Deliver(channel, Notice("alipay", "payment", 1999, &simulated)),
                  Outcome::kAppended);
}

// A form field given twice is malformed even in a correctly signed notice, whichever
// copy the signature would cover.
TEST_F(PlatformChannelTest, AlipayRepeatedFieldsAreMalformed) {
    const std::string signed_body = AlipaySigned(AlipayPayment()).body;
    for (const char* repeat : {"&total_amount=0.01", "&total_amount=19.99", "&sign=x"}) {
        const ledger::Delivery delivery =
            Deliver(alipay_, {.target = "/v1/callbacks/alipay", .body = signed_body + repeat});
        ExpectVerdict(delivery, Outcome::kMalformed);
        EXPECT_NE(delivery.message.find("repeats"), std::string::npos) << delivery.message;
    }
}

TEST_F(PlatformChannelTest, AlipayAnswersSuccessOrFailure) {
    for (const Outcome outcome : {Outcome::kAppended, Outcome::kDuplicate, Outcome::kIgnored}) {
        const Response response = alipay_.Answer({.outcome = outcome});
        EXPECT_EQ(response.result(), http::status::ok);
        EXPECT_EQ(response.body(), "success");
        EXPECT_EQ(response[http::field::content_type], "text/plain");
    }
    const Response mismatch = alipay_.Answer({.outcome = Outcome::kMismatch});
    EXPECT_EQ(mismatch.result(), http::status::unprocessable_entity);
    EXPECT_EQ(mismatch.body(), "failure");
    EXPECT_EQ(alipay_.Answer({.outcome = Outcome::kUnknownOrder}).result(),
              http::status::not_found);
    EXPECT_EQ(alipay_.Answer({.failure = ledger::FailureKind::kInvariantBroken}).result(),
              http::status::internal_server_error);
}

// ---- simulate ----------------------------------------------------------------------------

// An IPv6 listen address ("::1:<port>", as the server takes it) is a URL host in brackets:
// simulate must try to post there (nothing listens: the request fails), not refuse its own
// default URL as invalid.
TEST_F(PlatformChannelTest, SimulatePostsToAnIpv6ListenAddress) {
    Config config = config_;
    config.listen_host = "::1";
    config.listen_port = 1;
    const SimulateOptions options{.channel = "alipay", .out_trade_no = "ORD-1"};
    EXPECT_THROW(static_cast<void>(RunSimulate(config, options, "")), std::runtime_error);
    EXPECT_THROW(static_cast<void>(RunSimulate(config, options, "http://[::1]:1")),
                 std::runtime_error);
}

}  // namespace
}  // namespace payledger::api
