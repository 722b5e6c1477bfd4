#include "api/wechat_v3_channel.hpp"

#include <charconv>

#include "api/json_input.hpp"
#include "api/json_output.hpp"
#include "api/platform_channel.hpp"
#include "api/platform_crypto.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::EventType;
using projections::Outcome;

constexpr const char* kTimestampHeader = "Wechatpay-Timestamp";
constexpr const char* kNonceHeader = "Wechatpay-Nonce";
constexpr const char* kSignatureHeader = "Wechatpay-Signature";
constexpr const char* kSerialHeader = "Wechatpay-Serial";
constexpr const char* kSignatureTypeHeader = "Wechatpay-Signature-Type";
constexpr std::string_view kSignatureType = "WECHATPAY2-SHA256-RSA2048";
constexpr std::string_view kProbePrefix = "WECHATPAY/SIGNTEST/";
constexpr std::size_t kTimestampDigitsMax = 12;
constexpr std::int64_t kMicrosPerSecond = 1'000'000;

std::string_view Header(const Incoming& incoming, const char* name) {
    const auto it = incoming.request.find(name);
    return it == incoming.request.end() ? std::string_view{} : std::string_view{it->value()};
}

// The string member `key`, or "" when absent or not a string (then invalid where required).
std::string Text(const json& object, const char* key) {
    return StringMember(object, key).value_or(std::string{});
}

std::optional<std::int64_t> ParseUnixSeconds(std::string_view text) {
    if (text.empty() || text.size() > kTimestampDigitsMax) return std::nullopt;
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || text.front() == '-' ||
        text.front() == '+') {
        return std::nullopt;
    }
    return value;
}

// Sets `data[name]` to `object[key]` when it is there.
void Keep(json& data, const char* name, const json& object, const char* key) {
    const auto it = object.find(key);
    if (it != object.end() && !it->is_null()) data[name] = *it;
}

// The notification fields an event keeps (SPEC §2 `data`); `id` for audit (providers.md §6).
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

ledger::Delivery Accepted(ledger::Receipt receipt, projections::Event event) {
    receipt.out_trade_no = event.out_trade_no;
    return ledger::Delivery{.receipt = std::move(receipt), .event = std::move(event)};
}

}  // namespace

std::string WechatV3SignatureMessage(std::string_view timestamp, std::string_view nonce,
                                     std::string_view body) {
    std::string message;
    message.reserve(timestamp.size() + nonce.size() + body.size() + 3);
    message.append(timestamp).append("\n").append(nonce).append("\n").append(body).append("\n");
    return message;
}

std::string WechatV3Channel::CheckSignature(const Incoming& incoming) const {
    const std::string_view type = Header(incoming, kSignatureTypeHeader);
    if (!type.empty() && type != kSignatureType) {
        return "Wechatpay-Signature-Type " + std::string(type) + " is not supported";
    }
    const std::string_view timestamp = Header(incoming, kTimestampHeader);
    const std::string_view nonce = Header(incoming, kNonceHeader);
    const std::string_view serial = Header(incoming, kSerialHeader);
    const std::string_view signature = Header(incoming, kSignatureHeader);
    if (timestamp.empty() || nonce.empty() || serial.empty() || signature.empty()) {
        return "Wechatpay-Timestamp, -Nonce, -Serial and -Signature are required";
    }
    const std::optional<std::int64_t> seconds = ParseUnixSeconds(timestamp);
    if (!seconds) return "Wechatpay-Timestamp is not unix seconds";
    const std::int64_t skew = incoming.received_at / kMicrosPerSecond - *seconds;
    if (skew > kSignatureWindowSeconds || skew < -kSignatureWindowSeconds) {
        return "Wechatpay-Timestamp is outside the 300 s window";
    }
    const auto key = config_.platform_public_keys.find(std::string(serial));
    if (key == config_.platform_public_keys.end()) {
        return "Wechatpay-Serial " + std::string(serial) + " names no configured platform key";
    }
    // providers.md §2.3: probes are wrong on purpose; they fail like any bad signature.
    if (signature.substr(0, kProbePrefix.size()) == kProbePrefix) {
        return "Wechatpay-Signature is a signature probe";
    }
    const std::optional<std::string> raw = Base64Decode(signature);
    if (!raw) return "Wechatpay-Signature is not base64";
    const std::string message = WechatV3SignatureMessage(timestamp, nonce, incoming.request.body());
    if (!RsaSha256Verify(key->second, message, *raw)) {
        return "Wechatpay-Signature does not verify with the platform key " + std::string(serial);
    }
    return {};
}

