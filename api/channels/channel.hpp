#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/channels/refusal.hpp"
#include "api/http/http.hpp"
#include "ledger/writer.hpp"
#include "projections/event.hpp"

namespace payledger::api {

// A callback channel (docs/platforms.md#channels): verifies a platform's delivery and answers in
// its format. Implementations are immutable after construction and safe to call from any thread.
class Channel {
public:
    virtual ~Channel() = default;

    [[nodiscard]] virtual projections::Source source() const = 0;

    // Verifies the signature over the raw bytes first, then parses and validates the body.
    // The result always carries the receipt (raw body, the headers that matter, the claimed
    // out_trade_no); its verdict is kAppended with an event for the ledger to decide, or the
    // outcome already reached (malformed, bad_signature, mismatch, ignored).
    // Takes the body: incoming.request.body() is moved into the receipt, never copied (a full
    // write queue of 64 KiB bodies holds each once), and is empty on return.
    [[nodiscard]] virtual ledger::Delivery Verify(Incoming& incoming) const = 0;

    // The platform's answer for a decided delivery (the outcome's status, the platform's body).
    [[nodiscard]] virtual Response Answer(const ledger::DeliveryResult& result) const = 0;
};

// The status of each outcome (docs/design.md#outcomes; kAppended is 200 here; POST /v1/orders
// answers 201).
[[nodiscard]] http::status StatusOf(projections::Outcome outcome);

// The receipt fields every channel fills the same way; `header_names` are the headers that
// matter for verification, kept as evidence. Moves the body out of `incoming` into the
// receipt: a channel reads the raw bytes from receipt.body from then on.
[[nodiscard]] ledger::Receipt BaseReceipt(Incoming& incoming, projections::Source source,
                                          const std::vector<std::string>& header_names);

// A delivery refused (or ignored) before the ledger.
[[nodiscard]] ledger::Delivery Rejected(ledger::Receipt receipt, Refusal refusal);
[[nodiscard]] ledger::Delivery Rejected(ledger::Receipt receipt, projections::Outcome verdict,
                                        std::string message);

// What a verified notice asks the ledger to record, and what it names about its order and
// payment beside that (a refund's cross-checks, docs/platforms.md#cross-checks), for the ledger to
// check.
struct NoticeEvent {
    projections::Event event{};
    projections::Claims claims{};
};

// The receipt names the out_trade_no a body claims, verified or not, when it is a
// valid key (else none).
void ClaimOutTradeNo(ledger::Receipt& receipt, std::string_view claimed);

// True when the delivery is answered as a success with its event: appended or duplicate.
[[nodiscard]] bool IsSuccess(const ledger::DeliveryResult& result);

// The error body (docs/design.md#the-http-api) for a delivery that is not a success, with its
// outcome's status (500 "internal error" when an invariant or a database rule failed).
[[nodiscard]] Response ErrorAnswer(const ledger::DeliveryResult& result);

// A delivery for the ledger to decide: the receipt names the event's order.
[[nodiscard]] ledger::Delivery Accepted(ledger::Receipt receipt, NoticeEvent notice);

}  // namespace payledger::api
