// Tests of the Alipay channel (docs/platforms.md) without a database: forms signed by a test-only
// key; Verify() checked for the verdict, the event and the receipt, Answer() for its plain-text
// answers. The sign content of the worked example, the trade statuses' table, GBK notices verified
// over their raw bytes; refusals: forged signatures, other apps, malformed forms (bad
// percent-encoding, a third decimal, repeated fields), seller_id when configured.

#include "api/channels/alipay_channel.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/channels/alipay_form.hpp"
#include "ledger/base/bytes.hpp"
#include "projections/decide.hpp"
#include "projections/validate.hpp"
#include "tests/api/channels/platform_channel_fixture.hpp"
#include "tests/api/channels/platform_fixtures.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::EventType;
using projections::Outcome;

PlatformFields AlipayPayment() {
    return {{"app_id", testing::kAlipayAppId},
            {"charset", "utf-8"},
            {"notify_type", "trade_status_sync"},
            {"notify_id", "ac05099524730693a8b330c5ecf72da9"},
            {"notify_time", "2024-05-01 10:30:20"},
            {"out_trade_no", "ORD-1"},
            {"trade_no", "2024050122001400000000000001"},
            {"trade_status", "TRADE_SUCCESS"},
            {"total_amount", "19.99"},
            {"gmt_payment", "2024-05-01 10:30:15"},
            {"subject", "测试"},
            {"body", ""}};
}

SimulatedNotice AlipaySigned(PlatformFields fields,
                             const PrivateKey& key = testing::TestPlatformKey(2)) {
    fields["sign_type"] = "RSA2";
    fields["sign"] = ledger::Base64Encode(RsaSha256Sign(key, AlipaySignContent(fields)));
    return {.target = "/v1/callbacks/alipay", .body = EncodeForm(fields)};
}

TEST_F(PlatformChannelTest, AlipaySignContentFollowsTheWorkedExample) {
    const Checked<PlatformFields> form = DecodeForm(
        "charset=utf-8&gmt_payment=2024-05-01+10%3A30%3A15&notify_type=trade_status_sync&subject="
        "%E6%B5%8B%E8%AF%95&total_amount=19.99&trade_status=TRADE_SUCCESS&out_trade_no=ORD-1&"
        "app_id=2021000000000001&body=&sign_type=RSA2&sign=Ab%2Bcd%3D%3D&fund_bill_list=%5B%7B%22"
        "amount%22%3A%2219.99%22%2C%22fundChannel%22%3A%22ALIPAYACCOUNT%22%7D%5D");
    ASSERT_TRUE(form.ok()) << form.refusal().message;
    EXPECT_EQ(form->at("sign"), "Ab+cd==");
    EXPECT_EQ(AlipaySignContent(*form),
              "app_id=2021000000000001&charset=utf-8&fund_bill_list=[{\"amount\":\"19.99\","
              "\"fundChannel\":\"ALIPAYACCOUNT\"}]&gmt_payment=2024-05-01 10:30:15&notify_type="
              "trade_status_sync&out_trade_no=ORD-1&subject=测试&total_amount=19.99&"
              "trade_status=TRADE_SUCCESS");
}

TEST_F(PlatformChannelTest, AlipayPaymentBecomesAPaymentEvent) {
    for (const SimulatedNotice& notice : {Notice("alipay"), AlipaySigned(AlipayPayment())}) {
        const ledger::Delivery delivery = Deliver(alipay_, notice);
        ExpectVerdict(delivery, Outcome::kAppended);
        ASSERT_TRUE(delivery.event);
        EXPECT_EQ(delivery.event->event_type, EventType::kPaymentSucceeded);
        EXPECT_EQ(delivery.event->amount, 1999);
        EXPECT_EQ(delivery.event->currency, "CNY");
        EXPECT_EQ(delivery.receipt.out_trade_no, "ORD-1");
    }
    const ledger::Delivery delivery = Deliver(alipay_, AlipaySigned(AlipayPayment()));
    EXPECT_EQ(delivery.event->transaction_id, "2024050122001400000000000001");
    EXPECT_EQ(projections::FormatRfc3339(delivery.event->occurred_at), "2024-05-01T02:30:15Z");
    EXPECT_EQ(json::parse(delivery.event->data).at("notify_id"),
              "ac05099524730693a8b330c5ecf72da9");
}