WechatV3Channel::Opened WechatV3Channel::Open(const json& envelope) const {
    const auto resource = envelope.find("resource");
    if (resource == envelope.end() || !resource->is_object()) {
        return {.error = "resource must be an object"};
    }
    if (Text(*resource, "algorithm") != "AEAD_AES_256_GCM") {
        return {.error = "resource.algorithm must be AEAD_AES_256_GCM"};
    }
    const std::string nonce = Text(*resource, "nonce");
    const std::optional<std::string> sealed = Base64Decode(Text(*resource, "ciphertext"));
    const auto aad = resource->find("associated_data");
    if (nonce.empty() || !sealed || sealed->empty() ||
        (aad != resource->end() && !aad->is_string())) {
        return {.error = "resource needs a nonce, base64 ciphertext and string associated_data"};
    }
    const std::optional<std::string> plaintext =
        Aes256GcmDecrypt(config_.api_v3_key, nonce,
                         aad == resource->end() ? std::string{} : aad->get<std::string>(), *sealed);
    if (!plaintext) {
        return {.failure = Outcome::kBadSignature,
                .error = "resource does not decrypt with the APIv3 key"};
    }
    std::optional<json> opened = ParseJsonObject(*plaintext);
    if (!opened) return {.error = "resource does not decrypt to a JSON object"};
    return {.resource = std::move(opened)};
}

ledger::Delivery WechatV3Channel::Verify(const Incoming& incoming) const {
    ledger::Receipt receipt =
        BaseReceipt(incoming, source(),
                    {kTimestampHeader, kNonceHeader, kSignatureHeader, kSerialHeader,
                     kSignatureTypeHeader, "Request-ID", "Content-Type", "User-Agent"});
    const std::string why = CheckSignature(incoming);
    const std::optional<json> envelope = ParseJsonObject(incoming.request.body());
    // Opened even when the signature fails, only to name the order the body claims on the
    // receipt (SPEC §5); nothing else is read from an unverified body.
    const Opened opened = envelope ? Open(*envelope) : Opened{};
    if (opened.resource) {
        const std::string claimed = Text(*opened.resource, "out_trade_no");
        if (projections::IsValidKey(claimed)) receipt.out_trade_no = claimed;
    }
    if (!why.empty()) return Rejected(std::move(receipt), Outcome::kBadSignature, why);
    if (!envelope) {
        return Rejected(std::move(receipt), Outcome::kMalformed, "body is not a JSON object");
    }
    if (!opened.resource) return Rejected(std::move(receipt), opened.failure, opened.error);
    return Decide(std::move(receipt), *envelope, *opened.resource, incoming.received_at);
}

ledger::Delivery WechatV3Channel::Decide(ledger::Receipt receipt, const json& envelope,
                                         const json& resource,
                                         projections::TimeMicros received_at) const {
    const std::string event_type = Text(envelope, "event_type");
    if (event_type.empty()) {
        return Rejected(std::move(receipt), Outcome::kMalformed, "event_type is missing");
    }
    const bool recorded = event_type == "TRANSACTION.SUCCESS" || event_type == "REFUND.SUCCESS";
    // mchid must be there for a notice that records an event; appid only where sent.
    const std::pair<const char*, const std::string*> checks[] = {{"mchid", &config_.mchid},
                                                                 {"appid", &config_.appid}};
    for (const auto& [name, expected] : checks) {
        if (!resource.contains(name)) {
            if (recorded && std::string_view(name) == "mchid") {
                return Rejected(std::move(receipt), Outcome::kMalformed, "mchid is missing");
            }
            continue;
        }
        const std::string value = Text(resource, name);
        if (value != *expected) {
            return Rejected(std::move(receipt), Outcome::kMismatch,
                            std::string(name) + " " + value + " is not the configured " + name);
        }
    }
    if (event_type == "TRANSACTION.SUCCESS") {
        return Payment(std::move(receipt), envelope, resource, received_at);
    }
    if (event_type == "REFUND.SUCCESS") {
        return Refund(std::move(receipt), envelope, resource, received_at);
    }
    // REFUND.ABNORMAL (not final), REFUND.CLOSED (failed), TRANSACTION.FAIL and the rest.
    return Rejected(std::move(receipt), Outcome::kIgnored,
                    "event_type " + event_type + " records no event");
}

