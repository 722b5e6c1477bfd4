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

ledger::Receipt BaseReceipt(Incoming& incoming, projections::Source source,
                            const std::vector<std::string>& header_names) {
    nlohmann::json headers = nlohmann::json::object();
    for (const std::string& name : header_names) {
        const auto it = incoming.request.find(name);
        if (it != incoming.request.end()) {
            headers[name] = std::string(it->value());
        }
    }
    return ledger::Receipt{.source = source,
                           .received_at = incoming.received_at,
                           .peer = incoming.peer,
                           .headers = Dump(headers),
                           .body = std::move(incoming.request.body())};
}

void ClaimOutTradeNo(ledger::Receipt& receipt, std::string_view claimed) {
    if (projections::IsValidKey(claimed)) receipt.out_trade_no = std::string(claimed);
}

bool IsSuccess(const ledger::DeliveryResult& result) {
    return !result.internal_error && (result.outcome == projections::Outcome::kAppended ||
                                      result.outcome == projections::Outcome::kDuplicate);
}

Response ErrorAnswer(const ledger::DeliveryResult& result) {
    if (result.internal_error) {
        return ErrorResponse(http::status::internal_server_error,
                             projections::Outcome::kUnavailable, "internal error");
    }
    return ErrorResponse(StatusOf(result.outcome), result.outcome, result.message, result.seq);
}

ledger::Delivery Rejected(ledger::Receipt receipt, Refusal refusal) {
    PAYLEDGER_ASSERT(refusal.outcome != projections::Outcome::kAppended);
    return ledger::Delivery{.receipt = std::move(receipt),
                            .verdict = refusal.outcome,
                            .message = std::move(refusal.message)};
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
