// Every channel's write path (docs/write-path.md): a platform's callback verified by its channel,
// the unverified limits (docs/security.md#peers-and-limits), the committer, and after the commit
// the delivery counted, logged and answered in the channel's format.
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/http/json_output.hpp"
#include "api/log.hpp"
#include "api/routes/handlers.hpp"
#include "api/routes/route_helpers.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::Outcome;

void LogDelivery(projections::Source source, const std::optional<std::string>& out_trade_no,
                 const ledger::DeliveryResult& result, const Incoming& incoming) {
    const auto latency = std::chrono::steady_clock::now() - incoming.started;
    const json fields = {
        {"msg", "delivery"},
        {"channel", projections::ToString(source)},
        {"out_trade_no", out_trade_no ? json(*out_trade_no) : json(nullptr)},
        {"outcome", IsInternalError(result) ? "internal_error"
                                            : std::string(projections::ToString(result.outcome))},
        {"seq", result.seq == 0 ? json(nullptr) : json(result.seq)},
        {"receipt_id", result.receipt_id == 0 ? json(nullptr) : json(result.receipt_id)},
        {"latency_ms", static_cast<double>(
                           std::chrono::duration_cast<std::chrono::microseconds>(latency).count()) /
                           1000.0},
        {"peer", incoming.peer},
        {"reason", result.detail.empty() ? result.message : result.detail}};
    LogJson(IsInternalError(result) ? "error" : "info", Dump(fields));
}

}  // namespace

void HandleCallback(WritePath& path, const Channel& channel, Incoming incoming, Respond respond) {
    ledger::Delivery delivery = channel.Verify(incoming);
    Deliver(path, channel, std::move(delivery), std::move(incoming), std::move(respond));
}

void Deliver(WritePath& path, const Channel& channel, ledger::Delivery delivery, Incoming incoming,
             Respond respond) {
    // A delivery whose signature verifies is never limited, malformed or not
    // (docs/security.md#peers-and-limits).
    const bool unverified =
        !delivery.receipt.signature_verified &&
        (delivery.outcome == Outcome::kMalformed || delivery.outcome == Outcome::kBadSignature);
    const projections::Source source = channel.source();
    const UnverifiedLimiter::Clock::time_point admitted_at = UnverifiedLimiter::Clock::now();
    const ledger::Receipt& receipt = delivery.receipt;
    const std::size_t stored_bytes = UnverifiedStoredBytes(
        receipt.body.size(), receipt.headers.size(), delivery.message.size(), receipt.peer.size(),
        receipt.out_trade_no ? receipt.out_trade_no->size() : 0);
    // Nobody without a key fills the append-only tables: an unverified delivery is stored
    // only within its peer's count and within the bytes all peers may store per minute.
    // Over either: counted, answered in the platform's failure form, never stored.
    const char* limited = nullptr;
    if (unverified) {
        if (!path.unverified.Admit(incoming.peer_address, admitted_at)) {
            limited = "too many unverified deliveries from this address; retry later";
        } else if (!path.unverified_bytes.Admit(stored_bytes, admitted_at)) {
            path.unverified.Forget(incoming.peer_address, admitted_at);
            limited = "too many bytes of unverified deliveries from all addresses; retry later";
        }
    }
    if (limited != nullptr) {
        path.metrics.CountDelivery(source, Outcome::kRateLimited);
        return respond(channel.Answer(
            ledger::DeliveryResult{.outcome = Outcome::kRateLimited, .message = limited}));
    }
    // After the commit: counted, logged and answered in the channel's format, on the
    // committer's answer thread (one hand-off per batch), so that its writing thread goes back
    // to writing. What it throws is counted there (Committer::Stats::answer_failures).
    std::optional<std::string> out_trade_no = delivery.receipt.out_trade_no;
    auto effects = [&path, &channel, source, unverified, admitted_at, stored_bytes,
                    out_trade_no = std::move(out_trade_no), incoming = std::move(incoming),
                    respond = std::move(respond)](const ledger::DeliveryResult& result) {
        // The limit counts the unverified receipts stored: one that was not is uncounted.
        if (unverified && result.outcome == Outcome::kUnavailable) {
            path.unverified.Forget(incoming.peer_address, admitted_at);
            path.unverified_bytes.Forget(stored_bytes, admitted_at);
        }
        path.metrics.CountDelivery(source, result.outcome);
        if (IsInternalError(result)) path.metrics.CountInternalError();
        LogDelivery(source, out_trade_no, result, incoming);
        Response response;
        try {
            response = channel.Answer(result);
        } catch (...) {
            // The delivery is stored as decided; only its answer failed.
            response =
                FailureResponse(ledger::ClassifyFailure(std::current_exception()), path.metrics);
        }
        respond(std::move(response));
    };
    path.committer.Submit(std::move(delivery), std::move(effects));  // Called exactly once.
}

}  // namespace payledger::api
