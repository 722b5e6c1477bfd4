#include "api/alipay_channel.hpp"

#include "api/alipay_form.hpp"
#include "api/platform_crypto.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using projections::EventType;
using projections::Outcome;

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

// The kept notice fields (SPEC §2 `data`).
std::string NoticeData(const PlatformFields& fields) {
    return KeptFields(
        fields, {"notify_id", "notify_type", "notify_time", "trade_status", "trade_no",
                 "out_biz_no", "buyer_id", "buyer_open_id", "buyer_logon_id", "seller_id",
                 "total_amount", "receipt_amount", "buyer_pay_amount", "refund_fee", "gmt_payment",
                 "gmt_refund", "gmt_close", "charset"});
}

// SPEC §6: the time of the payment, refund or close, else notify_time.
std::optional<projections::TimeMicros> OccurredAt(const PlatformFields& fields, const char* primary,
                                                  projections::TimeMicros received_at) {
    std::string_view text = FieldOr(fields, primary);
    if (text.empty()) text = FieldOr(fields, "notify_time");
    return PlatformTime(text, received_at, ParseAlipayTime);
}

struct Classified {
    std::optional<EventType> event_type{};  // nullopt: ignored or refused.
    Outcome refusal = Outcome::kIgnored;
    std::string message{};
};

// The SPEC §6 mapping table for Alipay.
Classified Classify(const PlatformFields& fields) {
    const std::string_view status = FieldOr(fields, "trade_status");
    const std::string_view refund_fee = FieldOr(fields, "refund_fee");
    const bool refunded = !refund_fee.empty() && !IsZeroAmount(refund_fee);
    if (status == "TRADE_FINISHED") return {.event_type = EventType::kPaymentSucceeded};
    if (status == "TRADE_SUCCESS") {
        return {.event_type =
                    refunded ? EventType::kRefundSucceeded : EventType::kPaymentSucceeded};
    }
    if (status == "TRADE_CLOSED") {
        return {.event_type = refunded ? EventType::kRefundSucceeded : EventType::kPaymentClosed};
    }
    if (status == "WAIT_BUYER_PAY") return {.message = "WAIT_BUYER_PAY records no event"};
    return {.refusal = Outcome::kMalformed,
            .message =
                "trade_status must be WAIT_BUYER_PAY, TRADE_SUCCESS, TRADE_FINISHED or "
                "TRADE_CLOSED"};
}

// The event of a verified notice of `type`, or why it is malformed.
std::pair<std::optional<projections::Event>, std::string> BuildEvent(
    const PlatformFields& fields, EventType type, projections::TimeMicros received_at) {
    const std::string_view out_trade_no = FieldOr(fields, "out_trade_no");
    if (!projections::IsValidKey(out_trade_no)) {
        return {std::nullopt, "out_trade_no must be 1-64 characters of A-Z a-z 0-9 _ - | * ."};
    }
    const std::string_view trade_no = FieldOr(fields, "trade_no");
    projections::Event event{.out_trade_no = std::string(out_trade_no),
                             .event_type = type,
                             .source = projections::Source::kAlipay,
                             .data = NoticeData(fields)};
    const char* time_field = "gmt_close";
    if (type != EventType::kPaymentClosed) {
        const bool refund = type == EventType::kRefundSucceeded;
        const char* amount_field = refund ? "refund_fee" : "total_amount";
        const std::optional<std::int64_t> amount =
            projections::ParseMajorUnits(FieldOr(fields, amount_field));
        if (!amount) {
            return {std::nullopt, std::string(amount_field) +
                                      " must be yuan with at most two decimals, 0.01 to 10^11"};
        }
        const std::string_view out_biz_no = FieldOr(fields, "out_biz_no");
        const std::string_view number = refund && !out_biz_no.empty() ? out_biz_no : trade_no;
        if (!IsValidPlatformId(number)) {
            return {std::nullopt, refund ? "out_biz_no or trade_no must be 1-128 visible ASCII"
                                         : "trade_no must be 1-128 visible ASCII characters"};
        }
        // CNY unless the notice names a currency; a refund without one takes its order's.
        std::string currency{FieldOr(fields, "currency")};
        if (currency.empty() && !refund) currency = "CNY";
        if (!currency.empty() && !projections::IsValidCurrency(currency)) {
            return {std::nullopt, "currency must be an upper-case ISO 4217 code"};
        }
        event.amount = *amount;
        event.currency = currency;
        event.transaction_id = std::string(number);
        time_field = refund ? "gmt_refund" : "gmt_payment";
    }
    const std::optional<projections::TimeMicros> occurred_at =
        OccurredAt(fields, time_field, received_at);
    if (!occurred_at) {
        return {std::nullopt, std::string(time_field) +
                                  " and notify_time must be yyyy-MM-dd HH:mm:ss (Asia/Shanghai)"};
    }
    event.occurred_at = *occurred_at;
    return {std::move(event), {}};
}

}  // namespace

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

std::string AlipayChannel::CheckSignature(const PlatformFields& fields) const {
    const std::string_view sign = FieldOr(fields, "sign");
    if (sign.empty()) return "sign is missing";
    const std::string_view sign_type = FieldOr(fields, "sign_type");
    if (!sign_type.empty() && sign_type != "RSA2") {
        return "sign_type " + std::string(sign_type) + " is not accepted; only RSA2 is";
    }
    const std::optional<std::string> raw = Base64Decode(sign);
    if (!raw) return "sign is not base64 (after form decoding)";
    if (!RsaSha256Verify(config_.alipay_public_key, AlipaySignContent(fields), *raw)) {
        return "sign does not verify with the Alipay public key";
    }
    return {};
}

ledger::Delivery AlipayChannel::Verify(const Incoming& incoming) const {
    ledger::Receipt receipt = BaseReceipt(incoming, source(), {"Content-Type", "User-Agent"});
    const DecodedForm form = DecodeForm(incoming.request.body());
    if (!form.fields) return Rejected(std::move(receipt), Outcome::kMalformed, form.error);
    const PlatformFields& fields = *form.fields;
    const std::string_view claimed = FieldOr(fields, "out_trade_no");
    if (projections::IsValidKey(claimed)) receipt.out_trade_no = std::string(claimed);

    const std::string why = CheckSignature(fields);
    if (!why.empty()) return Rejected(std::move(receipt), Outcome::kBadSignature, why);
    const std::string_view app_id = FieldOr(fields, "app_id");
    if (app_id.empty())
        return Rejected(std::move(receipt), Outcome::kMalformed, "app_id is missing");
    if (app_id != config_.app_id) {
        return Rejected(std::move(receipt), Outcome::kMismatch,
                        "app_id " + std::string(app_id) + " is not the configured app_id");
    }
    const Classified classified = Classify(fields);
    if (!classified.event_type) {
        return Rejected(std::move(receipt), classified.refusal, classified.message);
    }
    auto [event, invalid] = BuildEvent(fields, *classified.event_type, incoming.received_at);
    if (!event) return Rejected(std::move(receipt), Outcome::kMalformed, std::move(invalid));
    receipt.out_trade_no = event->out_trade_no;
    return ledger::Delivery{.receipt = std::move(receipt), .event = std::move(*event)};
}

Response AlipayChannel::Answer(const ledger::DeliveryResult& result) const {
    // providers.md §3.6: exactly "success", or Alipay resends.
    if (IsAcknowledged(result)) return MakeResponse(http::status::ok, "text/plain", "success");
    const http::status status =
        result.internal_error ? http::status::internal_server_error : StatusOf(result.outcome);
    return MakeResponse(status, "text/plain", "failure");
}

}  // namespace payledger::api
