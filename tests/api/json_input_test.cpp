// Tests of api/json_input.hpp against SPEC §1 and §5: AmountFromJson takes only a JSON integer
// in 1 ... 10^13 (values are parsed from JSON text, as a request body would give them, so
// nlohmann's signed/unsigned/float kinds are the real ones); ParseJsonObject refuses invalid
// UTF-8, non-objects, truncated text, nesting past kJsonDepthMax and (SPEC §6) a key repeated
// in any object at any depth, while equal keys in different objects are fine; IsValidUtf8 is
// checked against a table of well-formed and ill-formed byte sequences (overlong forms, surrogates,
// truncations, stray continuation bytes, code points past U+10FFFF).

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

// SPEC §6: nlohmann would keep the last of two equal keys; a platform or gateway that sent
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

TEST(IsValidUtf8, AcceptsWellFormedText) {
    const std::vector<std::string> valid{
        "",
        "plain ASCII",
        std::string("nul\0inside", 10),
        "\x7F",
        "\xC2\x80",                  // U+0080, the smallest two-byte form.
        "caf\xC3\xA9",               // café
        "\xE6\xB5\x8B\xE8\xAF\x95",  // 测试
        "测试",
        "\xE0\xA0\x80",      // U+0800, the smallest three-byte form.
        "\xED\x9F\xBF",      // U+D7FF, just below the surrogates.
        "\xEE\x80\x80",      // U+E000, just above them.
        "\xEF\xBF\xBF",      // U+FFFF
        "\xF0\x90\x80\x80",  // U+10000, the smallest four-byte form.
        "\xF0\x9F\x98\x80",  // U+1F600
        "\xF4\x8F\xBF\xBF",  // U+10FFFF, the largest code point.
    };
    for (const std::string& text : valid) {
        EXPECT_TRUE(IsValidUtf8(text)) << text;
    }
}

TEST(IsValidUtf8, RefusesIllFormedSequences) {
    const struct {
        const char* name;
        std::string bytes;
    } cases[] = {
        {"overlong NUL", "\xC0\x80"},
        {"overlong slash, 2 bytes", "\xC0\xAF"},
        {"overlong U+007F", "\xC1\xBF"},
        {"overlong slash, 3 bytes", "\xE0\x80\xAF"},
        {"overlong U+07FF", "\xE0\x9F\xBF"},
        {"overlong slash, 4 bytes", "\xF0\x80\x80\xAF"},
        {"overlong U+FFFF", "\xF0\x8F\xBF\xBF"},
        {"high surrogate U+D800", "\xED\xA0\x80"},
        {"low surrogate U+DFFF", "\xED\xBF\xBF"},
        {"surrogate pair encoded as CESU-8", "\xED\xA0\xBD\xED\xB8\x80"},
        {"past U+10FFFF", "\xF4\x90\x80\x80"},
        {"F5 lead byte", "\xF5\x80\x80\x80"},
        {"five-byte lead", "\xF8\x88\x80\x80\x80"},
        {"FE", "\xFE"},
        {"FF", "\xFF"},
        {"lone continuation byte", "\x80"},
        {"continuation after ASCII", "a\xBF"},
        {"truncated two-byte", "\xC3"},
        {"truncated three-byte (first two bytes of 测)", "\xE6\xB5"},
        {"truncated four-byte", "\xF0\x9F\x98"},
        {"truncated at the end of text", "\xE6\xB5\x8B\xE8\xAF"},
        {"ASCII where a continuation belongs", "\xC3("},
        {"lead byte where a continuation belongs", "\xE6\xB5\xE6"},
    };
    for (const auto& c : cases) {
        EXPECT_FALSE(IsValidUtf8(c.bytes)) << c.name;
    }
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
