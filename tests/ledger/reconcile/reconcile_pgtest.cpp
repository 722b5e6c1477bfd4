// `payledger reconcile` against the real PostgreSQL (docs/reconciliation.md): every
// category in one bill with the exact output, --apply through the callbacks' write path (a
// receipt whose body is the bill's line, source wechat_bill, the projections), a second run
// that applies nothing, the platform's later callback as a duplicate, verify after; §6
// checks that keep an entry from being applied; an incomplete bill that records nothing; the
// append-only reconciliations table and what it stores; Alipay's zip from simulate-bill; and
// GET /v1/reconciliations[/{id}] through the HTTP service.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ledger/base/bytes.hpp"
#include "ledger/integrity/verify.hpp"
#include "ledger/read/reads.hpp"
#include "ledger/reconcile/reconciliation.hpp"
#include "ledger/reconcile/simulate_bill.hpp"
#include "ledger/write/writer.hpp"
#include "projections/validate.hpp"
#include "support/http_client.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::ledger::reconcile {
namespace {

using projections::Category;
using projections::Event;
using projections::EventType;
using projections::Outcome;
using projections::Source;

const std::string kDate = "2026-11-30";
// 2026-11-30 12:00 in Shanghai, and the Shanghai day before.
const projections::TimeMicros kNoon = *projections::ParseRfc3339("2026-11-30T04:00:00Z");
const projections::TimeMicros kDayBefore = *projections::ParseRfc3339("2026-11-29T04:00:00Z");
// 2026-11-30 23:30 Shanghai is still the day; 2026-12-01 00:10 Shanghai is not.
const projections::TimeMicros kLate = *projections::ParseRfc3339("2026-11-30T15:30:00Z");
const projections::TimeMicros kNextDay = *projections::ParseRfc3339("2026-11-30T16:10:00Z");
const std::string kMchId = "1900000109";

const std::string kHeader =
    "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,"
    "付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,"
    "退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注";

std::string Yuan(std::int64_t fen) { return FormatYuan(fen); }

// One detail row in the 27-field layout (docs/reconciliation.md#wechat-pay-trade-bill).
struct Row {
    EventType type = EventType::kPaymentSucceeded;
    std::string out_trade_no;
    std::string id;  // Payment: 微信订单号; refund: 微信退款单号.
    std::int64_t amount = 0;
    std::string refund_status = "SUCCESS";
    std::string payment_id{};  // A refund's 微信订单号: its payment's transaction_id.
};

std::string RowText(const Row& row) {
    const bool refund = row.type == EventType::kRefundSucceeded;
    return "`2026-11-30 12:00:00,`wx8888888888888888,`" + kMchId + ",`0,`,`" +
           (refund ? row.payment_id : row.id) + ",`" + row.out_trade_no + ",`o1,`JSAPI,`" +
           (refund ? "REFUND" : "SUCCESS") + ",`OTHERS,`CNY,`" +
           (refund ? "0.00" : Yuan(row.amount)) + ",`0.00,`" + (refund ? row.id : "0") + ",`" +
           (refund ? "RF-1" : "0") + ",`" + (refund ? Yuan(row.amount) : "0.00") + ",`0.00,`" +
           (refund ? "ORIGINAL" : "") + ",`" + (refund ? row.refund_status : "") +
           ",`T-shirt,`,`0.00000,`0.60%,`" + (refund ? "0.00" : Yuan(row.amount)) + ",`" +
           (refund ? Yuan(row.amount) : "0.00") + ",`";
}

std::string Bill(const std::vector<Row>& rows, std::int64_t count_delta = 0) {
    std::string text = kHeader + "\n";
    std::int64_t orders = 0, refunds = 0;
    for (const Row& row : rows) {
        text += RowText(row) + "\n";
        (row.type == EventType::kRefundSucceeded ? refunds : orders) += row.amount;
    }
    text +=
        "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,"
        "申请退款总金额\n";
    text += "`" + std::to_string(static_cast<std::int64_t>(rows.size()) + count_delta) + ",`" +
            Yuan(orders) + ",`" + Yuan(refunds) + ",`0.00,`0.00000,`" + Yuan(orders) + ",`" +
            Yuan(refunds) + "\n";
    return text;
}

class ReconcilePgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        connection_ = db_.Connect();
        bill_path_ = std::filesystem::temp_directory_path() / (db_.name() + "-bill.txt");
    }
    void TearDown() override { std::filesystem::remove(bill_path_); }

    DeliveryResult Write(Delivery delivery) {
        const std::vector<Delivery> batch = {std::move(delivery)};
        return WriteBatch(*connection_, batch).at(0);
    }

    void Order(const std::string& out_trade_no, std::int64_t amount) {
        ASSERT_EQ(
            Write({.receipt = {.source = Source::kApi, .peer = "t", .out_trade_no = out_trade_no},
                   .event = Event{.out_trade_no = out_trade_no,
                                  .event_type = EventType::kOrderCreated,
                                  .source = Source::kApi,
                                  .account_id = "shop-1",
                                  .amount = amount,
                                  .currency = "CNY",
                                  .occurred_at = kDayBefore}})
                .outcome,
            Outcome::kAppended);
    }

    Outcome Callback(const std::string& out_trade_no, EventType type, const std::string& id,
                     std::int64_t amount, Source source = Source::kWechatV2,
                     projections::TimeMicros at = kNoon) {
        return Write({.receipt = {.source = source, .peer = "t", .out_trade_no = out_trade_no},
                      .event = Event{.out_trade_no = out_trade_no,
                                     .event_type = type,
                                     .source = source,
                                     .amount = amount,
                                     .currency = "CNY",
                                     .transaction_id = id,
                                     .occurred_at = at}})
            .outcome;
    }

    void WriteBill(const std::string& text) {
        std::ofstream out{bill_path_, std::ios::binary};
        out << text;
    }

    ReconcileReport Run(bool apply, std::string* output = nullptr,
                        Platform platform = Platform::kWechat,
                        std::function<void()> before_apply = {}, std::string* log = nullptr) {
        std::ostringstream out, reasons;
        ReconcileReport report = Reconcile(db_.url(),
                                           {.platform = platform,
                                            .bill_path = bill_path_,
                                            .date = kDate,
                                            .apply = apply,
                                            .wechat_mch_ids = {kMchId},
                                            .before_apply = std::move(before_apply)},
                                           out, &reasons);
        if (output != nullptr) *output = out.str();
        if (log != nullptr) *log = reasons.str();
        return report;
    }

    // The stored differences of run `id`.
    nlohmann::json Differences(std::int64_t id) {
        return nlohmann::json::parse(db_.Scalar(
            "SELECT differences::text FROM reconciliations WHERE id = " + std::to_string(id)));
    }

    std::int64_t Count(Category category, const ReconcileReport& report) {
        return report.counts.at(static_cast<std::size_t>(category));
    }

    testing::TestDatabase db_;
    std::unique_ptr<pqxx::connection> connection_;
    std::string bill_path_;
};

