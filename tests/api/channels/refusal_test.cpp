// The checks every write path shares (one way to say no): the one integer parser,
// the key, currency and amount rules, the signature window, and the orders channel, the
// fifth channel, which refuses through them like the others. Unit: no database.
#include "api/channels/refusal.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "api/channels/json_input.hpp"
#include "api/channels/orders_channel.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using projections::Outcome;

constexpr std::int64_t kMicros = 1'000'000;

TEST(ParseDigits, AcceptsPlainDigitsUpToTheMaximumAndNothingElse) {
    const std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
    struct Case {
        const char* text;
        std::int64_t max;
        std::optional<std::int64_t> expected;
    };
    for (const Case& c : std::initializer_list<Case>{
             {"0", 10, 0},
             {"007", 10, 7},
             {"10", 10, 10},
             {"11", 10, std::nullopt},
             {"9223372036854775807", int64_max, int64_max},
             {"9223372036854775808", int64_max, std::nullopt},
             {"99999999999999999999", int64_max, std::nullopt},
             {"", 10, std::nullopt},
             {"-1", 10, std::nullopt},
             {"+1", 10, std::nullopt},
             {" 1", 10, std::nullopt},
             {"1 ", 10, std::nullopt},
             {"1.0", 10, std::nullopt},
             {"1e1", 10, std::nullopt},
             {"0x1", 100, std::nullopt},
         }) {
        EXPECT_EQ(projections::ParseDigits(c.text, c.max), c.expected) << '"' << c.text << '"';
    }
}

TEST(SharedChecks, SayTheRuleInTheirMessage) {
    const Checked<std::string> key = RequireKey("a b", "account_id");
    ASSERT_FALSE(key);
    EXPECT_EQ(key.refusal().outcome, Outcome::kMalformed);
    EXPECT_EQ(key.refusal().message,
              std::string("account_id must be ") + projections::kKeyRuleText);
    EXPECT_EQ(*RequireKey("ORD-1.a|b*_", "out_trade_no"), "ORD-1.a|b*_");

    EXPECT_EQ(*RequireCurrency("CNY", "currency"), "CNY");
    for (const char* bad : {"cny", "CN", "CNYY", ""}) {
        const Checked<std::string> currency = RequireCurrency(bad, "fee_type");
        ASSERT_FALSE(currency) << bad;
        EXPECT_EQ(currency.refusal().message, "fee_type must be an upper-case ISO 4217 code");
    }

    const nlohmann::json body = nlohmann::json::parse(
        R"({"a": 1999, "b": 1999.0, "c": "1999", "d": 0, "e": 10000000000001})");
    EXPECT_EQ(*RequireJsonAmount(body, "a"), 1999);
    for (const char* field : {"b", "c", "d", "e", "missing"}) {
        const Checked<std::int64_t> amount = RequireJsonAmount(body, field);
        ASSERT_FALSE(amount) << field;
        EXPECT_EQ(amount.refusal().message,
                  std::string(field) + " must be a JSON integer of minor units, 1 to 10^13");
    }
}

TEST(SharedChecks, SignedAtIsUnixSecondsWithin300sEitherWay) {
    const std::int64_t now = 1'700'000'000;
    EXPECT_EQ(*RequireSignedAt("1700000000", now * kMicros, "t"), now);
    EXPECT_TRUE(RequireSignedAt("1699999700", now * kMicros, "t"));
    EXPECT_TRUE(RequireSignedAt("1700000300", now * kMicros, "t"));
    for (const char* stale : {"1699999699", "1700000301", "0"}) {
        const Checked<std::int64_t> refused = RequireSignedAt(stale, now * kMicros, "X-Time");
        ASSERT_FALSE(refused) << stale;
        EXPECT_EQ(refused.refusal().outcome, Outcome::kBadSignature);
        EXPECT_EQ(refused.refusal().message, "X-Time is outside the 300 s window");
    }
    for (const char* junk : {"", "-1700000000", "1700000000.5", "1e9", "9999999999999"}) {
        const Checked<std::int64_t> refused = RequireSignedAt(junk, now * kMicros, "X-Time");
        ASSERT_FALSE(refused) << junk;
        EXPECT_EQ(refused.refusal().outcome, Outcome::kBadSignature);
    }
}

