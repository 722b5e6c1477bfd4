#include "api/routes/admin_input.hpp"

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "api/channels/json_input.hpp"

namespace payledger::api {

Checked<std::int64_t> RewindCursor(std::string_view body) {
    const std::optional<nlohmann::json> parsed = ParseJsonObject(body);
    if (!parsed) return Malformed("the body must be a JSON object {\"after\": <seq>}");
    const auto after = parsed->find("after");
    if (after == parsed->end()) {
        return Malformed("after is missing: the body is {\"after\": <seq>}");
    }
    if (!after->is_number_integer()) return Malformed("after must be a non-negative JSON integer");
    if (after->is_number_unsigned()) {
        if (after->get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            return Malformed("after is out of range");
        }
        return after->get<std::int64_t>();
    }
    const std::int64_t value = after->get<std::int64_t>();
    if (value < 0) return Malformed("after must be a non-negative JSON integer");
    return value;
}

}  // namespace payledger::api
