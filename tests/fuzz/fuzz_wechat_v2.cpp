// Fuzzes the WeChat Pay v2 notices (SPEC §6 `wechat_v2`, providers.md §1) with the whole
// input as the XML body: ParseFlatXml directly (roots <xml> and <root>), then
// WechatV2Channel::Verify on the raw body. An MD5 over arbitrary fields cannot be guessed,
// so when the body parses the harness also re-signs it: `sign` SIGN is replaced by the
// correct sign of the parsed fields (MD5, or HMAC-SHA256 when sign_type says so), and a
// `req_info` that starts with '<' is taken as the refund plaintext and sealed as WeChat
// does (AES-256-ECB under MD5(key), base64); WechatV2Xml writes the fields back and Verify
// runs on that body, reaching the payment and refund checks behind the signature.
// Checks: fuzz_channel.hpp's contracts; parsed fields survive WechatV2Xml and a second
// parse exactly (values are the text as written, "\r\n" and spaces included); a correctly
// signed payment notice is never refused as bad_signature.

#include <cstdint>
#include <string>

#include "api/json_output.hpp"
#include "api/platform_crypto.hpp"
#include "api/wechat_v2_channel.hpp"
#include "api/wechat_v2_xml.hpp"
#include "tests/api/platform_fixtures.hpp"
#include "tests/fuzz/fuzz_channel.hpp"

namespace payledger::fuzz {
namespace {

api::WechatV2Config Config(api::WechatV2SignType sign_type) {
    return {.appid = testing::kV2AppId,
            .mch_id = testing::kV2MchId,
            .api_key = testing::kV2ApiKey,
            .sign_type = sign_type};
}

ledger::Delivery VerifyBody(const api::WechatV2Channel& channel, const std::string& body) {
    const api::Incoming incoming = BodyOnly(body, "text/xml");
    ledger::Delivery delivery = channel.Verify(incoming);
    CheckDelivery(delivery, projections::Source::kWechatV2, body);
    CheckAnswers(channel, delivery);
    return delivery;
}

// The fields re-signed and re-sealed as described above, through Verify.
void VerifyResigned(api::PlatformFields fields) {
    static const api::WechatV2Channel md5{Config(api::WechatV2SignType::kMd5)};
    static const api::WechatV2Channel hmac{Config(api::WechatV2SignType::kHmacSha256)};
    const auto req_info = fields.find("req_info");
    const bool sealed = req_info != fields.end() && req_info->second.starts_with('<');
    if (sealed) {
        req_info->second = api::Base64Encode(
            api::Aes256EcbEncrypt(api::Md5HexLower(testing::kV2ApiKey), req_info->second));
    }
    const auto sign = fields.find("sign");
    const bool signed_here = sign != fields.end() && sign->second == kSignPlaceholder;
    const bool use_hmac = api::FieldOr(fields, "sign_type") == "HMAC-SHA256";
    if (signed_here) {
        sign->second = api::WechatV2Sign(
            fields, testing::kV2ApiKey,
            use_hmac ? api::WechatV2SignType::kHmacSha256 : api::WechatV2SignType::kMd5);
    }
    if (!sealed && !signed_here) return;
    const ledger::Delivery delivery =
        VerifyBody(use_hmac ? hmac : md5, api::WechatV2Xml(fields, "xml"));
    const std::string_view sign_type = api::FieldOr(fields, "sign_type");
    if (signed_here && !fields.contains("req_info") &&
        (sign_type.empty() || sign_type == "MD5" || sign_type == "HMAC-SHA256")) {
        FUZZ_CHECK(delivery.verdict != projections::Outcome::kBadSignature);
    }
}

}  // namespace
}  // namespace payledger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace payledger;
    static const api::WechatV2Channel channel{fuzz::Config(api::WechatV2SignType::kMd5)};
    const std::string_view text = fuzz::AsText(data, size);
    const api::FlatXml inner = api::ParseFlatXml(text, "root");
    FUZZ_CHECK(inner.fields.has_value() == inner.error.empty());
    const api::FlatXml xml = api::ParseFlatXml(text, "xml");
    FUZZ_CHECK(xml.fields.has_value() == xml.error.empty());

    (void)fuzz::VerifyBody(channel, std::string(text));
    if (!xml.fields) return 0;
    const api::FlatXml again = api::ParseFlatXml(api::WechatV2Xml(*xml.fields, "xml"), "xml");
    FUZZ_CHECK(again.fields == xml.fields);
    fuzz::VerifyResigned(*xml.fields);
    return 0;
}
