#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "projections/event.hpp"

namespace payledger::ledger::reconcile {

// The platforms whose daily statements payledger reconciles (docs/reconciliation.md).
enum class Platform { kWechat, kAlipay };

[[nodiscard]] const char* ToString(Platform platform);

// A bill that cannot be reconciled: unreadable, malformed, incomplete (its summary disagrees
// with its rows), another merchant's or another day's. what() is for a person and names the
// line where there is one. `payledger reconcile` exits 2 and records nothing.
class BillError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// How a BillError names its line: "line 12: ".
[[nodiscard]] inline std::string AtLine(std::int64_t line_number) {
    return "line " + std::to_string(line_number) + ": ";
}

// The byte order mark some bills begin with (UTF-8's), skipped before the first line is read.
inline constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

// Lines longer than this are refused: a receipt's body is at most 64 KiB
// (docs/reconciliation.md#limits-and-memory).
inline constexpr std::size_t kBillLineBytesMax = 64 * 1024;
// The bill file as given: it is stored whole in one bytea (PostgreSQL's limit is 1 GB), and
// a 200 000-row statement is about 60 MiB.
inline constexpr std::size_t kBillBytesMax = 256 * 1024 * 1024;
// The statement after gzip or zip: a small compressed file must not expand without end.
inline constexpr std::uint64_t kBillDecompressedBytesMax = 1024ull * 1024 * 1024;
// Lines of a statement, blank ones included, so that a file of line ends cannot run for hours.
inline constexpr std::int64_t kBillLinesMax = 5'000'000;

// One detail row of a bill that is a payment or a refund (docs/reconciliation.md#entries).
struct BillEntry {
    std::int64_t line_number = 0;  // 1-based, in the (decompressed) statement.
    projections::EventType event_type = projections::EventType::kPaymentSucceeded;
    std::string out_trade_no{};
    std::string platform_id{};  // Payment: the platform's trade number; refund: its refund's.
    // The payment's trade number (WeChat 微信订单号, Alipay 支付宝交易号): for a refund, what
    // --apply checks against the stored payment (docs/reconciliation.md#applying); for a payment,
    // platform_id.
    std::string payment_id{};
    std::int64_t amount = 0;  // Fen.
    std::string currency{};
    projections::TimeMicros occurred_at = 0;  // The row's time, Asia/Shanghai on the wire.
    bool pending = false;                     // A refund the bill lists as not yet successful.
    std::string raw_line{};  // The row's bytes as in the statement, without the line end.
};

// Called once per entry, in file order, before the summary has been checked: a caller must
// hold what it receives back until the parser returns (it throws BillError otherwise).
using EntrySink = std::function<void(const BillEntry&)>;

// What a parser found besides the entries.
struct BillTotals {
    std::int64_t rows = 0;  // Detail rows, entries or not (the output's rows=<n>).
};

// "yyyy-MM-dd HH:mm:ss" in Asia/Shanghai time (UTC+8, no daylight saving).
[[nodiscard]] std::string FormatShanghaiDashed(projections::TimeMicros time);

// Fen as yuan with two decimals: 8880 -> "88.80". REQUIRES: amount >= 0.
[[nodiscard]] std::string FormatYuan(std::int64_t amount);

// Yuan with at most two decimals into fen by docs/events.md#money-keys-and-time
// (projections::ParseMajorUnits), zero included ("0.00" -> 0, as bills write absent amounts).
// nullopt when malformed.
[[nodiscard]] std::optional<std::int64_t> ParseYuanOrZero(std::string_view text);

}  // namespace payledger::ledger::reconcile
