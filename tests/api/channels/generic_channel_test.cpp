// Tests of api/channels/generic_channel.hpp against docs/platforms.md#generic, without a database:
// each test builds an api::Incoming with a raw body, a Payledger-Signature header made by
// GenericChannel::Sign and received_at = the current time (whole seconds, in microseconds),
// then checks the verdict, the event handed to the ledger and the receipt kept as evidence.
// Answer() is checked on hand-made DeliveryResults, one per outcome. Signature windows,
// bad headers and malformed bodies are tables. Sign() is pinned to a published HMAC vector.

#include "api/channels/generic_channel.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/config.hpp"
#include "api/http/http.hpp"
#include "ledger/write/writer.hpp"
#include "projections/event.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::EventType;
using projections::Outcome;

constexpr const char* kSecret = "generic-test-secret-0123456789";
constexpr std::int64_t kMicrosPerSecond = 1'000'000;

constexpr const char* kPaymentBody =
    R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"TX-1",)"
    R"("amount":1999,"currency":"USD","occurred_at":"2026-11-29T16:30:00+08:00"})";

std::int64_t NowSeconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

class GenericChannelTest : public ::testing::Test {
protected:
    // A delivery of `body` carrying `header` as Payledger-Signature (none when nullopt).
    Incoming Make(const std::string& body, const std::optional<std::string>& header) const {
        Incoming incoming{.peer = "10.0.0.7:51234", .received_at = now_ * kMicrosPerSecond};
        incoming.request = Request{http::verb::post, "/v1/callbacks/generic", 11};
        incoming.request.set(http::field::content_type, "application/json");
        if (header) incoming.request.set("Payledger-Signature", *header);
        incoming.request.body() = body;
        incoming.request.prepare_payload();
        return incoming;
    }

    // `body` signed correctly, `skew_seconds` away from the server clock.
    Incoming Signed(const std::string& body, std::int64_t skew_seconds = 0) const {
        return Make(body, GenericChannel::Sign(kSecret, now_ + skew_seconds, body));
    }

    // Verify takes the request's body; the test keeps its own copy of `incoming`.
    ledger::Delivery Verify(Incoming incoming) const { return channel_.Verify(incoming); }

    const std::int64_t now_ = NowSeconds();
    const GenericChannel channel_{GenericConfig{.secret = kSecret}};
};

