#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "projections/event.hpp"

namespace payledger::projections {

// 1-64 characters of A-Z a-z 0-9 _ - | * . (out_trade_no and account_id;
// docs/events.md#money-keys-and-time).
[[nodiscard]] bool IsValidKey(std::string_view text);
inline constexpr std::size_t kKeyBytesMax = 64;  // The longest key IsValidKey accepts.
// The rule IsValidKey checks, in words: every message that refuses a key says it so.
inline constexpr const char* kKeyRuleText = "1-64 characters of A-Z a-z 0-9 _ - | * .";

// A platform's id: a callback's transaction_id, refund_id, trade_no or out_biz_no, and a bill's
// trade and refund numbers. 1 to kPlatformIdBytesMax visible ASCII characters (0x21-0x7E, no
// space: reconcile's output lines separate fields with spaces). One limit for the callbacks
// and the bills: the ledger stores ids of up to 128 bytes (schema/0001_ledger.sql's CHECK on
// transaction_id), and every id a callback stored must be found again in the day's bill, so
// the bill parsers may not accept less. The platforms' own ids are shorter (WeChat Pay 32,
// Alipay 64).
[[nodiscard]] bool IsValidPlatformId(std::string_view text);
inline constexpr std::size_t kPlatformIdBytesMax = 128;
// The rule IsValidPlatformId checks, in words, for the messages that refuse an id.
inline constexpr const char* kPlatformIdRuleText = "1-128 visible ASCII characters";

// Plain decimal digits (no sign, space or point), at least one, of a value at most `max`;
// nullopt otherwise. The one integer parser of inputs: amounts, cursors, signed timestamps,
// ports. REQUIRES: max >= 0.
[[nodiscard]] std::optional<std::int64_t> ParseDigits(std::string_view text, std::int64_t max);

// An ISO 4217 alphabetic code, upper case (three letters A-Z).
[[nodiscard]] bool IsValidCurrency(std::string_view text);

// 1 ... 10^13 minor units (docs/events.md#money-keys-and-time).
[[nodiscard]] bool IsValidAmount(std::int64_t amount);

// An amount written as plain decimal digits of minor units ("1999"), as WeChat sends them.
// No sign, no spaces, no decimal point. nullopt when malformed or out of range.
[[nodiscard]] std::optional<std::int64_t> ParseMinorUnits(std::string_view text);

// A decimal amount in major units with at most two decimals ("88.80" -> 8880, "0.01" -> 1,
// "88.8" -> 8880, "12" -> 1200), converted exactly, digit by digit. A third decimal, a
// sign, an exponent, spaces or junk give nullopt, as does a result outside 1 ... 10^13.
[[nodiscard]] std::optional<std::int64_t> ParseMajorUnits(std::string_view text);

// RFC 3339 date-time with a zone ("2026-11-29T08:30:00Z", "2018-06-08T10:34:56+08:00",
// optional fraction). nullopt when malformed.
[[nodiscard]] std::optional<TimeMicros> ParseRfc3339(std::string_view text);

// Asia/Shanghai local time (UTC+8, no daylight saving) in the two platform layouts:
// "yyyyMMddHHmmss" and "yyyy-MM-dd HH:mm:ss". nullopt when malformed.
[[nodiscard]] std::optional<TimeMicros> ParseShanghaiCompact(std::string_view text);
[[nodiscard]] std::optional<TimeMicros> ParseShanghaiDashed(std::string_view text);

// RFC 3339 in UTC with a `Z`; the fraction is written only when it is not zero.
[[nodiscard]] std::string FormatRfc3339(TimeMicros time);
// The same with exactly six fractional digits, always (receipt lines, checkpoints).
[[nodiscard]] std::string FormatRfc3339Micros(TimeMicros time);
// The inverses of the Asia/Shanghai parsers, of `time`'s whole seconds: "yyyyMMddHHmmss",
// "yyyy-MM-dd HH:mm:ss", and "yyyy-MM-ddTHH:mm:ss+08:00" (WeChat Pay v3's times).
[[nodiscard]] std::string FormatShanghaiCompact(TimeMicros time);
[[nodiscard]] std::string FormatShanghaiDashed(TimeMicros time);
[[nodiscard]] std::string FormatShanghaiRfc3339(TimeMicros time);
// Minor units as major units with two decimals, "88.80" (Alipay's amounts); the inverse of
// ParseMajorUnits. REQUIRES: minor >= 0.
[[nodiscard]] std::string FormatMajorUnits(std::int64_t minor);
// The same, appended to `out` (no allocation once `out` has room).
void AppendRfc3339Micros(TimeMicros time, std::string& out);

}  // namespace payledger::projections
