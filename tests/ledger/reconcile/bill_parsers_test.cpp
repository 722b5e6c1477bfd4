// The statement readers (docs/reconciliation.md) on sample rows in the platforms' layouts (byte
// for byte: the WeChat backticks, Alipay's tab-then-comma separators) and on broken bills: no
// summary, totals that disagree, bad amounts, another merchant or day, a CSV that is not GBK, a
// truncated gzip stream and a truncated zip archive. Lines are fed through LineReader in
// small pieces, so a line split across reads is covered too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ledger/reconcile/alipay_bill.hpp"
#include "ledger/reconcile/bill_input.hpp"
#include "ledger/reconcile/simulate_bill.hpp"
#include "ledger/reconcile/wechat_bill.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger::reconcile {
namespace {

using projections::EventType;
using ::testing::HasSubstr;

// Runs `parse`, which must throw BillError with a message that contains `expected`.
template <typename Parse>
void ExpectRefused(Parse parse, const std::string& expected, const std::string& what) {
    try {
        parse();
        ADD_FAILURE() << what << ": accepted";
    } catch (const BillError& error) {
        EXPECT_THAT(error.what(), HasSubstr(expected)) << what;
    }
}

// A statement in memory, handed out `piece` bytes at a time.
class StringStream final : public ByteStream {
public:
    explicit StringStream(std::string text, std::size_t piece = 7)
        : text_(std::move(text)), piece_(piece) {}
    std::size_t Read(char* buffer, std::size_t size) override {
        const std::size_t n = std::min({size, piece_, text_.size() - at_});
        text_.copy(buffer, n, at_);
        at_ += n;
        return n;
    }

private:
    std::string text_;
    std::size_t piece_;
    std::size_t at_ = 0;
};

const std::string kWechatHeader =
    "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,"
    "付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,"
    "退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注";
// Rows in the layout of docs/reconciliation.md#wechat-pay-trade-bill, backticks and all.
const std::string kWechatPayment =
    "`2026-11-30 10:06:33,`wx8888888888888888,`1900000109,`0,`,`4200002360202611301150650780,"
    "`ORD-20261130-0001,`oUpF8uMuAJO_M2pxb1Q9zNjWeS6o,`JSAPI,`SUCCESS,`OTHERS,`CNY,`60.00,`0.00,"
    "`0,`0,`0.00,`0.00,`,`,`T-shirt,`{\"k\":\"v\"},`0.32000,`0.54%,`60.00,`0.00,`";
const std::string kWechatRefund =
    "`2026-11-30 16:47:58,`wx8888888888888888,`1900000109,`0,`,`4200002166202611250324636876,"
    "`ORD-20261125-0042,`oUpF8uMuAJO_M2pxb1Q9zNjWeS6o,`JSAPI,`REFUND,`OTHERS,`CNY,`0.00,`0.00,"
    "`50302709992026113091956632208,`RF-20261130-0007,`50.00,`0.00,`ORIGINAL,`SUCCESS,`T-shirt,`,"
    "`-0.27000,`0.54%,`0.00,`50.00,`";
const std::string kWechatSummaryHeader =
    "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额";

std::string WechatBill(const std::vector<std::string>& rows, const std::string& summary,
                       const std::string& end = "\n") {
    std::string text = kWechatHeader + end;
    for (const std::string& row : rows) text += row + end;
    return text + kWechatSummaryHeader + end + summary + end;
}

const std::vector<std::string> kMchIds = {"1900000109"};

std::vector<BillEntry> ParseWechat(const std::string& text,
                                   const std::vector<std::string>& mch_ids = kMchIds,
                                   std::int64_t* rows = nullptr) {
    StringStream stream{text};
    LineReader lines{stream};
    std::vector<BillEntry> entries;
    const BillTotals totals =
        ParseWechatBill(lines, mch_ids, [&](const BillEntry& e) { entries.push_back(e); });
    if (rows != nullptr) *rows = totals.rows;
    return entries;
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
}

TEST(WechatBill, ProvidersSampleRowsGiveAPaymentAndARefund) {
    for (const std::string end : {"\n", "\r\n"}) {
        std::int64_t rows = 0;
        const std::vector<BillEntry> entries =
            ParseWechat(WechatBill({kWechatPayment, kWechatRefund},
                                   "`2,`60.00,`50.00,`0.00,`0.05000,`60.00,`50.00", end),
                        kMchIds, &rows);
        EXPECT_EQ(rows, 2);
        ASSERT_EQ(entries.size(), 2u);
        EXPECT_EQ(entries[0].event_type, EventType::kPaymentSucceeded);
        EXPECT_EQ(entries[0].out_trade_no, "ORD-20261130-0001");
        EXPECT_EQ(entries[0].platform_id, "4200002360202611301150650780");
        EXPECT_EQ(entries[0].amount, 6000);
        EXPECT_EQ(entries[0].currency, "CNY");
        EXPECT_EQ(entries[0].occurred_at, *projections::ParseRfc3339("2026-11-30T02:06:33Z"));
        EXPECT_FALSE(entries[0].pending);
        EXPECT_EQ(entries[0].raw_line, kWechatPayment);  // Without "\n" or "\r\n".
        EXPECT_EQ(entries[0].line_number, 2);
        EXPECT_EQ(entries[1].event_type, EventType::kRefundSucceeded);
        EXPECT_EQ(entries[1].out_trade_no, "ORD-20261125-0042");
        EXPECT_EQ(entries[1].platform_id, "50302709992026113091956632208");
        // The refund's payment, for the cross-check before --apply.
        EXPECT_EQ(entries[1].payment_id, "4200002166202611250324636876");
        EXPECT_EQ(entries[0].payment_id, "4200002360202611301150650780");
        EXPECT_EQ(entries[1].amount, 5000);
        EXPECT_FALSE(entries[1].pending);
        EXPECT_EQ(entries[1].raw_line, kWechatRefund);
    }
}

TEST(WechatBill, CommasInsideFieldsDoNotSplitThem) {
    const std::string row = Replace(kWechatPayment, "`T-shirt,", "`T-shirt, blue, XL,");
    const std::vector<BillEntry> entries =
        ParseWechat(WechatBill({row}, "`1,`60.00,`0.00,`0.00,`0.32000,`60.00,`0.00"));
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].amount, 6000);
}

