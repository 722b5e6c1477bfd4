// Fuzzes WechatV3Channel::Verify (docs/platforms.md#wechat-pay-apiv3). Input: header
// lines, a blank line, the JSON envelope (tests/fuzz/README.md); Beast parses them as the
// server would. Two directives let the fuzzer past the cryptography: a string
// `resource.plaintext` is sealed into `resource.ciphertext` (AES-256-GCM under the APIv3
// key with the resource's nonce and associated_data, base64), and `Wechatpay-Signature: SIGN`
// is replaced by the SHA256withRSA signature of the parsed timestamp, nonce and body under
// the test key that Wechatpay-Serial names. Checks: fuzz_channel.hpp's contracts; what the
// harness signed or sealed never fails verification or decryption; a bad_signature receipt
// names no order (nothing is decrypted before the signature holds); a signed
// envelope that repeats a JSON key is not accepted.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "api/channels/json_input.hpp"
#include "api/channels/platform_crypto.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "ledger/base/bytes.hpp"
#include "tests/api/channels/platform_fixtures.hpp"
#include "tests/fuzz/fuzz_channel.hpp"
#include "tests/fuzz/fuzz_json_keys.hpp"

namespace payledger::fuzz {
namespace {

constexpr const char* kSignatureHeader = "Wechatpay-Signature";

// Small keys: signing runs once per SIGN input, and the key size is not under test.
const api::PrivateKey& Key(int index) {
    static const api::PrivateKey keys[] = {api::GenerateRsaKey(1024), api::GenerateRsaKey(1024)};
    return keys[index];
}

const api::WechatV3Channel& Channel() {
    static const api::WechatV3Channel channel{
        api::WechatV3Config{.appid = testing::kV3AppId,
                            .mchid = testing::kV3MchId,
                            .api_v3_key = testing::kV3ApiKey,
                            .platform_public_keys = {{testing::kV3Serial, Key(0).Public()},
                                                     {testing::kV3PublicKeyId, Key(1).Public()}}}};
    return channel;
}

// The body with resource.plaintext sealed, or nullopt when there is nothing to seal.
std::optional<std::string> Seal(std::string_view body) {
    std::optional<nlohmann::json> envelope = api::ParseJsonObject(body);
    if (!envelope) return std::nullopt;
    const auto resource = envelope->find("resource");
    if (resource == envelope->end() || !resource->is_object()) return std::nullopt;
    const auto plaintext = resource->find("plaintext");
    const auto nonce = resource->find("nonce");
    const auto aad = resource->find("associated_data");
    if (plaintext == resource->end() || !plaintext->is_string() || nonce == resource->end() ||
        !nonce->is_string() || nonce->get_ref<const std::string&>().empty() ||
        nonce->get_ref<const std::string&>().size() > api::kGcmNonceMaxBytes ||
        (aad != resource->end() && !aad->is_string())) {
        return std::nullopt;
    }
    const std::string sealed =
        api::Aes256GcmEncrypt(testing::kV3ApiKey, nonce->get<std::string>(),
                              aad == resource->end() ? std::string{} : aad->get<std::string>(),
                              plaintext->get<std::string>());
    (*resource)["ciphertext"] = ledger::Base64Encode(sealed);
    resource->erase("plaintext");
    return envelope->dump();
}

// True when the body's resource.plaintext (what Seal encrypts) repeats a JSON key.
bool PlaintextRepeatsAKey(std::string_view body) {
    const nlohmann::json envelope = nlohmann::json::parse(body, nullptr, false);
    if (envelope.is_discarded() || !envelope.is_object()) return false;
    const auto resource = envelope.find("resource");
    if (resource == envelope.end() || !resource->is_object()) return false;
    const auto plaintext = resource->find("plaintext");
    return plaintext != resource->end() && plaintext->is_string() &&
           HasRepeatedKey(plaintext->get_ref<const std::string&>());
}

std::string Header(const api::Incoming& incoming, const char* name) {
    const auto it = incoming.request.find(name);
    return it == incoming.request.end() ? std::string{} : std::string(it->value());
}

// Replaces `Wechatpay-Signature: SIGN` by the signature; true when it did.
bool Sign(api::Incoming& incoming) {
    const auto header = incoming.request.find(kSignatureHeader);
    if (header == incoming.request.end() || header->value() != kSignPlaceholder ||
        incoming.request.count(kSignatureHeader) != 1) {
        return false;
    }
    const std::string message =
        api::WechatV3SignatureMessage(Header(incoming, "Wechatpay-Timestamp"),
                                      Header(incoming, "Wechatpay-Nonce"), incoming.request.body());
    const int key = Header(incoming, "Wechatpay-Serial") == testing::kV3PublicKeyId ? 1 : 0;
    incoming.request.set(kSignatureHeader,
                         ledger::Base64Encode(api::RsaSha256Sign(Key(key), message)));
    return true;
}

}  // namespace
}  // namespace payledger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace payledger;
    const fuzz::Split split = fuzz::SplitInput(fuzz::AsText(data, size));
    const std::optional<std::string> sealed = fuzz::Seal(split.body);
    std::optional<api::Incoming> incoming = fuzz::ParseIncoming(
        "/v1/callbacks/wechat/v3", split.lines, sealed ? std::string_view(*sealed) : split.body);
    if (!incoming) return 0;
    const bool signed_here = fuzz::Sign(*incoming);

    const api::WechatV3Channel& channel = fuzz::Channel();
    const std::string body = incoming->request.body();  // Verify moves it into the receipt.
    const ledger::Delivery delivery = channel.Verify(*incoming);
    fuzz::CheckDelivery(delivery, projections::Source::kWechatV3, body);
    fuzz::CheckAnswers(channel, delivery);
    if (signed_here) {
        FUZZ_CHECK(!delivery.message.starts_with("Wechatpay-Signature does not verify"));
    }
    if (sealed) FUZZ_CHECK(delivery.message != "resource does not decrypt with the APIv3 key");
    // The signature is verified before the body is parsed or decrypted, so a
    // delivery refused for its signature has read no order number from the resource.
    if (delivery.outcome == projections::Outcome::kBadSignature) {
        FUZZ_CHECK(!delivery.receipt.out_trade_no.has_value());
    }
    // A signed envelope or sealed resource that repeats a JSON key is malformed, never
    // last-wins.
    if (signed_here &&
        (fuzz::HasRepeatedKey(body) || (sealed && fuzz::PlaintextRepeatsAKey(split.body)))) {
        FUZZ_CHECK(delivery.outcome == projections::Outcome::kMalformed ||
                   delivery.outcome == projections::Outcome::kBadSignature);
    }
    return 0;
}
