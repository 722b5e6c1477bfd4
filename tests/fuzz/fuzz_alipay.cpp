// Fuzzes the Alipay notices (docs/platforms.md#alipay) with the whole input as the
// form body: DecodeForm directly, ParseAlipayTime on the input and on every decoded value,
// then AlipayChannel::Verify on the raw body. When the form decodes and its `sign` is SIGN,
// the harness signs the decoded fields RSA2 with the test key, writes them back with
// EncodeForm and runs Verify again, reaching the mapping behind the signature. Checks:
// fuzz_channel.hpp's contracts; a field name given twice is refused, every refusal
// of the form is malformed; DecodeForm(EncodeForm(f)) == f; ParseAlipayTime is
// ParseShanghaiDashed plus at most six fraction digits; a correctly signed RSA2 notice is
// never refused as bad_signature.

#include <cstdint>
#include <set>
#include <string>

#include "api/channels/alipay_channel.hpp"
#include "api/channels/alipay_form.hpp"
#include "api/channels/platform_crypto.hpp"
#include "ledger/base/bytes.hpp"
#include "tests/api/channels/platform_fixtures.hpp"
#include "tests/fuzz/fuzz_channel.hpp"

namespace payledger::fuzz {
namespace {

// A small key: signing runs once per SIGN input, and the key size is not under test.
const api::PrivateKey& Key() {
    static const api::PrivateKey key = api::GenerateRsaKey(1024);
    return key;
}

const api::AlipayChannel& Channel() {
    static const api::AlipayChannel channel{
        api::AlipayConfig{.app_id = testing::kAlipayAppId, .alipay_public_key = Key().Public()}};
    return channel;
}

// "yyyy-MM-dd HH:mm:ss" with an optional "." and 1-6 digits of fraction.
void CheckAlipayTime(std::string_view text) {
    const std::optional<projections::TimeMicros> time = api::ParseAlipayTime(text);
    if (text.size() <= 19) {
        FUZZ_CHECK(time == projections::ParseShanghaiDashed(text));
        return;
    }
    const std::string_view fraction = text.substr(20);
    const bool fraction_ok = text[19] == '.' && !fraction.empty() && fraction.size() <= 6 &&
                             fraction.find_first_not_of("0123456789") == std::string_view::npos;
    const std::optional<projections::TimeMicros> whole =
        projections::ParseShanghaiDashed(text.substr(0, 19));
    if (!fraction_ok || !whole) {
        FUZZ_CHECK(!time);
        return;
    }
    std::string six(fraction);
    six.resize(6, '0');
    FUZZ_CHECK(time == *whole + std::stoll(six));
}

// Strict parsing (docs/platforms.md#strict-parsing), judged apart from DecodeForm: a body in which
// two pairs have byte-equal names (before decoding) repeats a field and must be refused.
bool RepeatsARawName(std::string_view body) {
    std::set<std::string_view> names;
    std::size_t start = 0;
    while (start <= body.size()) {
        const std::size_t amp = body.find('&', start);
        const std::string_view pair =
            body.substr(start, amp == std::string_view::npos ? body.npos : amp - start);
        start = amp == std::string_view::npos ? body.size() + 1 : amp + 1;
        if (pair.empty()) continue;
        if (!names.insert(pair.substr(0, pair.find('='))).second) return true;
    }
    return false;
}

ledger::Delivery VerifyBody(const std::string& body) {
    api::Incoming incoming = BodyOnly(body, "application/x-www-form-urlencoded");
    ledger::Delivery delivery = Channel().Verify(incoming);
    CheckDelivery(delivery, projections::Source::kAlipay, body);
    CheckAnswers(Channel(), delivery);
    return delivery;
}

void VerifyResigned(api::PlatformFields fields) {
    const auto sign = fields.find("sign");
    if (sign == fields.end() || sign->second != kSignPlaceholder) return;
    sign->second = ledger::Base64Encode(api::RsaSha256Sign(Key(), api::AlipaySignContent(fields)));
    const ledger::Delivery delivery = VerifyBody(api::EncodeForm(fields));
    const std::string_view sign_type = api::FieldOr(fields, "sign_type");
    if (sign_type.empty() || sign_type == "RSA2") {
        FUZZ_CHECK(delivery.outcome != projections::Outcome::kBadSignature);
    }
}

}  // namespace
}  // namespace payledger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace payledger;
    const std::string_view text = fuzz::AsText(data, size);
    fuzz::CheckAlipayTime(text);
    const api::Checked<api::PlatformFields> form = api::DecodeForm(text);
    if (fuzz::RepeatsARawName(text)) FUZZ_CHECK(!form.ok());
    FUZZ_CHECK(form.ok() || (form.refusal().outcome == projections::Outcome::kMalformed &&
                             !form.refusal().message.empty()));
    (void)fuzz::VerifyBody(std::string(text));
    if (!form.ok()) return 0;
    for (const auto& [name, value] : *form) fuzz::CheckAlipayTime(value);
    const api::Checked<api::PlatformFields> again = api::DecodeForm(api::EncodeForm(*form));
    FUZZ_CHECK(again.ok() && *again == *form);
    fuzz::VerifyResigned(*form);
    return 0;
}