Incoming OrderRequest(const std::string& body) {
    Incoming incoming{.peer = "10.0.0.8:4000", .received_at = 1'700'000'000 * kMicros};
    incoming.request = Request{http::verb::post, "/v1/orders", 11};
    incoming.request.set(http::field::content_type, "application/json");
    incoming.request.body() = body;
    incoming.request.prepare_payload();
    return incoming;
}

TEST(OrdersChannel, ValidOrderIsAnOrderCreatedEventAndTakesTheBody) {
    const std::string body =
        R"({"out_trade_no":"ORD-7","account_id":"shop-1","amount":1999,"currency":"CNY","x":1})";
    Incoming incoming = OrderRequest(body);
    const ledger::Delivery delivery = OrdersChannel{}.Verify(incoming);
    ASSERT_EQ(delivery.outcome, Outcome::kAppended) << delivery.message;
    ASSERT_TRUE(delivery.event.has_value());
    EXPECT_EQ(delivery.event->event_type, projections::EventType::kOrderCreated);
    EXPECT_EQ(delivery.event->source, projections::Source::kApi);
    EXPECT_EQ(delivery.event->out_trade_no, "ORD-7");
    EXPECT_EQ(delivery.event->account_id, "shop-1");
    EXPECT_EQ(delivery.event->amount, 1999);
    EXPECT_EQ(delivery.event->currency, "CNY");
    EXPECT_EQ(delivery.event->occurred_at, incoming.received_at);
    EXPECT_EQ(delivery.receipt.body, body);
    EXPECT_TRUE(incoming.request.body().empty()) << "the body is moved, not copied";
    EXPECT_EQ(delivery.receipt.out_trade_no, "ORD-7");
    EXPECT_TRUE(delivery.receipt.signature_verified) << "token-authenticated: never limited";
}

TEST(OrdersChannel, EachBrokenRuleIsMalformedWithItsMessageAndKeepsTheReceipt) {
    struct Case {
        const char* body;
        const char* message;
        bool claims_order;
    };
    const std::string key_rule = projections::kKeyRuleText;
    for (const Case& c : std::initializer_list<Case>{
             {"[1]", "body is not a JSON object", false},
             {R"({"out_trade_no":"A","out_trade_no":"A"})", "body is not a JSON object", false},
             {R"({"account_id":"s","amount":1,"currency":"CNY"})", "out_trade_no must be ", false},
             {R"({"out_trade_no":"A","account_id":"s s","amount":1,"currency":"CNY"})",
              "account_id must be ", true},
             {R"({"out_trade_no":"A","account_id":"s","amount":1.0,"currency":"CNY"})",
              "amount must be a JSON integer of minor units, 1 to 10^13", true},
             {R"({"out_trade_no":"A","account_id":"s","amount":1,"currency":"cny"})",
              "currency must be an upper-case ISO 4217 code", true},
         }) {
        Incoming incoming = OrderRequest(c.body);
        const ledger::Delivery delivery = OrdersChannel{}.Verify(incoming);
        EXPECT_EQ(delivery.outcome, Outcome::kMalformed) << c.body;
        EXPECT_FALSE(delivery.event.has_value()) << c.body;
        EXPECT_EQ(delivery.message.rfind(c.message, 0), 0u) << c.body << ": " << delivery.message;
        EXPECT_EQ(delivery.receipt.body, c.body);
        EXPECT_EQ(delivery.receipt.out_trade_no.has_value(), c.claims_order) << c.body;
    }
}

TEST(OrdersChannel, AnswersTheOrderOnSuccessAndTheErrorBodyOtherwise) {
    const OrdersChannel channel;
    const projections::OrderRow order{
        .out_trade_no = "ORD-7", .account_id = "shop-1", .amount = 1999, .currency = "CNY"};
    EXPECT_EQ(channel.Answer({.outcome = Outcome::kAppended, .seq = 3, .order = order}).result(),
              http::status::created);
    EXPECT_EQ(channel.Answer({.outcome = Outcome::kDuplicate, .seq = 3, .order = order}).result(),
              http::status::ok);
    const Response conflict = channel.Answer({.outcome = Outcome::kConflict, .seq = 3});
    EXPECT_EQ(conflict.result(), http::status::conflict);
    const nlohmann::json error = nlohmann::json::parse(conflict.body());
    EXPECT_EQ(error["outcome"], "conflict");
    EXPECT_EQ(error["seq"], 3);
    EXPECT_EQ(channel
                  .Answer({.outcome = Outcome::kUnavailable,
                           .failure = ledger::FailureKind::kInvariantBroken})
                  .result(),
              http::status::internal_server_error);
}

// The channel the merchant's order will be paid through and its expiry (docs/query.md): kept in
// the ORDER_CREATED's data, the expiry in one canonical form; WeChat's order-number rule
// enforced only where WeChat will be asked; invalid values refused with their rule.
TEST(OrdersChannel, ChannelAndExpiryAreKeptInTheEventsData) {
    Incoming incoming = OrderRequest(
        R"({"out_trade_no":"ORD.8","account_id":"shop-1","amount":1999,"currency":"CNY",)"
        R"("channel":"alipay","expires_at":"2026-12-06T18:30:00+08:00"})");
    const ledger::Delivery delivery = OrdersChannel{}.Verify(incoming);
    ASSERT_EQ(delivery.outcome, Outcome::kAppended) << delivery.message;
    EXPECT_EQ(nlohmann::json::parse(delivery.event->data),
              (nlohmann::json{{"channel", "alipay"}, {"expires_at", "2026-12-06T10:30:00Z"}}));
    // No channel, no expiry: nothing kept, as before.
    Incoming plain =
        OrderRequest(R"({"out_trade_no":"ORD-9","account_id":"s","amount":1,"currency":"CNY"})");
    EXPECT_EQ(OrdersChannel{}.Verify(plain).event->data, "{}");
    // 32 characters without '.' is a number WeChat can be asked about.
    Incoming wechat = OrderRequest(R"({"out_trade_no":")" + std::string(32, 'W') +
                                   R"(","account_id":"s","amount":1,"currency":"CNY",)"
                                   R"("channel":"wechat_v3"})");
    EXPECT_EQ(OrdersChannel{}.Verify(wechat).outcome, Outcome::kAppended);
}

