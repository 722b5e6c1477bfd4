#include "api/channels/channel.hpp"

#include <nlohmann/json.hpp>
#include <utility>

#include "api/http/json_output.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::api {

http::status StatusOf(projections::Outcome outcome) {
    using projections::Outcome;
    switch (outcome) {
        case Outcome::kAppended:
        case Outcome::kDuplicate:
        case Outcome::kIgnored:
            return http::status::ok;
        case Outcome::kMalformed:
            return http::status::bad_request;
        case Outcome::kBadSignature:
            return http::status::unauthorized;
        case Outcome::kUnknownOrder:
            return http::status::not_found;
        case Outcome::kConflict:
            return http::status::conflict;
        case Outcome::kMismatch:
            return http::status::unprocessable_entity;
        case Outcome::kRateLimited:
            return http::status::too_many_requests;
        case Outcome::kUnavailable:
            return http::status::service_unavailable;
    }
    PAYLEDGER_ASSERT(false);
    return http::status::internal_server_error;
}

http::status StatusOf(ledger::FailureKind kind) {
    switch (kind) {
        case ledger::FailureKind::kRetryable:
        case ledger::FailureKind::kInDoubt:
            return http::status::service_unavailable;
        case ledger::FailureKind::kInvariantBroken:
            return http::status::internal_server_error;
    }
    PAYLEDGER_ASSERT(false);
    return http::status::internal_server_error;
}

http::status StatusOf(const ledger::DeliveryResult& result) {
    return result.failure ? StatusOf(*result.failure) : StatusOf(result.outcome);
}

bool IsInternalError(const ledger::DeliveryResult& result) {
    return result.failure == ledger::FailureKind::kInvariantBroken;
}

std::string CutForStorage(std::string_view text, std::size_t bytes_max) {
    if (text.size() <= bytes_max) return std::string(text);
    std::size_t cut = bytes_max;
    // Not inside a UTF-8 sequence: back off over continuation bytes (10xxxxxx), at most three.
    for (int i = 0; i < 3 && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U;
         ++i) {
        --cut;
    }
    std::string out(text.substr(0, cut));
    out += " \u2026[cut from " + std::to_string(text.size()) + " bytes]";
    return out;
}

namespace {

bool AllOf(std::string_view value, std::size_t bytes_max, bool (*allowed)(char)) {
    if (value.empty() || value.size() > bytes_max) return false;
    for (const char c : value) {
        if (!allowed(c)) return false;
    }
    return true;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsVisibleAscii(char c) { return c > ' ' && c < 0x7F; }
bool IsVisibleAsciiOrSpace(char c) { return c >= ' ' && c < 0x7F; }
bool IsAlnum(char c) { return IsDigit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool IsSignatureChar(char c) { return IsAlnum(c) || c == '+' || c == '/' || c == '=' || c == '_'; }
bool IsSerialChar(char c) { return IsAlnum(c) || c == '_' || c == '-'; }

}  // namespace

bool IsUnixSecondsForm(std::string_view value) { return AllOf(value, 20, IsDigit); }
bool IsNonceForm(std::string_view value) { return AllOf(value, 256, IsVisibleAscii); }
bool IsSignatureForm(std::string_view value) { return AllOf(value, 2048, IsSignatureChar); }
bool IsSerialForm(std::string_view value) { return AllOf(value, 256, IsSerialChar); }
bool IsSchemeForm(std::string_view value) { return AllOf(value, 64, IsVisibleAscii); }
bool IsSignatureHeaderForm(std::string_view value) {
    return AllOf(value, 1024, IsVisibleAsciiOrSpace);
}

BaseReceiptResult BaseReceipt(Incoming& incoming, projections::Source source,
                              std::initializer_list<KeptHeader> kept) {
    BaseReceiptResult result;
    nlohmann::json headers = nlohmann::json::object();
    for (const KeptHeader& header : kept) {
        const auto it = incoming.request.find(header.name);
        if (it == incoming.request.end()) continue;
        const std::string_view value = it->value();
        const bool whole = header.form != nullptr && header.form(value);
        headers[std::string(header.name)] =
            whole ? std::string(value) : CutForStorage(value, kStoredHeaderBytesMax);
        if (header.form != nullptr && !whole && !result.refused) {
            result.refused =
                BadSignature(std::string(header.name) + " is not a value the platform sends");
        }
    }
    result.receipt = ledger::Receipt{.source = source,
                                     .received_at = incoming.received_at,
                                     .peer = incoming.peer,
                                     .headers = Dump(headers),
                                     .body = std::move(incoming.request.body())};
    return result;
}

void ClaimOutTradeNo(ledger::Receipt& receipt, std::string_view claimed) {
    if (projections::IsValidKey(claimed)) receipt.out_trade_no = std::string(claimed);
}

bool IsSuccess(const ledger::DeliveryResult& result) {
    return !result.failure && (result.outcome == projections::Outcome::kAppended ||
                               result.outcome == projections::Outcome::kDuplicate);
}

Response ErrorAnswer(const ledger::DeliveryResult& result) {
    if (result.failure) {
        // Not a decided outcome: `unavailable`, with the classification's words, never the
        // driver's (ledger/pg/failures.hpp).
        return ErrorResponse(StatusOf(*result.failure), projections::Outcome::kUnavailable,
                             IsInternalError(result) ? "internal error" : result.message);
    }
    return ErrorResponse(StatusOf(result.outcome), result.outcome, result.message, result.seq);
}

ledger::Delivery Rejected(ledger::Receipt receipt, Refusal refusal) {
    PAYLEDGER_ASSERT(refusal.outcome != projections::Outcome::kAppended);
    // The message is stored with the receipt; one that echoes the request stays bounded.
    return ledger::Delivery{.receipt = std::move(receipt),
                            .outcome = refusal.outcome,
                            .message = refusal.message.size() > kStoredMessageBytesMax
                                           ? CutForStorage(refusal.message, kStoredMessageBytesMax)
                                           : std::move(refusal.message)};
}

ledger::Delivery Rejected(ledger::Receipt receipt, projections::Outcome verdict,
                          std::string message) {
    return Rejected(std::move(receipt), Refusal{.outcome = verdict, .message = std::move(message)});
}

ledger::Delivery Accepted(ledger::Receipt receipt, NoticeEvent notice) {
    receipt.out_trade_no = notice.event.out_trade_no;
    return ledger::Delivery{.receipt = std::move(receipt),
                            .event = std::move(notice.event),
                            .claims = std::move(notice.claims)};
}

}  // namespace payledger::api