TEST_F(PlatformChannelTest, AlipayMapsTradeStatusesBySpecTable) {
    struct Row {
        const char* status;
        const char* refund_fee;
        std::optional<EventType> type;
        std::int64_t amount;
    };
    const Row rows[] = {
        {"TRADE_SUCCESS", nullptr, EventType::kPaymentSucceeded, 1999},
        {"TRADE_SUCCESS", "0.00", EventType::kPaymentSucceeded, 1999},
        {"TRADE_FINISHED", nullptr, EventType::kPaymentSucceeded, 1999},
        {"TRADE_FINISHED", "5.00", EventType::kPaymentSucceeded, 1999},
        {"TRADE_SUCCESS", "5.5", EventType::kRefundSucceeded, 550},
        {"TRADE_CLOSED", "19.99", EventType::kRefundSucceeded, 1999},
        {"TRADE_CLOSED", nullptr, EventType::kPaymentClosed, 0},
        {"WAIT_BUYER_PAY", nullptr, std::nullopt, 0},
    };
    for (const Row& row : rows) {
        PlatformFields fields = AlipayPayment();
        fields["trade_status"] = row.status;
        if (row.refund_fee) fields["refund_fee"] = row.refund_fee;
        const ledger::Delivery delivery = Deliver(alipay_, AlipaySigned(fields));
        ExpectVerdict(delivery, row.type ? Outcome::kAppended : Outcome::kIgnored);
        if (!row.type || !delivery.event) continue;
        EXPECT_EQ(delivery.event->event_type, *row.type) << row.status;
        EXPECT_EQ(delivery.event->amount, row.amount) << row.status;
    }
}

TEST_F(PlatformChannelTest, AlipayRefundAndCloseEvents) {
    PlatformFields refund = AlipayPayment();
    refund["refund_fee"] = "5.00";
    refund["gmt_refund"] = "2024-05-02 09:00:00.250";
    refund["out_biz_no"] = "RF-1";
    const ledger::Delivery delivery = Deliver(alipay_, AlipaySigned(refund));
    ExpectVerdict(delivery, Outcome::kAppended);
    ASSERT_TRUE(delivery.event);
    EXPECT_EQ(delivery.event->transaction_id, "RF-1");
    EXPECT_EQ(delivery.event->currency, "");
    EXPECT_EQ(projections::FormatRfc3339(delivery.event->occurred_at),
              "2024-05-02T01:00:00.250000Z");
    refund.erase("out_biz_no");
    EXPECT_EQ(Deliver(alipay_, AlipaySigned(refund)).event->transaction_id,
              "2024050122001400000000000001");
    const ledger::Delivery close = Deliver(alipay_, Notice("alipay", "close"));
    ExpectVerdict(close, Outcome::kAppended);
    ASSERT_TRUE(close.event);
    EXPECT_EQ(close.event->event_type, EventType::kPaymentClosed);
    EXPECT_FALSE(close.event->transaction_id.has_value());
    EXPECT_EQ(close.event->occurred_at, now_ * 1'000'000);
    ExpectVerdict(Deliver(alipay_, Notice("alipay", "refund", 300)), Outcome::kAppended);
}

TEST_F(PlatformChannelTest, AlipayVerifiesGbkNoticesOverTheirRawBytes) {
    PlatformFields fields = AlipayPayment();
    fields["charset"] = "gbk";
    fields["subject"] = "\xb2\xe2\xca\xd4";  // "测试" in GBK: not UTF-8.
    const SimulatedNotice notice = AlipaySigned(fields);
    EXPECT_NE(notice.body.find("subject=%B2%E2%CA%D4"), std::string::npos);
    ExpectVerdict(Deliver(alipay_, notice), Outcome::kAppended);
}