TEST_F(GenericChannelTest, ValidPaymentIsHandedToTheLedgerWithEveryField) {
    const ledger::Delivery delivery = Verify(Signed(kPaymentBody));
    ASSERT_EQ(delivery.outcome, Outcome::kAppended) << delivery.message;
    ASSERT_TRUE(delivery.event.has_value());
    const projections::Event& event = *delivery.event;
    EXPECT_EQ(event.out_trade_no, "ORD-1");
    EXPECT_EQ(event.event_type, EventType::kPaymentSucceeded);
    EXPECT_EQ(event.source, projections::Source::kGeneric);
    EXPECT_EQ(event.amount, 1999);
    EXPECT_EQ(event.currency, "USD");
    EXPECT_EQ(event.transaction_id, std::optional<std::string>("TX-1"));
    // 2026-11-29T08:30:00Z, from `date -u -d 2026-11-29T08:30:00Z +%s`.
    EXPECT_EQ(event.occurred_at, 1'795'941'000 * kMicrosPerSecond);
    EXPECT_EQ(delivery.receipt.source, projections::Source::kGeneric);
    EXPECT_EQ(delivery.receipt.out_trade_no, std::optional<std::string>("ORD-1"));
    EXPECT_EQ(delivery.receipt.received_at, now_ * kMicrosPerSecond);
    EXPECT_EQ(delivery.receipt.peer, "10.0.0.7:51234");
}

TEST_F(GenericChannelTest, OmittedCurrencyIsCnyAndOmittedOccurredAtIsTheTimeOfReceipt) {
    const std::string body =
        R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-2","transaction_id":"TX-2",)"
        R"("amount":1})";
    const ledger::Delivery delivery = Verify(Signed(body));
    ASSERT_EQ(delivery.outcome, Outcome::kAppended) << delivery.message;
    ASSERT_TRUE(delivery.event.has_value());
    EXPECT_EQ(delivery.event->currency, "CNY");
    EXPECT_EQ(delivery.event->occurred_at, now_ * kMicrosPerSecond);
    EXPECT_EQ(delivery.event->amount, 1);
}

TEST_F(GenericChannelTest, RefundWithoutCurrencyLeavesItForTheOrderToSupply) {
    // The ledger gives a currency-less refund its order's currency; the channel cannot
    // know it, and must not guess CNY for a USD order.
    const std::string body =
        R"({"event_type":"REFUND_SUCCEEDED","out_trade_no":"ORD-3","transaction_id":"RF-1",)"
        R"("amount":500})";
    const ledger::Delivery delivery = Verify(Signed(body));
    ASSERT_EQ(delivery.outcome, Outcome::kAppended) << delivery.message;
    ASSERT_TRUE(delivery.event.has_value());
    EXPECT_EQ(delivery.event->event_type, EventType::kRefundSucceeded);
    EXPECT_EQ(delivery.event->amount, 500);
    EXPECT_EQ(delivery.event->transaction_id, std::optional<std::string>("RF-1"));
    EXPECT_EQ(delivery.event->currency, "");
}

TEST_F(GenericChannelTest, PaymentClosedNeedsNoAmountOrTransactionId) {
    const std::string body = R"({"event_type":"PAYMENT_CLOSED","out_trade_no":"ORD-4"})";
    const ledger::Delivery delivery = Verify(Signed(body));
    ASSERT_EQ(delivery.outcome, Outcome::kAppended) << delivery.message;
    ASSERT_TRUE(delivery.event.has_value());
    EXPECT_EQ(delivery.event->event_type, EventType::kPaymentClosed);
    EXPECT_EQ(delivery.event->out_trade_no, "ORD-4");
    EXPECT_EQ(delivery.event->amount, 0);
    EXPECT_FALSE(delivery.event->transaction_id.has_value());
}

TEST_F(GenericChannelTest, TimestampsWithinThreeHundredSecondsEitherWayAreAccepted) {
    const struct {
        std::int64_t skew_seconds;
        Outcome outcome;
    } cases[] = {
        {-301, Outcome::kBadSignature}, {-300, Outcome::kAppended},
        {-1, Outcome::kAppended},       {0, Outcome::kAppended},
        {1, Outcome::kAppended},        {300, Outcome::kAppended},
        {301, Outcome::kBadSignature},  {-86'400, Outcome::kBadSignature},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.skew_seconds);
        const ledger::Delivery delivery = Verify(Signed(kPaymentBody, c.skew_seconds));
        EXPECT_EQ(delivery.outcome, c.outcome) << delivery.message;
        EXPECT_EQ(delivery.event.has_value(), c.outcome == Outcome::kAppended);
    }
}

TEST_F(GenericChannelTest, WrongSecretIsBadSignature) {
    const Incoming incoming =
        Make(kPaymentBody, GenericChannel::Sign("another-secret-0123456789", now_, kPaymentBody));
    const ledger::Delivery delivery = Verify(incoming);
    EXPECT_EQ(delivery.outcome, Outcome::kBadSignature);
    EXPECT_FALSE(delivery.event.has_value());
    EXPECT_FALSE(delivery.message.empty());
}

TEST_F(GenericChannelTest, TamperedBodyIsBadSignature) {
    std::string tampered = kPaymentBody;
    tampered.replace(tampered.find("1999"), 4, "9999");
    const std::vector<std::string> bodies{
        tampered,
        std::string(kPaymentBody) + " ",  // One byte more: the signature covers raw bytes.
        std::string(kPaymentBody).substr(1),
    };
    for (const std::string& body : bodies) {
        SCOPED_TRACE(body);
        const Incoming incoming = Make(body, GenericChannel::Sign(kSecret, now_, kPaymentBody));
        EXPECT_EQ(Verify(incoming).outcome, Outcome::kBadSignature);
    }
}

TEST_F(GenericChannelTest, MissingOrUnreadableSignatureHeaderIsBadSignature) {
    const std::string good = GenericChannel::Sign(kSecret, now_, kPaymentBody);
    const std::string v1 = good.substr(good.find("v1="));
    const std::string t = "t=" + std::to_string(now_);
    const struct {
        const char* name;
        std::optional<std::string> header;
    } cases[] = {
        {"no header", std::nullopt},
        {"empty header", ""},
        {"t without v1", t},
        {"v1 without t", v1},
        {"non-numeric t", "t=abc," + v1},
        {"t with junk", t + "x," + v1},
        {"negative t", "t=-" + std::to_string(now_) + "," + v1},
        {"empty t", "t=," + v1},
        {"empty v1", t + ",v1="},
        {"v0 scheme only", t + ",v0=" + v1.substr(3)},
        {"signature of another time", "t=" + std::to_string(now_ - 1) + "," + v1},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const ledger::Delivery delivery = Verify(Make(kPaymentBody, c.header));
        EXPECT_EQ(delivery.outcome, Outcome::kBadSignature) << delivery.message;
        EXPECT_FALSE(delivery.event.has_value());
    }
}

TEST_F(GenericChannelTest, SignatureHeaderNameIsCaseInsensitive) {
    Incoming incoming = Make(kPaymentBody, std::nullopt);
    incoming.request.set("payledger-signature", GenericChannel::Sign(kSecret, now_, kPaymentBody));
    EXPECT_EQ(Verify(incoming).outcome, Outcome::kAppended);
}

TEST_F(GenericChannelTest, BadSignatureReceiptStillCarriesTheClaimedOutTradeNo) {
    const std::string body =
        R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-CLAIMED","transaction_id":"X",)"
        R"("amount":1})";
    const ledger::Delivery delivery =
        Verify(Make(body, GenericChannel::Sign("forger-secret-0123456789", now_, body)));
    EXPECT_EQ(delivery.outcome, Outcome::kBadSignature);
    EXPECT_EQ(delivery.receipt.out_trade_no, std::optional<std::string>("ORD-CLAIMED"));
    EXPECT_EQ(delivery.receipt.body, body);
}

TEST_F(GenericChannelTest, MalformedBodiesAreRefusedBeforeTheLedger) {
    const struct {
        const char* name;
        std::string body;
    } cases[] = {
        {"not JSON", "not json"},
        {"truncated JSON", R"({"event_type":"PAYMENT_SUCCEEDED")"},
        {"a JSON array", "[]"},
        {"amount 19.99",
         R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"TX-1","amount":19.99})"},
        {"amount 1999.0",
         R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"TX-1","amount":1999.0})"},
        {"amount as a string",
         R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"TX-1","amount":"1999"})"},
        {"amount zero",
         R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"TX-1","amount":0})"},
        {"amount over 10^13",
         R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"TX-1","amount":10000000000001})"},
        {"payment without amount",
         R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"TX-1"})"},
        {"payment without transaction_id",
         R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","amount":1999})"},
        {"refund without transaction_id",
         R"({"event_type":"REFUND_SUCCEEDED","out_trade_no":"ORD-1","amount":1999})"},
        {"transaction_id not a string",
         R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":42,"amount":1999})"},
        {"event_type ORDER_CREATED",
         R"({"event_type":"ORDER_CREATED","out_trade_no":"ORD-1","transaction_id":"TX-1","amount":1999})"},
        {"unknown event_type",
         R"({"event_type":"PAYMENT_FAILED","out_trade_no":"ORD-1","transaction_id":"TX-1","amount":1999})"},
        {"missing event_type", R"({"out_trade_no":"ORD-1","transaction_id":"TX-1","amount":1999})"},
        {"missing out_trade_no", R"({"event_type":"PAYMENT_CLOSED"})"},
        {"out_trade_no with a space", R"({"event_type":"PAYMENT_CLOSED","out_trade_no":"ORD 1"})"},
        {"out_trade_no too long",
         R"({"event_type":"PAYMENT_CLOSED","out_trade_no":")" + std::string(65, 'x') + R"("})"},
        {"out_trade_no not ASCII", R"({"event_type":"PAYMENT_CLOSED","out_trade_no":"订单"})"},
        {"lower-case currency",
         R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"TX-1","amount":1999,"currency":"usd"})"},
        {"currency of four letters",
         R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"TX-1","amount":1999,"currency":"USDT"})"},
        {"currency null",
         R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"TX-1","amount":1999,"currency":null})"},
        {"occurred_at without a zone",
         R"({"event_type":"PAYMENT_CLOSED","out_trade_no":"ORD-1","occurred_at":"2026-11-29T08:30:00"})"},
        {"occurred_at month 13",
         R"({"event_type":"PAYMENT_CLOSED","out_trade_no":"ORD-1","occurred_at":"2026-13-29T08:30:00Z"})"},
        {"occurred_at as a number",
         R"({"event_type":"PAYMENT_CLOSED","out_trade_no":"ORD-1","occurred_at":1795941000})"},
        {"invalid UTF-8",
         "{\"event_type\":\"PAYMENT_CLOSED\",\"out_trade_no\":\"ORD-1\",\"x\":\"\xFF\"}"},
        // A duplicate key is malformed, not last-wins.
        {"amount given twice",
         R"({"event_type":"PAYMENT_SUCCEEDED","out_trade_no":"ORD-1","transaction_id":"TX-1","amount":1,"amount":1999})"},
        {"out_trade_no given twice",
         R"({"event_type":"PAYMENT_CLOSED","out_trade_no":"ORD-1","out_trade_no":"ORD-2"})"},
        {"a key repeated in a nested object",
         R"({"event_type":"PAYMENT_CLOSED","out_trade_no":"ORD-1","meta":{"k":1,"k":2}})"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const ledger::Delivery delivery = Verify(Signed(c.body));
        EXPECT_EQ(delivery.outcome, Outcome::kMalformed) << delivery.message;
        EXPECT_FALSE(delivery.event.has_value());
        EXPECT_FALSE(delivery.message.empty());
        EXPECT_EQ(delivery.receipt.body, c.body);
    }
}

