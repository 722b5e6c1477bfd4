#include "api/wechat_v2_channel.hpp"

#include "api/crypto.hpp"
#include "api/platform_crypto.hpp"
#include "api/wechat_v2_xml.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using projections::EventType;
using projections::Outcome;

ledger::Delivery Accepted(ledger::Receipt receipt, projections::Event event) {
    receipt.out_trade_no = event.out_trade_no;
    return ledger::Delivery{.receipt = std::move(receipt), .event = std::move(event)};
}

void ClaimOutTradeNo(ledger::Receipt& receipt, const PlatformFields& fields) {
    const std::string_view claimed = FieldOr(fields, "out_trade_no");
    if (projections::IsValidKey(claimed)) receipt.out_trade_no = std::string(claimed);
}

}  // namespace

ledger::Delivery WechatV2Channel::Verify(const Incoming& incoming) const {
    ledger::Receipt receipt = BaseReceipt(incoming, source(), {"Content-Type", "User-Agent"});
    const FlatXml xml = ParseFlatXml(incoming.request.body(), "xml");
    if (!xml.fields) return Rejected(std::move(receipt), Outcome::kMalformed, xml.error);
    ClaimOutTradeNo(receipt, *xml.fields);
    if (xml.fields->contains("req_info")) {
        return VerifyRefund(std::move(receipt), *xml.fields, incoming.received_at);
    }
    return VerifyPayment(std::move(receipt), *xml.fields, incoming.received_at);
}

std::optional<ledger::Delivery> WechatV2Channel::CheckMerchant(ledger::Receipt& receipt,
                                                               const PlatformFields& fields) const {
    const std::pair<std::string, const std::string*> checks[] = {{"appid", &config_.appid},
                                                                 {"mch_id", &config_.mch_id}};
    for (const auto& [name, expected] : checks) {
        const std::string_view value = FieldOr(fields, name);
        if (value.empty()) {
            return Rejected(std::move(receipt), Outcome::kMalformed, name + " is missing");
        }
        if (value != *expected) {
            return Rejected(std::move(receipt), Outcome::kMismatch,
                            name + " " + std::string(value) + " is not the configured " + name);
        }
    }
    return std::nullopt;
}

ledger::Delivery WechatV2Channel::VerifyPayment(ledger::Receipt receipt,
                                                const PlatformFields& fields,
                                                projections::TimeMicros received_at) const {
    const std::string_view return_code = FieldOr(fields, "return_code");
    const std::string_view sign = FieldOr(fields, "sign");
    if (sign.empty()) {
        // SPEC §5: a missing signature is bad_signature, whatever the unsigned body says (a
        // return_code FAIL too): nothing unverified is acknowledged.
        return Rejected(std::move(receipt), Outcome::kBadSignature, "sign is missing");
    }
    const std::string_view sign_type = FieldOr(fields, "sign_type");
    if (!sign_type.empty() && sign_type != ToString(config_.sign_type)) {
        return Rejected(std::move(receipt), Outcome::kBadSignature,
                        "sign_type " + std::string(sign_type) + " is not the configured " +
                            std::string(ToString(config_.sign_type)));
    }
    if (!ConstantTimeEquals(WechatV2Sign(fields, config_.api_key, config_.sign_type), sign)) {
        return Rejected(std::move(receipt), Outcome::kBadSignature,
                        "sign does not match the fields and the API key");
    }
    if (return_code != "SUCCESS") {
        if (return_code == "FAIL") {
            return Rejected(std::move(receipt), Outcome::kIgnored, "return_code is FAIL");
        }
        return Rejected(std::move(receipt), Outcome::kMalformed,
                        "return_code must be SUCCESS or FAIL");
    }
    if (auto refused = CheckMerchant(receipt, fields)) return std::move(*refused);
    const std::string_view result_code = FieldOr(fields, "result_code");
    if (result_code == "FAIL") {
        return Rejected(std::move(receipt), Outcome::kIgnored, "result_code is FAIL");
    }
    if (result_code != "SUCCESS") {
        return Rejected(std::move(receipt), Outcome::kMalformed,
                        "result_code must be SUCCESS or FAIL");
    }

    const std::string_view out_trade_no = FieldOr(fields, "out_trade_no");
    const std::string_view transaction_id = FieldOr(fields, "transaction_id");
    const std::optional<std::int64_t> total_fee =
        projections::ParseMinorUnits(FieldOr(fields, "total_fee"));
    std::string currency{FieldOr(fields, "fee_type")};
    if (currency.empty()) currency = "CNY";  // providers.md §1.2: fee_type defaults to CNY.
    const std::optional<projections::TimeMicros> time_end =
        PlatformTime(FieldOr(fields, "time_end"), received_at, projections::ParseShanghaiCompact);
    const char* invalid = !projections::IsValidKey(out_trade_no)
                              ? "out_trade_no must be 1-64 characters of A-Z a-z 0-9 _ - | * ."
                          : !IsValidPlatformId(transaction_id)
                              ? "transaction_id must be 1-128 visible ASCII characters"
                          : !total_fee ? "total_fee must be an integer of fen, 1 to 10^13"
                          : !projections::IsValidCurrency(currency)
                              ? "fee_type must be an upper-case ISO 4217 code"
                          : !time_end ? "time_end must be yyyyMMddHHmmss (Asia/Shanghai)"
                                      : nullptr;
    if (invalid != nullptr) return Rejected(std::move(receipt), Outcome::kMalformed, invalid);
    return Accepted(
        std::move(receipt),
        projections::Event{
            .out_trade_no = std::string(out_trade_no),
            .event_type = EventType::kPaymentSucceeded,
            .source = source(),
            .amount = *total_fee,
            .currency = currency,
            .transaction_id = std::string(transaction_id),
            .occurred_at = *time_end,
            .data = KeptFields(fields, {"result_code", "trade_type", "bank_type", "openid",
                                        "cash_fee", "cash_fee_type", "settlement_total_fee",
                                        "coupon_fee", "attach", "time_end"})});
}

