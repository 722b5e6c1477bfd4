#include "api/channels/alipay_channel.hpp"

#include "api/channels/alipay_form.hpp"
#include "api/channels/platform_crypto.hpp"
#include "ledger/base/bytes.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using projections::EventType;

constexpr std::size_t kDashedTimeLength = 19;  // "yyyy-MM-dd HH:mm:ss"
constexpr std::size_t kFractionDigitsMax = 6;

// A zero amount ("0", "0.00") means no refund; a positive one parses; anything else is bad.
bool IsZeroAmount(std::string_view text) {
    const std::size_t dot = text.find('.');
    const std::string_view whole = text.substr(0, dot);
    const std::string_view fraction =
        dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
    if (dot != std::string_view::npos && (fraction.empty() || fraction.size() > 2)) return false;
    return !whole.empty() && whole.find_first_not_of('0') == std::string_view::npos &&
           fraction.find_first_not_of('0') == std::string_view::npos;
}

// The kept notice fields (the event's `data`).
std::string NoticeData(const PlatformFields& fields) {
    return KeptFields(
        fields, {"notify_id", "notify_type", "notify_time", "trade_status", "trade_no",
                 "out_biz_no", "buyer_id", "buyer_open_id", "buyer_logon_id", "seller_id",
                 "total_amount", "receipt_amount", "buyer_pay_amount", "refund_fee", "gmt_payment",
                 "gmt_refund", "gmt_close", "charset"});
}

// The time of the payment, refund or close, else notify_time (docs/platforms.md#notices-to-events).
std::optional<projections::TimeMicros> OccurredAt(const PlatformFields& fields, const char* primary,
                                                  projections::TimeMicros received_at) {
    std::string_view text = FieldOr(fields, primary);
    if (text.empty()) text = FieldOr(fields, "notify_time");
    return PlatformTime(text, received_at, ParseAlipayTime);
}

// docs/platforms.md#notices-to-events for Alipay: the event a verified notice records.
Checked<EventType> Classify(const PlatformFields& fields) {
    const std::string_view status = FieldOr(fields, "trade_status");
    const std::string_view refund_fee = FieldOr(fields, "refund_fee");
    const bool refunded = !refund_fee.empty() && !IsZeroAmount(refund_fee);
    if (status == "TRADE_FINISHED") return EventType::kPaymentSucceeded;
    if (status == "TRADE_SUCCESS") {
        return refunded ? EventType::kRefundSucceeded : EventType::kPaymentSucceeded;
    }
    if (status == "TRADE_CLOSED") {
        return refunded ? EventType::kRefundSucceeded : EventType::kPaymentClosed;
    }
    if (status == "WAIT_BUYER_PAY") return Ignored("WAIT_BUYER_PAY records no event");
    return Malformed(
        "trade_status must be WAIT_BUYER_PAY, TRADE_SUCCESS, TRADE_FINISHED or TRADE_CLOSED");
}

Checked<std::int64_t> RequireYuan(const PlatformFields& fields, const char* field) {
    const std::optional<std::int64_t> amount = projections::ParseMajorUnits(FieldOr(fields, field));
    if (!amount) {
        return Malformed(std::string(field) +
                         " must be yuan with at most two decimals, 0.01 to 10^11");
    }
    return *amount;
}

// The cross-checks of a refund (docs/platforms.md#cross-checks): the total_amount and trade_no it
// names, if it names them.
Checked<projections::Claims> RefundClaims(const PlatformFields& fields) {
    projections::Claims claims;
    if (!FieldOr(fields, "total_amount").empty()) {
        const Checked<std::int64_t> total = RequireYuan(fields, "total_amount");
        if (!total) return total.refusal();
        claims.order_amount = *total;
    }
    const std::string_view trade_no = FieldOr(fields, "trade_no");
    if (!trade_no.empty()) {
        Checked<std::string> named = RequirePlatformId(trade_no, "trade_no");
        if (!named) return named.refusal();
        claims.payment_transaction_id = std::move(*named);
    }
    return claims;
}

// The amount, number and currency of a payment or refund notice into `notice`.
std::optional<Refusal> FillMoney(const PlatformFields& fields, bool refund, NoticeEvent& notice) {
    const Checked<std::int64_t> amount =
        RequireYuan(fields, refund ? "refund_fee" : "total_amount");
    if (!amount) return amount.refusal();
    const std::string_view out_biz_no = FieldOr(fields, "out_biz_no");
    const bool by_out_biz_no = refund && !out_biz_no.empty();
    const Checked<std::string> number =
        RequirePlatformId(by_out_biz_no ? out_biz_no : FieldOr(fields, "trade_no"),
                          by_out_biz_no ? "out_biz_no" : "trade_no");
    if (!number) return number.refusal();
    // CNY unless the notice names a currency; a refund without one takes its order's.
    std::string currency{FieldOr(fields, "currency")};
    if (currency.empty() && !refund) currency = "CNY";
    if (!currency.empty()) {
        if (auto checked = RequireCurrency(currency, "currency"); !checked) {
            return checked.refusal();
        }
    }
    if (refund) {
        Checked<projections::Claims> claims = RefundClaims(fields);
        if (!claims) return claims.refusal();
        notice.claims = std::move(*claims);
    }
    notice.event.amount = *amount;
    notice.event.currency = currency;
    notice.event.transaction_id = *number;
    return std::nullopt;
}

