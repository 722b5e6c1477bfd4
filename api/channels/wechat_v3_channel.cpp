#include "api/channels/wechat_v3_channel.hpp"

#include "api/channels/json_input.hpp"
#include "api/channels/platform_channel.hpp"
#include "api/channels/platform_crypto.hpp"
#include "api/http/json_output.hpp"
#include "ledger/base/bytes.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::EventType;

constexpr const char* kTimestampHeader = "Wechatpay-Timestamp";
constexpr const char* kNonceHeader = "Wechatpay-Nonce";
constexpr const char* kSignatureHeader = "Wechatpay-Signature";
constexpr const char* kSerialHeader = "Wechatpay-Serial";
constexpr const char* kSignatureTypeHeader = "Wechatpay-Signature-Type";
constexpr std::string_view kSignatureType = "WECHATPAY2-SHA256-RSA2048";
constexpr std::string_view kProbePrefix = "WECHATPAY/SIGNTEST/";

std::string_view Header(const Incoming& incoming, const char* name) {
    const auto it = incoming.request.find(name);
    return it == incoming.request.end() ? std::string_view{} : std::string_view{it->value()};
}

// The string member `key`, or "" when absent or not a string (then invalid where required).
std::string Text(const json& object, const char* key) {
    return StringMember(object, key).value_or(std::string{});
}

// Sets `data[name]` to `object[key]` when it is there.
void Keep(json& data, const char* name, const json& object, const char* key) {
    const auto it = object.find(key);
    if (it != object.end() && !it->is_null()) data[name] = *it;
}

// The notification fields an event keeps in `data`; `id` for audit, never as a key
// (docs/platforms.md#the-encrypted-resource).
json EnvelopeData(const json& envelope) {
    json data = json::object();
    Keep(data, "id", envelope, "id");
    Keep(data, "event_type", envelope, "event_type");
    Keep(data, "create_time", envelope, "create_time");
    Keep(data, "summary", envelope, "summary");
    return data;
}

const json& AmountOf(const json& resource) {
    static const json kEmpty = json::object();
    const auto it = resource.find("amount");
    return it != resource.end() && it->is_object() ? *it : kEmpty;
}

std::optional<std::int64_t> AmountMember(const json& amount, const char* key) {
    const auto it = amount.find(key);
    return it == amount.end() ? std::nullopt : AmountFromJson(*it);
}

// amount.<key> when the amount names it: nullopt when absent, refused when not an amount.
Checked<std::optional<std::int64_t>> OptionalAmount(const json& amount, const char* key) {
    if (!amount.contains(key)) return std::optional<std::int64_t>{};
    const std::optional<std::int64_t> value = AmountMember(amount, key);
    if (!value) {
        return Malformed("amount." + std::string(key) +
                         " must be a JSON integer of fen, 1 to 10^13");
    }
    return value;
}

Checked<std::int64_t> RequireAmount(const json& amount, const char* key) {
    Checked<std::optional<std::int64_t>> value = OptionalAmount(amount, key);
    if (!value) return value.refusal();
    if (!value->has_value()) {
        return Malformed("amount." + std::string(key) +
                         " must be a JSON integer of fen, 1 to 10^13");
    }
    return **value;
}

Checked<projections::TimeMicros> SuccessTime(const json& resource,
                                             projections::TimeMicros received_at) {
    const std::optional<projections::TimeMicros> time =
        PlatformTime(Text(resource, "success_time"), received_at, projections::ParseRfc3339);
    if (!time) return Malformed("success_time must be an RFC 3339 date-time");
    return *time;
}

// amount.currency: CNY when absent for a payment; a refund without one takes its order's.
Checked<std::string> Currency(const json& amount, const char* when_absent) {
    if (!amount.contains("currency")) return std::string(when_absent);
    return RequireCurrency(Text(amount, "currency"), "amount.currency");
}

