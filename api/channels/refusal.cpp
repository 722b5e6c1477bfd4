#include "api/channels/refusal.hpp"

#include "projections/validate.hpp"

namespace payledger::api {
namespace {

constexpr std::int64_t kUnixSecondsMax = 999'999'999'999;  // 12 digits: year 33658.
constexpr std::int64_t kMicrosPerSecond = 1'000'000;

}  // namespace

Checked<std::string> RequireKey(std::string_view text, std::string_view field) {
    if (!projections::IsValidKey(text)) {
        return Malformed(std::string(field) + " must be " + projections::kKeyRuleText);
    }
    return std::string(text);
}

Checked<std::string> RequireCurrency(std::string_view text, std::string_view field) {
    if (!projections::IsValidCurrency(text)) {
        return Malformed(std::string(field) + " must be an upper-case ISO 4217 code");
    }
    return std::string(text);
}

Checked<std::string> RequirePlatformId(std::string_view text, std::string_view field) {
    if (!projections::IsValidPlatformId(text)) {
        return Malformed(std::string(field) + " must be " + projections::kPlatformIdRuleText);
    }
    return std::string(text);
}

Checked<std::int64_t> RequireSignedAt(std::string_view text, projections::TimeMicros received_at,
                                      std::string_view what) {
    const std::optional<std::int64_t> seconds = projections::ParseDigits(text, kUnixSecondsMax);
    if (!seconds) return BadSignature(std::string(what) + " is not unix seconds");
    const std::int64_t skew = received_at / kMicrosPerSecond - *seconds;
    if (skew > kSignatureWindowSeconds || skew < -kSignatureWindowSeconds) {
        return BadSignature(std::string(what) + " is outside the 300 s window");
    }
    return *seconds;
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