TEST(WechatBill, ARefundStillProcessingIsPending) {
    const std::string row = Replace(kWechatRefund, "`ORIGINAL,`SUCCESS,", "`ORIGINAL,`PROCESSING,");
    const std::vector<BillEntry> entries =
        ParseWechat(WechatBill({row}, "`1,`0.00,`50.00,`0.00,`-0.27000,`0.00,`50.00"));
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_TRUE(entries[0].pending);
}

TEST(WechatBill, TheOlderLayoutIsRecognisedByItsHeader) {
    const std::string header =
        "交易时间,公众账号ID,商户号,子商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,"
        "交易状态,"
        "付款银行,货币种类,总金额,代金券或立减优惠金额,微信退款单号,商户退款单号,退款金额,"
        "代金券或立减优惠退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率";
    const std::string payment =
        "`2026-11-30 10:06:33,`wx8888888888888888,`1900000109,`0,`,`4200000001,`ORD-1,`o1,"
        "`JSAPI,`SUCCESS,`OTHERS,`CNY,`60.00,`0.00,`0,`0,`0.00,`0.00,`,`,`T-shirt,`,`0.32000,"
        "`0.54%";
    const std::string refund =
        "`2026-11-30 16:47:58,`wx8888888888888888,`1900000109,`0,`,`4200000001,`ORD-1,`o1,"
        "`JSAPI,`REFUND,`OTHERS,`CNY,`0.00,`0.00,`5030000001,`RF-1,`10.00,`0.00,`ORIGINAL,"
        "`SUCCESS,`T-shirt,`,`-0.05000,`0.54%";
    const std::string text =
        header + "\n" + payment + "\n" + refund + "\n" +
        "总交易单数,总交易额,总退款金额,总代金券或立减优惠退款金额,手续费总金额\n" +
        "`2,`60.00,`10.00,`0.00,`0.27000\n";
    const std::vector<BillEntry> entries = ParseWechat(text);
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[0].amount, 6000);
    EXPECT_EQ(entries[1].amount, 1000);
    EXPECT_EQ(entries[1].platform_id, "5030000001");
}

TEST(WechatBill, ARevokedRowCountsButIsNeitherAPaymentNorARefund) {
    const std::string row = Replace(kWechatPayment, "`SUCCESS,", "`REVOKED,");
    std::int64_t rows = 0;
    const std::vector<BillEntry> entries = ParseWechat(
        WechatBill({row, kWechatRefund}, "`2,`60.00,`50.00,`0.00,`0.05000,`60.00,`50.00"), kMchIds,
        &rows);
    EXPECT_EQ(rows, 2);
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].event_type, EventType::kRefundSucceeded);
}