// `wechat_v3` TRANSACTION.SUCCESS with trade_state SUCCESS
// (docs/platforms.md#the-encrypted-resource).
Checked<NoticeEvent> PaymentEvent(const json& envelope, const json& resource,
                                  projections::TimeMicros received_at) {
    const std::string trade_state = Text(resource, "trade_state");
    if (trade_state.empty()) {
        // A missing state is no "other state": acknowledging it as ignored would
        // drop a payment for good, while malformed makes WeChat resend it.
        return Malformed("trade_state must be a non-empty string");
    }
    if (trade_state != "SUCCESS") {
        return Ignored("trade_state " + trade_state + " records no event");
    }
    return WechatV3TransactionPayment(resource, EnvelopeData(envelope), received_at);
}

}  // namespace

Checked<NoticeEvent> WechatV3TransactionPayment(const json& resource, json data,
                                                projections::TimeMicros received_at) {
    const json& amount = AmountOf(resource);
    const Checked<std::string> out_trade_no =
        RequireKey(Text(resource, "out_trade_no"), "out_trade_no");
    if (!out_trade_no) return out_trade_no.refusal();
    const Checked<std::string> transaction_id =
        RequirePlatformId(Text(resource, "transaction_id"), "transaction_id");
    if (!transaction_id) return transaction_id.refusal();
    const Checked<std::int64_t> total = RequireAmount(amount, "total");
    if (!total) return total.refusal();
    const Checked<std::string> currency = Currency(amount, "CNY");
    if (!currency) return currency.refusal();
    const Checked<projections::TimeMicros> success_time = SuccessTime(resource, received_at);
    if (!success_time) return success_time.refusal();
    for (const char* key : {"trade_state", "trade_type", "bank_type", "attach"}) {
        Keep(data, key, resource, key);
    }
    if (const auto payer = resource.find("payer"); payer != resource.end() && payer->is_object()) {
        Keep(data, "payer_openid", *payer, "openid");
    }
    Keep(data, "payer_total", amount, "payer_total");
    Keep(data, "payer_currency", amount, "payer_currency");
    return NoticeEvent{.event = {.out_trade_no = *out_trade_no,
                                 .event_type = EventType::kPaymentSucceeded,
                                 .source = projections::Source::kWechatV3,
                                 .amount = *total,
                                 .currency = *currency,
                                 .transaction_id = *transaction_id,
                                 .occurred_at = *success_time,
                                 .data = Dump(data)}};
}

namespace {

// `wechat_v3` REFUND.SUCCESS. amount.total and transaction_id, where the notice
// names them, are the order's total and its payment's number: cross-checked by the ledger.
Checked<NoticeEvent> RefundEvent(const json& envelope, const json& resource,
                                 projections::TimeMicros received_at) {
    const std::string status = Text(resource, "refund_status");
    if (resource.contains("refund_status") && status != "SUCCESS") {
        return Malformed("refund_status " + status + " contradicts event_type REFUND.SUCCESS");
    }
    const json& amount = AmountOf(resource);
    const Checked<std::string> out_trade_no =
        RequireKey(Text(resource, "out_trade_no"), "out_trade_no");
    if (!out_trade_no) return out_trade_no.refusal();
    const Checked<std::string> refund_id =
        RequirePlatformId(Text(resource, "refund_id"), "refund_id");
    if (!refund_id) return refund_id.refusal();
    const Checked<std::int64_t> refund = RequireAmount(amount, "refund");
    if (!refund) return refund.refusal();
    const Checked<std::optional<std::int64_t>> total = OptionalAmount(amount, "total");
    if (!total) return total.refusal();
    std::optional<std::string> transaction_id;
    if (resource.contains("transaction_id")) {
        Checked<std::string> named =
            RequirePlatformId(Text(resource, "transaction_id"), "transaction_id");
        if (!named) return named.refusal();
        transaction_id = std::move(*named);
    }
    const Checked<std::string> currency = Currency(amount, "");  // Else the order's.
    if (!currency) return currency.refusal();
    const Checked<projections::TimeMicros> success_time = SuccessTime(resource, received_at);
    if (!success_time) return success_time.refusal();
    json data = EnvelopeData(envelope);
    for (const char* key :
         {"refund_status", "out_refund_no", "transaction_id", "user_received_account"}) {
        Keep(data, key, resource, key);
    }
    Keep(data, "total", amount, "total");
    Keep(data, "payer_refund", amount, "payer_refund");
    return NoticeEvent{
        .event = {.out_trade_no = *out_trade_no,
                  .event_type = EventType::kRefundSucceeded,
                  .source = projections::Source::kWechatV3,
                  .amount = *refund,
                  .currency = *currency,
                  .transaction_id = *refund_id,
                  .occurred_at = *success_time,
                  .data = Dump(data)},
        .claims = {.order_amount = *total, .payment_transaction_id = std::move(transaction_id)}};
}

}  // namespace

