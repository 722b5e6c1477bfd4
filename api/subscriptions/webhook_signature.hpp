#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/channels/refusal.hpp"

namespace payledger::api {

// Standard Webhooks 1.0 symmetric signatures, with which a subscription signs each delivery
// so that its receiver can check it with any Standard Webhooks library:
// `v1,<standard base64 of HMAC-SHA256(secret bytes, "<id>.<timestamp>.<body>")>`.

// A signing secret's length in bytes, as Standard Webhooks requires (192 to 512 bits).
inline constexpr std::size_t kWebhookSecretBytesMin = 24;
inline constexpr std::size_t kWebhookSecretBytesMax = 64;

// The bytes of one signing secret. No way to print it: it has no stream operator and no
// conversion to a string, so it cannot reach a log or an answer by accident. Immutable and
// safe to share between threads.
class WebhookSecret {
public:
    // REQUIRES: kWebhookSecretBytesMin <= bytes.size() <= kWebhookSecretBytesMax.
    explicit WebhookSecret(std::string bytes);
    [[nodiscard]] const std::string& bytes() const { return bytes_; }
    bool operator==(const WebhookSecret&) const = default;

private:
    std::string bytes_{};
};

// `whsec_` followed by standard base64 (with padding) of 24 to 64 bytes. A malformed
// refusal otherwise, whose message never repeats the text.
[[nodiscard]] Checked<WebhookSecret> ParseWebhookSecret(std::string_view text);

// The value of the `webhook-signature` header: one `v1,<base64>` per secret, in the given
// order, separated by single spaces (several secrets during a rotation). Throws
// std::runtime_error when OpenSSL fails. REQUIRES: `secrets` is not empty. `webhook_id` is
// ours (a subscription name and seqs), never a receiver's or a client's text.
[[nodiscard]] std::string SignWebhook(const std::vector<WebhookSecret>& secrets,
                                      std::string_view webhook_id, std::int64_t timestamp_seconds,
                                      std::string_view body);

}  // namespace payledger::api