TEST(WechatBill, TwoEntriesForOneKeyAreBothGiven) {
    // Two partial refunds of one order: ordinary, never a reason to refuse the bill.
    const std::string second = Replace(Replace(kWechatRefund, "`50302709992026113091956632208,",
                                               "`50302709992026113091956632209,"),
                                       "`0.00,`50.00,`", "`0.00,`10.00,`");
    const std::vector<BillEntry> entries = ParseWechat(WechatBill(
        {kWechatRefund, Replace(second, "`50.00,`0.00,`ORIGINAL", "`10.00,`0.00,`ORIGINAL")},
        "`2,`0.00,`60.00,`0.00,`-0.54000,`0.00,`60.00"));
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[0].out_trade_no, entries[1].out_trade_no);
    EXPECT_EQ(entries[1].amount, 1000);
    EXPECT_EQ(entries[1].line_number, 3);
}

// An id as long as a callback may store (projections::kPlatformIdBytesMax) is reconciled:
// the bill parsers take every id the ledger can hold.
TEST(WechatBill, AnIdOfAHundredCharactersIsRead) {
    const std::string id(100, '7');
    const std::string refund_id = "RF" + std::string(98, '8');
    const std::vector<BillEntry> entries = ParseWechat(WechatBill(
        {Replace(kWechatPayment, "`4200002360202611301150650780,", "`" + id + ","),
         Replace(Replace(kWechatRefund, "`4200002166202611250324636876,", "`" + id + ","),
                 "`50302709992026113091956632208,", "`" + refund_id + ",")},
        "`2,`60.00,`50.00,`0.00,`0.05000,`60.00,`50.00"));
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[0].platform_id, id);
    EXPECT_EQ(entries[0].payment_id, id);
    EXPECT_EQ(entries[1].platform_id, refund_id);
    EXPECT_EQ(entries[1].payment_id, id);
}

// Each broken bill breaks exactly one rule, and the message says which.
TEST(WechatBill, BrokenBillsAreRefused) {
    const std::string good = "`2,`60.00,`50.00,`0.00,`0.05000,`60.00,`50.00";
    const std::vector<std::string> rows = {kWechatPayment, kWechatRefund};
    const std::string missing_summary = kWechatHeader + "\n" + kWechatPayment + "\n";
    const std::string summary_header_only =
        kWechatHeader + "\n" + kWechatPayment + "\n" + kWechatSummaryHeader + "\n";
    const auto payment_with = [](const std::string& from, const std::string& to) {
        return Replace(kWechatPayment, from, to);
    };
    struct Case {
        std::string text;
        std::string message;
        std::string what;
    };
    const Case cases[] = {
        {"", "the bill is empty", "empty"},
        {missing_summary, "it has no summary row", "no summary"},
        {summary_header_only, "it has no summary row", "summary header without its row"},
        {WechatBill(rows, "`3,`60.00,`50.00,`0.00,`0.05000,`60.00,`50.00"),
         "总交易单数 3, it has 2 detail rows", "count"},
        {WechatBill(rows, "`2,`60.00,`50.00,`0.00,`0.05000,`60.01,`50.00"),
         "订单总金额 60.01, its rows add up to 60.00", "order total"},
        {WechatBill(rows, "`2,`60.00,`50.00,`0.00,`0.05000,`60.00,`49.99"),
         "申请退款总金额 49.99, its rows add up to 50.00", "refund total"},
        // The totals agree with what is left: only the count tells a row is missing.
        {WechatBill({kWechatPayment}, "`2,`60.00,`0.00,`0.00,`0.32000,`60.00,`0.00"),
         "总交易单数 2, it has 1 detail rows", "a row missing"},
        {WechatBill({payment_with("`0.54%,`60.00,", "`0.54%,`60.001,"), kWechatRefund}, good),
         "订单金额 \"60.001\" is not an amount", "third decimal"},
        {WechatBill({payment_with("`0.54%,`60.00,", "`0.54%,`-60.00,"), kWechatRefund}, good),
         "订单金额 \"-60.00\" is not an amount", "sign"},
        {WechatBill({payment_with("`0.54%,`60.00,", "`0.54%,`6e1,"), kWechatRefund}, good),
         "订单金额 \"6e1\" is not an amount", "exponent"},
        {WechatBill({payment_with("`1900000109,", "`1900000999,"), kWechatRefund}, good),
         "商户号 1900000999 is neither", "another merchant"},
        {WechatBill({payment_with("`ORD-20261130-0001,", "`ORD 1,"), kWechatRefund}, good),
         "商户订单号 \"ORD 1\" is not a valid out_trade_no", "bad out_trade_no"},
        {WechatBill({payment_with("`CNY,", "`cny,"), kWechatRefund}, good),
         "货币种类 \"cny\" is not an ISO 4217 code", "bad currency"},
        {WechatBill({payment_with("`2026-11-30 10:06:33,", "`2026-11-31 10:06:33,"), kWechatRefund},
                    good),
         "交易时间 \"2026-11-31 10:06:33\"", "bad time"},
        {WechatBill({payment_with(",`0.54%,", ","), kWechatRefund}, good),
         "has 26 fields, the header 27", "a field short"},
        {WechatBill({payment_with("`SUCCESS,", "`PAID,"), kWechatRefund}, good),
         "unknown 交易状态 PAID", "unknown status"},
        {WechatBill(
             {payment_with("`4200002360202611301150650780,", "`42000023602026113011506507８,"),
              kWechatRefund},
             good),
         "微信订单号 must be 1-128 visible ASCII characters", "a non-ASCII payment id"},
        {WechatBill(
             {payment_with("`4200002360202611301150650780,", "`" + std::string(129, '4') + ","),
              kWechatRefund},
             good),
         "微信订单号 must be 1-128 visible ASCII characters", "a payment id of 129 characters"},
        {WechatBill({kWechatPayment,
                     Replace(kWechatRefund, "`50302709992026113091956632208,", "`5030 2709,")},
                    good),
         "微信退款单号 must be 1-128 visible ASCII characters", "a refund id with a space"},
        {WechatBill(
             {kWechatPayment, Replace(kWechatRefund, "`4200002166202611250324636876,", "`,")},
             good),
         "微信订单号 must be 1-128 visible ASCII characters", "a refund row without its payment"},
        // 0xFF is never UTF-8; the field is one no rule reads.
        {WechatBill({payment_with("`T-shirt,", "`T-\xff,"), kWechatRefund}, good),
         "line 2: is not UTF-8 text", "invalid UTF-8"},
        {Replace(WechatBill(rows, good), "微信订单号", "微信单号"),
         "not a WeChat Pay ALL trade bill header (no 微信订单号)", "not a trade bill header"},
        // A well-formed row, but after the summary.
        {WechatBill(rows, good) + kWechatPayment + "\n", "text after the summary row",
         "text after the summary"},
    };
    for (const Case& c : cases) {
        ExpectRefused([&] { static_cast<void>(ParseWechat(c.text)); }, c.message, c.what);
    }
}

