#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ledger/base/bytes.hpp"
#include "ledger/pg/rows.hpp"
#include "projections/event.hpp"

namespace payledger::ledger {

// docs/integrity.md#the-receipt-chain: chain(r) = SHA-256(chain(previous receipt) ‖ line(r)), in id
// order, from 32 zero bytes. Computed by the writer under the writer lock, so the chain
// order is commit order; recomputed by `payledger audit`.
using ChainValue = Sha256Digest;  // HexLower(value) is its text.
inline constexpr ChainValue kChainStart{};

// What a receipt's line is made of: its stored fields, by reference.
struct ReceiptLineFields {
    std::int64_t id = 0;
    projections::Source source = projections::Source::kApi;
    projections::TimeMicros received_at = 0;
    projections::Outcome outcome = projections::Outcome::kMalformed;
    std::optional<std::int64_t> seq{};
    std::string_view out_trade_no{};     // Empty when null.
    std::string_view body_sha256_hex{};  // Sha256Hex of the raw body.
};

// The line of one receipt (UTF-8, tab-separated, ending in "\n", null as the empty string):
// id source received_at outcome seq out_trade_no body_sha256 event. `appended` is the event
// the receipt appended (outcome appended) and nothing otherwise; its part is
// seq,event_type,out_trade_no,account_id,amount,currency,transaction_id,occurred_at. Times are
// RFC 3339 UTC with six fractional digits.
[[nodiscard]] std::string ReceiptLine(const ReceiptLineFields& receipt,
                                      const projections::Event* appended);
// The same line, appended to `out`.
void AppendReceiptLine(const ReceiptLineFields& receipt, const projections::Event* appended,
                       std::string& out);

// The line of a stored receipt: its body's digest as read (Receipt::body_sha256), else computed
// here from the body.
[[nodiscard]] std::string ReceiptLine(const Receipt& receipt, const projections::Event* appended);

[[nodiscard]] ChainValue NextChain(const ChainValue& previous, std::string_view line);
// The same for the receipt's line, built in `scratch` (reused from one receipt to the next, so
// that chaining a million receipts allocates nothing per receipt: the writer's and audit's loop).
[[nodiscard]] ChainValue NextChain(const ChainValue& previous, const ReceiptLineFields& receipt,
                                   const projections::Event* appended, std::string& scratch);

// A chain value from its lower-case hex: nullopt unless exactly 64 lower-case hex digits.
[[nodiscard]] std::optional<ChainValue> ParseChainHex(std::string_view hex);

}  // namespace payledger::ledger
