// Fuzzes api/channels/json_input.hpp with the whole input as a request body: ParseJsonObject, then
// AmountFromJson and StringMember on every member at every depth. Checks: IsValidUtf8 agrees
// with a table-driven reference (RFC 3629 §4, Unicode Table 3-7); what ParseJsonObject
// accepts is an object nested at most kJsonDepthMax deep with no raw NUL byte, and what it
// refuses is not a valid UTF-8 object within that depth without a repeated key, and
// what it accepts repeats no key, both judged by counting the keys nlohmann's SAX parser
// reads against the members of the parsed objects; an accepted object dumps and parses back
// to itself; AmountFromJson gives exactly the JSON integers in 1 ... 10^13.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/channels/json_input.hpp"
#include "ledger/base/bytes.hpp"
#include "projections/event.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "tests/fuzz/fuzz_json_keys.hpp"

namespace payledger::fuzz {
namespace {

using nlohmann::json;

// Unicode Table 3-7: the well-formed byte sequences, by the range of each byte.
bool ReferenceUtf8(std::string_view text) {
    std::size_t i = 0;
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const auto in = [](unsigned char b, unsigned lo, unsigned hi) { return b >= lo && b <= hi; };
    while (i < text.size()) {
        const unsigned char b0 = byte(i);
        if (b0 <= 0x7F) {
            ++i;
            continue;
        }
        std::size_t length = 0;
        unsigned lo1 = 0x80, hi1 = 0xBF;
        if (in(b0, 0xC2, 0xDF)) {
            length = 2;
        } else if (in(b0, 0xE0, 0xEF)) {
            length = 3;
            if (b0 == 0xE0) lo1 = 0xA0;
            if (b0 == 0xED) hi1 = 0x9F;
        } else if (in(b0, 0xF0, 0xF4)) {
            length = 4;
            if (b0 == 0xF0) lo1 = 0x90;
            if (b0 == 0xF4) hi1 = 0x8F;
        } else {
            return false;
        }
        if (i + length > text.size() || !in(byte(i + 1), lo1, hi1)) return false;
        for (std::size_t k = 2; k < length; ++k) {
            if (!in(byte(i + k), 0x80, 0xBF)) return false;
        }
        i += length;
    }
    return true;
}

// The nesting depth of a parsed value: 1 for an empty object or array.
int Depth(const json& value) {
    if (!value.is_structured()) return 0;
    int deepest = 0;
    for (const json& child : value) deepest = std::max(deepest, Depth(child));
    return deepest + 1;
}

std::optional<std::int64_t> ReferenceAmount(const json& value) {
    if (value.is_number_unsigned()) {
        const std::uint64_t amount = value.get<std::uint64_t>();
        if (amount < 1 || amount > static_cast<std::uint64_t>(projections::kAmountMax)) {
            return std::nullopt;
        }
        return static_cast<std::int64_t>(amount);
    }
    if (value.is_number_integer()) {
        const std::int64_t amount = value.get<std::int64_t>();
        if (amount < 1 || amount > projections::kAmountMax) return std::nullopt;
        return amount;
    }
    return std::nullopt;
}

void CheckMembers(const json& object) {
    std::vector<const json*> pending{&object};
    while (!pending.empty()) {
        const json& node = *pending.back();
        pending.pop_back();
        if (node.is_object()) {
            for (const auto& [key, member] : node.items()) {
                FUZZ_CHECK(api::AmountFromJson(member) == ReferenceAmount(member));
                const std::optional<std::string> text = api::StringMember(node, key.c_str());
                // A key with a NUL byte is cut short as a C string: skip the comparison.
                if (key.find('\0') == std::string::npos) {
                    FUZZ_CHECK(text.has_value() == member.is_string());
                    if (text) FUZZ_CHECK(*text == member.get<std::string>());
                }
                pending.push_back(&member);
            }
        } else if (node.is_array()) {
            for (const json& element : node) {
                FUZZ_CHECK(api::AmountFromJson(element) == ReferenceAmount(element));
                pending.push_back(&element);
            }
        }
    }
}

}  // namespace
}  // namespace payledger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace payledger;
    using nlohmann::json;
    const std::string_view text = fuzz::AsText(data, size);
    const bool utf8 = ledger::IsValidUtf8(text);
    FUZZ_CHECK(utf8 == fuzz::ReferenceUtf8(text));

    const std::optional<json> object = api::ParseJsonObject(text);
    if (!object) {
        // Refused: then it is not valid UTF-8, or not an object within the depth limit. The
        // depth is measured on nlohmann's own parse, only for inputs short enough that the
        // recursive measure cannot matter, and without a NUL byte: nlohmann ends the input
        // at one.
        if (utf8 && text.size() <= 4096 && text.find('\0') == std::string_view::npos) {
            const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
            FUZZ_CHECK(parsed.is_discarded() || !parsed.is_object() ||
                       fuzz::Depth(parsed) > api::kJsonDepthMax ||
                       fuzz::HasRepeatedKey(text, parsed));
        }
        return 0;
    }
    FUZZ_CHECK(utf8);
    // A raw NUL byte is never JSON (not whitespace, and escaped inside strings).
    FUZZ_CHECK(text.find('\0') == std::string_view::npos);
    FUZZ_CHECK(object->is_object());
    FUZZ_CHECK(fuzz::Depth(*object) <= api::kJsonDepthMax);
    FUZZ_CHECK(!fuzz::HasRepeatedKey(text, *object));  // No key given twice.
    fuzz::CheckMembers(*object);
    const std::optional<json> again = api::ParseJsonObject(object->dump());
    FUZZ_CHECK(again && *again == *object);
    return 0;
}
