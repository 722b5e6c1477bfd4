// Fuzzes the WeChat Pay v2 notices (docs/platforms.md#wechat-pay-apiv2) with the whole
// input as the XML body: ParseFlatXml directly (roots <xml> and <root>), then
// WechatV2Channel::Verify on the raw body. An MD5 over arbitrary fields cannot be guessed,
// so when the body parses the harness also re-signs it: `sign` SIGN is replaced by the
// correct sign of the parsed fields (MD5, or HMAC-SHA256 when sign_type says so), and a
// `req_info` that starts with '<' is taken as the refund plaintext and sealed as WeChat
// does (AES-256-ECB under MD5(key), base64); WechatV2Xml writes the fields back and Verify
// runs on that body, reaching the payment and refund checks behind the signature.
// Checks: fuzz_channel.hpp's contracts; parsed fields survive WechatV2Xml and a second
// parse exactly (values are the text as written, "\r\n" and spaces included, references
// decoded); a reference to a control character outside CDATA is always refused,
// every refusal is malformed, and no parsed value holds a NUL; a correctly signed payment
// notice is never refused as bad_signature.

#include <cstdint>
#include <string>

#include "api/channels/platform_crypto.hpp"
#include "api/channels/wechat_v2_channel.hpp"
#include "api/channels/wechat_v2_xml.hpp"
#include "ledger/base/bytes.hpp"
#include "tests/api/channels/platform_fixtures.hpp"
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
    api::Incoming incoming = BodyOnly(body, "text/xml");
    ledger::Delivery delivery = channel.Verify(incoming);
    CheckDelivery(delivery, projections::Source::kWechatV2, body);
    CheckAnswers(channel, delivery);
    return delivery;
}

bool IsMalformedRefusal(const api::Refusal& refusal) {
    return refusal.outcome == projections::Outcome::kMalformed && !refusal.message.empty();
}

// Strict parsing (docs/platforms.md#strict-parsing), independently of the parser: a character
// reference "&#N;" / "&#xN;" to U+0000-U+001F other than tab, LF and CR (with any number of leading
// zeros), or past U+10FFFF (which pugixml's unsigned arithmetic wrapped, "&#4294967296;" to a NUL).
// Judged only in text without CDATA, comments, processing instructions and attributes (no '='),
// where every "&#" stands in a text node: inside a field it breaks the reference rule, outside the
// fields it is text the flat XML refuses, so such a body is always refused.
bool HasForbiddenReference(std::string_view text) {
    if (text.find("<!") != std::string_view::npos || text.find("<?") != std::string_view::npos ||
        text.find('=') != std::string_view::npos) {
        return false;
    }
    for (std::size_t at = text.find("&#"); at != std::string_view::npos;
         at = text.find("&#", at + 2)) {
        const bool hex = text.substr(at, 3) == "&#x";
        std::size_t i = at + (hex ? 3 : 2);
        unsigned value = 0;  // Saturates past Unicode; pugixml's would wrap to 0.
        bool digits = false;
        for (; i < text.size(); ++i) {
            const char c = text[i];
            const bool digit = (c >= '0' && c <= '9') ||
                               (hex && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')));
            if (!digit) break;
            digits = true;
            const unsigned next = value * (hex ? 16 : 10) +
                                  static_cast<unsigned>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
            value = value > 0x10FFFF ? value : next;
        }
        const bool control = value < 32 && value != 9 && value != 10 && value != 13;
        if (digits && i < text.size() && text[i] == ';' && (control || value > 0x10FFFF)) {
            return true;
        }
    }
    return false;
}

// The fields re-signed and re-sealed as described above, through Verify.
void VerifyResigned(api::PlatformFields fields) {
    static const api::WechatV2Channel md5{Config(api::WechatV2SignType::kMd5)};
    static const api::WechatV2Channel hmac{Config(api::WechatV2SignType::kHmacSha256)};
    const auto req_info = fields.find("req_info");
    const bool sealed = req_info != fields.end() && req_info->second.starts_with('<');
    // A <root> plaintext that decrypts but breaks a parsing rule is malformed.
    const bool forbidden_inside =
        sealed && req_info->second.starts_with("<root>") && HasForbiddenReference(req_info->second);
    if (sealed) {
        req_info->second = ledger::Base64Encode(
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
    if (forbidden_inside) FUZZ_CHECK(delivery.outcome == projections::Outcome::kMalformed);
    const std::string_view sign_type = api::FieldOr(fields, "sign_type");
    if (signed_here && !fields.contains("req_info") &&
        (sign_type.empty() || sign_type == "MD5" || sign_type == "HMAC-SHA256")) {
        FUZZ_CHECK(delivery.outcome != projections::Outcome::kBadSignature);
    }
}

}  // namespace
}  // namespace payledger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace payledger;
    static const api::WechatV2Channel channel{fuzz::Config(api::WechatV2SignType::kMd5)};
    const std::string_view text = fuzz::AsText(data, size);
    const api::Checked<api::PlatformFields> inner = api::ParseFlatXml(text, "root");
    FUZZ_CHECK(inner.ok() || fuzz::IsMalformedRefusal(inner.refusal()));
    const api::Checked<api::PlatformFields> xml = api::ParseFlatXml(text, "xml");
    FUZZ_CHECK(xml.ok() || fuzz::IsMalformedRefusal(xml.refusal()));
    if (fuzz::HasForbiddenReference(text)) FUZZ_CHECK(!inner.ok() && !xml.ok());

    (void)fuzz::VerifyBody(channel, std::string(text));
    if (!xml.ok()) return 0;
    for (const auto& [name, value] : *xml) {
        FUZZ_CHECK(value.find('\0') == std::string::npos);  // No reference decodes to a NUL.
    }
    const api::Checked<api::PlatformFields> again =
        api::ParseFlatXml(api::WechatV2Xml(*xml, "xml"), "xml");
    FUZZ_CHECK(again.ok() && *again == *xml);
    fuzz::VerifyResigned(*xml);
    return 0;
}
