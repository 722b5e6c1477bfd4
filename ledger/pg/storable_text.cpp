#include "ledger/pg/storable_text.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace payledger::ledger {

std::string WithoutNul(std::string text) {
    for (std::size_t at = text.find('\0'); at != std::string::npos; at = text.find('\0', at)) {
        text.replace(at, 1, "\xEF\xBF\xBD");
    }
    return text;
}

std::string JsonWithoutNul(std::string text) {
    for (std::size_t at = text.find("\\u0000"); at != std::string::npos;
         at = text.find("\\u0000", at + 1)) {
        std::size_t slashes = 0;
        while (slashes < at && text[at - 1 - slashes] == '\\') ++slashes;
        if (slashes % 2 == 0) text.replace(at, 6, "\\ufffd");
    }
    return text;
}

std::string StorableText(std::string text) {
    // Most texts here are keys, names and digits: nothing to do.
    const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
        const auto byte = static_cast<unsigned char>(c);
        return byte != 0 && byte < 0x80;
    });
    if (plain) return text;
    // nlohmann's dump replaces what is not UTF-8 and escapes the rest; parsing it back gives
    // the text, valid UTF-8 (what the writer stored when its rows were JSON).
    using nlohmann::json;
    const std::string dumped =
        json(WithoutNul(std::move(text))).dump(-1, ' ', false, json::error_handler_t::replace);
    return json::parse(dumped).get<std::string>();
}

}  // namespace payledger::ledger
