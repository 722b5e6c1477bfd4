// Tests of api/subscriptions/subscription_config.hpp ParseSubscriptions: a full entry and a
// minimal one (the defaults) are read field by field, and a table of invalid entries, each
// one field away from a valid one, must throw ConfigError naming exactly that field, with no
// secret and no user info of a URL in the message.

#include "api/subscriptions/subscription_config.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/config.hpp"
#include "ledger/base/bytes.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::EventType;

const std::string kSubscriptionSecretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const std::string kSubscriptionSecretB = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

json MinimalSubscription(const std::string& name = "fulfilment") {
    return {{"name", name},
            {"url", "http://10.0.0.5:9000/hooks/payledger"},
            {"secret", kSubscriptionSecretA}};
}

// The what() of the ConfigError, or a marker when none is thrown.
std::string SubscriptionsErrorOf(const json& array) {
    try {
        (void)ParseSubscriptions(array);
    } catch (const ConfigError& error) {
        return error.what();
    }
    return "<no ConfigError thrown>";
}

TEST(ParseSubscriptions, ReadsEveryFieldOfAFullEntry) {
    const json array = json::array({MinimalSubscription("other"),
                                    {{"name", "fulfilment"},
                                     {"url", "https://hooks.example.com/payledger?team=2"},
                                     {"secret", {kSubscriptionSecretA, kSubscriptionSecretB}},
                                     {"event_types", {"PAYMENT_SUCCEEDED", "REFUND_SUCCEEDED"}},
                                     {"accounts", {"shop-1", "shop.2"}},
                                     {"start", "now"},
                                     {"batch_max", 1000},
                                     {"timeout_seconds", 60}}});
    const std::vector<SubscriptionConfig> subscriptions = ParseSubscriptions(array);
    ASSERT_EQ(subscriptions.size(), 2U);
    const SubscriptionConfig& full = subscriptions[1];
    EXPECT_EQ(full.name, "fulfilment");
    EXPECT_EQ(full.url, "https://hooks.example.com/payledger?team=2");
    ASSERT_EQ(full.secrets.size(), 2U);
    EXPECT_EQ(ledger::Base64Encode(full.secrets[0].bytes()), kSubscriptionSecretA.substr(6));
    EXPECT_EQ(ledger::Base64Encode(full.secrets[1].bytes()), kSubscriptionSecretB.substr(6));
    EXPECT_EQ(full.event_types,
              (std::set<EventType>{EventType::kPaymentSucceeded, EventType::kRefundSucceeded}));
    EXPECT_EQ(full.accounts, (std::set<std::string>{"shop-1", "shop.2"}));
    EXPECT_EQ(full.start, ledger::SubscriptionStart::kNow);
    EXPECT_EQ(full.batch_max, 1000);
    EXPECT_EQ(full.timeout, std::chrono::seconds{60});
}

TEST(ParseSubscriptions, AMinimalEntryGetsTheDefaults) {
    const std::vector<SubscriptionConfig> subscriptions =
        ParseSubscriptions(json::array({MinimalSubscription()}));
    ASSERT_EQ(subscriptions.size(), 1U);
    const SubscriptionConfig& s = subscriptions[0];
    EXPECT_EQ(s.name, "fulfilment");
    EXPECT_EQ(s.url, "http://10.0.0.5:9000/hooks/payledger");
    ASSERT_EQ(s.secrets.size(), 1U);
    EXPECT_EQ(s.event_types,
              (std::set<EventType>{EventType::kOrderCreated, EventType::kPaymentSucceeded,
                                   EventType::kPaymentClosed, EventType::kRefundSucceeded}));
    EXPECT_EQ(s.accounts, std::nullopt);
    EXPECT_EQ(s.start, ledger::SubscriptionStart::kBeginning);
    EXPECT_EQ(s.batch_max, 100);
    EXPECT_EQ(s.timeout, std::chrono::seconds{10});
    EXPECT_TRUE(ParseSubscriptions(json::array()).empty());
}

TEST(ParseSubscriptions, AcceptsTheBoundsAndEveryNameCharacter) {
    json entry = MinimalSubscription(std::string(64, 'n'));
    entry["batch_max"] = 1;
    entry["timeout_seconds"] = 1;
    entry["url"] = "https://user:password@[::1]:8443";
    EXPECT_EQ(ParseSubscriptions(json::array({entry, MinimalSubscription("Az09_-|*.")})).size(),
              2U);
}

