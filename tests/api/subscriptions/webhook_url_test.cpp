// Tests of api/subscriptions/webhook_url.hpp and ParseRetryAfterSeconds: what a URL becomes
// for one POST (host, port, Host header, target, Basic credentials), URLs shown without
// their user info, and Retry-After read as delta-seconds only. No network.

#include "api/subscriptions/webhook_url.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/subscriptions/webhook_client.hpp"

namespace payledger::api {
namespace {

WebhookUrl ParsedWebhookUrl(const std::string& text) {
    Checked<WebhookUrl> url = ParseWebhookUrl(text);
    EXPECT_TRUE(url.ok()) << text;
    return url.ok() ? *url : WebhookUrl{};
}

TEST(ParseWebhookUrl, SplitsWhatOnePostNeeds) {
    const WebhookUrl plain = ParsedWebhookUrl("http://10.0.0.5:9000/hooks/payledger?team=2");
    EXPECT_FALSE(plain.tls);
    EXPECT_EQ(plain.host, "10.0.0.5");
    EXPECT_TRUE(plain.host_is_address);
    EXPECT_EQ(plain.port, 9000);
    EXPECT_EQ(plain.host_header, "10.0.0.5:9000");
    EXPECT_EQ(plain.target, "/hooks/payledger?team=2");
    EXPECT_EQ(plain.basic_credentials, std::nullopt);

    const WebhookUrl named = ParsedWebhookUrl("HTTPS://Hooks.Example.com");
    EXPECT_TRUE(named.tls);
    EXPECT_EQ(named.host, "Hooks.Example.com");
    EXPECT_FALSE(named.host_is_address);
    EXPECT_EQ(named.port, 443);
    EXPECT_EQ(named.host_header, "Hooks.Example.com");
    EXPECT_EQ(named.target, "/");

    const WebhookUrl v6 = ParsedWebhookUrl("https://alice:p%40ss@[::1]:8443?x=1");
    EXPECT_EQ(v6.host, "::1");
    EXPECT_TRUE(v6.host_is_address);
    EXPECT_EQ(v6.port, 8443);
    EXPECT_EQ(v6.host_header, "[::1]:8443");
    EXPECT_EQ(v6.target, "/?x=1");
    EXPECT_EQ(v6.basic_credentials, "alice:p@ss");

    EXPECT_EQ(ParsedWebhookUrl("http://h/").port, 80);
    EXPECT_EQ(ParsedWebhookUrl("http://h:65535/").port, 65535);
    EXPECT_EQ(ParsedWebhookUrl("http://h/a%20b").target, "/a%20b");  // Sent as written.
}

TEST(ParseWebhookUrl, RefusesWhatCannotBePosted) {
    for (const std::string text :
         {"", "hooks.example.com/x", "/x", "mailto:a@b", "ftp://h/", "ws://h/", "http://",
          "http:///x", "http://h:0/", "http://h:99999/", "http://h#frag", "http://[v7.x]/",
          "http://h/a b"}) {
        EXPECT_FALSE(ParseWebhookUrl(text).ok()) << text;
    }
}

TEST(UrlWithoutUserInfo, DropsUserAndPasswordOnly) {
    EXPECT_EQ(UrlWithoutUserInfo("https://alice:secret@hooks.example.com:8443/p?q=1"),
              "https://hooks.example.com:8443/p?q=1");
    EXPECT_EQ(UrlWithoutUserInfo("http://alice@h/"), "http://h/");
    EXPECT_EQ(UrlWithoutUserInfo("http://:secret@h/"), "http://h/");
    EXPECT_EQ(UrlWithoutUserInfo("http://h/x"), "http://h/x");
    EXPECT_EQ(UrlWithoutUserInfo("not a url with secret@"), "(not a URL)");
}

TEST(ParseRetryAfterSeconds, DeltaSecondsOnly) {
    EXPECT_EQ(ParseRetryAfterSeconds("7"), 7);
    EXPECT_EQ(ParseRetryAfterSeconds("0"), 0);
    EXPECT_EQ(ParseRetryAfterSeconds(" 120\t"), 120);
    EXPECT_EQ(ParseRetryAfterSeconds("99999999999"), 99999999999);
    for (const std::string text : {"", " ", "-1", "+5", "1.5", "5s", "1 2",
                                   "Wed, 21 Oct 2015 07:28:00 GMT", "99999999999999999999"}) {
        EXPECT_EQ(ParseRetryAfterSeconds(text), std::nullopt) << text;
    }
}

}  // namespace
}  // namespace payledger::api