TEST_F(GenericChannelTest, ReceiptKeepsTheRawBodyByteForByteAndTheSignatureHeader) {
    // Odd spacing, member order, an unknown member and non-ASCII text: nothing is normalised.
    const std::string body =
        "{ \"out_trade_no\" : \"ORD-5\",\n\t\"note\":\"\xE6\xB5\x8B\xE8\xAF\x95 \\u00e9\","
        "\"event_type\":\"PAYMENT_CLOSED\"  }\r\n";
    const Incoming incoming = Signed(body);
    const std::string header = std::string(incoming.request["Payledger-Signature"]);
    const ledger::Delivery delivery = Verify(incoming);
    ASSERT_EQ(delivery.outcome, Outcome::kAppended) << delivery.message;
    EXPECT_EQ(delivery.receipt.body, body);
    EXPECT_EQ(delivery.receipt.body.size(), body.size());
    const json headers = json::parse(delivery.receipt.headers);
    ASSERT_TRUE(headers.contains("Payledger-Signature")) << delivery.receipt.headers;
    EXPECT_EQ(headers.at("Payledger-Signature"), header);
    EXPECT_EQ(delivery.receipt.out_trade_no, std::optional<std::string>("ORD-5"));
}

TEST_F(GenericChannelTest, ReceiptOfAnUnsignedDeliveryKeepsItsBody) {
    const ledger::Delivery delivery = Verify(Make(kPaymentBody, std::nullopt));
    EXPECT_EQ(delivery.outcome, Outcome::kBadSignature);
    EXPECT_EQ(delivery.receipt.body, kPaymentBody);
    EXPECT_EQ(delivery.receipt.out_trade_no, std::optional<std::string>("ORD-1"));
}