// One key per category, plus events that must not count (Shanghai's next day, another
// channel) and one matched although paid on another day.
TEST_F(ReconcilePgTest, EveryCategoryInOneBillWithTheSpecsOutput) {
    Order("A-matched", 1000);
    ASSERT_EQ(Callback("A-matched", EventType::kPaymentSucceeded, "42A", 1000), Outcome::kAppended);
    Order("B-missing", 2000);
    Order("C-unbilled", 3000);
    ASSERT_EQ(
        Callback("C-unbilled", EventType::kPaymentSucceeded, "42C", 3000, Source::kWechatV3, kLate),
        Outcome::kAppended);
    Order("D-amount", 4000);
    ASSERT_EQ(Callback("D-amount", EventType::kPaymentSucceeded, "42D", 4000), Outcome::kAppended);
    Order("E-txn", 5000);
    ASSERT_EQ(Callback("E-txn", EventType::kPaymentSucceeded, "42E", 5000), Outcome::kAppended);
    Order("G-pending", 7000);  // Paid the day before; its refund is still processing.
    ASSERT_EQ(Callback("G-pending", EventType::kPaymentSucceeded, "42G", 7000, Source::kWechatV2,
                       kDayBefore),
              Outcome::kAppended);
    Order("H-generic", 8000);  // Another channel's payment of the day: not the bill's business.
    ASSERT_EQ(Callback("H-generic", EventType::kPaymentSucceeded, "42H", 8000, Source::kGeneric),
              Outcome::kAppended);
    Order("I-other-day", 9000);  // Paid the day before, billed today: matched all the same.
    ASSERT_EQ(Callback("I-other-day", EventType::kPaymentSucceeded, "42I", 9000, Source::kWechatV2,
                       kDayBefore),
              Outcome::kAppended);
    Order("J-next-day", 1100);  // Shanghai's next day: not on this bill's day.
    ASSERT_EQ(Callback("J-next-day", EventType::kPaymentSucceeded, "42J", 1100, Source::kWechatV2,
                       kNextDay),
              Outcome::kAppended);
    Order("K-refund", 1200);
    ASSERT_EQ(Callback("K-refund", EventType::kPaymentSucceeded, "42K", 1200, Source::kWechatV2,
                       kDayBefore),
              Outcome::kAppended);
    ASSERT_EQ(Callback("K-refund", EventType::kRefundSucceeded, "50K", 200), Outcome::kAppended);
    WriteBill(Bill({{EventType::kPaymentSucceeded, "A-matched", "42A", 1000},
                    {EventType::kPaymentSucceeded, "B-missing", "42B", 2000},
                    {EventType::kPaymentSucceeded, "D-amount", "42D", 4001},
                    {EventType::kPaymentSucceeded, "E-txn", "42X", 5000},
                    {EventType::kPaymentSucceeded, "F-unknown", "42F", 6000},
                    {EventType::kRefundSucceeded, "G-pending", "50G", 100, "PROCESSING", "42G"},
                    {EventType::kPaymentSucceeded, "I-other-day", "42I", 9000},
                    {EventType::kRefundSucceeded, "K-refund", "50K", 300, "SUCCESS", "42K"}}));
    std::string output;
    const ReconcileReport report = Run(false, &output);
    EXPECT_FALSE(report.ok);
    EXPECT_EQ(output,
              "reconcile wechat 2026-11-30 rows=8 matched=2 missing_in_ledger=1 "
              "missing_in_bill=1 amount_mismatch=2 transaction_mismatch=1 unknown_order=1 "
              "pending=1 applied=0 DIFFERS\n"
              "  missing_in_ledger PAYMENT_SUCCEEDED B-missing bill=42B:2000 ledger=-\n"
              "  missing_in_bill PAYMENT_SUCCEEDED C-unbilled bill=- ledger=42C:3000\n"
              "  amount_mismatch PAYMENT_SUCCEEDED D-amount bill=42D:4001 ledger=42D:4000\n"
              "  amount_mismatch REFUND_SUCCEEDED K-refund bill=50K:300 ledger=50K:200\n"
              "  transaction_mismatch PAYMENT_SUCCEEDED E-txn bill=42X:5000 ledger=42E:5000\n"
              "  unknown_order PAYMENT_SUCCEEDED F-unknown bill=42F:6000 ledger=-\n");
    // The run is stored with its counts and differences, in the output's order.
    const std::string stored = db_.Scalar(
        "SELECT jsonb_build_array(platform, date::text, ok, applied, counts, differences)::text "
        "FROM reconciliations WHERE id = " +
        std::to_string(report.id));
    const nlohmann::json row = nlohmann::json::parse(stored);
    EXPECT_EQ(row[0], "wechat");
    EXPECT_EQ(row[1], kDate);
    EXPECT_EQ(row[2], false);
    EXPECT_EQ(row[3], false);
    EXPECT_EQ(row[4]["rows"], 8);
    EXPECT_EQ(row[4]["amount_mismatch"], 2);
    ASSERT_EQ(row[5].size(), 6u);
    EXPECT_EQ(row[5][1], (nlohmann::json{{"category", "missing_in_bill"},
                                         {"event_type", "PAYMENT_SUCCEEDED"},
                                         {"out_trade_no", "C-unbilled"},
                                         {"bill", nullptr},
                                         {"ledger", "42C:3000"}}));
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events"), "20");  // Nothing appended.
}

