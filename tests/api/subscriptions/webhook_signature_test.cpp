// Tests of api/subscriptions/webhook_signature.hpp: the Standard Webhooks reference vectors
// give the exact header, several secrets give one signature each in order, and every
// malformed secret is refused with a message that holds none of it. The signatures are also
// checked by the reference JavaScript library (verify_signatures.mjs, ctest
// StandardWebhooksLibraryVerifiesOurSignatures).

#include "api/subscriptions/webhook_signature.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ledger/base/bytes.hpp"
#include "projections/assert.hpp"

namespace payledger::api {
namespace {

WebhookSecret WebhookSecretOf(const std::string& text) {
    Checked<WebhookSecret> secret = ParseWebhookSecret(text);
    EXPECT_TRUE(secret.ok()) << text;
    return *secret;
}

// From github.com/standard-webhooks/standard-webhooks, libraries/javascript/src/webhook.test.ts
// ("sign function works"; the same vector is in libraries/go/webhook_test.go,
// libraries/python/tests/test_webhooks.py and the other libraries' tests).
TEST(SignWebhook, MatchesTheStandardWebhooksReferenceVector) {
    EXPECT_EQ(SignWebhook({WebhookSecretOf("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")},
                          "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, R"({"test": 2432232314})"),
              "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
}

// From the same repository, libraries/rust/src/lib.rs (test_sign).
TEST(SignWebhook, MatchesTheStandardWebhooksRustLibraryVector) {
    EXPECT_EQ(SignWebhook({WebhookSecretOf("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")},
                          "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1649367553,
                          R"({"email":"test@example.com","username":"test_user"})"),
              "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
}

TEST(SignWebhook, ChangingAnySignedPartChangesTheSignature) {
    const std::vector<WebhookSecret> secret{
        WebhookSecretOf("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")};
    const std::string reference =
        SignWebhook(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, R"({"test": 2432232314})");
    EXPECT_NE(
        SignWebhook(secret, "msg_p5jXN8AQM9LWM0D4loKWxJeK", 1614265330, R"({"test": 2432232314})"),
        reference);
    EXPECT_NE(
        SignWebhook(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265331, R"({"test": 2432232314})"),
        reference);
    EXPECT_NE(
        SignWebhook(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, R"({"test":2432232314})"),
        reference);
}

TEST(SignWebhook, SignsWithEverySecretInOrderSpaceSeparated) {
    const WebhookSecret first = WebhookSecretOf("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
    const WebhookSecret second = WebhookSecretOf("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD");
    const WebhookSecret third =
        WebhookSecretOf("whsec_" + ledger::Base64Encode(std::string(64, '\x07')));
    const std::string id = "fulfilment:1-3";
    const std::string body = R"({"type":"ledger.events"})";
    const std::string one = SignWebhook({first}, id, 1700000000, body);
    const std::string two = SignWebhook({second}, id, 1700000000, body);
    const std::string three = SignWebhook({third}, id, 1700000000, body);
    EXPECT_EQ(SignWebhook({first, second, third}, id, 1700000000, body),
              one + " " + two + " " + three);
    EXPECT_EQ(SignWebhook({third, first}, id, 1700000000, body), three + " " + one);
    EXPECT_NE(one, two);
}

TEST(SignWebhook, NoSecretIsAnInvariantError) {
    EXPECT_THROW((void)SignWebhook({}, "a:1-1", 1, "{}"), InvariantError);
}

TEST(ParseWebhookSecret, AcceptsTwentyFourToSixtyFourBytes) {
    for (const std::size_t size :
         {std::size_t{24}, std::size_t{25}, std::size_t{32}, std::size_t{63}, std::size_t{64}}) {
        const std::string bytes(size, '\xa5');
        const Checked<WebhookSecret> secret =
            ParseWebhookSecret("whsec_" + ledger::Base64Encode(bytes));
        ASSERT_TRUE(secret.ok()) << size;
        EXPECT_EQ(secret->bytes(), bytes);
    }
}

TEST(ParseWebhookSecret, RefusesMalformedSecretsWithoutRepeatingThem) {
    const std::string valid_body = ledger::Base64Encode(std::string(32, 'k'));
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"no prefix", valid_body},
        {"another prefix", "whsk_" + valid_body},
        {"prefix in upper case", "WHSEC_" + valid_body},
        {"prefix only", "whsec_"},
        {"empty", ""},
        {"23 bytes", "whsec_" + ledger::Base64Encode(std::string(23, 'k'))},
        {"65 bytes", "whsec_" + ledger::Base64Encode(std::string(65, 'k'))},
        {"not base64", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa!w"},
        {"URL-safe alphabet", "whsec_" + std::string(31, 'A') + "-"},
        {"length not a multiple of 4", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS"},
        {"padding inside", "whsec_MfKQ9r8GKYqrTwjU=D8ILPZIo2LaLaSw"},
        {"whitespace", "whsec_MfKQ9r8GKYqrTwjUPD8I LPZIo2LaLaSw"},
        {"trailing newline", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"},
    };
    for (const auto& [what, text] : cases) {
        const Checked<WebhookSecret> secret = ParseWebhookSecret(text);
        ASSERT_FALSE(secret.ok()) << what;
        EXPECT_EQ(secret.refusal().outcome, projections::Outcome::kMalformed) << what;
        EXPECT_EQ(secret.refusal().message,
                  "must be \"whsec_\" followed by standard base64 of 24 to 64 bytes")
            << what;
    }
}

}  // namespace
}  // namespace payledger::api
