// Tests of api/channels/json_input.hpp: AmountFromJson takes only a JSON integer
// in 1 ... 10^13 (values are parsed from JSON text, as a request body would give them, so
// nlohmann's signed/unsigned/float kinds are the real ones); ParseJsonObject refuses invalid
// UTF-8, non-objects, truncated text, nesting past kJsonDepthMax and a key repeated
// in any object at any depth, while equal keys in different objects are fine. (The UTF-8
// check itself is ledger/base/bytes.hpp's, tested in tests/ledger/base/bytes_test.cpp.)

#include "api/channels/json_input.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace payledger::api {
namespace {

using nlohmann::json;

// `depth` nested objects: {"a":{"a":...{}...}}.
std::string NestedObjects(int depth) {
    std::string text;
    for (int i = 1; i < depth; ++i) text += R"({"a":)";
    text += "{}";
    for (int i = 1; i < depth; ++i) text += "}";
    return text;
}

TEST(AmountFromJson, RefusesEverythingButAJsonIntegerInRange) {
    for (const char* text :
         {"1999.0", "1.999e3", "1e3", "19.99", R"("1999")", "null", "true", "false", "0", "-0",
          "-5", "-9223372036854775808", "10000000000001", "9223372036854775807",
          "9223372036854775808", "18446744073709551615", "[1999]", R"({"amount":1999})"}) {
        const json value = json::parse(text);
        EXPECT_EQ(AmountFromJson(value), std::nullopt) << text;
    }
}

TEST(AmountFromJson, AcceptsIntegersFromOneToTenToTheThirteenth) {
    const struct {
        const char* text;
        std::int64_t expected;
    } cases[] = {
        {"1", 1},
        {"1999", 1999},
        {"10000000000000", 10'000'000'000'000},
    };
    for (const auto& c : cases) {
        EXPECT_EQ(AmountFromJson(json::parse(c.text)), c.expected) << c.text;
    }
}

TEST(AmountFromJson, JudgesSignedAndUnsignedIntegersAlike) {
    EXPECT_EQ(AmountFromJson(json(std::int64_t{10'000'000'000'000})), 10'000'000'000'000);
    EXPECT_EQ(AmountFromJson(json(std::uint64_t{10'000'000'000'000})), 10'000'000'000'000);
    EXPECT_EQ(AmountFromJson(json(std::int64_t{10'000'000'000'001})), std::nullopt);
    EXPECT_EQ(AmountFromJson(json(std::uint64_t{10'000'000'000'001})), std::nullopt);
    EXPECT_EQ(AmountFromJson(json(std::int64_t{-1})), std::nullopt);
}

TEST(ParseJsonObject, AcceptsAnObjectAndKeepsItsMembers) {
    const std::optional<json> object = ParseJsonObject(
        R"({"out_trade_no":"ORD-1","amount":1999,"note":"测试","nested":{"a":[1,2]}})");
    ASSERT_TRUE(object.has_value());
    EXPECT_EQ(object->at("out_trade_no"), "ORD-1");
    EXPECT_EQ(object->at("amount"), 1999);
    EXPECT_EQ(object->at("note"), "\xE6\xB5\x8B\xE8\xAF\x95");
    EXPECT_EQ(object->at("nested").at("a").size(), 2u);
    EXPECT_TRUE(ParseJsonObject("{}").has_value());
    EXPECT_TRUE(ParseJsonObject(" \n{ }\n ").has_value());
}

TEST(ParseJsonObject, RefusesNonObjectsTruncatedTextAndInvalidUtf8) {
    const std::vector<std::string> refused{
        "",
        "   ",
        "[]",
        R"([{"a":1}])",
        "42",
        R"("text")",
        "null",
        "true",
        R"({"a":1)",
        R"({"a":)",
        R"({"a":"unterminated)",
        "{",
        R"({"a":1} trailing)",
        R"({"a":1}{"b":2})",
        R"({a:1})",
        "{\"a\":\"\xFF\"}",
        "{\"a\":\"\xC0\xAF\"}",
        "{\"a\":\"\xED\xA0\x80\"}",
        "{\"\xE6\xB5\":1}",
    };
    for (const std::string& body : refused) {
        EXPECT_EQ(ParseJsonObject(body), std::nullopt) << body;
    }
}

TEST(ParseJsonObject, RefusesNestingDeeperThanTheMaximum) {
    EXPECT_TRUE(ParseJsonObject(NestedObjects(kJsonDepthMax)).has_value());
    EXPECT_EQ(ParseJsonObject(NestedObjects(kJsonDepthMax + 1)), std::nullopt);
    EXPECT_EQ(ParseJsonObject(NestedObjects(10'000)), std::nullopt);
    // Arrays count as nesting too.
    const std::string arrays =
        R"({"a":)" + std::string(kJsonDepthMax, '[') + std::string(kJsonDepthMax, ']') + "}";
    EXPECT_EQ(ParseJsonObject(arrays), std::nullopt);
}

// nlohmann would keep the last of two equal keys; a platform or gateway that sent
// two means something else than what a last-wins reading records.
TEST(ParseJsonObject, RefusesAKeyRepeatedInAnyObjectAtAnyDepth) {
    for (const char* body : {
             R"({"amount":1,"amount":2})", R"({"amount":1,"amount":1})", R"({"a":{"b":1,"b":2}})",
             R"({"a":[{"x":1},{"y":1,"y":2}]})", R"({"a":{"b":{"c":{"d":[[{"e":1,"e":{}}]]}}}})",
             R"({"out_trade_no":"A","out_trade_no":"B"})",  // Equal once unescaped.
             R"({"a":1,"b":{"c":2},"a":3})",                // Around a nested object.
         }) {
        EXPECT_EQ(ParseJsonObject(body), std::nullopt) << body;
    }
}

TEST(ParseJsonObject, EqualKeysInDifferentObjectsAreNotRepeats) {
    const std::optional<json> object = ParseJsonObject(
        R"({"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}],"c":{"a":1,"b":2},"d":{"a":1,"b":2}})");
    ASSERT_TRUE(object.has_value());
    EXPECT_EQ(object->at("b").at(1).at("a"), 2);
    EXPECT_EQ(object->at("a").at("a").at("a"), 1);
    // Keys differ in case or by a byte are different keys.
    EXPECT_TRUE(ParseJsonObject(R"({"a":1,"A":2,"a ":3})").has_value());
}

TEST(ParseJsonObject, BracketsInsideStringsAreNotNesting) {
    const std::string body =
        R"({"a":")" + std::string(100, '[') + std::string(100, '{') + R"(\"[{","b":1})";
    const std::optional<json> object = ParseJsonObject(body);
    ASSERT_TRUE(object.has_value()) << body;
    EXPECT_EQ(object->at("b"), 1);
}

}  // namespace
}  // namespace payledger::api

namespace payledger::api {
namespace {

TEST(ParseJsonObjectNul, ANulByteAnywhereIsRefused) {
    // nlohmann stops reading at a NUL: what came after it would be ignored (found by fuzzing).
    const std::string body("{\"a\":1}\0trailing junk {[", 24);
    EXPECT_FALSE(ParseJsonObject(body).has_value());
    EXPECT_FALSE(ParseJsonObject(std::string("{\"a\":\"x\0y\"}", 12)).has_value());
    EXPECT_TRUE(ParseJsonObject("{\"a\":\"x\\u0000y\"}").has_value());  // The escape is JSON.
}

}  // namespace
}  // namespace payledger::api
