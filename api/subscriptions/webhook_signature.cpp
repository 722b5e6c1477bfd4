#include "api/subscriptions/webhook_signature.hpp"

#include <optional>
#include <utility>

#include "api/crypto.hpp"
#include "ledger/base/bytes.hpp"
#include "projections/assert.hpp"

namespace payledger::api {
namespace {

constexpr std::string_view kWebhookSecretPrefix = "whsec_";

}  // namespace

WebhookSecret::WebhookSecret(std::string bytes) : bytes_(std::move(bytes)) {
    PAYLEDGER_ASSERT(bytes_.size() >= kWebhookSecretBytesMin);
    PAYLEDGER_ASSERT(bytes_.size() <= kWebhookSecretBytesMax);
}

Checked<WebhookSecret> ParseWebhookSecret(std::string_view text) {
    // One message for every way to be wrong: it must not echo any part of the secret.
    const Refusal refusal = Malformed("must be \"whsec_\" followed by standard base64 of " +
                                      std::to_string(kWebhookSecretBytesMin) + " to " +
                                      std::to_string(kWebhookSecretBytesMax) + " bytes");
    if (!text.starts_with(kWebhookSecretPrefix)) return refusal;
    std::optional<std::string> bytes =
        ledger::Base64Decode(text.substr(kWebhookSecretPrefix.size()));
    if (!bytes || bytes->size() < kWebhookSecretBytesMin ||
        bytes->size() > kWebhookSecretBytesMax) {
        return refusal;
    }
    return WebhookSecret{std::move(*bytes)};
}

std::string SignWebhook(const std::vector<WebhookSecret>& secrets, std::string_view webhook_id,
                        std::int64_t timestamp_seconds, std::string_view body) {
    PAYLEDGER_ASSERT(!secrets.empty());
    std::string signed_text;
    signed_text.reserve(webhook_id.size() + body.size() + 24);
    signed_text.append(webhook_id).append(".").append(std::to_string(timestamp_seconds));
    signed_text.append(".").append(body);
    std::string header;
    for (const WebhookSecret& secret : secrets) {
        if (!header.empty()) header += ' ';
        header += "v1,";
        header += ledger::Base64Encode(HmacSha256(secret.bytes(), signed_text));
    }
    return header;
}

}  // namespace payledger::api
