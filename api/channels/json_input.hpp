#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/channels/refusal.hpp"

namespace payledger::api {

// Nesting deeper than this is refused before parsing: no input of ours needs more.
inline constexpr int kJsonDepthMax = 32;

// Parses a request body as a JSON object. nullopt when it is not valid UTF-8 JSON, not an
// object, nested deeper than kJsonDepthMax, holds a NUL byte anywhere, or repeats a key in any
// object at any depth (docs/platforms.md#strict-parsing: keys are compared byte for byte after
// unescaping, so "a" and "\u0061" are the same key).
[[nodiscard]] std::optional<nlohmann::json> ParseJsonObject(std::string_view body);

// An amount (docs/events.md#money-keys-and-time): a JSON integer in 1 ... 10^13 (1999.0, 1.999e3
// and "1999" are refused).
[[nodiscard]] std::optional<std::int64_t> AmountFromJson(const nlohmann::json& value);

// The member `field` of `object` as an amount: malformed "<field> must be a JSON integer of
// minor units, 1 to 10^13" when it is absent or not one.
[[nodiscard]] Checked<std::int64_t> RequireJsonAmount(const nlohmann::json& object,
                                                      const char* field);

// The string member `key` of `object`, or nullopt when absent or not a string.
[[nodiscard]] std::optional<std::string> StringMember(const nlohmann::json& object,
                                                      const char* key);

}  // namespace payledger::api
