#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace payledger::projections {

// Every amount in an input is 1 ... 10^13 minor units (docs/events.md#money-keys-and-time).
inline constexpr std::int64_t kAmountMax = 10'000'000'000'000;
inline constexpr std::int64_t kEventsPerOrderMax = 4;  // One of each EventType.
static_assert(kAmountMax <= INT64_MAX / kEventsPerOrderMax, "sums of one order cannot overflow");

// The event types (docs/events.md#events), in that order everywhere.
enum class EventType { kOrderCreated, kPaymentSucceeded, kPaymentClosed, kRefundSucceeded };
// How many there are: kRefundSucceeded is the last.
inline constexpr std::size_t kEventTypeCount =
    static_cast<std::size_t>(EventType::kRefundSucceeded) + 1;

// Where a delivery came from (the `source` of docs/events.md#events): the bill sources, then what
// payledger learned by asking the platform itself (docs/query.md): a query's answer, a close's.
enum class Source {
    kApi,
    kWechatV2,
    kWechatV3,
    kAlipay,
    kGeneric,
    kWechatBill,
    kAlipayBill,
    kWechatV2Query,
    kWechatV3Query,
    kAlipayQuery,
    kWechatV2Close,
    kWechatV3Close,
    kAlipayClose,
};

// One enumerator per outcome, in the order of docs/events.md#outcomes.
enum class Outcome {
    kAppended,
    kDuplicate,
    kIgnored,
    kMalformed,
    kBadSignature,
    kUnknownOrder,
    kConflict,
    kMismatch,
    kRateLimited,  // Never stored (docs/events.md#invariants, 3).
    kUnavailable,  // Never stored.
};

[[nodiscard]] std::string_view ToString(EventType type);
[[nodiscard]] std::string_view ToString(Source source);
[[nodiscard]] std::string_view ToString(Outcome outcome);
[[nodiscard]] std::optional<EventType> ParseEventType(std::string_view text);
[[nodiscard]] std::optional<Source> ParseSource(std::string_view text);
[[nodiscard]] std::optional<Outcome> ParseOutcome(std::string_view text);

// Microseconds since the Unix epoch, UTC. Timestamps travel as this everywhere.
using TimeMicros = std::int64_t;

// One row of ledger_events (docs/events.md#events). `seq` and `receipt_id` are 0 until allocated.
struct Event {
    std::int64_t seq = 0;
    std::string out_trade_no{};
    EventType event_type = EventType::kOrderCreated;
    Source source = Source::kApi;
    std::string account_id{};  // Copied from the order for callback events.
    std::int64_t amount = 0;   // 0 only for PAYMENT_CLOSED.
    std::string currency{};    // Empty only for PAYMENT_CLOSED.
    std::optional<std::string> transaction_id{};
    TimeMicros occurred_at = 0;
    TimeMicros recorded_at = 0;
    std::int64_t receipt_id = 0;
    std::string data = "{}";  // JSON text of the normalised platform fields.
};

// The fields that tell a duplicate from a conflict (docs/events.md#same-event-or-conflict).
[[nodiscard]] bool SameFingerprint(const Event& stored, const Event& delivered);

}  // namespace payledger::projections