TEST_F(PlatformChannelTest, AlipayRefusesForgedNotices) {
    SimulatedNotice tampered = AlipaySigned(AlipayPayment());
    tampered.body.replace(tampered.body.find("total_amount=19.99"), 18, "total_amount=0.01");
    const ledger::Delivery delivery = Deliver(alipay_, tampered);
    ExpectVerdict(delivery, Outcome::kBadSignature);
    EXPECT_EQ(delivery.receipt.out_trade_no, "ORD-1");
    ExpectVerdict(Deliver(alipay_, AlipaySigned(AlipayPayment(), testing::TestPlatformKey(3))),
                  Outcome::kBadSignature);
    SimulatedNotice rsa1 = AlipaySigned(AlipayPayment());
    rsa1.body.replace(rsa1.body.find("sign_type=RSA2"), 14, "sign_type=RSA");
    ExpectVerdict(Deliver(alipay_, rsa1), Outcome::kBadSignature);
    SimulatedNotice unsigned_notice = AlipaySigned(AlipayPayment());
    unsigned_notice.body = EncodeForm(AlipayPayment());
    ExpectVerdict(Deliver(alipay_, unsigned_notice), Outcome::kBadSignature);
    // A sign whose "+" was not percent-encoded decodes to a space: not base64.
    SimulatedNotice plus = AlipaySigned(AlipayPayment());
    const Checked<PlatformFields> form = DecodeForm(plus.body);
    ASSERT_TRUE(form.ok());
    std::string raw_sign = form->at("sign");
    PlatformFields without_sign = *form;
    without_sign.erase("sign");
    plus.body = EncodeForm(without_sign) + "&sign=" + raw_sign;
    ExpectVerdict(Deliver(alipay_, plus), raw_sign.find('+') == std::string::npos
                                              ? Outcome::kAppended
                                              : Outcome::kBadSignature);
}

TEST_F(PlatformChannelTest, AlipayOtherAppIsMismatch) {
    PlatformFields fields = AlipayPayment();
    fields["app_id"] = "2021000000000002";
    ExpectVerdict(Deliver(alipay_, AlipaySigned(fields)), Outcome::kMismatch);
}

TEST_F(PlatformChannelTest, AlipayRefusesMalformedNotices) {
    for (const char* body : {"a=%", "a=%4", "a=%zz&b=1", "%G1=1", "=1&a=2", "a=1&a=2"}) {
        ExpectVerdict(Deliver(alipay_, {.target = "/v1/callbacks/alipay", .body = body}),
                      Outcome::kMalformed);
    }
    for (const auto& [field, value] :
         std::vector<std::pair<std::string, std::string>>{{"total_amount", "19.999"},
                                                          {"total_amount", "-19.99"},
                                                          {"total_amount", "1e3"},
                                                          {"total_amount", "0.00"},
                                                          {"trade_status", "TRADE_UNKNOWN"},
                                                          {"gmt_payment", "20240501103015"},
                                                          {"out_trade_no", "bad key!"},
                                                          {"trade_no", ""},
                                                          {"app_id", ""},
                                                          {"currency", "usd"}}) {
        PlatformFields fields = AlipayPayment();
        fields[field] = value;
        ExpectVerdict(Deliver(alipay_, AlipaySigned(fields)), Outcome::kMalformed);
    }
    PlatformFields refund = AlipayPayment();
    refund["refund_fee"] = "1.001";
    ExpectVerdict(Deliver(alipay_, AlipaySigned(refund)), Outcome::kMalformed);
}