// The event of a verified notice of `type`.
Checked<NoticeEvent> BuildEvent(const PlatformFields& fields, EventType type,
                                projections::TimeMicros received_at) {
    const Checked<std::string> out_trade_no =
        RequireKey(FieldOr(fields, "out_trade_no"), "out_trade_no");
    if (!out_trade_no) return out_trade_no.refusal();
    NoticeEvent notice{.event = {.out_trade_no = *out_trade_no,
                                 .event_type = type,
                                 .source = projections::Source::kAlipay,
                                 .data = NoticeData(fields)}};
    const bool refund = type == EventType::kRefundSucceeded;
    const char* time_field = "gmt_close";
    if (type != EventType::kPaymentClosed) {
        if (auto refused = FillMoney(fields, refund, notice)) return *refused;
        time_field = refund ? "gmt_refund" : "gmt_payment";
    }
    const std::optional<projections::TimeMicros> occurred_at =
        OccurredAt(fields, time_field, received_at);
    if (!occurred_at) {
        return Malformed(std::string(time_field) +
                         " and notify_time must be yyyy-MM-dd HH:mm:ss (Asia/Shanghai)");
    }
    notice.event.occurred_at = *occurred_at;
    return notice;
}

}  // namespace

Checked<NoticeEvent> AlipayNoticeEvent(const PlatformFields& fields,
                                       projections::TimeMicros received_at) {
    const Checked<EventType> type = Classify(fields);
    if (!type) return type.refusal();
    return BuildEvent(fields, *type, received_at);
}

std::optional<projections::TimeMicros> ParseAlipayTime(std::string_view text) {
    if (text.size() <= kDashedTimeLength) return projections::ParseShanghaiDashed(text);
    const std::string_view fraction = text.substr(kDashedTimeLength + 1);
    if (text[kDashedTimeLength] != '.' || fraction.empty() ||
        fraction.size() > kFractionDigitsMax ||
        fraction.find_first_not_of("0123456789") != std::string_view::npos) {
        return std::nullopt;
    }
    std::optional<projections::TimeMicros> time =
        projections::ParseShanghaiDashed(text.substr(0, kDashedTimeLength));
    if (!time) return std::nullopt;
    std::int64_t micros = 0;
    for (std::size_t i = 0; i < kFractionDigitsMax; ++i) {
        micros = micros * 10 + (i < fraction.size() ? fraction[i] - '0' : 0);
    }
    return *time + micros;
}

std::optional<Refusal> AlipayChannel::CheckSignature(const PlatformFields& fields) const {
    const std::string_view sign = FieldOr(fields, "sign");
    if (sign.empty()) return BadSignature("sign is missing");
    const std::string_view sign_type = FieldOr(fields, "sign_type");
    if (!sign_type.empty() && sign_type != "RSA2") {
        return BadSignature("sign_type " + std::string(sign_type) +
                            " is not accepted; only RSA2 is");
    }
    const std::optional<std::string> raw = ledger::Base64Decode(sign);
    if (!raw) return BadSignature("sign is not base64 (after form decoding)");
    if (!RsaSha256Verify(config_.alipay_public_key, AlipaySignContent(fields), *raw)) {
        return BadSignature("sign does not verify with the Alipay public key");
    }
    return std::nullopt;
}

std::optional<Refusal> AlipayChannel::CheckMerchant(const PlatformFields& fields) const {
    if (auto refused = CheckConfiguredId(FieldOr(fields, "app_id"), "app_id", config_.app_id)) {
        return refused;
    }
    // seller_id too, when alipay.seller_id is configured.
    if (config_.seller_id.empty()) return std::nullopt;
    return CheckConfiguredId(FieldOr(fields, "seller_id"), "seller_id", config_.seller_id);
}

ledger::Delivery AlipayChannel::Verify(Incoming& incoming) const {
    // Information only: no header verifies this channel's deliveries.
    ledger::Receipt receipt =
        BaseReceipt(incoming, source(), {{"Content-Type"}, {"User-Agent"}}).receipt;
    const Checked<PlatformFields> form = DecodeForm(receipt.body);
    if (!form) return Rejected(std::move(receipt), form.refusal());
    const PlatformFields& fields = *form;
    ClaimOutTradeNo(receipt, FieldOr(fields, "out_trade_no"));

    if (auto refused = CheckSignature(fields)) return Rejected(std::move(receipt), *refused);
    receipt.signature_verified = true;
    if (auto refused = CheckMerchant(fields)) return Rejected(std::move(receipt), *refused);
    Checked<NoticeEvent> notice = AlipayNoticeEvent(fields, incoming.received_at);
    if (!notice) return Rejected(std::move(receipt), notice.refusal());
    return Accepted(std::move(receipt), std::move(*notice));
}

Response AlipayChannel::Answer(const ledger::DeliveryResult& result) const {
    // Exactly "success", or Alipay resends (docs/platforms.md#alipay-answers).
    if (IsAcknowledged(result)) return MakeResponse(http::status::ok, "text/plain", "success");
    const http::status status = StatusOf(result);
    return MakeResponse(status, "text/plain", "failure");
}

}  // namespace payledger::api
