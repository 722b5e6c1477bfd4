// Tests of projections/validate.hpp against docs/events.md#money-keys-and-time: the key alphabet
// and length, currency codes, the amount range, minor-unit and major-unit amount strings, RFC 3339
// and the two Asia/Shanghai local layouts, and FormatRfc3339. Edges are tables of (input,
// expected); the expected instants are independent constants (from `date -u -d ... +%s`), not
// values computed by the code under test.

#include "projections/validate.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "projections/event.hpp"

namespace payledger::projections {
namespace {

constexpr std::int64_t kMicros = 1'000'000;
constexpr std::int64_t k20261129T083000Z = 1'795'941'000 * kMicros;  // 2026-11-29T08:30:00Z
constexpr std::int64_t k20240501T023015Z = 1'714'530'615 * kMicros;  // 2024-05-01T02:30:15Z
constexpr std::int64_t k20240229T120000Z = 1'709'208'000 * kMicros;  // 2024-02-29T12:00:00Z

TEST(IsValidKey, AcceptsTheSpecAlphabetFromOneToSixtyFourCharacters) {
    const std::vector<std::string> accepted{
        "a",
        "Z",
        "0",
        "_",
        "-",
        "|",
        "*",
        ".",
        "ORD-20240501-0001",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-|*.",
        std::string(64, 'x'),
    };
    for (const std::string& key : accepted) {
        // The alphabet string above is 67 characters: it checks the alphabet, not the length.
        if (key.size() > kKeyBytesMax) {
            EXPECT_FALSE(IsValidKey(key)) << key;
            EXPECT_TRUE(IsValidKey(key.substr(0, 64))) << key;
            EXPECT_TRUE(IsValidKey(key.substr(64))) << key;
            continue;
        }
        EXPECT_TRUE(IsValidKey(key)) << key;
    }
}

TEST(IsValidKey, RefusesEmptyTooLongAndCharactersOutsideTheAlphabet) {
    const std::vector<std::string> refused{
        "",
        std::string(65, 'x'),
        "ORD 1",
        " ORD1",
        "ORD1 ",
        "ORD/1",
        "ORD\\1",
        "ORD'1",
        "ORD\"1",
        "ORD:1",
        "ORD+1",
        "ORD#1",
        "ORD%1",
        "ORD\t1",
        "ORD\n1",
        "\xE8\xAE\xA2\xE5\x8D\x95",  // 订单
        "caf\xC3\xA9",               // café
        std::string{'O', 'R', 'D', '\0', '1'},
        std::string(1, '\0'),
    };
    for (const std::string& key : refused) {
        EXPECT_FALSE(IsValidKey(key)) << "size " << key.size() << ": " << key;
    }
}

TEST(IsValidPlatformId, AcceptsOneTo128VisibleAsciiCharacters) {
    EXPECT_EQ(kPlatformIdBytesMax, 128u);
    for (const std::string& id :
         {std::string("4200002360202611301150650780"), std::string("2026113022001458860515315453"),
          std::string("x"), std::string("!~\"#{}"), std::string(64, '9'), std::string(128, '9')}) {
        EXPECT_TRUE(IsValidPlatformId(id)) << id;
    }
    for (const std::string& id :
         {std::string(), std::string(129, '9'), std::string("4200 0023"), std::string(" 42"),
          std::string("42\t"), std::string("42\n"), std::string("42\x7f"),
          std::string("\xE8\xAE\xA2\xE5\x8D\x95"),  // 订单
          std::string("caf\xC3\xA9"), std::string{'4', '\0', '2'}}) {
        EXPECT_FALSE(IsValidPlatformId(id)) << id;
    }
}

TEST(IsValidCurrency, AcceptsThreeUpperCaseLettersOnly) {
    for (const char* code : {"CNY", "USD", "HKD", "EUR", "JPY"}) {
        EXPECT_TRUE(IsValidCurrency(code)) << code;
    }
    for (const char* code : {"", "C", "CN", "CNYY", "cny", "Cny", "CN1", "C Y", " CNY", "CNY "}) {
        EXPECT_FALSE(IsValidCurrency(code)) << code;
    }
    EXPECT_FALSE(IsValidCurrency(std::string_view("CN\0", 3)));
}

TEST(IsValidAmount, AcceptsOneToTenToTheThirteenth) {
    const struct {
        std::int64_t amount;
        bool valid;
    } cases[] = {
        {std::numeric_limits<std::int64_t>::min(), false},
        {-1, false},
        {0, false},
        {1, true},
        {1999, true},
        {10'000'000'000'000, true},
        {10'000'000'000'001, false},
        {std::numeric_limits<std::int64_t>::max(), false},
    };
    for (const auto& c : cases) {
        EXPECT_EQ(IsValidAmount(c.amount), c.valid) << c.amount;
    }
}

struct AmountCase {
    std::string text;
    std::optional<std::int64_t> expected;
};

TEST(ParseMinorUnits, AcceptsPlainDigitsInRangeAndRefusesEverythingElse) {
    const std::vector<AmountCase> cases{
        {"1999", 1999},
        {"1", 1},
        {"01", 1},
        {"10000000000000", 10'000'000'000'000},
        {"10000000000001", std::nullopt},
        {"99999999999999", std::nullopt},
        {"123456789012345678901234567890", std::nullopt},  // Overflows int64 many times.
        {"9223372036854775808", std::nullopt},             // INT64_MAX + 1.
        {"18446744073709551617", std::nullopt},            // UINT64_MAX + 2.
        {"0", std::nullopt},
        {"00", std::nullopt},
        {"-1", std::nullopt},
        {"+1", std::nullopt},
        {"1.0", std::nullopt},
        {"19.99", std::nullopt},
        {" 1", std::nullopt},
        {"1 ", std::nullopt},
        {"", std::nullopt},
        {"1e3", std::nullopt},
        {"0x10", std::nullopt},
        {"abc", std::nullopt},
        {std::string{'1', '\0', '2'}, std::nullopt},
    };
    for (const AmountCase& c : cases) {
        EXPECT_EQ(ParseMinorUnits(c.text), c.expected) << '"' << c.text << '"';
    }
}

TEST(ParseMajorUnits, ConvertsUpToTwoDecimalsExactlyAndRefusesEverythingElse) {
    const std::vector<AmountCase> cases{
        // Accepted.
        {"0.01", 1},
        {"0.1", 10},
        {"0.10", 10},
        {"88.8", 8880},
        {"88.80", 8880},
        {"88.08", 8808},
        {"12", 1200},
        {"19.99", 1999},
        {"100000000000", 10'000'000'000'000},
        {"100000000000.00", 10'000'000'000'000},
        {"99999999999.99", 9'999'999'999'999},
        // Refused: precision, sign, exponent, range, shape, junk.
        {"88.801", std::nullopt},
        {"0.001", std::nullopt},
        {"1e3", std::nullopt},
        {"1E3", std::nullopt},
        {"-1", std::nullopt},
        {"-0.01", std::nullopt},
        {"+1", std::nullopt},
        {"100000000000.01", std::nullopt},
        {"100000000001", std::nullopt},
        {"0.00", std::nullopt},
        {"0", std::nullopt},
        {".5", std::nullopt},
        {"5.", std::nullopt},
        {".", std::nullopt},
        {"", std::nullopt},
        {" 1.00", std::nullopt},
        {"1.00 ", std::nullopt},
        {"1,00", std::nullopt},
        {"1.0.0", std::nullopt},
        {"1..0", std::nullopt},
        {"abc", std::nullopt},
        {"1.a", std::nullopt},
        {"1.-5", std::nullopt},
        {"999999999999999999999", std::nullopt},
        {"999999999999999999999.99", std::nullopt},
        {"NaN", std::nullopt},
        {"inf", std::nullopt},
    };
    for (const AmountCase& c : cases) {
        EXPECT_EQ(ParseMajorUnits(c.text), c.expected) << '"' << c.text << '"';
    }
}

struct TimeCase {
    const char* text;
    std::optional<TimeMicros> expected;
};

TEST(ParseRfc3339, ReadsUtcOffsetsAndFractions) {
    const std::vector<TimeCase> cases{
        {"2026-11-29T08:30:00Z", k20261129T083000Z},
        {"2026-11-29T16:30:00+08:00", k20261129T083000Z},
        {"2026-11-29T03:00:00-05:30", k20261129T083000Z},
        {"2026-11-29T08:30:00+00:00", k20261129T083000Z},
        {"2026-11-29T08:30:00.5Z", k20261129T083000Z + 500'000},
        {"2026-11-29T08:30:00.123456Z", k20261129T083000Z + 123'456},
        {"2026-11-29T08:30:00.000001Z", k20261129T083000Z + 1},
        {"2026-11-29T16:30:00.250+08:00", k20261129T083000Z + 250'000},
        {"2024-02-29T12:00:00Z", k20240229T120000Z},
        {"1970-01-01T00:00:00Z", 0},
    };
    for (const TimeCase& c : cases) {
        EXPECT_EQ(ParseRfc3339(c.text), c.expected) << c.text;
    }
}

TEST(ParseRfc3339, RefusesImpossibleDatesAndTimesAndAMissingZone) {
    const std::vector<std::string> refused{
        "",
        "2026-11-29",
        "2026-11-29T08:30:00",       // No zone.
        "2026-11-29T08:30",          // No seconds, no zone.
        "2026-11-29T08:30:00+0800",  // Offset without a colon.
        "2026-11-29T08:30:00+08",
        "2026-11-29T08:30:00 Z",
        "2026-11-29T08:30:00Z ",
        "2026-11-29T08:30:00.Z",  // A point without digits.
        "2026-13-01T00:00:00Z",   // Month 13.
        "2026-00-10T00:00:00Z",   // Month 0.
        "2026-11-00T00:00:00Z",   // Day 0.
        "2026-11-31T00:00:00Z",   // November has 30 days.
        "2026-01-32T00:00:00Z",
        "2025-02-29T00:00:00Z",  // 2025 is not a leap year.
        "2100-02-29T00:00:00Z",  // Nor is 2100: a century not divisible by 400.
        "2026-11-29T24:00:00Z",
        "2026-11-29T08:60:00Z",
        "2026-11-29T08:30:60Z",
        "2026-11-29T08:30:00+24:00",
        "2026/11/29T08:30:00Z",
        "2026-11-29X08:30:00Z",
        "20261129T083000Z",
        "2026-1-29T08:30:00Z",
        "abcd-11-29T08:30:00Z",
    };
    for (const std::string& text : refused) {
        EXPECT_EQ(ParseRfc3339(text), std::nullopt) << text;
    }
}

TEST(ParseRfc3339, AcceptsFebruaryTwentyNinthInLeapYears) {
    EXPECT_TRUE(ParseRfc3339("2024-02-29T00:00:00Z").has_value());
    EXPECT_TRUE(ParseRfc3339("2000-02-29T00:00:00Z").has_value());  // Divisible by 400.
}

TEST(ParseShanghaiCompact, IsAsiaShanghaiLocalTimeEightHoursAheadOfUtc) {
    EXPECT_EQ(ParseShanghaiCompact("20240501103015"), k20240501T023015Z);
    EXPECT_EQ(ParseShanghaiCompact("20240501103015"), ParseRfc3339("2024-05-01T02:30:15Z"));
    // Midnight local is the previous day in UTC.
    EXPECT_EQ(ParseShanghaiCompact("20240501000000"), ParseRfc3339("2024-04-30T16:00:00Z"));
}

TEST(ParseShanghaiCompact, RefusesOtherShapesAndImpossibleDates) {
    for (const char* text :
         {"", "2024050110301", "202405011030150", "2024-05-01 10:30:15", "2024050110301a",
          "20240230103015", "20241301103015", "20240501243015", " 20240501103015"}) {
        EXPECT_EQ(ParseShanghaiCompact(text), std::nullopt) << text;
    }
}

TEST(ParseShanghaiDashed, IsAsiaShanghaiLocalTimeEightHoursAheadOfUtc) {
    EXPECT_EQ(ParseShanghaiDashed("2024-05-01 10:30:15"), k20240501T023015Z);
    EXPECT_EQ(ParseShanghaiDashed("2024-05-01 10:30:15"), ParseRfc3339("2024-05-01T02:30:15Z"));
    EXPECT_EQ(ParseShanghaiDashed("2024-05-01 10:30:15"), ParseShanghaiCompact("20240501103015"));
}

TEST(ParseShanghaiDashed, RefusesOtherShapesAndImpossibleDates) {
    for (const char* text : {"", "2024-05-01T10:30:15", "2024/05/01 10:30:15", "20240501103015",
                             "2024-05-01 10:30", "2024-05-01 10:30:15Z", "2024-02-30 10:30:15",
                             "2024-05-01  10:30:15", "2024-5-01 10:30:15"}) {
        EXPECT_EQ(ParseShanghaiDashed(text), std::nullopt) << text;
    }
}

TEST(FormatRfc3339, WritesUtcWithZAndAFractionOnlyWhenNotZero) {
    const struct {
        TimeMicros time;
        const char* text;
    } cases[] = {
        {0, "1970-01-01T00:00:00Z"},
        {1, "1970-01-01T00:00:00.000001Z"},
        {k20261129T083000Z, "2026-11-29T08:30:00Z"},
        {k20240501T023015Z, "2024-05-01T02:30:15Z"},
        {k20240229T120000Z, "2024-02-29T12:00:00Z"},
        {-1, "1969-12-31T23:59:59.999999Z"},
    };
    for (const auto& c : cases) {
        EXPECT_EQ(FormatRfc3339(c.time), c.text) << c.time;
    }
    const std::string with_fraction = FormatRfc3339(k20261129T083000Z + 500'000);
    EXPECT_EQ(with_fraction.rfind("2026-11-29T08:30:00.5", 0), 0u) << with_fraction;
    EXPECT_EQ(with_fraction.back(), 'Z');
}

TEST(FormatRfc3339, RoundTripsThroughParseRfc3339) {
    const std::vector<TimeMicros> times{
        0,
        1,
        k20261129T083000Z,
        k20261129T083000Z + 123'456,
        k20240229T120000Z,
        ParseRfc3339("1999-12-31T23:59:59.999999Z").value_or(-1),
        ParseRfc3339("2000-03-01T00:00:00Z").value_or(-1),
        ParseRfc3339("9999-12-31T23:59:59Z").value_or(-1),
    };
    for (const TimeMicros time : times) {
        ASSERT_GE(time, 0);
        const std::string text = FormatRfc3339(time);
        EXPECT_EQ(text.back(), 'Z') << text;
        EXPECT_EQ(ParseRfc3339(text), time) << text;
    }
    for (const char* text : {"2026-11-29T08:30:00Z", "2024-02-29T12:00:00Z",
                             "2000-01-01T00:00:00.000001Z", "2038-01-19T03:14:08Z"}) {
        const std::optional<TimeMicros> parsed = ParseRfc3339(text);
        ASSERT_TRUE(parsed.has_value()) << text;
        EXPECT_EQ(FormatRfc3339(*parsed), text);
    }
    // An offset is written back in UTC.
    EXPECT_EQ(FormatRfc3339(ParseRfc3339("2026-11-29T16:30:00+08:00").value_or(0)),
              "2026-11-29T08:30:00Z");
}

}  // namespace
}  // namespace payledger::projections