// A refund's total_amount and trade_no go to the ledger as claims about the order and
// its payment; a total_amount that is not an amount is malformed.
TEST_F(PlatformChannelTest, AlipayRefundNamesItsOrderTotalAndTradeNoForTheLedger) {
    PlatformFields refund = AlipayPayment();
    refund["refund_fee"] = "5.00";
    refund["out_biz_no"] = "RF-1";
    const ledger::Delivery delivery = Deliver(alipay_, AlipaySigned(refund));
    ExpectVerdict(delivery, Outcome::kAppended);
    EXPECT_EQ(delivery.event->transaction_id, "RF-1");
    EXPECT_EQ(delivery.claims.order_amount, 1999);
    EXPECT_EQ(delivery.claims.payment_transaction_id, "2024050122001400000000000001");
    const ledger::Delivery payment = Deliver(alipay_, AlipaySigned(AlipayPayment()));
    EXPECT_FALSE(payment.claims.order_amount.has_value());  // A payment's total is its amount.
    refund["total_amount"] = "19.999";
    ExpectVerdict(Deliver(alipay_, AlipaySigned(refund)), Outcome::kMalformed);
}

// With alipay.seller_id configured, a notice's seller_id must be it.
TEST_F(PlatformChannelTest, AlipaySellerIdIsCheckedWhenConfigured) {
    AlipayConfig config = *config_.alipay;
    config.seller_id = "2088102176044281";
    const AlipayChannel channel{config};
    PlatformFields fields = AlipayPayment();
    fields["seller_id"] = "2088102176044281";
    ExpectVerdict(Deliver(channel, AlipaySigned(fields)), Outcome::kAppended);
    ExpectVerdict(Deliver(alipay_, AlipaySigned(fields)), Outcome::kAppended);
    fields["seller_id"] = "2088000000000001";
    const ledger::Delivery other = Deliver(channel, AlipaySigned(fields));
    ExpectVerdict(other, Outcome::kMismatch);
    EXPECT_NE(other.message.find("seller_id"), std::string::npos) << other.message;
    ExpectVerdict(Deliver(alipay_, AlipaySigned(fields)), Outcome::kAppended);  // Not configured.
    fields.erase("seller_id");
    ExpectVerdict(Deliver(channel, AlipaySigned(fields)), Outcome::kMalformed);
    Config simulated = config_;
    simulated.alipay = config;
    ExpectVerdict(Deliver(channel, Notice("alipay", "payment", 1999, &simulated)),
                  Outcome::kAppended);
}

// A form field given twice is malformed even in a correctly signed notice, whichever
// copy the signature would cover.
TEST_F(PlatformChannelTest, AlipayRepeatedFieldsAreMalformed) {
    const std::string signed_body = AlipaySigned(AlipayPayment()).body;
    for (const char* repeat : {"&total_amount=0.01", "&total_amount=19.99", "&sign=x"}) {
        const ledger::Delivery delivery =
            Deliver(alipay_, {.target = "/v1/callbacks/alipay", .body = signed_body + repeat});
        ExpectVerdict(delivery, Outcome::kMalformed);
        EXPECT_NE(delivery.message.find("repeats"), std::string::npos) << delivery.message;
    }
}

TEST_F(PlatformChannelTest, AlipayAnswersSuccessOrFailure) {
    for (const Outcome outcome : {Outcome::kAppended, Outcome::kDuplicate, Outcome::kIgnored}) {
        const Response response = alipay_.Answer({.outcome = outcome});
        EXPECT_EQ(response.result(), http::status::ok);
        EXPECT_EQ(response.body(), "success");
        EXPECT_EQ(response[http::field::content_type], "text/plain");
    }
    const Response mismatch = alipay_.Answer({.outcome = Outcome::kMismatch});
    EXPECT_EQ(mismatch.result(), http::status::unprocessable_entity);
    EXPECT_EQ(mismatch.body(), "failure");
    EXPECT_EQ(alipay_.Answer({.outcome = Outcome::kUnknownOrder}).result(),
              http::status::not_found);
    EXPECT_EQ(alipay_.Answer({.failure = ledger::FailureKind::kInvariantBroken}).result(),
              http::status::internal_server_error);
}

}  // namespace
}  // namespace payledger::api
