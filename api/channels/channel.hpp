#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/channels/refusal.hpp"
#include "api/http/http.hpp"
#include "ledger/write/writer.hpp"
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

// The status of each outcome (docs/events.md#outcomes; kAppended is 200 here; POST /v1/orders
// answers 201).
[[nodiscard]] http::status StatusOf(projections::Outcome outcome);
// The status of each failure (docs/write-path.md#failures-and-retries): retryable and in doubt 503
// `unavailable` (a platform retries; the unique key makes the retry exact), an invariant broken
// 500.
[[nodiscard]] http::status StatusOf(ledger::FailureKind kind);
// A decided delivery's status: its failure's when it did not commit, else its outcome's.
[[nodiscard]] http::status StatusOf(const ledger::DeliveryResult& result);
// The delivery failed on a broken invariant or a database rule (answered 500, logged as an error).
[[nodiscard]] bool IsInternalError(const ledger::DeliveryResult& result);

// A request header that a receipt keeps (docs/security.md#what-a-receipt-stores). Every stored
// byte is bounded: a header that verification needs (`form` set) is kept whole only when `form`
// accepts its value, the form the platform gives it, so that `audit --platform-signatures` can
// re-verify the receipt; every other value is cut to kStoredHeaderBytesMax and marked as cut.
struct KeptHeader {
    std::string_view name{};
    // The values verification can accept, each bounded in length; null for a header kept as
    // information only (Content-Type, User-Agent, Request-ID).
    bool (*form)(std::string_view value) = nullptr;
};

// What a receipt keeps of a value it cuts, before the marker: " …[cut from <n> bytes]".
inline constexpr std::size_t kStoredHeaderBytesMax = 256;
// What a refusal's message may hold (it is stored in the receipt): longer ones are cut and
// marked the same way. Messages that echo a value from the request stay within it.
inline constexpr std::size_t kStoredMessageBytesMax = 512;

// `text` when it has at most `bytes_max` bytes, else its first `bytes_max` bytes (never ending
// inside a UTF-8 sequence) followed by " …[cut from <n> bytes]".
[[nodiscard]] std::string CutForStorage(std::string_view text, std::size_t bytes_max);

// The forms of evidence headers, each with its length bound: unix seconds (1-20 digits); a
// nonce (1-256 visible ASCII characters); a signature (1-2048 characters of base64 and of a
// signature probe's prefix); a key or certificate serial (1-256 of A-Z a-z 0-9 _ -); a
// signature type or scheme name (1-64 visible ASCII); a whole signature header such as
// Payledger-Signature (1-1024 visible ASCII and spaces).
[[nodiscard]] bool IsUnixSecondsForm(std::string_view value);
[[nodiscard]] bool IsNonceForm(std::string_view value);
[[nodiscard]] bool IsSignatureForm(std::string_view value);
[[nodiscard]] bool IsSerialForm(std::string_view value);
[[nodiscard]] bool IsSchemeForm(std::string_view value);
[[nodiscard]] bool IsSignatureHeaderForm(std::string_view value);

// The receipt fields every channel fills the same way, with `kept` (KeptHeader) as its headers.
// Moves the body out of `incoming` into the receipt: a channel reads the raw bytes from
// receipt.body from then on. `refused` is set when an evidence header has a value that cannot be
// valid (a bad_signature naming the header): the channel refuses the delivery with it.
struct BaseReceiptResult {
    ledger::Receipt receipt{};
    std::optional<Refusal> refused{};
};
[[nodiscard]] BaseReceiptResult BaseReceipt(Incoming& incoming, projections::Source source,
                                            std::initializer_list<KeptHeader> kept);

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

// The error body (docs/api.md#the-http-api) for a delivery that is not a success, with its
// outcome's status (500 "internal error" when an invariant or a database rule failed).
[[nodiscard]] Response ErrorAnswer(const ledger::DeliveryResult& result);

// A delivery for the ledger to decide: the receipt names the event's order.
[[nodiscard]] ledger::Delivery Accepted(ledger::Receipt receipt, NoticeEvent notice);

}  // namespace payledger::api