struct InvalidSubscription {
    std::string what{};
    std::string key{};  // Set to `value` in a valid entry; erased when value is null and erase.
    json value{};
    bool erase = false;
    std::string expected{};  // The whole message.
};

TEST(ParseSubscriptions, EveryRefusalNamesItsField) {
    const std::string base64_of_23 = ledger::Base64Encode(std::string(23, 's'));
    const std::string base64_of_65 = ledger::Base64Encode(std::string(65, 's'));
    const std::string secret_rule =
        "must be \"whsec_\" followed by standard base64 of 24 to 64 bytes";
    const std::string key_rule = "must be 1-64 characters of A-Z a-z 0-9 _ - | * .";
    const std::string count_1000 = "must be an integer from 1 to 1000";
    const std::string count_60 = "must be an integer from 1 to 60";
    const std::vector<InvalidSubscription> cases = {
        {"name missing", "name", nullptr, true, "subscriptions[1].name: missing"},
        {"name empty", "name", "", false, "subscriptions[1].name: " + key_rule},
        {"name too long", "name", std::string(65, 'n'), false,
         "subscriptions[1].name: " + key_rule},
        {"name with a space", "name", "a b", false, "subscriptions[1].name: " + key_rule},
        {"name with a colon", "name", "a:b", false, "subscriptions[1].name: " + key_rule},
        {"name not a string", "name", 7, false, "subscriptions[1].name: " + key_rule},
        {"url missing", "url", nullptr, true, "subscriptions[1].url: missing"},
        {"url not a string", "url", 80, false, "subscriptions[1].url: must be a string"},
        {"url relative", "url", "/hooks", false,
         "subscriptions[1].url: must be an absolute http:// or https:// URL"},
        {"url of another scheme", "url", "ftp://host/x", false,
         "subscriptions[1].url: must be an http:// or https:// URL"},
        {"url without a host", "url", "http:///hooks", false,
         "subscriptions[1].url: must name a host name or an IP address"},
        {"url with port 0", "url", "http://host:0/", false,
         "subscriptions[1].url: must have a port from 1 to 65535"},
        {"url with port 65536", "url", "http://host:65536/", false,
         "subscriptions[1].url: must have a port from 1 to 65535"},
        {"url with an empty port", "url", "http://host:/", false,
         "subscriptions[1].url: must have a port from 1 to 65535"},
        {"url with a fragment", "url", "http://host/a#b", false,
         "subscriptions[1].url: must not have a fragment (#...)"},
        {"url with spaces", "url", "http://host/a b", false,
         "subscriptions[1].url: must be an absolute http:// or https:// URL"},
        {"secret missing", "secret", nullptr, true, "subscriptions[1].secret: missing"},
        {"secret not a string", "secret", 5, false, "subscriptions[1].secret: must be a string"},
        {"secret without prefix", "secret", kSubscriptionSecretA.substr(6), false,
         "subscriptions[1].secret: " + secret_rule},
        {"secret of bad base64", "secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa!w", false,
         "subscriptions[1].secret: " + secret_rule},
        {"secret of 23 bytes", "secret", "whsec_" + base64_of_23, false,
         "subscriptions[1].secret: " + secret_rule},
        {"secret of 65 bytes", "secret", "whsec_" + base64_of_65, false,
         "subscriptions[1].secret: " + secret_rule},
        {"secrets empty", "secret", json::array(), false,
         "subscriptions[1].secret: must be a string or an array of 1 to 16 strings"},
        {"secrets too many", "secret", json(std::vector<std::string>(17, kSubscriptionSecretA)),
         false, "subscriptions[1].secret: must be a string or an array of 1 to 16 strings"},
        {"second secret bad",
         "secret",
         {kSubscriptionSecretA, "whsec_" + base64_of_65},
         false,
         "subscriptions[1].secret[1]: " + secret_rule},
        {"second secret not a string",
         "secret",
         {kSubscriptionSecretA, nullptr},
         false,
         "subscriptions[1].secret[1]: must be a string"},
        {"event_types not an array", "event_types", "PAYMENT_SUCCEEDED", false,
         "subscriptions[1].event_types: must be a non-empty array of event types"},
        {"event_types empty", "event_types", json::array(), false,
         "subscriptions[1].event_types: must be a non-empty array of event types"},
        {"event type unknown",
         "event_types",
         {"PAYMENT_SUCCEEDED", "PAYMENT_FAILED"},
         false,
         "subscriptions[1].event_types[1]: must be ORDER_CREATED, PAYMENT_SUCCEEDED, "
         "PAYMENT_CLOSED or REFUND_SUCCEEDED"},
        {"event type in lower case",
         "event_types",
         {"payment_succeeded"},
         false,
         "subscriptions[1].event_types[0]: must be ORDER_CREATED, PAYMENT_SUCCEEDED, "
         "PAYMENT_CLOSED or REFUND_SUCCEEDED"},
        {"event type repeated",
         "event_types",
         {"ORDER_CREATED", "ORDER_CREATED"},
         false,
         "subscriptions[1].event_types[1]: repeats an event type"},
        {"accounts not an array", "accounts", "shop-1", false,
         "subscriptions[1].accounts: must be a non-empty array of account ids"},
        {"accounts empty", "accounts", json::array(), false,
         "subscriptions[1].accounts: must be a non-empty array of account ids"},
        {"account invalid",
         "accounts",
         {"shop-1", "shop 2"},
         false,
         "subscriptions[1].accounts[1]: " + key_rule},
        {"account not a string",
         "accounts",
         {1},
         false,
         "subscriptions[1].accounts[0]: " + key_rule},
        {"account repeated",
         "accounts",
         {"shop-1", "shop-1"},
         false,
         "subscriptions[1].accounts[1]: repeats an account id"},
        {"start unknown", "start", "end", false,
         "subscriptions[1].start: must be \"beginning\" or \"now\""},
        {"start not a string", "start", 0, false,
         "subscriptions[1].start: must be \"beginning\" or \"now\""},
        {"batch_max 0", "batch_max", 0, false, "subscriptions[1].batch_max: " + count_1000},
        {"batch_max 1001", "batch_max", 1001, false, "subscriptions[1].batch_max: " + count_1000},
        {"batch_max negative", "batch_max", -1, false, "subscriptions[1].batch_max: " + count_1000},
        {"batch_max fraction", "batch_max", 10.5, false,
         "subscriptions[1].batch_max: " + count_1000},
        {"batch_max huge", "batch_max", json(18446744073709551615ULL), false,
         "subscriptions[1].batch_max: " + count_1000},
        {"batch_max text", "batch_max", "100", false, "subscriptions[1].batch_max: " + count_1000},
        {"timeout_seconds 0", "timeout_seconds", 0, false,
         "subscriptions[1].timeout_seconds: " + count_60},
        {"timeout_seconds 61", "timeout_seconds", 61, false,
         "subscriptions[1].timeout_seconds: " + count_60},
        {"timeout_seconds fraction", "timeout_seconds", 0.5, false,
         "subscriptions[1].timeout_seconds: " + count_60},
        {"unknown field",
         "event_type",
         {"ORDER_CREATED"},
         false,
         "subscriptions[1].event_type: unknown field"},
    };
    for (const InvalidSubscription& c : cases) {
        json entry = MinimalSubscription("second");
        if (c.erase) {
            entry.erase(c.key);
        } else {
            entry[c.key] = c.value;
        }
        const std::string message =
            SubscriptionsErrorOf(json::array({MinimalSubscription(), entry}));
        EXPECT_EQ(message, c.expected) << c.what;
        for (const std::string& secret_part :
             {kSubscriptionSecretA.substr(6, 8), base64_of_23.substr(0, 8),
              base64_of_65.substr(0, 8)}) {
            EXPECT_EQ(message.find(secret_part), std::string::npos) << c.what;
        }
    }
}

TEST(ParseSubscriptions, RefusesTheShapeOfTheArrayAndRepeatedNames) {
    EXPECT_EQ(SubscriptionsErrorOf(json::object()), "subscriptions: must be an array");
    EXPECT_EQ(SubscriptionsErrorOf(MinimalSubscription()), "subscriptions: must be an array");
    EXPECT_EQ(SubscriptionsErrorOf(json::array({MinimalSubscription(), "fulfilment"})),
              "subscriptions[1]: must be an object");
    EXPECT_EQ(SubscriptionsErrorOf(json::array(
                  {MinimalSubscription("a"), MinimalSubscription("b"), MinimalSubscription("a")})),
              "subscriptions[2].name: \"a\" is the name of an earlier subscription");
}

TEST(ParseSubscriptions, AUrlRefusalNeverShowsItsUserInfo) {
    json entry = MinimalSubscription();
    entry["url"] = "ftp://alice:s3cret-pass@host/x";
    const std::string message = SubscriptionsErrorOf(json::array({entry}));
    EXPECT_EQ(message, "subscriptions[0].url: must be an http:// or https:// URL");
    EXPECT_EQ(message.find("s3cret"), std::string::npos);
}

}  // namespace
}  // namespace payledger::api