// A payment payledger found by asking the platform (docs/query.md) is the statement's to confirm
// as a notified one is: billed, matched; missing from the statement, missing_in_bill.
TEST_F(ReconcilePgTest, APaymentFoundByAQueryIsReconciledAsANotifiedOne) {
    Order("Q-billed", 1000);
    ASSERT_EQ(
        Callback("Q-billed", EventType::kPaymentSucceeded, "42Q", 1000, Source::kWechatV3Query),
        Outcome::kAppended);
    Order("Q-unbilled", 2000);
    ASSERT_EQ(
        Callback("Q-unbilled", EventType::kPaymentSucceeded, "42U", 2000, Source::kWechatV2Query),
        Outcome::kAppended);
    WriteBill(Bill({{EventType::kPaymentSucceeded, "Q-billed", "42Q", 1000}}));
    std::string output;
    const ReconcileReport report = Run(false, &output);
    EXPECT_EQ(Count(Category::kMatched, report), 1);
    EXPECT_EQ(Count(Category::kMissingInBill, report), 1);
    EXPECT_NE(
        output.find("  missing_in_bill PAYMENT_SUCCEEDED Q-unbilled bill=- ledger=42U:2000\n"),
        std::string::npos)
        << output;
}

TEST_F(ReconcilePgTest, ApplyAppendsThroughTheWritePathOnceAndTheLateCallbackIsADuplicate) {
    Order("P-1", 1999);
    Order("P-2", 2999);
    ASSERT_EQ(Callback("P-2", EventType::kPaymentSucceeded, "42P2", 2999), Outcome::kAppended);
    Order("R-1", 5000);
    ASSERT_EQ(
        Callback("R-1", EventType::kPaymentSucceeded, "42R1", 5000, Source::kWechatV2, kDayBefore),
        Outcome::kAppended);
    const Row payment{EventType::kPaymentSucceeded, "P-1", "42P1", 1999};
    const Row refund{EventType::kRefundSucceeded, "R-1", "50R1", 1500, "SUCCESS", "42R1"};
    WriteBill(Bill({payment, {EventType::kPaymentSucceeded, "P-2", "42P2", 2999}, refund}));

    std::string output;
    ReconcileReport report = Run(true, &output);
    EXPECT_TRUE(report.ok);
    EXPECT_EQ(output,
              "reconcile wechat 2026-11-30 rows=3 matched=1 missing_in_ledger=0 "
              "missing_in_bill=0 amount_mismatch=0 transaction_mismatch=0 unknown_order=0 "
              "pending=0 applied=2 OK\n"
              "  applied PAYMENT_SUCCEEDED P-1 bill=42P1:1999 ledger=42P1:1999\n"
              "  applied REFUND_SUCCEEDED R-1 bill=50R1:1500 ledger=50R1:1500\n");
    // The events, their receipts (body: the bill's raw line) and the projections.
    pqxx::read_transaction tx{*connection_};
    const std::vector<Event> events = ReadOrderEvents(tx, "P-1");
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[1].source, Source::kWechatBill);
    EXPECT_EQ(events[1].transaction_id, "42P1");
    EXPECT_EQ(events[1].amount, 1999);
    EXPECT_EQ(events[1].occurred_at, kNoon);
    const std::vector<Receipt> receipts = ReadOrderReceipts(tx, "P-1", 0, 100);
    ASSERT_EQ(receipts.size(), 2u);
    EXPECT_EQ(receipts[1].source, Source::kWechatBill);
    EXPECT_EQ(receipts[1].outcome, Outcome::kAppended);
    EXPECT_EQ(receipts[1].body, RowText(payment));
    EXPECT_EQ(receipts[1].seq, events[1].seq);
    EXPECT_EQ(ReadOrderReceipts(tx, "R-1", 0, 100).back().body, RowText(refund));
    EXPECT_EQ(ReadOrder(tx, "P-1")->status, "PAID");
    EXPECT_EQ(ReadOrder(tx, "R-1")->status, "REFUNDED");
    EXPECT_EQ(ReadBalances(tx, "shop-1").at(0).balance, 1999 + 2999 + 5000 - 1500);
    tx.commit();

    // A second run appends nothing: everything is matched now.
    const std::string events_before = db_.Scalar("SELECT count(*) FROM ledger_events");
    report = Run(true, &output);
    EXPECT_TRUE(report.ok);
    EXPECT_EQ(Count(Category::kMatched, report), 3);
    EXPECT_EQ(Count(Category::kApplied, report), 0);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events"), events_before);

    // The platform's callback that arrives at last: the same fingerprint, a duplicate.
    EXPECT_EQ(Callback("P-1", EventType::kPaymentSucceeded, "42P1", 1999), Outcome::kDuplicate);
    EXPECT_EQ(Callback("R-1", EventType::kRefundSucceeded, "50R1", 1500, Source::kWechatV3),
              Outcome::kDuplicate);
    EXPECT_TRUE(Verify(db_.url()).ok());
}

