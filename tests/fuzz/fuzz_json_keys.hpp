#pragma once

// Strict parsing (docs/platforms.md#strict-parsing) for the fuzz targets, judged apart from
// api/channels/json_input.cpp: whether a JSON text repeats a key in one of its objects. nlohmann's
// SAX parser reports every key it reads; the DOM keeps one member per distinct key (the last), so
// the text repeats a key exactly when it reads more keys than its parsed objects hold members.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace payledger::fuzz {

struct KeyCounter : nlohmann::json_sax<nlohmann::json> {
    std::size_t keys = 0;
    bool null() override { return true; }
    bool boolean(bool /*value*/) override { return true; }
    bool number_integer(number_integer_t /*value*/) override { return true; }
    bool number_unsigned(number_unsigned_t /*value*/) override { return true; }
    bool number_float(number_float_t /*value*/, const string_t& /*text*/) override { return true; }
    bool string(string_t& /*value*/) override { return true; }
    bool binary(binary_t& /*value*/) override { return true; }
    bool start_object(std::size_t /*elements*/) override { return true; }
    bool key(string_t& /*value*/) override {
        ++keys;
        return true;
    }
    bool end_object() override { return true; }
    bool start_array(std::size_t /*elements*/) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                     const nlohmann::detail::exception& /*error*/) override {
        return false;
    }
};

inline std::size_t MemberCount(const nlohmann::json& value) {
    std::size_t count = value.is_object() ? value.size() : 0;
    if (value.is_structured()) {
        for (const nlohmann::json& child : value) count += MemberCount(child);
    }
    return count;
}

// True when `text` is JSON (as nlohmann reads it; `parsed` is its DOM) that repeats a key.
inline bool HasRepeatedKey(std::string_view text, const nlohmann::json& parsed) {
    KeyCounter counter;
    if (!nlohmann::json::sax_parse(text, &counter)) return false;
    return counter.keys != MemberCount(parsed);
}

// The same for text not parsed yet. Bounded: MemberCount recurses, and no body of ours nests
// deeper than api::kJsonDepthMax, which the callers' inputs are far from.
inline bool HasRepeatedKey(std::string_view text) {
    if (text.size() > 65536 || text.find('\0') != std::string_view::npos) return false;
    const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
    return !parsed.is_discarded() && HasRepeatedKey(text, parsed);
}

}  // namespace payledger::fuzz