Checked<json> OpenWechatV3Resource(std::string_view api_v3_key, const json& envelope) {
    const auto resource = envelope.find("resource");
    if (resource == envelope.end() || !resource->is_object()) {
        return Malformed("resource must be an object");
    }
    if (Text(*resource, "algorithm") != "AEAD_AES_256_GCM") {
        return Malformed("resource.algorithm must be AEAD_AES_256_GCM");
    }
    const std::string nonce = Text(*resource, "nonce");
    const std::optional<std::string> sealed = ledger::Base64Decode(Text(*resource, "ciphertext"));
    const auto aad = resource->find("associated_data");
    if (nonce.empty() || !sealed || sealed->empty() ||
        (aad != resource->end() && !aad->is_string())) {
        return Malformed("resource needs a nonce, base64 ciphertext and string associated_data");
    }
    const std::optional<std::string> plaintext =
        Aes256GcmDecrypt(api_v3_key, nonce,
                         aad == resource->end() ? std::string{} : aad->get<std::string>(), *sealed);
    if (!plaintext) return BadSignature("resource does not decrypt with the APIv3 key");
    std::optional<json> opened = ParseJsonObject(*plaintext);
    if (!opened) return Malformed("resource does not decrypt to a JSON object");
    return std::move(*opened);
}

Checked<NoticeEvent> WechatV3NoticeEvent(const json& envelope, const json& resource,
                                         projections::TimeMicros received_at) {
    const std::string event_type = Text(envelope, "event_type");
    if (event_type.empty()) return Malformed("event_type is missing");
    if (event_type == "TRANSACTION.SUCCESS") return PaymentEvent(envelope, resource, received_at);
    if (event_type == "REFUND.SUCCESS") return RefundEvent(envelope, resource, received_at);
    // REFUND.ABNORMAL (not final), REFUND.CLOSED (failed), TRANSACTION.FAIL and the rest.
    return Ignored("event_type " + event_type + " records no event");
}

json WechatV3EnvelopeData(const json& envelope) { return EnvelopeData(envelope); }

std::string WechatV3SignatureMessage(std::string_view timestamp, std::string_view nonce,
                                     std::string_view body) {
    std::string message;
    message.reserve(timestamp.size() + nonce.size() + body.size() + 3);
    message.append(timestamp).append("\n").append(nonce).append("\n").append(body).append("\n");
    return message;
}

std::optional<Refusal> WechatV3Channel::CheckSignature(const Incoming& incoming,
                                                       std::string_view body) const {
    const std::string_view type = Header(incoming, kSignatureTypeHeader);
    if (!type.empty() && type != kSignatureType) {
        return BadSignature("Wechatpay-Signature-Type " + std::string(type) + " is not supported");
    }
    const std::string_view timestamp = Header(incoming, kTimestampHeader);
    const std::string_view nonce = Header(incoming, kNonceHeader);
    const std::string_view serial = Header(incoming, kSerialHeader);
    const std::string_view signature = Header(incoming, kSignatureHeader);
    if (timestamp.empty() || nonce.empty() || serial.empty() || signature.empty()) {
        return BadSignature("Wechatpay-Timestamp, -Nonce, -Serial and -Signature are required");
    }
    const Checked<std::int64_t> signed_at =
        RequireSignedAt(timestamp, incoming.received_at, kTimestampHeader);
    if (!signed_at) return signed_at.refusal();
    const auto key = config_.platform_public_keys.find(std::string(serial));
    if (key == config_.platform_public_keys.end()) {
        return BadSignature("Wechatpay-Serial " + std::string(serial) +
                            " names no configured platform key");
    }
    // WeChat's signature probes are wrong on purpose; they fail like any bad signature
    // (docs/platforms.md#apiv3-signature).
    if (signature.substr(0, kProbePrefix.size()) == kProbePrefix) {
        return BadSignature("Wechatpay-Signature is a signature probe");
    }
    const std::optional<std::string> raw = ledger::Base64Decode(signature);
    if (!raw) return BadSignature("Wechatpay-Signature is not base64");
    const std::string message = WechatV3SignatureMessage(timestamp, nonce, body);
    if (!RsaSha256Verify(key->second, message, *raw)) {
        return BadSignature("Wechatpay-Signature does not verify with the platform key " +
                            std::string(serial));
    }
    return std::nullopt;
}