// The command's progress display is told each phase, in order, with the counts.
TEST_F(ReconcilePgTest, ProgressIsReadingThenApplyingThenDone) {
    Order("G-1", 100);
    Order("G-2", 200);
    WriteBill(Bill({{EventType::kPaymentSucceeded, "G-1", "42G1", 100},
                    {EventType::kPaymentSucceeded, "G-2", "42G2", 200},
                    {EventType::kPaymentSucceeded, "G-3", "42G3", 300}}));
    std::vector<std::string> told;
    std::ostringstream out;
    const ReconcileReport report =
        Reconcile(db_.url(),
                  {.platform = Platform::kWechat,
                   .bill_path = bill_path_,
                   .date = kDate,
                   .apply = true,
                   .wechat_mch_ids = {kMchId},
                   .progress =
                       [&](std::string_view phase, std::int64_t done, std::int64_t total) {
                           told.push_back(std::string(phase) + " " + std::to_string(done) + "/" +
                                          std::to_string(total));
                       }},
                  out);
    EXPECT_EQ(Count(Category::kApplied, report), 2);
    EXPECT_EQ(told, (std::vector<std::string>{"reading 3/0", "applying 2/2", "done 0/0"}));
}

TEST_F(ReconcilePgTest, ApplyLeavesWhatSectionSixRefusesMissing) {
    Order("P-short", 1999);  // The bill's payment is another amount than the order's.
    Order("R-big", 1000);    // The bill's refund exceeds the order amount.
    ASSERT_EQ(Callback("R-big", EventType::kPaymentSucceeded, "42RB", 1000), Outcome::kAppended);
    WriteBill(Bill({{EventType::kPaymentSucceeded, "P-short", "42PS", 1998},
                    {EventType::kRefundSucceeded, "R-big", "50RB", 1001, "SUCCESS", "42RB"},
                    {EventType::kPaymentSucceeded, "X-unknown", "42XU", 10}}));
    const std::string receipts_before = db_.Scalar("SELECT count(*) FROM callback_receipts");
    std::string output;
    const ReconcileReport report = Run(true, &output);
    EXPECT_FALSE(report.ok);
    EXPECT_EQ(Count(Category::kMissingInLedger, report), 2);
    EXPECT_EQ(Count(Category::kUnknownOrder, report), 1);
    EXPECT_EQ(Count(Category::kApplied, report), 0);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts"), receipts_before);
}

TEST_F(ReconcilePgTest, AnIncompleteBillRecordsAndAppliesNothing) {
    Order("P-1", 1999);
    WriteBill(Bill({{EventType::kPaymentSucceeded, "P-1", "42P1", 1999}}, /*count_delta=*/1));
    const std::string receipts_before = db_.Scalar("SELECT count(*) FROM callback_receipts");
    EXPECT_THROW(Run(true), BillError);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM reconciliations"), "0");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts"), receipts_before);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events WHERE out_trade_no = 'P-1'"), "1");
    // Another merchant's bill is refused the same way.
    std::string other = Bill({{EventType::kPaymentSucceeded, "P-1", "42P1", 1999}});
    other.replace(other.find(kMchId), kMchId.size(), "1900000999");
    WriteBill(other);
    EXPECT_THROW(Run(true), BillError);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM reconciliations"), "0");
}

