#pragma once

#include "api/channel.hpp"
#include "api/config.hpp"
#include "api/platform_channel.hpp"

namespace payledger::api {

// SPEC §6 `wechat_v2` (providers.md §1): WeChat Pay APIv2 payment and refund notifications,
// flat XML. A payment notice is signed with the APIv2 key (MD5 or HMAC-SHA256, as
// configured); a refund notice carries `req_info`, AES-256-ECB under the MD5 of that key,
// and no signature. Answers are the compact return_code XML.
class WechatV2Channel final : public Channel {
public:
    explicit WechatV2Channel(WechatV2Config config) : config_(std::move(config)) {}

    [[nodiscard]] projections::Source source() const override {
        return projections::Source::kWechatV2;
    }
    [[nodiscard]] ledger::Delivery Verify(const Incoming& incoming) const override;
    [[nodiscard]] Response Answer(const ledger::DeliveryResult& result) const override;

private:
    [[nodiscard]] ledger::Delivery VerifyPayment(ledger::Receipt receipt,
                                                 const PlatformFields& fields,
                                                 projections::TimeMicros received_at) const;
    [[nodiscard]] ledger::Delivery VerifyRefund(ledger::Receipt receipt,
                                                const PlatformFields& fields,
                                                projections::TimeMicros received_at) const;
    // nullopt when appid and mch_id are the configured ones; else the refused delivery
    // (malformed when one is missing, mismatch when it differs).
    [[nodiscard]] std::optional<ledger::Delivery> CheckMerchant(ledger::Receipt& receipt,
                                                                const PlatformFields& fields) const;

    WechatV2Config config_;
};

}  // namespace payledger::api