ledger::Delivery WechatV3Channel::Payment(ledger::Receipt receipt, const json& envelope,
                                          const json& resource,
                                          projections::TimeMicros received_at) const {
    const std::string trade_state = Text(resource, "trade_state");
    if (trade_state.empty()) {
        // A missing state is no "other state" (SPEC §6): acknowledging it as ignored would
        // drop a payment for good, while malformed makes WeChat resend it.
        return Rejected(std::move(receipt), Outcome::kMalformed,
                        "trade_state must be a non-empty string");
    }
    if (trade_state != "SUCCESS") {
        return Rejected(std::move(receipt), Outcome::kIgnored,
                        "trade_state " + trade_state + " records no event");
    }
    const json& amount = AmountOf(resource);
    const std::string out_trade_no = Text(resource, "out_trade_no");
    const std::string transaction_id = Text(resource, "transaction_id");
    const std::optional<std::int64_t> total = AmountMember(amount, "total");
    const std::string currency = amount.contains("currency") ? Text(amount, "currency") : "CNY";
    const std::optional<projections::TimeMicros> success_time =
        PlatformTime(Text(resource, "success_time"), received_at, projections::ParseRfc3339);
    const char* invalid = !projections::IsValidKey(out_trade_no)
                              ? "out_trade_no must be 1-64 characters of A-Z a-z 0-9 _ - | * ."
                          : !IsValidPlatformId(transaction_id)
                              ? "transaction_id must be 1-128 visible ASCII characters"
                          : !total ? "amount.total must be a JSON integer of fen, 1 to 10^13"
                          : !projections::IsValidCurrency(currency)
                              ? "amount.currency must be an upper-case ISO 4217 code"
                          : !success_time ? "success_time must be an RFC 3339 date-time"
                                          : nullptr;
    if (invalid != nullptr) return Rejected(std::move(receipt), Outcome::kMalformed, invalid);
    json data = EnvelopeData(envelope);
    for (const char* key : {"trade_state", "trade_type", "bank_type", "attach"}) {
        Keep(data, key, resource, key);
    }
    if (const auto payer = resource.find("payer"); payer != resource.end() && payer->is_object()) {
        Keep(data, "payer_openid", *payer, "openid");
    }
    Keep(data, "payer_total", amount, "payer_total");
    Keep(data, "payer_currency", amount, "payer_currency");
    return Accepted(std::move(receipt),
                    projections::Event{.out_trade_no = out_trade_no,
                                       .event_type = EventType::kPaymentSucceeded,
                                       .source = source(),
                                       .amount = *total,
                                       .currency = currency,
                                       .transaction_id = transaction_id,
                                       .occurred_at = *success_time,
                                       .data = Dump(data)});
}

ledger::Delivery WechatV3Channel::Refund(ledger::Receipt receipt, const json& envelope,
                                         const json& resource,
                                         projections::TimeMicros received_at) const {
    const std::string status = Text(resource, "refund_status");
    if (resource.contains("refund_status") && status != "SUCCESS") {
        return Rejected(std::move(receipt), Outcome::kMalformed,
                        "refund_status " + status + " contradicts event_type REFUND.SUCCESS");
    }
    const json& amount = AmountOf(resource);
    const std::string out_trade_no = Text(resource, "out_trade_no");
    const std::string refund_id = Text(resource, "refund_id");
    const std::optional<std::int64_t> refund = AmountMember(amount, "refund");
    // No currency: the ledger gives the refund its order's (SPEC §2).
    const bool has_currency = amount.contains("currency");
    const std::string currency = has_currency ? Text(amount, "currency") : "";
    const std::optional<projections::TimeMicros> success_time =
        PlatformTime(Text(resource, "success_time"), received_at, projections::ParseRfc3339);
    const char* invalid = !projections::IsValidKey(out_trade_no)
                              ? "out_trade_no must be 1-64 characters of A-Z a-z 0-9 _ - | * ."
                          : !IsValidPlatformId(refund_id)
                              ? "refund_id must be 1-128 visible ASCII characters"
                          : !refund ? "amount.refund must be a JSON integer of fen, 1 to 10^13"
                          : has_currency && !projections::IsValidCurrency(currency)
                              ? "amount.currency must be an upper-case ISO 4217 code"
                          : !success_time ? "success_time must be an RFC 3339 date-time"
                                          : nullptr;
    if (invalid != nullptr) return Rejected(std::move(receipt), Outcome::kMalformed, invalid);
    json data = EnvelopeData(envelope);
    for (const char* key :
         {"refund_status", "out_refund_no", "transaction_id", "user_received_account"}) {
        Keep(data, key, resource, key);
    }
    Keep(data, "total", amount, "total");
    Keep(data, "payer_refund", amount, "payer_refund");
    return Accepted(std::move(receipt),
                    projections::Event{.out_trade_no = out_trade_no,
                                       .event_type = EventType::kRefundSucceeded,
                                       .source = source(),
                                       .amount = *refund,
                                       .currency = currency,
                                       .transaction_id = refund_id,
                                       .occurred_at = *success_time,
                                       .data = Dump(data)});
}

Response WechatV3Channel::Answer(const ledger::DeliveryResult& result) const {
    if (IsAcknowledged(result)) {
        Response response{http::status::no_content, 11};  // providers.md §2.8: 200 or 204.
        return response;
    }
    const http::status status =
        result.internal_error ? http::status::internal_server_error : StatusOf(result.outcome);
    return MakeResponse(status, "application/json",
                        Dump(json{{"code", "FAIL"}, {"message", FailureReason(result)}}));
}

}  // namespace payledger::api
