#include "api/channels/generic_channel.hpp"

#include <vector>

#include "api/channels/json_input.hpp"
#include "api/crypto.hpp"
#include "api/http/json_output.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using projections::EventType;
using projections::Outcome;

constexpr const char* kSignatureHeader = "Payledger-Signature";

std::string_view Trim(std::string_view text) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    return text;
}

}  // namespace

std::string GenericChannel::Sign(std::string_view secret, std::int64_t unix_seconds,
                                 std::string_view body) {
    const std::string t = std::to_string(unix_seconds);
    std::string message = t + ".";
    message.append(body);
    return "t=" + t + ",v1=" + HmacSha256Hex(secret, message);
}

std::optional<Refusal> GenericChannel::CheckSignature(const Incoming& incoming,
                                                      std::string_view body) const {
    const auto header = incoming.request.find(kSignatureHeader);
    if (header == incoming.request.end()) {
        return BadSignature("Payledger-Signature header is missing");
    }
    const std::string_view value = header->value();
    std::optional<std::string_view> timestamp;
    std::vector<std::string_view> candidates;
    std::size_t start = 0;
    while (start <= value.size()) {
        const std::size_t comma = value.find(',', start);
        const std::string_view item =
            Trim(value.substr(start, comma == std::string_view::npos ? value.npos : comma - start));
        start = comma == std::string_view::npos ? value.size() + 1 : comma + 1;
        const std::size_t equals = item.find('=');
        if (equals == std::string_view::npos) continue;
        const std::string_view key = item.substr(0, equals);
        const std::string_view text = item.substr(equals + 1);
        if (key == "t") {
            timestamp = text;
        } else if (key == "v1") {
            candidates.push_back(text);
        }
    }
    if (!timestamp) return BadSignature("Payledger-Signature has no timestamp");
    if (candidates.empty()) return BadSignature("Payledger-Signature has no v1 signature");
    const Checked<std::int64_t> signed_at =
        RequireSignedAt(*timestamp, incoming.received_at, "Payledger-Signature timestamp");
    if (!signed_at) return signed_at.refusal();
    std::string message = std::to_string(*signed_at) + ".";
    message.append(body);
    const std::string expected = HmacSha256Hex(config_.secret, message);
    bool matched = false;
    for (const std::string_view candidate : candidates) {
        matched |= ConstantTimeEquals(expected, candidate);  // No early exit.
    }
    if (!matched) return BadSignature("Payledger-Signature does not match the body");
    return std::nullopt;
}

namespace {

// The `generic` body (docs/platforms.md#generic): the event it reports.
Checked<projections::Event> BodyEvent(const nlohmann::json& body,
                                      projections::TimeMicros received_at) {
    const std::optional<std::string> type_text = StringMember(body, "event_type");
    const std::optional<EventType> type =
        type_text ? projections::ParseEventType(*type_text) : std::nullopt;
    if (!type || *type == EventType::kOrderCreated) {
        return Malformed(
            "event_type must be PAYMENT_SUCCEEDED, PAYMENT_CLOSED or REFUND_SUCCEEDED");
    }
    const Checked<std::string> out_trade_no =
        RequireKey(StringMember(body, "out_trade_no").value_or(""), "out_trade_no");
    if (!out_trade_no) return out_trade_no.refusal();
    projections::Event event{.out_trade_no = *out_trade_no,
                             .event_type = *type,
                             .source = projections::Source::kGeneric,
                             .occurred_at = received_at};
    if (*type != EventType::kPaymentClosed) {
        const Checked<std::string> transaction_id =
            RequirePlatformId(StringMember(body, "transaction_id").value_or(""), "transaction_id");
        if (!transaction_id) return transaction_id.refusal();
        const Checked<std::int64_t> amount = RequireJsonAmount(body, "amount");
        if (!amount) return amount.refusal();
        event.transaction_id = *transaction_id;
        event.amount = *amount;
        if (body.contains("currency")) {
            const Checked<std::string> currency =
                RequireCurrency(StringMember(body, "currency").value_or(""), "currency");
            if (!currency) return currency.refusal();
            event.currency = *currency;
        } else if (*type == EventType::kPaymentSucceeded) {
            event.currency = "CNY";  // CNY where a platform omits it.
        }                            // A refund without currency takes its order's, in the ledger.
    }
    if (body.contains("occurred_at")) {
        const std::optional<std::string> text = StringMember(body, "occurred_at");
        const std::optional<projections::TimeMicros> occurred_at =
            text ? projections::ParseRfc3339(*text) : std::nullopt;
        if (!occurred_at) return Malformed("occurred_at must be an RFC 3339 date-time");
        event.occurred_at = *occurred_at;
    }
    return event;
}

}  // namespace

ledger::Delivery GenericChannel::Verify(Incoming& incoming) const {
    BaseReceiptResult base =
        BaseReceipt(incoming, source(),
                    {{kSignatureHeader, IsSignatureHeaderForm}, {"Content-Type"}, {"User-Agent"}});
    ledger::Receipt receipt = std::move(base.receipt);
    const std::optional<Refusal> unsigned_body =
        base.refused ? base.refused : CheckSignature(incoming, receipt.body);
    receipt.signature_verified = !unsigned_body.has_value();
    const std::optional<nlohmann::json> body = ParseJsonObject(receipt.body);
    // The out_trade_no the body claims, kept on the receipt even when unverified.
    if (body) ClaimOutTradeNo(receipt, StringMember(*body, "out_trade_no").value_or(""));
    if (unsigned_body) return Rejected(std::move(receipt), *unsigned_body);
    if (!body) return Rejected(std::move(receipt), Malformed("body is not a JSON object"));
    Checked<projections::Event> event = BodyEvent(*body, incoming.received_at);
    if (!event) return Rejected(std::move(receipt), event.refusal());
    return Accepted(std::move(receipt), {.event = std::move(*event)});
}

Response GenericChannel::Answer(const ledger::DeliveryResult& result) const {
    if (!IsSuccess(result)) return ErrorAnswer(result);
    const nlohmann::json body = {{"code", "SUCCESS"},
                                 {"outcome", projections::ToString(result.outcome)},
                                 {"seq", result.seq}};
    return MakeResponse(http::status::ok, "application/json", Dump(body));
}

}  // namespace payledger::api
