#pragma once

#include "api/channels/channel.hpp"
#include "api/channels/platform_channel.hpp"
#include "api/config.hpp"

namespace payledger::api {

// `wechat_v2` (docs/platforms.md#wechat-pay-apiv2): WeChat Pay APIv2 payment and refund
// notifications, flat XML. A payment notice is signed with the APIv2 key (MD5 or HMAC-SHA256, as
// configured); a refund notice carries `req_info`, AES-256-ECB under the MD5 of that key,
// and no signature. ECB authenticates nothing (blocks of other notices of the merchant can
// be spliced in), so a refund must name the order's total_fee and its payment's
// transaction_id, which the ledger checks against the order (docs/platforms.md#cross-checks).
// Answers are the compact return_code XML.
class WechatV2Channel final : public Channel {
public:
    explicit WechatV2Channel(WechatV2Config config) : config_(std::move(config)) {}

    [[nodiscard]] projections::Source source() const override {
        return projections::Source::kWechatV2;
    }
    [[nodiscard]] ledger::Delivery Verify(Incoming& incoming) const override;
    [[nodiscard]] Response Answer(const ledger::DeliveryResult& result) const override;

private:
    [[nodiscard]] ledger::Delivery VerifyPayment(ledger::Receipt receipt,
                                                 const PlatformFields& fields,
                                                 projections::TimeMicros received_at) const;
    [[nodiscard]] ledger::Delivery VerifyRefund(ledger::Receipt receipt,
                                                const PlatformFields& fields,
                                                projections::TimeMicros received_at) const;
    // nullopt when `sign` (and `sign_type`, if sent) verify with the API key.
    [[nodiscard]] std::optional<Refusal> CheckSignature(const PlatformFields& fields) const;
    // nullopt when appid and mch_id are the configured ones.
    [[nodiscard]] std::optional<Refusal> CheckMerchant(const PlatformFields& fields) const;
    // The decrypted req_info fields; bad_signature when it does not decrypt with the key.
    [[nodiscard]] Checked<PlatformFields> OpenReqInfo(const PlatformFields& fields) const;

    WechatV2Config config_;
};

// The PAYMENT_SUCCEEDED that v2 payment fields record (a notification's, or an order query's
// answer, which names the same fields: docs/query.md): total_fee in fee_type (default CNY),
// transaction_id, time_end; source wechat_v2 (the caller sets another). No merchant check here.
[[nodiscard]] Checked<NoticeEvent> WechatV2PaymentEvent(const PlatformFields& fields,
                                                        projections::TimeMicros received_at);

}  // namespace payledger::api