Checked<json> WechatV3Channel::Open(const json& envelope) const {
    return OpenWechatV3Resource(config_.api_v3_key, envelope);
}

ledger::Delivery WechatV3Channel::Verify(Incoming& incoming) const {
    BaseReceiptResult base = BaseReceipt(incoming, source(),
                                         {{kTimestampHeader, IsUnixSecondsForm},
                                          {kNonceHeader, IsNonceForm},
                                          {kSignatureHeader, IsSignatureForm},
                                          {kSerialHeader, IsSerialForm},
                                          {kSignatureTypeHeader, IsSchemeForm},
                                          {"Request-ID"},
                                          {"Content-Type"},
                                          {"User-Agent"}});
    ledger::Receipt receipt = std::move(base.receipt);
    if (base.refused) return Rejected(std::move(receipt), *base.refused);
    // The signature first (docs/platforms.md#apiv3-signature), from the headers and the raw bytes
    // alone. An unverified body is neither parsed nor decrypted, so its receipt names no order (the
    // order number is inside the encrypted resource).
    if (auto refused = CheckSignature(incoming, receipt.body)) {
        return Rejected(std::move(receipt), *refused);
    }
    receipt.signature_verified = true;
    const std::optional<json> envelope = ParseJsonObject(receipt.body);
    if (!envelope) return Rejected(std::move(receipt), Malformed("body is not a JSON object"));
    const Checked<json> resource = Open(*envelope);
    if (!resource) return Rejected(std::move(receipt), resource.refusal());
    ClaimOutTradeNo(receipt, Text(*resource, "out_trade_no"));
    return Decide(std::move(receipt), *envelope, *resource, incoming.received_at);
}

ledger::Delivery WechatV3Channel::Decide(ledger::Receipt receipt, const json& envelope,
                                         const json& resource,
                                         projections::TimeMicros received_at) const {
    const std::string event_type = Text(envelope, "event_type");
    if (event_type.empty()) return Rejected(std::move(receipt), Malformed("event_type is missing"));
    const bool payment = event_type == "TRANSACTION.SUCCESS";
    const bool refund = event_type == "REFUND.SUCCESS";
    // mchid must be there for a notice that records an event; appid only where sent.
    if (resource.contains("mchid") || payment || refund) {
        if (auto refused = CheckConfiguredId(Text(resource, "mchid"), "mchid", config_.mchid)) {
            return Rejected(std::move(receipt), *refused);
        }
    }
    if (resource.contains("appid")) {
        if (auto refused = CheckConfiguredId(Text(resource, "appid"), "appid", config_.appid)) {
            return Rejected(std::move(receipt), *refused);
        }
    }
    if (!payment && !refund) {
        // REFUND.ABNORMAL (not final), REFUND.CLOSED (failed), TRANSACTION.FAIL and the rest.
        return Rejected(std::move(receipt),
                        Ignored("event_type " + event_type + " records no event"));
    }
    Checked<NoticeEvent> notice = WechatV3NoticeEvent(envelope, resource, received_at);
    if (!notice) return Rejected(std::move(receipt), notice.refusal());
    return Accepted(std::move(receipt), std::move(*notice));
}

Response WechatV3Channel::Answer(const ledger::DeliveryResult& result) const {
    if (IsAcknowledged(result)) {
        Response response{http::status::no_content, 11};  // WeChat accepts 200 or 204.
        return response;
    }
    const http::status status = StatusOf(result);
    return MakeResponse(status, "application/json",
                        Dump(json{{"code", "FAIL"}, {"message", FailureReason(result)}}));
}

}  // namespace payledger::api
