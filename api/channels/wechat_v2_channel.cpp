#include "api/channels/wechat_v2_channel.hpp"

#include "api/channels/platform_crypto.hpp"
#include "api/channels/wechat_v2_xml.hpp"
#include "api/crypto.hpp"
#include "ledger/base/bytes.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using projections::EventType;

// return_code is the communication flag: FAIL records nothing, anything but SUCCESS is bad.
std::optional<Refusal> CheckReturnCode(const PlatformFields& fields) {
    const std::string_view return_code = FieldOr(fields, "return_code");
    if (return_code == "SUCCESS") return std::nullopt;
    if (return_code == "FAIL") return Ignored("return_code is FAIL");
    return Malformed("return_code must be SUCCESS or FAIL");
}

// WeChat writes amounts as integer fen.
Checked<std::int64_t> RequireFen(const PlatformFields& fields, const char* field) {
    const std::optional<std::int64_t> fen = projections::ParseMinorUnits(FieldOr(fields, field));
    if (!fen) return Malformed(std::string(field) + " must be an integer of fen, 1 to 10^13");
    return *fen;
}

Checked<projections::TimeMicros> RequireTime(
    const PlatformFields& fields, const char* field, projections::TimeMicros received_at,
    std::optional<projections::TimeMicros> (*parse)(std::string_view), const char* layout) {
    const std::optional<projections::TimeMicros> time =
        PlatformTime(FieldOr(fields, field), received_at, parse);
    if (!time) return Malformed(std::string(field) + " must be " + layout + " (Asia/Shanghai)");
    return *time;
}

// `wechat_v2` payment (docs/platforms.md#apiv2-payment-notices): PAYMENT_SUCCEEDED of total_fee in
// fee_type (default CNY).
Checked<NoticeEvent> PaymentEvent(const PlatformFields& fields,
                                  projections::TimeMicros received_at) {
    const Checked<std::string> out_trade_no =
        RequireKey(FieldOr(fields, "out_trade_no"), "out_trade_no");
    if (!out_trade_no) return out_trade_no.refusal();
    const Checked<std::string> transaction_id =
        RequirePlatformId(FieldOr(fields, "transaction_id"), "transaction_id");
    if (!transaction_id) return transaction_id.refusal();
    const Checked<std::int64_t> total_fee = RequireFen(fields, "total_fee");
    if (!total_fee) return total_fee.refusal();
    std::string currency{FieldOr(fields, "fee_type")};
    if (currency.empty()) currency = "CNY";  // fee_type defaults to CNY.
    if (auto checked = RequireCurrency(currency, "fee_type"); !checked) return checked.refusal();
    const Checked<projections::TimeMicros> time_end = RequireTime(
        fields, "time_end", received_at, projections::ParseShanghaiCompact, "yyyyMMddHHmmss");
    if (!time_end) return time_end.refusal();
    return NoticeEvent{
        .event = {.out_trade_no = *out_trade_no,
                  .event_type = EventType::kPaymentSucceeded,
                  .source = projections::Source::kWechatV2,
                  .amount = *total_fee,
                  .currency = currency,
                  .transaction_id = *transaction_id,
                  .occurred_at = *time_end,
                  .data = KeptFields(fields, {"result_code", "trade_type", "bank_type", "openid",
                                              "cash_fee", "cash_fee_type", "settlement_total_fee",
                                              "coupon_fee", "attach", "time_end"})}};
}

