#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/channels/channel.hpp"
#include "api/config.hpp"

namespace payledger::api {

// `wechat_v3` (docs/platforms.md#wechat-pay-apiv3): WeChat Pay APIv3 notifications. The headers
// sign "<Wechatpay-Timestamp>\n<Wechatpay-Nonce>\n<raw body>\n" with SHA256withRSA under the
// platform key that Wechatpay-Serial names; the JSON envelope carries the notice as an
// AES-256-GCM `resource` under the APIv3 key. The signature is verified before the body is
// parsed or decrypted, so an unverified delivery names no order. Answers: 204 on success, else
// {"code":"FAIL","message":...} with the outcome's status.
class WechatV3Channel final : public Channel {
public:
    explicit WechatV3Channel(WechatV3Config config) : config_(std::move(config)) {}

    [[nodiscard]] projections::Source source() const override {
        return projections::Source::kWechatV3;
    }
    [[nodiscard]] ledger::Delivery Verify(Incoming& incoming) const override;
    [[nodiscard]] Response Answer(const ledger::DeliveryResult& result) const override;

private:
    // nullopt when the headers hold a valid, fresh signature of the raw body. Reads nothing
    // but the headers and the raw bytes (verified before anything is parsed).
    [[nodiscard]] std::optional<Refusal> CheckSignature(const Incoming& incoming,
                                                        std::string_view body) const;
    // The decrypted resource of a verified envelope.
    [[nodiscard]] Checked<nlohmann::json> Open(const nlohmann::json& envelope) const;
    [[nodiscard]] ledger::Delivery Decide(ledger::Receipt receipt, const nlohmann::json& envelope,
                                          const nlohmann::json& resource,
                                          projections::TimeMicros received_at) const;

    WechatV3Config config_;
};

// The resource of a notice envelope, decrypted with the APIv3 key (AEAD_AES_256_GCM under
// resource.nonce and resource.associated_data) and parsed as a JSON object.
[[nodiscard]] Checked<nlohmann::json> OpenWechatV3Resource(std::string_view api_v3_key,
                                                           const nlohmann::json& envelope);

// The event that a notice whose signature verified records, from its envelope and decrypted
// resource: a payment for TRANSACTION.SUCCESS, a refund for REFUND.SUCCESS (a missing
// success_time is `received_at`), ignored for other event types. The merchant checks are not
// made here. What the channel appends, and what `payledger audit --platform-signatures`
// compares a stored event with.
[[nodiscard]] Checked<NoticeEvent> WechatV3NoticeEvent(const nlohmann::json& envelope,
                                                       const nlohmann::json& resource,
                                                       projections::TimeMicros received_at);

// The PAYMENT_SUCCEEDED of a paid WeChat Pay v3 Transaction object (a notification's decrypted
// resource, or an order query's answer: docs/query.md), whatever its trade_state: amount.total,
// amount.currency (default CNY), transaction_id, success_time; `data` with the transaction's
// kept fields added; source wechat_v3 (the caller sets another). No merchant check here.
[[nodiscard]] Checked<NoticeEvent> WechatV3TransactionPayment(const nlohmann::json& resource,
                                                              nlohmann::json data,
                                                              projections::TimeMicros received_at);

// The envelope's fields that the channel keeps in an event's data (id, event_type,
// create_time, summary: in plain text, readable without the APIv3 key).
[[nodiscard]] nlohmann::json WechatV3EnvelopeData(const nlohmann::json& envelope);

// docs/platforms.md#apiv3-signature: the signed message, three lines each ending in "\n".
[[nodiscard]] std::string WechatV3SignatureMessage(std::string_view timestamp,
                                                   std::string_view nonce, std::string_view body);

}  // namespace payledger::api
