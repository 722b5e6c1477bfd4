// Tests of ledger/integrity/checkpoint.hpp (docs/integrity.md#checkpoints): Ed25519 over the exact
// bytes, with RFC 8032's first test key; the expected signature and key id were computed with the
// openssl command line (`openssl pkeyutl -sign -rawin`) and Python's hashlib. A changed field, a
// signature by another key and malformed JSON are refused.

#include "ledger/integrity/checkpoint.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace payledger::ledger {
namespace {

constexpr const char* kPrivatePem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
    "-----END PRIVATE KEY-----\n";
constexpr const char* kPublicPem =
    "-----BEGIN PUBLIC KEY-----\n"
    "MCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n"
    "-----END PUBLIC KEY-----\n";
constexpr const char* kChain = "52a1166e94ca9adb160273f46db974041f412277e4e31387f551e596f91bc26a";
constexpr projections::TimeMicros kAt = 1'795'941'000'123'456;  // 2026-11-29T08:30:00.123456Z

TEST(CheckpointTest, SignsTheSpecifiedBytesWithEd25519) {
    EXPECT_EQ(
        CheckpointMessage(7, kChain, "2026-11-29T08:30:00.123456Z"),
        std::string("payledger-checkpoint\n7\n") + kChain + "\n2026-11-29T08:30:00.123456Z\n");
    const Ed25519Key key = Ed25519Key::PrivateFromPem(kPrivatePem);
    const Checkpoint checkpoint = key.Sign(7, *ParseChainHex(kChain), kAt);
    EXPECT_EQ(checkpoint.at, "2026-11-29T08:30:00.123456Z");
    EXPECT_EQ(checkpoint.key_id,
              "21fe31dfa154a261626bf854046fd2271b7bed4b6abe45aa58877ef47f9721b9");
    EXPECT_EQ(
        checkpoint.signature,
        "PQgkpMScrTM1EMTjP9P0tzwfpb5F6Y6AHUVothhlpAn7b0HLQ/osjdh2SPQNgleVRTqeL+n8jg0SSdvwLztHCw==");
    EXPECT_EQ(key.PublicPem(), kPublicPem);
}

TEST(CheckpointTest, TheOutsideAuditorVerifiesWithThePublicKeyAlone) {
    const Checkpoint checkpoint =
        Ed25519Key::PrivateFromPem(kPrivatePem).Sign(7, *ParseChainHex(kChain), kAt);
    const Ed25519Key auditor = Ed25519Key::PublicFromPem(kPublicPem);
    EXPECT_FALSE(auditor.has_private());
    const auto parsed = ParseCheckpointJson(CheckpointJson(checkpoint));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_TRUE(auditor.Verifies(*parsed));

    for (auto change : {+[](Checkpoint& c) { c.receipt_id += 1; },
                        +[](Checkpoint& c) { c.chain[0] = c.chain[0] == '5' ? '6' : '5'; },
                        +[](Checkpoint& c) { c.at[0] = '3'; },
                        +[](Checkpoint& c) { c.signature[3] = c.signature[3] == 'A' ? 'B' : 'A'; },
                        +[](Checkpoint& c) { c.key_id[0] = c.key_id[0] == '2' ? '3' : '2'; }}) {
        Checkpoint forged = *parsed;
        change(forged);
        EXPECT_FALSE(auditor.Verifies(forged)) << CheckpointJson(forged);
    }
}

TEST(CheckpointTest, AnotherKeysSignatureDoesNotVerify) {
    // A second key: RFC 8032's test 2 secret key.
    const Ed25519Key other = Ed25519Key::PrivateFromPem(
        "-----BEGIN PRIVATE KEY-----\n"
        "MC4CAQAwBQYDK2VwBCIEIEzNCJso/5banbbDRuwRTg9bijGfNaumJNqM9u1PuKb7\n"
        "-----END PRIVATE KEY-----\n");
    Checkpoint checkpoint = other.Sign(7, *ParseChainHex(kChain), kAt);
    const Ed25519Key auditor = Ed25519Key::PublicFromPem(kPublicPem);
    EXPECT_FALSE(auditor.Verifies(checkpoint));
    checkpoint.key_id = auditor.KeyId();  // Claiming the auditor's key changes nothing.
    EXPECT_FALSE(auditor.Verifies(checkpoint));
}

TEST(CheckpointTest, MalformedCheckpointsAndKeysAreRefused) {
    EXPECT_FALSE(ParseCheckpointJson("not json").has_value());
    EXPECT_FALSE(
        ParseCheckpointJson(R"({"receipt_id":"7","chain":"","at":"","key_id":"","signature":""})"));
    EXPECT_FALSE(ParseCheckpointJson(std::string(R"({"receipt_id":7,"chain":")") + "00" +
                                     R"(","at":"x","key_id":"k","signature":"s"})"));
    EXPECT_THROW((void)Ed25519Key::PrivateFromPem(kPublicPem), std::runtime_error);
    EXPECT_THROW((void)Ed25519Key::PublicFromPem("garbage"), std::runtime_error);
    // An RSA or EC key is not an Ed25519 key.
    EXPECT_THROW((void)Ed25519Key::PrivateFromPem(
                     "-----BEGIN PRIVATE KEY-----\n"
                     "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgJgjO7P/GkSAe3Rsx\n"
                     "pWrhHZ5YZre5GJCBs47csX1y3ouhRANCAAQ+vz8yAASdFDWwQRnuld40mAAVVwun\n"
                     "E5ijusQWYb9iMhtDajbRRP7LJs+VbgZ2vL3+NtZ/N3CZoJ3GrtcSPmcX\n"
                     "-----END PRIVATE KEY-----\n"),
                 std::runtime_error);
}

}  // namespace
}  // namespace payledger::ledger