TEST(WechatBill, GzipIsReadThroughZlibAndATruncatedStreamIsRefused) {
    const std::string text = WechatBill({kWechatPayment, kWechatRefund},
                                        "`2,`60.00,`50.00,`0.00,`0.05000,`60.00,`50.00");
    const std::string path = std::filesystem::temp_directory_path() /
                             ("payledger-bill-" + std::to_string(::getpid()) + ".txt.gz");
    gzFile out = gzopen(path.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    ASSERT_EQ(gzwrite(out, text.data(), static_cast<unsigned>(text.size())),
              static_cast<int>(text.size()));
    ASSERT_EQ(gzclose(out), Z_OK);
    {
        const std::unique_ptr<ByteStream> stream = OpenTextOrGzip(path);
        LineReader lines{*stream};
        std::vector<BillEntry> entries;
        ParseWechatBill(lines, kMchIds, [&](const BillEntry& e) { entries.push_back(e); });
        EXPECT_EQ(entries.size(), 2u);
    }
    std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
    {
        const std::unique_ptr<ByteStream> stream = OpenTextOrGzip(path);
        LineReader lines{*stream};
        ExpectRefused([&] { ParseWechatBill(lines, kMchIds, [](const BillEntry&) {}); },
                      "the gzip stream is truncated or corrupt", "truncated gzip");
    }
    std::filesystem::remove(path);
}

TEST(WechatBill, AGzipBombStopsAtTheDecompressedLimit) {
    // 1 MiB of line ends compresses to about a kilobyte.
    const std::string text =
        WechatBill({kWechatPayment}, "`1,`60.00,`0.00,`0.00,`0.32000,`60.00,`0.00") +
        std::string(1 << 20, '\n');
    const std::string path = std::filesystem::temp_directory_path() /
                             ("payledger-bomb-" + std::to_string(::getpid()) + ".txt.gz");
    gzFile out = gzopen(path.c_str(), "wb9");
    ASSERT_NE(out, nullptr);
    ASSERT_EQ(gzwrite(out, text.data(), static_cast<unsigned>(text.size())),
              static_cast<int>(text.size()));
    ASSERT_EQ(gzclose(out), Z_OK);
    EXPECT_LT(std::filesystem::file_size(path), 10'000u);
    {
        const std::unique_ptr<ByteStream> stream = OpenTextOrGzip(path, 512 * 1024);
        LineReader lines{*stream};
        ExpectRefused([&] { ParseWechatBill(lines, kMchIds, [](const BillEntry&) {}); },
                      "larger than 524288 bytes once decompressed", "gzip bomb");
    }
    {
        // Within the byte limit, the blank lines count toward the line limit.
        const std::unique_ptr<ByteStream> stream = OpenTextOrGzip(path);
        LineReader lines{*stream, 100'000};
        ExpectRefused([&] { ParseWechatBill(lines, kMchIds, [](const BillEntry&) {}); },
                      "more than 100000 lines (blank ones included)", "blank lines");
    }
    {
        const std::unique_ptr<ByteStream> stream = OpenTextOrGzip(path);
        LineReader lines{*stream};
        EXPECT_EQ(ParseWechatBill(lines, kMchIds, [](const BillEntry&) {}).rows, 1);
    }
    std::filesystem::remove(path);
}

// The sample of docs/reconciliation.md#alipay-business-detail-bill, whole (the separators are
// tab-then-comma), as UTF-8.
const std::vector<std::string> kAlipayLines = {
    "#支付宝业务明细查询",
    "#账号：[20881234567890120156]",
    "#起始日期：[2026年11月30日 00:00:00]   终止日期：[2026年12月01日 00:00:00]",
    "#-----------------------------------------业务明细列表---------------------------------------"
    "-",
    "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,终端号,"
    "对方账户,"
    "订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,支付宝优惠（元）,商家优惠（元）,"
    "券核销金额（元）,券名称,商家红包消费金额（元）,卡消费金额（元）,退款批次号/"
    "请求号,服务费（元）,"
    "分润（元）,备注",
    "2026113022001458860515315453\t,ORD-20261130-0002\t,交易\t,T-shirt,2026-11-30 10:55:16,"
    "2026-11-30 10:55:23,\t,\t,\t,\t,*津水(602***@qq.com)\t,88.80,88.80,0.00,0.00,0.00,0.00,0.00,,"
    "0.00\t,0.00,\t,-0.53,0.00,",
    "2026113022001458860515315453\t,ORD-20261130-0002\t,退款\t,T-shirt,2026-11-30 10:55:16,"
    "2026-11-30 12:56:48,\t,\t,\t,\t,*津水(602***@qq.com)\t,-8.80,-8.80,0.00,0.00,0.00,0.00,0.00,,"
    "0.00\t,0.00,RF-20261130-0002\t,0.05,0.00,",
    "#-----------------------------------------业务明细列表结束-----------------------------------"
    "-",
    "#交易合计：1笔，退款合计：1笔",
    "#导出时间：[2026年12月01日 09:12:01]",
};

std::string Gbk(const std::string& utf8) {
    const std::optional<std::string> gbk = EncodeGbk(utf8);
    EXPECT_TRUE(gbk.has_value());
    return gbk.value_or("");
}

std::string AlipayCsv(std::vector<std::string> lines, bool utf8_bom = false) {
    std::string text = utf8_bom ? "\xEF\xBB\xBF" : "";
    for (const std::string& line : lines) text += (utf8_bom ? line : Gbk(line)) + "\r\n";
    return text;
}

std::vector<BillEntry> ParseAlipay(const std::string& text, const std::string& date = "2026-11-30",
                                   std::int64_t* rows = nullptr) {
    StringStream stream{text};
    LineReader lines{stream};
    std::vector<BillEntry> entries;
    const BillTotals totals =
        ParseAlipayBill(lines, date, [&](const BillEntry& e) { entries.push_back(e); });
    if (rows != nullptr) *rows = totals.rows;
    return entries;
}

TEST(AlipayBill, ProvidersSampleRowsGiveAPaymentAndARefund) {
    for (const bool bom : {false, true}) {
        std::int64_t rows = 0;
        const std::vector<BillEntry> entries =
            ParseAlipay(AlipayCsv(kAlipayLines, bom), "2026-11-30", &rows);
        EXPECT_EQ(rows, 2);
        ASSERT_EQ(entries.size(), 2u);
        EXPECT_EQ(entries[0].event_type, EventType::kPaymentSucceeded);
        EXPECT_EQ(entries[0].out_trade_no, "ORD-20261130-0002");  // Trailing tab trimmed.
        EXPECT_EQ(entries[0].platform_id, "2026113022001458860515315453");
        EXPECT_EQ(entries[0].amount, 8880);
        EXPECT_EQ(entries[0].currency, "CNY");
        EXPECT_EQ(entries[0].occurred_at, *projections::ParseRfc3339("2026-11-30T02:55:23Z"));
        EXPECT_EQ(entries[1].event_type, EventType::kRefundSucceeded);
        EXPECT_EQ(entries[1].platform_id, "RF-20261130-0002");
        EXPECT_EQ(entries[1].payment_id, "2026113022001458860515315453");
        EXPECT_EQ(entries[1].amount, 880);  // The absolute value of -8.80.
        // The receipt's body is the bill's own bytes: GBK, or UTF-8 after a BOM.
        EXPECT_EQ(entries[0].raw_line, bom ? kAlipayLines[5] : Gbk(kAlipayLines[5]));
    }
}

TEST(AlipayBill, ARefundWithoutARequestNumberUsesTheTradeNumber) {
    std::vector<std::string> lines = kAlipayLines;
    lines[6] = Replace(lines[6], "RF-20261130-0002\t,", "\t,");
    const std::vector<BillEntry> entries = ParseAlipay(AlipayCsv(lines));
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[1].platform_id, "2026113022001458860515315453");
}

TEST(AlipayBill, BrokenBillsAreRefused) {
    const auto with = [](std::size_t index, const std::string& line) {
        std::vector<std::string> lines = kAlipayLines;
        lines[index] = line;
        return AlipayCsv(lines);
    };
    const auto without = [](std::size_t index) {
        std::vector<std::string> lines = kAlipayLines;
        lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(index));
        return AlipayCsv(lines);
    };
    // The footer before the refund row: the counts still agree, only the order is wrong.
    std::vector<std::string> footer_first = kAlipayLines;
    std::swap(footer_first[6], footer_first[7]);
    std::swap(footer_first[7], footer_first[8]);
    struct Case {
        std::string text;
        std::string message;
        std::string what;
    };
    const Case cases[] = {
        {without(8), "no #交易合计：N笔，退款合计：M笔 footer", "no footer"},
        {without(2), "the bill has no #起始日期 line", "no start date"},
        {without(4), "the header starts with 支付宝交易号", "no header"},
        {without(6), "its footer counts 1 payments and 1 refunds, its rows 1 and 0",
         "a row missing"},
        {with(8, "#交易合计：2笔，退款合计：1笔"), "its footer counts 2 payments", "payment count"},
        {with(8, "#交易合计：1笔，退款合计：0笔"), "and 0 refunds, its rows 1 and 1",
         "refund count"},
        {with(8, "#交易合计：一笔，退款合计：1笔"), "the footer's counts are not numbers",
         "count not a number"},
        {with(5, Replace(kAlipayLines[5], ",88.80,88.80,", ",88.801,88.80,")),
         "订单金额（元） \"88.801\"", "third decimal"},
        {with(5, Replace(kAlipayLines[5], ",88.80,88.80,", ",1e3,88.80,")),
         "订单金额（元） \"1e3\"", "exponent"},
        {with(5, Replace(kAlipayLines[5], ",88.80,88.80,", ",-88.80,88.80,")),
         "订单金额（元） \"-88.80\"", "negative pay"},
        {with(5, Replace(kAlipayLines[5], "ORD-20261130-0002\t", "ORD 2\t")),
         "商户订单号 \"ORD 2\" is not a valid out_trade_no", "bad key"},
        {with(5, Replace(kAlipayLines[5], "2026-11-30 10:55:23", "2026-11-30 25:55:23")),
         "完成时间 \"2026-11-30 25:55:23\"", "bad time"},
        {with(5, Replace(kAlipayLines[5], ",-0.53,0.00,", ",-0.53,")),
         "has 24 fields, the header 25", "a field short"},
        {AlipayCsv(footer_first), "a row after the footer", "a row after the footer"},
        // 0xFF never starts a GBK character; the field is one no rule reads.
        {Replace(AlipayCsv(kAlipayLines), "T-shirt", "T-\xff"), "line 6: is not GBK text",
         "not GBK"},
        {AlipayCsv({"#支付宝业务明细查询",
                    "#起始日期：[2026年11月30日 00:00:00]   终止日期：[2026年12月01日 00:00:00]",
                    kAlipayLines[4], Replace(kAlipayLines[5], "T-shirt", "T-\xff"), kAlipayLines[6],
                    kAlipayLines[8]},
                   /*utf8_bom=*/true),
         "line 4: is not UTF-8 text", "a UTF-8 bill that is not UTF-8"},
        {with(5, Replace(kAlipayLines[5], "2026113022001458860515315453\t",
                         "2026113022001458860515315453" + std::string(101, '9') + "\t")),
         "支付宝交易号 must be 1-128 visible ASCII characters", "a trade number of 129 characters"},
        {with(6, Replace(kAlipayLines[6], "RF-20261130-0002\t", "RF 2\t")),
         "退款批次号/请求号 must be 1-128 visible ASCII characters",
         "a refund number with a space"},
        // A monthly bill: it starts on --date but does not end the next day.
        {with(2, "#起始日期：[2026年11月30日 00:00:00]   终止日期：[2026年12月30日 00:00:00]"),
         "not a daily bill of 2026-11-30", "a month"},
        {with(2, "#起始日期：[2026年11月30日 08:00:00]   终止日期：[2026年12月01日 00:00:00]"),
         "not a daily bill of 2026-11-30", "a day starting at 08:00"},
        {with(2, "#起始日期：[2026年11月30日 00:00:00]"), "the dates line is not", "no end date"},
    };
    for (const Case& c : cases) {
        ExpectRefused([&] { static_cast<void>(ParseAlipay(c.text)); }, c.message, c.what);
    }
    ExpectRefused([&] { static_cast<void>(ParseAlipay(AlipayCsv(kAlipayLines), "2026-12-01")); },
                  "not a daily bill of 2026-12-01", "another day");
    // A monthly bill of November refused for its first day.
    std::vector<std::string> month = kAlipayLines;
    month[2] = "#起始日期：[2026年11月01日 00:00:00]   终止日期：[2026年12月01日 00:00:00]";
    ExpectRefused([&] { static_cast<void>(ParseAlipay(AlipayCsv(month), "2026-11-01")); },
                  "not a daily bill of 2026-11-01", "a monthly bill");
}

// alipay.seller_id configured: the #账号 line must name that account, alone or with Alipay's
// four-digit suffix; another account's bill, or one that names none, is refused before any
// entry is passed on. Without a seller_id the line is not checked.
TEST(AlipayBill, AnotherAccountsBillIsRefusedWhenTheSellerIdIsConfigured) {
    const std::string kSellerId = "2088123456789012";  // The sample's #账号 is it + "0156".
    const auto parse = [](const std::string& text, const std::string& seller_id,
                          std::size_t* passed_on) {
        StringStream stream{text};
        LineReader lines{stream};
        *passed_on = 0;
        return ParseAlipayBill(
            lines, "2026-11-30", [&](const BillEntry&) { ++*passed_on; }, seller_id);
    };
    const auto with_account = [](const std::string& line) {
        std::vector<std::string> lines = kAlipayLines;
        lines[1] = line;
        return AlipayCsv(lines);
    };
    std::size_t passed_on = 0;
    // Accepted: the sample as it is, the seller id alone, either encoding.
    for (const std::string& text :
         {AlipayCsv(kAlipayLines), AlipayCsv(kAlipayLines, /*utf8_bom=*/true),
          with_account("#账号：[2088123456789012]")}) {
        EXPECT_EQ(parse(text, kSellerId, &passed_on).rows, 2);
        EXPECT_EQ(passed_on, 2u);
    }
    struct Case {
        std::string text;
        std::string message;
        std::string what;
    };
    std::vector<std::string> no_account = kAlipayLines;
    no_account.erase(no_account.begin() + 1);
    const Case cases[] = {
        {with_account("#账号：[20889999999999990156]"),
         "line 2: the bill is account 20889999999999990156's (#账号), not alipay.seller_id "
         "2088123456789012's",
         "another account"},
        {with_account("#账号：[2088999999999999]"), "not alipay.seller_id", "another user id"},
        {with_account("#账号：[20881234567890]"), "not alipay.seller_id", "a prefix of it"},
        {with_account("#账号：[208812345678901201567]"), "not alipay.seller_id",
         "five more digits"},
        {with_account("#账号：[2088123456789012abcd]"), "not alipay.seller_id", "not digits"},
        {with_account("#账号：[]"), "not alipay.seller_id", "empty"},
        {with_account("#账号：[2088123456789012"), "the account line is not #账号：[...]",
         "unclosed"},
        {AlipayCsv(no_account), "line 4: the bill names no account (#账号) before its rows",
         "no account line"},
    };
    for (const Case& c : cases) {
        ExpectRefused([&] { static_cast<void>(parse(c.text, kSellerId, &passed_on)); }, c.message,
                      c.what);
        EXPECT_EQ(passed_on, 0u) << c.what;
    }
    // Not configured: the account is not checked (nor needed).
    EXPECT_EQ(parse(with_account("#账号：[20889999999999990156]"), "", &passed_on).rows, 2);
    EXPECT_EQ(parse(AlipayCsv(no_account), "", &passed_on).rows, 2);
}

class TempFiles {
public:
    std::string Path(const std::string& name) {
        const std::string path = std::filesystem::temp_directory_path() /
                                 ("payledger-" + std::to_string(::getpid()) + "-" + name);
        paths_.push_back(path);
        return path;
    }
    ~TempFiles() {
        for (const std::string& path : paths_) std::filesystem::remove(path);
    }

private:
    std::vector<std::string> paths_;
};

void WriteFile(const std::string& path, const std::string& bytes) {
    std::ofstream out{path, std::ios::binary};
    out << bytes;
}

std::vector<BillEntry> ParseAlipayZip(const std::string& path) {
    const std::unique_ptr<ByteStream> stream = OpenZipEntry(path, kAlipayDetailSuffix);
    LineReader lines{*stream};
    std::vector<BillEntry> entries;
    ParseAlipayBill(lines, "2026-11-30", [&](const BillEntry& e) { entries.push_back(e); });
    return entries;
}

TEST(AlipayBill, TheZipEntryNamedInGbkIsFoundAndATruncatedZipIsRefused) {
    TempFiles files;
    const std::string csv = files.Path("detail.csv");
    const std::string zip = files.Path("bill.csv.zip");
    WriteFile(csv, AlipayCsv(kAlipayLines));
    ZipAlipayBill(zip, csv, "20881234567890120156", "2026-11-30");
    EXPECT_TRUE(LooksLikeZip(zip));
    EXPECT_EQ(ParseAlipayZip(zip).size(), 2u);

    // Cut in the middle: the central directory at the end is gone.
    const std::string truncated = files.Path("truncated.zip");
    std::filesystem::copy_file(zip, truncated);
    std::filesystem::resize_file(truncated, std::filesystem::file_size(zip) / 2);
    ExpectRefused([&] { static_cast<void>(ParseAlipayZip(truncated)); },
                  "not a readable zip archive", "truncated zip");
    // The detail entry's data damaged in place: its CRC no longer matches.
    std::string bytes;
    {
        std::ifstream in{zip, std::ios::binary};
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    const std::string damaged = files.Path("damaged.zip");
    bytes[130] = static_cast<char>(bytes[130] ^ 0x55);  // Past the local header and name.
    WriteFile(damaged, bytes);
    ExpectRefused([&] { static_cast<void>(ParseAlipayZip(damaged)); }, "cannot read the zip entry",
                  "damaged zip");
    // The entry's stated size is checked before anything is read.
    ExpectRefused([&] { static_cast<void>(OpenZipEntry(zip, kAlipayDetailSuffix, 100)); },
                  "the zip entry is larger than 100 bytes once decompressed", "zip limit");
    // A zip without the detail file.
    const std::string other = files.Path("other.zip");
    WriteFile(csv, "x");
    ZipAlipayBill(other, csv, "2088", "2026-11-30");
    ExpectRefused([&] { static_cast<void>(OpenZipEntry(other, "_不存在.csv")); },
                  "no entry of the zip archive ends in _不存在.csv", "no detail entry");
}

TEST(LineReader, ALineOverTheReceiptLimitIsRefused) {
    StringStream stream{std::string(kBillLineBytesMax + 10, 'x') + "\n", 4096};
    LineReader lines{stream};
    std::string line;
    ExpectRefused([&] { lines.Next(line); }, "line 1 is longer than 65536 bytes", "long line");
}

TEST(LineReader, BlankLinesCountTowardTheLineLimit) {
    StringStream stream{std::string(10, '\n'), 4096};
    LineReader lines{stream, 9};
    std::string line;
    for (int i = 0; i < 9; ++i) ASSERT_TRUE(lines.Next(line));
    ExpectRefused([&] { lines.Next(line); }, "more than 9 lines (blank ones included)", "limit");
}

}  // namespace
}  // namespace payledger::ledger::reconcile
