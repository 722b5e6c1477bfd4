// Fuzzes api/routes/admin_input.hpp with the whole input as an admin request body: RewindCursor.
// Checks: it never throws and never reads a member that is not there (ASan and UBSan would say
// so); it accepts exactly the bodies that are a JSON object (as ParseJsonObject takes them) whose
// `after` is a JSON integer from 0 to 2^63 - 1, and gives that integer; anything else is
// `malformed` with a message.

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "api/channels/json_input.hpp"
#include "api/routes/admin_input.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace payledger::fuzz {
namespace {

// The reference: what the body's `after` must be, judged with nlohmann's own checked reads.
std::optional<std::int64_t> ReferenceCursor(std::string_view body) {
    const std::optional<nlohmann::json> parsed = api::ParseJsonObject(body);
    if (!parsed || !parsed->contains("after")) return std::nullopt;
    const nlohmann::json& after = parsed->at("after");
    if (after.is_number_unsigned()) {
        const std::uint64_t value = after.get<std::uint64_t>();
        if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            return std::nullopt;
        }
        return static_cast<std::int64_t>(value);
    }
    if (after.is_number_integer() && after.get<std::int64_t>() >= 0) {
        return after.get<std::int64_t>();
    }
    return std::nullopt;
}

}  // namespace
}  // namespace payledger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace payledger;
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    const api::Checked<std::int64_t> cursor = api::RewindCursor(body);
    const std::optional<std::int64_t> expected = fuzz::ReferenceCursor(body);
    FUZZ_CHECK(cursor.ok() == expected.has_value());
    if (cursor.ok()) {
        FUZZ_CHECK(*cursor == *expected);
        FUZZ_CHECK(*cursor >= 0);
    } else {
        FUZZ_CHECK(cursor.refusal().outcome == projections::Outcome::kMalformed);
        FUZZ_CHECK(!cursor.refusal().message.empty());
    }
    return 0;
}