TEST(GenericChannelAnswer, AppendedAndDuplicateAnswerSuccessWithTheSeq) {
    const GenericChannel channel{GenericConfig{.secret = kSecret}};
    const struct {
        Outcome outcome;
        const char* name;
    } cases[] = {{Outcome::kAppended, "appended"}, {Outcome::kDuplicate, "duplicate"}};
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const Response response =
            channel.Answer(ledger::DeliveryResult{.outcome = c.outcome, .seq = 42});
        EXPECT_EQ(response.result(), http::status::ok);
        EXPECT_EQ(response[http::field::content_type], "application/json");
        const json expected = {{"code", "SUCCESS"}, {"outcome", c.name}, {"seq", 42}};
        EXPECT_EQ(json::parse(response.body()), expected) << response.body();
    }
}

TEST(GenericChannelAnswer, FailuresAnswerTheSpecErrorBodyWithTheirStatus) {
    const GenericChannel channel{GenericConfig{.secret = kSecret}};
    const struct {
        Outcome outcome;
        std::int64_t seq;
        http::status status;
        const char* name;
    } cases[] = {
        {Outcome::kMalformed, 0, http::status::bad_request, "malformed"},
        {Outcome::kBadSignature, 0, http::status::unauthorized, "bad_signature"},
        {Outcome::kUnknownOrder, 0, http::status::not_found, "unknown_order"},
        {Outcome::kConflict, 7, http::status::conflict, "conflict"},
        {Outcome::kMismatch, 0, http::status::unprocessable_entity, "mismatch"},
        {Outcome::kUnavailable, 0, http::status::service_unavailable, "unavailable"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const Response response = channel.Answer(ledger::DeliveryResult{
            .outcome = c.outcome, .seq = c.seq, .message = std::string("why: ") + c.name});
        EXPECT_EQ(response.result(), c.status);
        const json body = json::parse(response.body());
        EXPECT_EQ(body.at("code"), "FAIL") << response.body();
        EXPECT_EQ(body.at("outcome"), c.name) << response.body();
        EXPECT_EQ(body.at("message"), std::string("why: ") + c.name) << response.body();
        if (c.seq != 0) {
            EXPECT_EQ(body.at("seq"), c.seq) << response.body();  // Names the event.
        } else {
            EXPECT_FALSE(body.contains("seq")) << response.body();
        }
    }
}

TEST(GenericChannelAnswer, InternalErrorAnswers500WithAnErrorBody) {
    const GenericChannel channel{GenericConfig{.secret = kSecret}};
    // Even a result that claims success is a failure once an invariant broke.
    for (const Outcome outcome : {Outcome::kAppended, Outcome::kConflict}) {
        const Response response = channel.Answer(ledger::DeliveryResult{
            .outcome = outcome, .seq = 5, .failure = ledger::FailureKind::kInvariantBroken});
        EXPECT_EQ(response.result(), http::status::internal_server_error);
        const json body = json::parse(response.body());
        EXPECT_EQ(body.at("code"), "FAIL") << response.body();
        EXPECT_TRUE(body.at("message").is_string()) << response.body();
        EXPECT_NE(body.at("outcome"), "appended") << response.body();
    }
}

TEST(GenericChannelSign, MatchesThePublishedStripeStyleVector) {
    // docs/platforms.md#test-vectors: HMAC-SHA256(secret, "<t>.<raw body>"), lower-case hex.
    EXPECT_EQ(GenericChannel::Sign("whsec_test_secret", 1700000000,
                                   R"({"id":"evt_1","type":"payment_intent.succeeded"})"),
              "t=1700000000,v1=22d8dc182f5c588077683bd378368e29765bfe5df2560112b4f28fef120f0e31");
}

TEST(GenericChannelSign, DependsOnTheSecretTheTimeAndEveryByteOfTheBody) {
    const std::string base = GenericChannel::Sign(kSecret, 1700000000, "{}");
    EXPECT_NE(GenericChannel::Sign("other-secret-0123456789", 1700000000, "{}"), base);
    EXPECT_NE(GenericChannel::Sign(kSecret, 1700000001, "{}"), base);
    EXPECT_NE(GenericChannel::Sign(kSecret, 1700000000, "{ }"), base);
    EXPECT_EQ(GenericChannel::Sign(kSecret, 1700000000, "{}"), base);
}

}  // namespace
}  // namespace payledger::api
