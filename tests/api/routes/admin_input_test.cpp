// Tests of api/routes/admin_input.hpp: the rewind body's cursor, accepted and refused in a table
// (the admin endpoint's own test, through serve, is in
// tests/api/subscriptions/delivery_pgtest.cpp).
#include "api/routes/admin_input.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace payledger::api {
namespace {

TEST(RewindCursorTest, AcceptsOnlyANonNegativeJsonIntegerAfter) {
    struct Case {
        std::string body{};
        std::optional<std::int64_t> after{};  // nullopt: refused as malformed.
    };
    const std::vector<Case> cases = {
        {R"({"after":0})", 0},
        {R"({"after":5})", 5},
        {R"({"after":9223372036854775807})", INT64_MAX},
        {R"({"after":5,"why":"receiver lost batch 4"})", 5},  // Unknown members are ignored.
        {"{}", std::nullopt},
        {R"({"x":1})", std::nullopt},
        {R"({"after":"5"})", std::nullopt},
        {R"({"after":1e3})", std::nullopt},
        {R"({"after":5.0})", std::nullopt},
        {R"({"after":-1})", std::nullopt},
        {R"({"after":null})", std::nullopt},
        {R"({"after":[5]})", std::nullopt},
        {R"({"after":9223372036854775808})", std::nullopt},
        {R"({"after":18446744073709551615})", std::nullopt},
        {R"({"after":99999999999999999999999})", std::nullopt},
        {R"({"after":1,"after":2})", std::nullopt},  // A repeated key, as everywhere.
        {"[]", std::nullopt},
        {"", std::nullopt},
        {"after=5", std::nullopt},
    };
    for (const Case& c : cases) {
        const Checked<std::int64_t> cursor = RewindCursor(c.body);
        ASSERT_EQ(cursor.ok(), c.after.has_value()) << c.body;
        if (c.after) {
            EXPECT_EQ(*cursor, *c.after) << c.body;
        } else {
            EXPECT_EQ(cursor.refusal().outcome, projections::Outcome::kMalformed) << c.body;
            EXPECT_NE(cursor.refusal().message.find("after"), std::string::npos) << c.body;
        }
    }
}

}  // namespace
}  // namespace payledger::api