// `wechat_v2` refund (docs/platforms.md#apiv2-refund-notices): REFUND_SUCCEEDED of refund_fee,
// numbered refund_id, in the order's currency. total_fee and transaction_id are required (the
// platform sends them in every refund notice): they are what the ledger checks the spliceable ECB
// plaintext by.
Checked<NoticeEvent> RefundEvent(const PlatformFields& refund,
                                 projections::TimeMicros received_at) {
    const Checked<std::string> out_trade_no =
        RequireKey(FieldOr(refund, "out_trade_no"), "out_trade_no");
    if (!out_trade_no) return out_trade_no.refusal();
    const Checked<std::string> refund_id =
        RequirePlatformId(FieldOr(refund, "refund_id"), "refund_id");
    if (!refund_id) return refund_id.refusal();
    const Checked<std::int64_t> refund_fee = RequireFen(refund, "refund_fee");
    if (!refund_fee) return refund_fee.refusal();
    const Checked<std::int64_t> total_fee = RequireFen(refund, "total_fee");
    if (!total_fee) return total_fee.refusal();
    const Checked<std::string> transaction_id =
        RequirePlatformId(FieldOr(refund, "transaction_id"), "transaction_id");
    if (!transaction_id) return transaction_id.refusal();
    const Checked<projections::TimeMicros> success_time =
        RequireTime(refund, "success_time", received_at, projections::ParseShanghaiDashed,
                    "yyyy-MM-dd HH:mm:ss");
    if (!success_time) return success_time.refusal();
    // No currency: the ledger gives the refund its order's.
    return NoticeEvent{
        .event = {.out_trade_no = *out_trade_no,
                  .event_type = EventType::kRefundSucceeded,
                  .source = projections::Source::kWechatV2,
                  .amount = *refund_fee,
                  .transaction_id = *refund_id,
                  .occurred_at = *success_time,
                  .data = KeptFields(
                      refund, {"refund_status", "out_refund_no", "transaction_id", "total_fee",
                               "settlement_refund_fee", "refund_account", "refund_recv_accout",
                               "refund_request_source", "success_time"})},
        .claims = {.order_amount = *total_fee, .payment_transaction_id = *transaction_id}};
}

}  // namespace

Checked<NoticeEvent> WechatV2PaymentEvent(const PlatformFields& fields,
                                          projections::TimeMicros received_at) {
    return PaymentEvent(fields, received_at);
}

ledger::Delivery WechatV2Channel::Verify(Incoming& incoming) const {
    // Information only: no header verifies this channel's deliveries.
    ledger::Receipt receipt =
        BaseReceipt(incoming, source(), {{"Content-Type"}, {"User-Agent"}}).receipt;
    const Checked<PlatformFields> xml = ParseFlatXml(receipt.body, "xml");
    if (!xml) return Rejected(std::move(receipt), xml.refusal());
    ClaimOutTradeNo(receipt, FieldOr(*xml, "out_trade_no"));
    if (xml->contains("req_info")) {
        return VerifyRefund(std::move(receipt), *xml, incoming.received_at);
    }
    return VerifyPayment(std::move(receipt), *xml, incoming.received_at);
}

std::optional<Refusal> WechatV2Channel::CheckSignature(const PlatformFields& fields) const {
    const std::string_view sign = FieldOr(fields, "sign");
    if (sign.empty()) {
        // A missing signature is bad_signature, whatever the unsigned body says (a
        // return_code FAIL too): nothing unverified is acknowledged.
        return BadSignature("sign is missing");
    }
    const std::string_view sign_type = FieldOr(fields, "sign_type");
    if (!sign_type.empty() && sign_type != ToString(config_.sign_type)) {
        return BadSignature("sign_type " + std::string(sign_type) + " is not the configured " +
                            std::string(ToString(config_.sign_type)));
    }
    if (!ConstantTimeEquals(WechatV2Sign(fields, config_.api_key, config_.sign_type), sign)) {
        return BadSignature("sign does not match the fields and the API key");
    }
    return std::nullopt;
}

std::optional<Refusal> WechatV2Channel::CheckMerchant(const PlatformFields& fields) const {
    if (auto refused = CheckConfiguredId(FieldOr(fields, "appid"), "appid", config_.appid)) {
        return refused;
    }
    return CheckConfiguredId(FieldOr(fields, "mch_id"), "mch_id", config_.mch_id);
}

