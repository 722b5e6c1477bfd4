#pragma once

#include <optional>
#include <string_view>

#include "api/channels/channel.hpp"
#include "api/channels/platform_channel.hpp"
#include "api/config.hpp"

namespace payledger::api {

// `alipay` (docs/platforms.md#alipay): Alipay asynchronous notifications, a form body signed
// RSA2 (SHA256withRSA) over the sorted decoded fields without sign, sign_type and empty
// values. Payments, refunds (cumulative refund_fee) and closes map to events by
// docs/platforms.md#notices-to-events; a refund's total_amount and trade_no are cross-checked by
// the ledger against the order and its payment. Answers: exactly `success`, else `failure` with the
// outcome's status.
class AlipayChannel final : public Channel {
public:
    explicit AlipayChannel(AlipayConfig config) : config_(std::move(config)) {}

    [[nodiscard]] projections::Source source() const override {
        return projections::Source::kAlipay;
    }
    [[nodiscard]] ledger::Delivery Verify(Incoming& incoming) const override;
    [[nodiscard]] Response Answer(const ledger::DeliveryResult& result) const override;

private:
    // nullopt when the fields carry a valid RSA2 signature.
    [[nodiscard]] std::optional<Refusal> CheckSignature(const PlatformFields& fields) const;
    // nullopt when app_id (and seller_id, when configured) are the configured ones.
    [[nodiscard]] std::optional<Refusal> CheckMerchant(const PlatformFields& fields) const;

    AlipayConfig config_;
};

// The event that the fields of a notice whose signature verified record: payment, refund or
// close by trade_status and refund_fee, with its amount, number and time (a missing time is
// `received_at`'s); ignored for WAIT_BUYER_PAY, malformed for what no notice may say. The
// merchant checks are not made here. What the channel appends, and what
// `payledger audit --platform-signatures` compares a stored event with.
[[nodiscard]] Checked<NoticeEvent> AlipayNoticeEvent(const PlatformFields& fields,
                                                     projections::TimeMicros received_at);

// Alipay's "yyyy-MM-dd HH:mm:ss" in Asia/Shanghai, with optional milliseconds (gmt_refund may carry
// them). nullopt when malformed.
[[nodiscard]] std::optional<projections::TimeMicros> ParseAlipayTime(std::string_view text);

}  // namespace payledger::api
