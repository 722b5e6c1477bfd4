#include "ledger/storable_text.hpp"

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

}  // namespace payledger::ledger
