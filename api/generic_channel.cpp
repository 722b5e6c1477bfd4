#include "api/generic_channel.hpp"

#include <charconv>
#include <vector>

#include "api/crypto.hpp"
#include "api/json_input.hpp"
#include "api/json_output.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using projections::EventType;
using projections::Outcome;

constexpr const char* kSignatureHeader = "Payledger-Signature";
constexpr std::size_t kTransactionIdBytesMax = 128;
constexpr std::int64_t kMicrosPerSecond = 1'000'000;

std::string_view Trim(std::string_view text) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    return text;
}

// A platform number: 1-128 visible ASCII characters.
bool IsValidTransactionId(std::string_view text) {
    if (text.empty() || text.size() > kTransactionIdBytesMax) return false;
    for (const char c : text) {
        if (c < 0x21 || c > 0x7e) return false;
    }
    return true;
}

}  // namespace

std::string GenericChannel::Sign(std::string_view secret, std::int64_t unix_seconds,
                                 std::string_view body) {
    const std::string t = std::to_string(unix_seconds);
    std::string message = t + ".";
    message.append(body);
    return "t=" + t + ",v1=" + HmacSha256Hex(secret, message);
}

std::string GenericChannel::CheckSignature(const Incoming& incoming) const {
    const auto header = incoming.request.find(kSignatureHeader);
    if (header == incoming.request.end()) return "Payledger-Signature header is missing";
    const std::string_view value = header->value();
    std::optional<std::int64_t> timestamp;
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
            std::int64_t parsed = 0;
            const auto [end, error] =
                std::from_chars(text.data(), text.data() + text.size(), parsed);
            if (error != std::errc{} || end != text.data() + text.size() || text.size() > 12 ||
                text.empty() || text.front() == '-') {
                return "Payledger-Signature has an invalid timestamp";
            }
            timestamp = parsed;
        } else if (key == "v1") {
            candidates.push_back(text);
        }
    }
    if (!timestamp) return "Payledger-Signature has no timestamp";
    if (candidates.empty()) return "Payledger-Signature has no v1 signature";
    const std::int64_t now_seconds = incoming.received_at / kMicrosPerSecond;
    const std::int64_t skew = now_seconds - *timestamp;
    if (skew > kSignatureWindowSeconds || skew < -kSignatureWindowSeconds) {
        return "Payledger-Signature timestamp is outside the 300 s window";
    }
    std::string message = std::to_string(*timestamp) + ".";
    message.append(incoming.request.body());
    const std::string expected = HmacSha256Hex(config_.secret, message);
    bool matched = false;
    for (const std::string_view candidate : candidates) {
        matched |= ConstantTimeEquals(expected, candidate);  // No early exit.
    }
    return matched ? std::string{} : "Payledger-Signature does not match the body";
}

ledger::Delivery GenericChannel::Verify(const Incoming& incoming) const {
    ledger::Receipt receipt =
        BaseReceipt(incoming, source(), {kSignatureHeader, "Content-Type", "User-Agent"});
    const std::string why = CheckSignature(incoming);
    const std::optional<nlohmann::json> body = ParseJsonObject(incoming.request.body());
    // The out_trade_no the body claims, kept on the receipt even when unverified (SPEC §5).
    if (body) {
        const std::optional<std::string> claimed = StringMember(*body, "out_trade_no");
        if (claimed && projections::IsValidKey(*claimed)) receipt.out_trade_no = claimed;
    }
    if (!why.empty()) return Rejected(std::move(receipt), Outcome::kBadSignature, why);
    if (!body) {
        return Rejected(std::move(receipt), Outcome::kMalformed, "body is not a JSON object");
    }

    const std::optional<std::string> type_text = StringMember(*body, "event_type");
    const std::optional<EventType> type =
        type_text ? projections::ParseEventType(*type_text) : std::nullopt;
    if (!type || *type == EventType::kOrderCreated) {
        return Rejected(std::move(receipt), Outcome::kMalformed,
                        "event_type must be PAYMENT_SUCCEEDED, PAYMENT_CLOSED or "
                        "REFUND_SUCCEEDED");
    }
    const std::optional<std::string> out_trade_no = StringMember(*body, "out_trade_no");
    if (!out_trade_no || !projections::IsValidKey(*out_trade_no)) {
        return Rejected(std::move(receipt), Outcome::kMalformed,
                        "out_trade_no must be 1-64 characters of A-Z a-z 0-9 _ - | * .");
    }
    projections::Event event{.out_trade_no = *out_trade_no,
                             .event_type = *type,
                             .source = source(),
                             .occurred_at = incoming.received_at};
    if (*type != EventType::kPaymentClosed) {
        const std::optional<std::string> transaction_id = StringMember(*body, "transaction_id");
        if (!transaction_id || !IsValidTransactionId(*transaction_id)) {
            return Rejected(std::move(receipt), Outcome::kMalformed,
                            "transaction_id must be 1-128 visible ASCII characters");
        }
        const auto amount = body->find("amount");
        const std::optional<std::int64_t> minor =
            amount == body->end() ? std::nullopt : AmountFromJson(*amount);
        if (!minor) {
            return Rejected(std::move(receipt), Outcome::kMalformed,
                            "amount must be a JSON integer of minor units, 1 to 10^13");
        }
        event.transaction_id = *transaction_id;
        event.amount = *minor;
        if (body->contains("currency")) {
            const std::optional<std::string> currency = StringMember(*body, "currency");
            if (!currency || !projections::IsValidCurrency(*currency)) {
                return Rejected(std::move(receipt), Outcome::kMalformed,
                                "currency must be an upper-case ISO 4217 code");
            }
            event.currency = *currency;
        } else if (*type == EventType::kPaymentSucceeded) {
            event.currency = "CNY";  // SPEC §1: CNY where a platform omits it.
        }  // A refund without currency takes its order's (SPEC §2), in the ledger.
    }
    if (body->contains("occurred_at")) {
        const std::optional<std::string> text = StringMember(*body, "occurred_at");
        const std::optional<projections::TimeMicros> occurred_at =
            text ? projections::ParseRfc3339(*text) : std::nullopt;
        if (!occurred_at) {
            return Rejected(std::move(receipt), Outcome::kMalformed,
                            "occurred_at must be an RFC 3339 date-time");
        }
        event.occurred_at = *occurred_at;
    }
    receipt.out_trade_no = *out_trade_no;
    return ledger::Delivery{.receipt = std::move(receipt), .event = std::move(event)};
}

Response GenericChannel::Answer(const ledger::DeliveryResult& result) const {
    if (result.internal_error) {
        return ErrorResponse(http::status::internal_server_error, Outcome::kUnavailable,
                             "internal error");
    }
    if (result.outcome == Outcome::kAppended || result.outcome == Outcome::kDuplicate) {
        const nlohmann::json body = {{"code", "SUCCESS"},
                                     {"outcome", projections::ToString(result.outcome)},
                                     {"seq", result.seq}};
        return MakeResponse(http::status::ok, "application/json", Dump(body));
    }
    return ErrorResponse(StatusOf(result.outcome), result.outcome, result.message, result.seq);
}

}  // namespace payledger::api
