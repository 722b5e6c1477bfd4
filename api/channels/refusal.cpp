#include "api/channels/refusal.hpp"

#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

constexpr std::size_t kPlatformIdBytesMax = 128;
constexpr std::size_t kDecimalDigitsMax = 18;  // 10^18 - 1 < INT64_MAX.
constexpr std::int64_t kMicrosPerSecond = 1'000'000;

}  // namespace

Checked<std::string> RequireKey(std::string_view text, std::string_view field) {
    if (!projections::IsValidKey(text)) {
        return Malformed(std::string(field) + " must be 1-64 characters of A-Z a-z 0-9 _ - | * .");
    }
    return std::string(text);
}

bool IsValidPlatformId(std::string_view text) {
    if (text.empty() || text.size() > kPlatformIdBytesMax) return false;
    for (const char c : text) {
        if (c < 0x21 || c > 0x7e) return false;
    }
    return true;
}

Checked<std::string> RequirePlatformId(std::string_view text, std::string_view field) {
    if (!IsValidPlatformId(text)) {
        return Malformed(std::string(field) + " must be 1-128 visible ASCII characters");
    }
    return std::string(text);
}

std::optional<std::int64_t> ParseDecimal(std::string_view text, std::size_t digits_max) {
    PAYLEDGER_ASSERT(digits_max <= kDecimalDigitsMax);
    if (text.empty() || text.size() > digits_max) return std::nullopt;
    std::int64_t value = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + (c - '0');
    }
    return value;
}

std::optional<Refusal> CheckSignatureWindow(std::int64_t signed_at_seconds,
                                            projections::TimeMicros received_at,
                                            std::string_view what) {
    const std::int64_t skew = received_at / kMicrosPerSecond - signed_at_seconds;
    if (skew > kSignatureWindowSeconds || skew < -kSignatureWindowSeconds) {
        return BadSignature(std::string(what) + " is outside the 300 s window");
    }
    return std::nullopt;
}

std::optional<Refusal> CheckConfiguredId(std::string_view value, std::string_view field,
                                         std::string_view configured) {
    const std::string name{field};
    if (value.empty()) return Malformed(name + " is missing");
    if (value != configured) {
        return Mismatch(name + " " + std::string(value) + " is not the configured " + name);
    }
    return std::nullopt;
}

}  // namespace payledger::api