TEST_F(ReconcilePgTest, TheTableIsAppendOnlyAndHoldsTheBillAsGiven) {
    const std::string text = Bill({});
    WriteBill(text);
    const ReconcileReport report = Run(false);
    EXPECT_TRUE(report.ok);
    const std::string hex = Sha256Hex(text);
    EXPECT_EQ(db_.Scalar("SELECT bill_sha256 FROM reconciliations"), hex);
    // The bytes are stored apart (reconciliation_bills), the record names them.
    EXPECT_EQ(db_.Scalar("SELECT encode(sha256(payledger_reconciliation_bill(r)), 'hex') "
                         "FROM reconciliations r"),
              hex);
    EXPECT_EQ(db_.Scalar("SELECT bill IS NULL AND stored_bill_sha256 = bill_sha256 "
                         "FROM reconciliations"),
              "t");
    for (const char* sql :
         {"UPDATE reconciliations SET ok = false", "DELETE FROM reconciliations",
          "TRUNCATE reconciliations", "UPDATE reconciliation_bills SET bill = ''",
          "DELETE FROM reconciliation_bills", "TRUNCATE reconciliation_bills CASCADE"}) {
        EXPECT_THROW(db_.Scalar(sql), pqxx::insufficient_privilege) << sql;
    }
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM reconciliations"), "1");
    // The same bill again is stored once.
    EXPECT_TRUE(Run(false).ok);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM reconciliations"), "2");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM reconciliation_bills"), "1");
    // A run recorded before the bills were stored apart keeps its bill inline, and reads alike;
    // a row has exactly one form, and a stored bill's key is its digest.
    const std::string old_row =
        "INSERT INTO reconciliations (platform, date, bill, stored_bill_sha256, bill_sha256, "
        "applied, counts, ok, differences) VALUES ('wechat', '2026-11-29', ";
    const std::string old_sha = "encode(sha256('old bill'::bytea), 'hex')";
    db_.Scalar(old_row + "'old bill'::bytea, NULL, " + old_sha +
               ", false, '{}', true, '[]') RETURNING id");
    EXPECT_EQ(db_.Scalar("SELECT convert_from(payledger_reconciliation_bill(r), 'UTF8') "
                         "FROM reconciliations r WHERE date = '2026-11-29'"),
              "old bill");
    EXPECT_THROW(
        db_.Scalar(old_row + "NULL, NULL, " + old_sha + ", false, '{}', true, '[]') RETURNING id"),
        pqxx::check_violation);
    EXPECT_THROW(db_.Scalar(old_row + "'x'::bytea, '" + hex + "', '" + hex +
                            "', false, '{}', true, '[]') RETURNING id"),
                 pqxx::check_violation);
    EXPECT_THROW(db_.Scalar(old_row + "NULL, " + old_sha + ", " + old_sha +
                            ", false, '{}', true, '[]') RETURNING id"),
                 pqxx::foreign_key_violation);
    EXPECT_THROW(db_.Scalar("INSERT INTO reconciliation_bills VALUES (repeat('0', 64), "
                            "'not the bill') RETURNING 1"),
                 pqxx::check_violation);
}

TEST_F(ReconcilePgTest, AlipayZipFromSimulateBillWithDroppedAndAlteredRows) {
    for (const std::string key : {"AL-1", "AL-2", "AL-3"}) {
        Order(key, 8880);
        ASSERT_EQ(Callback(key, EventType::kPaymentSucceeded, "2026" + key, 8880, Source::kAlipay),
                  Outcome::kAppended);
    }
    ASSERT_EQ(Callback("AL-3", EventType::kRefundSucceeded, "RF-AL-3", 880, Source::kAlipay, kLate),
              Outcome::kAppended);
    bill_path_ += ".zip";
    std::ostringstream out, log;
    const SimulateBillOptions options{.platform = Platform::kAlipay,
                                      .date = kDate,
                                      .out_path = bill_path_,
                                      .alipay_account = "2088123456789012"};
    EXPECT_EQ(SimulateBill(db_.url(), options, out, log).rows, 4);
    EXPECT_TRUE(Run(false, nullptr, Platform::kAlipay).ok);

    SimulateBillOptions changed = options;
    changed.drop = 1;
    changed.alter = 1;
    EXPECT_EQ(SimulateBill(db_.url(), changed, out, log).rows, 3);
    std::string output;
    const ReconcileReport report = Run(false, &output, Platform::kAlipay);
    EXPECT_EQ(output,
              "reconcile alipay 2026-11-30 rows=3 matched=2 missing_in_ledger=0 "
              "missing_in_bill=1 amount_mismatch=1 transaction_mismatch=0 unknown_order=0 "
              "pending=0 applied=0 DIFFERS\n"
              "  missing_in_bill PAYMENT_SUCCEEDED AL-1 bill=- ledger=2026AL-1:8880\n"
              "  amount_mismatch PAYMENT_SUCCEEDED AL-2 bill=2026AL-2:8881 ledger=2026AL-2:8880\n");
    EXPECT_FALSE(report.ok);
}

// alipay.seller_id configured: a bill whose #账号 names another account is another merchant's.
// It is refused (BillError: exit 2) and nothing is recorded or applied; the account's own bill
// is reconciled.
TEST_F(ReconcilePgTest, AnotherAlipayAccountsBillRecordsAndAppliesNothing) {
    Order("AL-1", 8880);
    ASSERT_EQ(Callback("AL-1", EventType::kPaymentSucceeded, "2026AL-1", 8880, Source::kAlipay),
              Outcome::kAppended);
    Order("AL-2", 8880);
    ASSERT_EQ(Callback("AL-2", EventType::kPaymentSucceeded, "2026AL-2", 8880, Source::kAlipay),
              Outcome::kAppended);
    bill_path_ += ".zip";
    std::ostringstream out, log;
    SimulateBillOptions options{.platform = Platform::kAlipay,
                                .date = kDate,
                                .out_path = bill_path_,
                                .drop = 0,
                                .alter = 0,
                                .alipay_account = "2088999999999999"};
    ASSERT_EQ(SimulateBill(db_.url(), options, out, log).rows, 2);
    const std::string receipts_before = db_.Scalar("SELECT count(*) FROM callback_receipts");
    const std::string events_before = db_.Scalar("SELECT count(*) FROM ledger_events");
    const auto run = [&] {
        std::ostringstream output;
        return Reconcile(db_.url(),
                         {.platform = Platform::kAlipay,
                          .bill_path = bill_path_,
                          .date = kDate,
                          .apply = true,
                          .alipay_seller_id = "2088123456789012"},
                         output);
    };
    try {
        (void)run();
        ADD_FAILURE() << "another account's bill was reconciled";
    } catch (const BillError& error) {
        EXPECT_THAT(error.what(), ::testing::HasSubstr("not alipay.seller_id 2088123456789012's"));
    }
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM reconciliations"), "0");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM reconciliation_bills"), "0");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts"), receipts_before);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events"), events_before);

    options.alipay_account = "2088123456789012";
    ASSERT_EQ(SimulateBill(db_.url(), options, out, log).rows, 2);
    EXPECT_TRUE(run().ok);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM reconciliations"), "1");
}