ledger::Delivery WechatV2Channel::VerifyPayment(ledger::Receipt receipt,
                                                const PlatformFields& fields,
                                                projections::TimeMicros received_at) const {
    if (auto refused = CheckSignature(fields)) return Rejected(std::move(receipt), *refused);
    receipt.signature_verified = true;
    if (auto refused = CheckReturnCode(fields)) return Rejected(std::move(receipt), *refused);
    if (auto refused = CheckMerchant(fields)) return Rejected(std::move(receipt), *refused);
    const std::string_view result_code = FieldOr(fields, "result_code");
    if (result_code == "FAIL") return Rejected(std::move(receipt), Ignored("result_code is FAIL"));
    if (result_code != "SUCCESS") {
        return Rejected(std::move(receipt), Malformed("result_code must be SUCCESS or FAIL"));
    }
    Checked<NoticeEvent> payment = PaymentEvent(fields, received_at);
    if (!payment) return Rejected(std::move(receipt), payment.refusal());
    return Accepted(std::move(receipt), std::move(*payment));
}

Checked<PlatformFields> WechatV2Channel::OpenReqInfo(const PlatformFields& fields) const {
    // A refund notice has no sign; only the holder of the API key can encrypt req_info, so
    // a req_info that does not decrypt is a failed signature.
    const std::optional<std::string> sealed = ledger::Base64Decode(FieldOr(fields, "req_info"));
    if (!sealed) return BadSignature("req_info is not base64");
    const std::optional<std::string> plaintext =
        Aes256EcbDecrypt(Md5HexLower(config_.api_key), *sealed);
    if (!plaintext) return BadSignature("req_info does not decrypt with the API key");
    Checked<PlatformFields> refund = ParseFlatXml(*plaintext, "root");
    if (refund) return refund;
    // A <root> document that breaks a parsing rule (a repeated field, a reference to a
    // control character) decrypted fine: it is malformed. Anything else is what
    // a wrong key gives.
    if (plaintext->starts_with("<root>")) {
        return Malformed("req_info: " + refund.refusal().message);
    }
    return BadSignature("req_info does not decrypt with the API key to a <root> document");
}

ledger::Delivery WechatV2Channel::VerifyRefund(ledger::Receipt receipt,
                                               const PlatformFields& fields,
                                               projections::TimeMicros received_at) const {
    // Nothing of the notice is interpreted before req_info decrypts.
    const Checked<PlatformFields> refund = OpenReqInfo(fields);
    if (!refund) return Rejected(std::move(receipt), refund.refusal());
    receipt.signature_verified = true;  // Only the API key's holder encrypts a req_info.
    ClaimOutTradeNo(receipt, FieldOr(*refund, "out_trade_no"));
    if (auto refused = CheckReturnCode(fields)) return Rejected(std::move(receipt), *refused);
    if (auto refused = CheckMerchant(fields)) return Rejected(std::move(receipt), *refused);
    const std::string_view status = FieldOr(*refund, "refund_status");
    if (status.empty()) return Rejected(std::move(receipt), Malformed("refund_status is missing"));
    if (status != "SUCCESS") {  // CHANGE (abnormal), REFUNDCLOSE: no refund happened.
        return Rejected(std::move(receipt),
                        Ignored("refund_status " + std::string(status) + " records no event"));
    }
    Checked<NoticeEvent> event = RefundEvent(*refund, received_at);
    if (!event) return Rejected(std::move(receipt), event.refusal());
    return Accepted(std::move(receipt), std::move(*event));
}

Response WechatV2Channel::Answer(const ledger::DeliveryResult& result) const {
    if (IsAcknowledged(result)) {
        return MakeResponse(http::status::ok, "application/xml", WechatV2Answer(true, {}));
    }
    const http::status status = StatusOf(result);
    return MakeResponse(status, "application/xml", WechatV2Answer(false, FailureReason(result)));
}

}  // namespace payledger::api