TEST(OrdersChannel, AnInvalidChannelOrExpiryIsMalformed) {
    const std::string head = R"({"account_id":"s","amount":1,"currency":"CNY",)";
    struct Case {
        std::string body;
        const char* message;
    };
    for (const Case& c : std::initializer_list<Case>{
             {head + R"("out_trade_no":"A","channel":"unionpay"})",
              "channel must be wechat_v2, wechat_v3 or alipay"},
             {head + R"("out_trade_no":"A","channel":7})",
              "channel must be wechat_v2, wechat_v3 or alipay"},
             {head + R"("out_trade_no":"A","channel":null})",
              "channel must be wechat_v2, wechat_v3 or alipay"},
             {head + R"("out_trade_no":"A.1","channel":"wechat_v2"})",
              "out_trade_no must be at most 32 characters without '.' for wechat_v2"},
             {head + R"("out_trade_no":")" + std::string(33, 'W') + R"(","channel":"wechat_v3"})",
              "out_trade_no must be at most 32 characters without '.' for wechat_v3"},
             {head + R"("out_trade_no":"A","expires_at":"tomorrow"})",
              "expires_at must be an RFC 3339 date-time"},
             {head + R"("out_trade_no":"A","expires_at":"2026-12-06 18:30:00"})",
              "expires_at must be an RFC 3339 date-time"},
             {head + R"("out_trade_no":"A","expires_at":1733480000})",
              "expires_at must be an RFC 3339 date-time"},
         }) {
        Incoming incoming = OrderRequest(c.body);
        const ledger::Delivery delivery = OrdersChannel{}.Verify(incoming);
        EXPECT_EQ(delivery.outcome, Outcome::kMalformed) << c.body;
        EXPECT_FALSE(delivery.event.has_value()) << c.body;
        EXPECT_EQ(delivery.message.rfind(c.message, 0), 0u) << c.body << ": " << delivery.message;
    }
}

// A registration the process will ask about answers its first query's time: first_after after
// the registration, or its expiry if sooner; other channels' registrations have no query.
TEST(OrdersChannel, AnAppendedOrderOfAQueriedChannelAnswersItsFirstQuery) {
    const OrdersChannel channel{{"wechat_v3"}, std::chrono::seconds{60}};
    const projections::OrderRow order{
        .out_trade_no = "ORD-7", .account_id = "shop-1", .amount = 1999, .currency = "CNY"};
    const projections::TimeMicros at = 1'700'000'000 * kMicros;
    const auto answer = [&](const std::string& data, Outcome outcome) {
        return nlohmann::json::parse(channel
                                         .Answer({.outcome = outcome,
                                                  .seq = 3,
                                                  .order = order,
                                                  .registered_data = data,
                                                  .registered_at = at})
                                         .body());
    };
    nlohmann::json body = answer(R"({"channel":"wechat_v3"})", Outcome::kAppended);
    EXPECT_EQ(body["channel"], "wechat_v3");
    EXPECT_EQ(body["query"]["next_at"], projections::FormatRfc3339(at + 60 * kMicros)) << body;
    body = answer(R"({"channel":"wechat_v3","expires_at":")" +
                      projections::FormatRfc3339(at + 30 * kMicros) + R"("})",
                  Outcome::kAppended);
    EXPECT_EQ(body["query"]["next_at"], projections::FormatRfc3339(at + 30 * kMicros)) << body;
    EXPECT_EQ(body["expires_at"], projections::FormatRfc3339(at + 30 * kMicros)) << body;
    // Not asked by this process, or a duplicate (its schedule moved on): no query state here.
    EXPECT_TRUE(answer(R"({"channel":"alipay"})", Outcome::kAppended)["query"].is_null());
    EXPECT_TRUE(answer(R"({"channel":"wechat_v3"})", Outcome::kDuplicate)["query"].is_null());
}

}  // namespace
}  // namespace payledger::api
