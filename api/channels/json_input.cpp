#include "api/channels/json_input.hpp"

#include <set>
#include <vector>

#include "ledger/base/bytes.hpp"
#include "projections/event.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

// Scans for the deepest [ or { nesting outside strings, without parsing.
bool NestingWithin(std::string_view text, int depth_max) {
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > depth_max) return false;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return true;
}

}  // namespace

std::optional<nlohmann::json> ParseJsonObject(std::string_view body) {
    using nlohmann::json;
    // nlohmann stops at a NUL byte and would accept what comes before it as the whole body.
    if (body.find('\0') != std::string_view::npos) return std::nullopt;
    if (!ledger::IsValidUtf8(body) || !NestingWithin(body, kJsonDepthMax)) return std::nullopt;
    // A duplicate key at any depth is malformed (docs/platforms.md#strict-parsing). nlohmann keeps
    // the last value of a repeated key; its parser callback sees every key as it is read, so one
    // set of keys per open object finds a repeat (the recipe of nlohmann's parser_callbacks.md). A
    // stack rather than the callback's depth: object_start reports the parent's depth, a key the
    // object's. The callback keeps every value; the verdict is read after the parse.
    std::vector<std::set<std::string>> open_objects;
    bool repeated = false;
    const json::parser_callback_t check_keys = [&](int /*depth*/, json::parse_event_t event,
                                                   json& parsed) {
        switch (event) {
            case json::parse_event_t::object_start:
                open_objects.emplace_back();
                break;
            case json::parse_event_t::object_end:
                if (!open_objects.empty()) open_objects.pop_back();
                break;
            case json::parse_event_t::key:
                if (!open_objects.empty() &&
                    !open_objects.back().insert(parsed.get<std::string>()).second) {
                    repeated = true;
                }
                break;
            case json::parse_event_t::array_start:
            case json::parse_event_t::array_end:
            case json::parse_event_t::value:
                break;
        }
        return true;
    };
    json value = json::parse(body, check_keys, /*allow_exceptions=*/false);
    if (repeated || value.is_discarded() || !value.is_object()) return std::nullopt;
    return value;
}

std::optional<std::int64_t> AmountFromJson(const nlohmann::json& value) {
    if (!value.is_number_integer()) return std::nullopt;  // 10.99, 1e3, "8880", null.
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() > static_cast<std::uint64_t>(projections::kAmountMax)) {
        return std::nullopt;  // get<std::int64_t>() would wrap it to a negative number.
    }
    const std::int64_t amount = value.get<std::int64_t>();
    if (!projections::IsValidAmount(amount)) return std::nullopt;
    return amount;
}

Checked<std::int64_t> RequireJsonAmount(const nlohmann::json& object, const char* field) {
    const auto it = object.find(field);
    const std::optional<std::int64_t> amount =
        it == object.end() ? std::nullopt : AmountFromJson(*it);
    if (!amount) {
        return Malformed(std::string(field) + " must be a JSON integer of minor units, 1 to 10^13");
    }
    return *amount;
}

std::optional<std::string> StringMember(const nlohmann::json& object, const char* key) {
    const auto it = object.find(key);
    if (it == object.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
}

}  // namespace payledger::api