// Two partial refunds of one order, and a payment billed twice: the bill is reconciled entry
// by entry against the one event of each key, sorted by line within a key, and nothing of a
// key named twice is applied.
TEST_F(ReconcilePgTest, AKeyTwiceInOneBillIsClassifiedEntryByEntryAndNeverApplied) {
    Order("R-2", 5000);
    ASSERT_EQ(
        Callback("R-2", EventType::kPaymentSucceeded, "42R2", 5000, Source::kWechatV2, kDayBefore),
        Outcome::kAppended);
    ASSERT_EQ(Callback("R-2", EventType::kRefundSucceeded, "50R2a", 1000), Outcome::kAppended);
    Order("P-3", 1000);
    WriteBill(Bill({{EventType::kRefundSucceeded, "R-2", "50R2a", 1000, "SUCCESS", "42R2"},
                    {EventType::kRefundSucceeded, "R-2", "50R2b", 2000, "SUCCESS", "42R2"},
                    {EventType::kPaymentSucceeded, "P-3", "42P3b", 1000},
                    {EventType::kPaymentSucceeded, "P-3", "42P3a", 1000}}));
    const std::string events_before = db_.Scalar("SELECT count(*) FROM ledger_events");
    std::string output, log;
    const ReconcileReport report = Run(true, &output, Platform::kWechat, {}, &log);
    EXPECT_TRUE(report.failure.empty()) << report.failure;
    EXPECT_EQ(output,
              "reconcile wechat 2026-11-30 rows=4 matched=1 missing_in_ledger=2 "
              "missing_in_bill=0 amount_mismatch=0 transaction_mismatch=1 unknown_order=0 "
              "pending=0 applied=0 DIFFERS\n"
              "  missing_in_ledger PAYMENT_SUCCEEDED P-3 bill=42P3b:1000 ledger=-\n"
              "  missing_in_ledger PAYMENT_SUCCEEDED P-3 bill=42P3a:1000 ledger=-\n"
              "  transaction_mismatch REFUND_SUCCEEDED R-2 bill=50R2b:2000 ledger=50R2a:1000\n");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events"), events_before);
    const nlohmann::json differences = Differences(report.id);
    ASSERT_EQ(differences.size(), 3u);
    EXPECT_EQ(differences[0]["bill"], "42P3b:1000");
    // The difference object (docs/reconciliation.md#the-record), exactly; why an entry was not
    // applied is the run's log.
    for (const nlohmann::json& difference : differences) {
        EXPECT_EQ(difference.size(), 5u) << difference.dump();
        for (const char* key : {"category", "event_type", "out_trade_no", "bill", "ledger"}) {
            EXPECT_TRUE(difference.contains(key)) << key;
        }
    }
    EXPECT_THAT(log, ::testing::HasSubstr("line 4 PAYMENT_SUCCEEDED P-3 not applied: the bill "
                                          "has 2 entries for this event type and out_trade_no"));
}

// A refund row names its payment; --apply passes it as the refund's claim, so a
// refund of another payment is never appended.
TEST_F(ReconcilePgTest, ApplyRefusesARefundThatNamesAnotherPayment) {
    Order("R-3", 5000);
    ASSERT_EQ(
        Callback("R-3", EventType::kPaymentSucceeded, "42R3", 5000, Source::kWechatV2, kDayBefore),
        Outcome::kAppended);
    WriteBill(Bill({{EventType::kRefundSucceeded, "R-3", "50R3", 1000, "SUCCESS", "42OTHER"}}));
    const std::string receipts_before = db_.Scalar("SELECT count(*) FROM callback_receipts");
    std::string output, log;
    const ReconcileReport report = Run(true, &output, Platform::kWechat, {}, &log);
    EXPECT_FALSE(report.ok);
    EXPECT_EQ(Count(Category::kMissingInLedger, report), 1);
    EXPECT_EQ(Count(Category::kApplied, report), 0);
    EXPECT_THAT(output, ::testing::HasSubstr(
                            "  missing_in_ledger REFUND_SUCCEEDED R-3 bill=50R3:1000 ledger=-\n"));
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events WHERE out_trade_no = 'R-3'"), "2");
    // The write path kept a receipt of the refusal, as for a refund notice.
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts"),
              std::to_string(std::stoll(receipts_before) + 1));
    EXPECT_EQ(db_.Scalar("SELECT outcome FROM callback_receipts WHERE out_trade_no = 'R-3' "
                         "ORDER BY id DESC LIMIT 1"),
              "mismatch");
    const nlohmann::json differences = Differences(report.id);
    ASSERT_EQ(differences.size(), 1u);
    EXPECT_EQ(differences[0]["category"], "missing_in_ledger");
    EXPECT_THAT(log, ::testing::HasSubstr("REFUND_SUCCEEDED R-3 not applied: mismatch"));
}

