#include "api/channels/platform_channel.hpp"

#include <nlohmann/json.hpp>

#include "api/channels/channel.hpp"  // IsInternalError.
#include "api/http/json_output.hpp"

namespace payledger::api {

std::string_view FieldOr(const PlatformFields& fields, const std::string& name) {
    const auto it = fields.find(name);
    return it == fields.end() ? std::string_view{} : std::string_view{it->second};
}

std::string KeptFields(const PlatformFields& fields, std::initializer_list<const char*> names) {
    nlohmann::json kept = nlohmann::json::object();
    for (const char* name : names) {
        const auto it = fields.find(name);
        if (it != fields.end() && !it->second.empty()) kept[name] = it->second;
    }
    return Dump(kept);  // Invalid UTF-8 (a GBK notice) is replaced, never stored as jsonb.
}

std::optional<projections::TimeMicros> PlatformTime(
    std::string_view text, projections::TimeMicros received_at,
    std::optional<projections::TimeMicros> (*parse)(std::string_view)) {
    if (text.empty()) return received_at;
    return parse(text);
}

bool IsAcknowledged(const ledger::DeliveryResult& result) {
    using projections::Outcome;
    return !result.failure &&
           (result.outcome == Outcome::kAppended || result.outcome == Outcome::kDuplicate ||
            result.outcome == Outcome::kIgnored);
}

std::string FailureReason(const ledger::DeliveryResult& result) {
    if (IsInternalError(result)) return "internal error";
    std::string reason{projections::ToString(result.outcome)};
    if (!result.message.empty()) reason += ": " + result.message;
    return reason;
}

}  // namespace payledger::api
