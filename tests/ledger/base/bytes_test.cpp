// Tests of ledger/base/bytes.hpp, the one home of hex, SHA-256, base64 and the UTF-8 check: hex
// both ways; SHA-256 against the FIPS 180-2 examples ("abc", the two-block message, a million
// "a"s), one-shot and piece by piece; base64 against RFC 4648's examples and a table of
// refusals; UTF-8 against tables of well-formed and ill-formed byte sequences (overlong forms,
// surrogates, truncations, stray continuation bytes, code points past U+10FFFF). Also
// ledger/base/clock.hpp's NowMicros against the system clock.

#include "ledger/base/bytes.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ledger/base/clock.hpp"

namespace payledger::ledger {
namespace {

constexpr const char* kSha256OfEmpty =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr const char* kSha256OfAbc =
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* kTwoBlocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
constexpr const char* kSha256OfTwoBlocks =
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
constexpr const char* kSha256OfMillionA =
    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

TEST(Hex, WritesTwoDigitsPerByteInEitherCase) {
    const std::string bytes("\x00\x01\x7f\x80\xab\xff", 6);
    EXPECT_EQ(HexLower(bytes), "00017f80abff");
    EXPECT_EQ(HexUpper(bytes), "00017F80ABFF");
    EXPECT_EQ(HexLower(""), "");
    std::string out = "key=";
    AppendHexLower("\x12\xef", out);
    EXPECT_EQ(out, "key=12ef");
}

TEST(Hex, ParsesLowerCaseHexBackAndRefusesAnythingElse) {
    EXPECT_EQ(ParseHexLower("00017f80abff"), std::string("\x00\x01\x7f\x80\xab\xff", 6));
    EXPECT_EQ(ParseHexLower(""), std::string());
    for (const char* text : {"0", "abc", "AB", "0g", " 00", "00 ", "0x00", "-1"}) {
        EXPECT_EQ(ParseHexLower(text), std::nullopt) << text;
    }
    std::string all_bytes;
    for (int byte = 0; byte < 256; ++byte) all_bytes += static_cast<char>(byte);
    EXPECT_EQ(ParseHexLower(HexLower(all_bytes)), all_bytes);
}

TEST(Sha256, MatchesThePublishedExamples) {
    EXPECT_EQ(Sha256Hex(""), kSha256OfEmpty);
    EXPECT_EQ(Sha256Hex("abc"), kSha256OfAbc);
    EXPECT_EQ(Sha256Hex(kTwoBlocks), kSha256OfTwoBlocks);
    EXPECT_EQ(Sha256Hex(std::string(1'000'000, 'a')), kSha256OfMillionA);
    const Sha256Digest digest = Sha256("abc");
    EXPECT_EQ(HexLower(digest), kSha256OfAbc);
    EXPECT_EQ(HexLower(DigestBytes(digest)), kSha256OfAbc);
    const Sha256HexDigits digits = HexDigits(digest);
    EXPECT_EQ(std::string(digits.data(), digits.size()), kSha256OfAbc);
    EXPECT_EQ(static_cast<unsigned>(digest[0]), 0xbau);
    EXPECT_EQ(static_cast<unsigned>(digest[31]), 0xadu);
}

TEST(Sha256Stream, PiecesGiveTheDigestOfTheWholeAndCopiesContinue) {
    Sha256Stream empty;
    EXPECT_EQ(empty.HexDigest(), kSha256OfEmpty);
    Sha256Stream pieces;
    const std::string text = kTwoBlocks;
    for (std::size_t at = 0; at < text.size(); at += 5) pieces.Update(text.substr(at, 5));
    EXPECT_EQ(pieces.HexDigest(), kSha256OfTwoBlocks);
    // A copy taken after "ab" continues from there; the original goes on alone.
    Sha256Stream original;
    original.Update("ab");
    Sha256Stream copy;
    copy.CopyFrom(original);
    copy.Update("c");
    original.Update("cdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq");
    EXPECT_EQ(copy.HexDigest(), kSha256OfAbc);
    EXPECT_EQ(original.HexDigest(), kSha256OfTwoBlocks);
}

TEST(Base64, EncodesRfc4648sExamples) {
    const std::vector<std::pair<std::string, std::string>> examples = {{"", ""},
                                                                       {"f", "Zg=="},
                                                                       {"fo", "Zm8="},
                                                                       {"foo", "Zm9v"},
                                                                       {"foob", "Zm9vYg=="},
                                                                       {"fooba", "Zm9vYmE="},
                                                                       {"foobar", "Zm9vYmFy"},
                                                                       {"\xfb\xff\xbf", "+/+/"}};
    for (const auto& [bytes, text] : examples) {
        EXPECT_EQ(Base64Encode(bytes), text) << bytes;
        EXPECT_EQ(Base64Decode(text), bytes) << text;
    }
    std::string all_bytes;
    for (int byte = 0; byte < 256; ++byte) all_bytes += static_cast<char>(byte);
    EXPECT_EQ(Base64Decode(Base64Encode(all_bytes)), all_bytes);
}

TEST(Base64, DecodesOnlyStrictBase64) {
    for (const char* text : {"Zg=", "Zg", "Z===", "====", "Zm9v\n", " Zm9v", "Zm9v ", "Zm=v",
                             "Zg==Zg==", "Zm9v====", "-_-_", "Zm9v!", "WECHATPAY/SIGNTEST/9B1A2C3D",
                             "WECHATPAY/SIGNTEST/9B1A2C3D4E5F"}) {
        EXPECT_FALSE(Base64Decode(text).has_value()) << text;
    }
    // Bits that no byte uses must be zero: each byte string has one base64 text.
    for (const char* text : {"Zh==", "Zv==", "Zm9=", "Zm/="}) {
        EXPECT_FALSE(Base64Decode(text).has_value()) << text;
    }
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

TEST(IsValidUtf8, TakesChineseTextAndRefusesTheCommonBreaks) {
    EXPECT_TRUE(IsValidUtf8("交易 abc"));
    EXPECT_FALSE(IsValidUtf8("\xff"));
    EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // Overlong "/".
    EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // A surrogate.
    EXPECT_FALSE(IsValidUtf8("\xe4\xba"));          // Cut short.
    EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // Past U+10FFFF.
}

TEST(NowMicros, IsTheSystemClockInMicroseconds) {
    const auto micros = [] {
        return std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
    };
    const std::int64_t before = micros();
    const projections::TimeMicros now = NowMicros();
    const std::int64_t after = micros();
    EXPECT_LE(before, now);
    EXPECT_LE(now, after);
    EXPECT_GT(now, 1'700'000'000'000'000);  // After November 2023: microseconds, not seconds.
}

}  // namespace
}  // namespace payledger::ledger