// An Alipay bill (UTF-8 after a BOM) whose payment and refund the ledger missed.
TEST_F(ReconcilePgTest, ApplyAnAlipayBillAppendsWithSourceAlipayBill) {
    Order("AP-1", 8880);
    const std::string payment =
        "2026113022001458860515315453\t,AP-1\t,交易\t,T-shirt,2026-11-30 10:55:16,"
        "2026-11-30 10:55:23,\t,\t,\t,\t,*津水(602***@qq.com)\t,88.80,88.80,0.00,0.00,0.00,0.00,"
        "0.00,,0.00\t,0.00,\t,-0.53,0.00,";
    const std::string refund =
        "2026113022001458860515315453\t,AP-1\t,退款\t,T-shirt,2026-11-30 10:55:16,"
        "2026-11-30 12:56:48,\t,\t,\t,\t,*津水(602***@qq.com)\t,-8.80,-8.80,0.00,0.00,0.00,0.00,"
        "0.00,,0.00\t,0.00,RF-AP-1\t,0.05,0.00,";
    WriteBill(
        std::string("\xEF\xBB\xBF") + "#支付宝业务明细查询\r\n" +
        "#起始日期：[2026年11月30日 00:00:00]   终止日期：[2026年12月01日 00:00:00]\r\n" +
        "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,"
        "终端号,对方账户,订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,"
        "支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称,商家红包消费金额（元）,"
        "卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注\r\n" +
        payment + "\r\n" + refund + "\r\n" + "#交易合计：1笔，退款合计：1笔\r\n");
    std::string output;
    const ReconcileReport report = Run(true, &output, Platform::kAlipay);
    EXPECT_TRUE(report.ok) << output;
    EXPECT_EQ(output,
              "reconcile alipay 2026-11-30 rows=2 matched=0 missing_in_ledger=0 "
              "missing_in_bill=0 amount_mismatch=0 transaction_mismatch=0 unknown_order=0 "
              "pending=0 applied=2 OK\n"
              "  applied PAYMENT_SUCCEEDED AP-1 bill=2026113022001458860515315453:8880 "
              "ledger=2026113022001458860515315453:8880\n"
              "  applied REFUND_SUCCEEDED AP-1 bill=RF-AP-1:880 ledger=RF-AP-1:880\n");
    pqxx::read_transaction tx{*connection_};
    const std::vector<Event> events = ReadOrderEvents(tx, "AP-1");
    ASSERT_EQ(events.size(), 3u);
    EXPECT_EQ(events[1].source, Source::kAlipayBill);
    EXPECT_EQ(events[2].source, Source::kAlipayBill);
    EXPECT_EQ(events[2].amount, 880);
    const std::vector<Receipt> receipts = ReadOrderReceipts(tx, "AP-1", 0, 100);
    ASSERT_EQ(receipts.size(), 3u);
    EXPECT_EQ(receipts[1].source, Source::kAlipayBill);
    EXPECT_EQ(receipts[1].body, payment);
    EXPECT_EQ(receipts[2].body, refund);
    EXPECT_EQ(ReadOrder(tx, "AP-1")->status, "REFUNDED");
    tx.commit();
    EXPECT_TRUE(Verify(db_.url()).ok());
}

// A callback that commits between the classification and the apply: the same payment is a
// duplicate, so matched; another one is a conflict, so classified against it.
TEST_F(ReconcilePgTest, ACallbackCommittedMeanwhileIsMatchedOrAMismatch) {
    Order("D-1", 1000);
    Order("C-1", 2000);
    WriteBill(Bill({{EventType::kPaymentSucceeded, "D-1", "42D1", 1000},
                    {EventType::kPaymentSucceeded, "C-1", "42C1", 2000}}));
    const auto meanwhile = [&] {
        ASSERT_EQ(Callback("D-1", EventType::kPaymentSucceeded, "42D1", 1000), Outcome::kAppended);
        ASSERT_EQ(Callback("C-1", EventType::kPaymentSucceeded, "42CX", 2000), Outcome::kAppended);
    };
    std::string output, log;
    const ReconcileReport report = Run(true, &output, Platform::kWechat, meanwhile, &log);
    EXPECT_TRUE(report.failure.empty()) << report.failure;
    EXPECT_EQ(output,
              "reconcile wechat 2026-11-30 rows=2 matched=1 missing_in_ledger=0 "
              "missing_in_bill=0 amount_mismatch=0 transaction_mismatch=1 unknown_order=0 "
              "pending=0 applied=0 DIFFERS\n"
              "  transaction_mismatch PAYMENT_SUCCEEDED C-1 bill=42C1:2000 ledger=42CX:2000\n");
    const nlohmann::json differences = Differences(report.id);
    ASSERT_EQ(differences.size(), 1u);
    EXPECT_EQ(differences[0]["category"], "transaction_mismatch");
    EXPECT_THAT(log, ::testing::HasSubstr("PAYMENT_SUCCEEDED C-1 not applied: conflict"));
}

// The write path fails for one entry: what was applied is stored all the same, and the run
// says it failed (reconcile exits 2).
TEST_F(ReconcilePgTest, ARunThatAppliedIsStoredWhenApplyingFailsPartWay) {
    db_.Scalar(
        "CREATE FUNCTION test_refuse_p_fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.out_trade_no = 'P-fail' AND NEW.event_type = 'PAYMENT_SUCCEEDED' THEN "
        "RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$; "
        "CREATE TRIGGER test_refuse_p_fail BEFORE INSERT ON ledger_events FOR EACH ROW "
        "EXECUTE FUNCTION test_refuse_p_fail(); SELECT 1");
    Order("P-ok", 1000);
    Order("P-fail", 2000);
    WriteBill(Bill({{EventType::kPaymentSucceeded, "P-ok", "42OK", 1000},
                    {EventType::kPaymentSucceeded, "P-fail", "42F", 2000}}));
    std::string output;
    const ReconcileReport report = Run(true, &output);
    EXPECT_THAT(report.failure, ::testing::HasSubstr("--apply could not write line 3"));
    EXPECT_FALSE(report.ok);
    EXPECT_EQ(Count(Category::kApplied, report), 1);
    EXPECT_EQ(Count(Category::kMissingInLedger, report), 1);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM reconciliations"), "1");
    EXPECT_EQ(db_.Scalar("SELECT counts->>'applied' FROM reconciliations"), "1");
    EXPECT_EQ(db_.Scalar("SELECT ok FROM reconciliations"), "f");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events WHERE source = 'wechat_bill'"), "1");
}