ledger::Delivery WechatV2Channel::VerifyRefund(ledger::Receipt receipt,
                                               const PlatformFields& fields,
                                               projections::TimeMicros received_at) const {
    // providers.md §1.6: no sign; only the holder of the API key can encrypt req_info, so
    // a req_info that does not decrypt is a failed signature. Nothing of the notice is
    // interpreted before it decrypts.
    const std::optional<std::string> sealed = Base64Decode(FieldOr(fields, "req_info"));
    if (!sealed) {
        return Rejected(std::move(receipt), Outcome::kBadSignature, "req_info is not base64");
    }
    const std::optional<std::string> plaintext =
        Aes256EcbDecrypt(Md5HexLower(config_.api_key), *sealed);
    const FlatXml xml = plaintext ? ParseFlatXml(*plaintext, "root") : FlatXml{};
    if (!xml.fields) {
        return Rejected(std::move(receipt), Outcome::kBadSignature,
                        "req_info does not decrypt with the API key to a <root> document");
    }
    const PlatformFields& refund = *xml.fields;
    ClaimOutTradeNo(receipt, refund);
    const std::string_view return_code = FieldOr(fields, "return_code");
    if (return_code == "FAIL") {
        return Rejected(std::move(receipt), Outcome::kIgnored, "return_code is FAIL");
    }
    if (return_code != "SUCCESS") {
        return Rejected(std::move(receipt), Outcome::kMalformed,
                        "return_code must be SUCCESS or FAIL");
    }
    if (auto refused = CheckMerchant(receipt, fields)) return std::move(*refused);
    const std::string_view status = FieldOr(refund, "refund_status");
    if (status.empty()) {
        return Rejected(std::move(receipt), Outcome::kMalformed, "refund_status is missing");
    }
    if (status != "SUCCESS") {  // CHANGE (abnormal), REFUNDCLOSE: no refund happened.
        return Rejected(std::move(receipt), Outcome::kIgnored,
                        "refund_status " + std::string(status) + " records no event");
    }

    const std::string_view out_trade_no = FieldOr(refund, "out_trade_no");
    const std::string_view refund_id = FieldOr(refund, "refund_id");
    const std::optional<std::int64_t> refund_fee =
        projections::ParseMinorUnits(FieldOr(refund, "refund_fee"));
    const std::optional<projections::TimeMicros> success_time = PlatformTime(
        FieldOr(refund, "success_time"), received_at, projections::ParseShanghaiDashed);
    const char* invalid =
        !projections::IsValidKey(out_trade_no)
            ? "out_trade_no must be 1-64 characters of A-Z a-z 0-9 _ - | * ."
        : !IsValidPlatformId(refund_id) ? "refund_id must be 1-128 visible ASCII characters"
        : !refund_fee                   ? "refund_fee must be an integer of fen, 1 to 10^13"
        : !success_time                 ? "success_time must be yyyy-MM-dd HH:mm:ss (Asia/Shanghai)"
                                        : nullptr;
    if (invalid != nullptr) return Rejected(std::move(receipt), Outcome::kMalformed, invalid);
    // No currency: the ledger gives the refund its order's (SPEC §2).
    return Accepted(
        std::move(receipt),
        projections::Event{
            .out_trade_no = std::string(out_trade_no),
            .event_type = EventType::kRefundSucceeded,
            .source = source(),
            .amount = *refund_fee,
            .transaction_id = std::string(refund_id),
            .occurred_at = *success_time,
            .data =
                KeptFields(refund, {"refund_status", "out_refund_no", "transaction_id", "total_fee",
                                    "settlement_refund_fee", "refund_account", "refund_recv_accout",
                                    "refund_request_source", "success_time"})});
}

Response WechatV2Channel::Answer(const ledger::DeliveryResult& result) const {
    if (IsAcknowledged(result)) {
        return MakeResponse(http::status::ok, "application/xml", WechatV2Answer(true, {}));
    }
    const http::status status =
        result.internal_error ? http::status::internal_server_error : StatusOf(result.outcome);
    return MakeResponse(status, "application/xml", WechatV2Answer(false, FailureReason(result)));
}

}  // namespace payledger::api