// The record's INSERT fails once: tried again. The session dies during it: the run is stored
// from a new session with its counts (and the bill's bytes), and the failure is reported.
TEST_F(ReconcilePgTest, ARunThatAppliedIsStoredWhenItsRecordFails) {
    db_.Scalar(
        "CREATE SEQUENCE test_record_attempts; "
        "CREATE FUNCTION test_fail_first_record() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF nextval('test_record_attempts') = 1 THEN RAISE EXCEPTION 'injected failure'; END IF; "
        "IF currval('test_record_attempts') = 3 THEN PERFORM "
        "pg_terminate_backend(pg_backend_pid()); "
        "END IF; RETURN NEW; END $$; "
        "CREATE TRIGGER test_fail_first_record BEFORE INSERT ON reconciliations FOR EACH ROW "
        "EXECUTE FUNCTION test_fail_first_record(); SELECT 1");
    Order("P-1", 1000);
    const std::string text = Bill({{EventType::kPaymentSucceeded, "P-1", "42P1", 1000}});
    WriteBill(text);
    ReconcileReport report = Run(true);  // Attempts 1 (fails) and 2.
    EXPECT_TRUE(report.failure.empty()) << report.failure;
    EXPECT_EQ(Count(Category::kApplied, report), 1);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM reconciliations"), "1");

    Order("P-2", 2000);
    WriteBill(Bill({{EventType::kPaymentSucceeded, "P-2", "42P2", 2000}}));
    report = Run(true);  // Attempt 3 loses the session; 4 stores it from a new one.
    EXPECT_THAT(report.failure, ::testing::HasSubstr("with its counts only"));
    EXPECT_FALSE(report.ok);
    EXPECT_EQ(Count(Category::kApplied, report), 1);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM reconciliations"), "2");
    EXPECT_EQ(db_.Scalar("SELECT counts->>'applied' FROM reconciliations WHERE id = " +
                         std::to_string(report.id)),
              "1");
    EXPECT_EQ(db_.Scalar("SELECT bill_sha256 = encode(sha256(payledger_reconciliation_bill(r)), "
                         "'hex') FROM reconciliations r WHERE id = " +
                         std::to_string(report.id)),
              "t");
}

TEST_F(ReconcilePgTest, AuditorsReadTheRunsOverHttp) {
    Order("P-1", 1999);
    WriteBill(Bill({{EventType::kPaymentSucceeded, "P-1", "42P1", 1999}}));
    const ReconcileReport first = Run(false);
    const ReconcileReport second = Run(true);
    testing::TestService service{testing::TestConfig(db_.url())};
    testing::HttpClient client{service.port()};
    const auto get = [&](const std::string& target, const char* token = testing::kAuditorToken) {
        return client.Get(target, token);
    };
    testing::HttpResult page = get("/v1/reconciliations?limit=1");
    ASSERT_EQ(page.status, 200) << page.body;
    nlohmann::json body = nlohmann::json::parse(page.body);
    ASSERT_EQ(body["reconciliations"].size(), 1u);
    EXPECT_EQ(body["next_after"], first.id);
    EXPECT_EQ(body["reconciliations"][0]["ok"], false);
    EXPECT_EQ(body["reconciliations"][0]["counts"]["missing_in_ledger"], 1);
    EXPECT_FALSE(body["reconciliations"][0].contains("differences"));
    page = get("/v1/reconciliations?after=" + std::to_string(first.id));
    body = nlohmann::json::parse(page.body);
    ASSERT_EQ(body["reconciliations"].size(), 1u);
    EXPECT_EQ(body["reconciliations"][0]["id"], second.id);
    EXPECT_EQ(body["reconciliations"][0]["counts"]["applied"], 1);

    const testing::HttpResult one = get("/v1/reconciliations/" + std::to_string(first.id));
    ASSERT_EQ(one.status, 200) << one.body;
    body = nlohmann::json::parse(one.body);
    EXPECT_EQ(body["platform"], "wechat");
    EXPECT_EQ(body["date"], kDate);
    EXPECT_EQ(body["bill_sha256"].get<std::string>().size(), 64u);
    EXPECT_EQ(body["differences"], (nlohmann::json::array({{{"category", "missing_in_ledger"},
                                                            {"event_type", "PAYMENT_SUCCEEDED"},
                                                            {"out_trade_no", "P-1"},
                                                            {"bill", "42P1:1999"},
                                                            {"ledger", nullptr}}})));
    EXPECT_EQ(get("/v1/reconciliations/999999").status, 404);
    EXPECT_EQ(get("/v1/reconciliations/x").status, 400);
    EXPECT_EQ(get("/v1/reconciliations?limit=1001").status, 400);
    EXPECT_EQ(get("/v1/reconciliations", testing::kMerchantToken).status, 403);
    EXPECT_EQ(client.Get("/v1/reconciliations").status, 401);
}

}  // namespace
}  // namespace payledger::ledger::reconcile
