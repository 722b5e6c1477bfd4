#include "ledger/reconcile/alipay_bill.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include "ledger/base/bytes.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger::reconcile {
namespace {

using projections::EventType;

std::string_view Trim(std::string_view text) {
    const auto pad = [](char c) { return c == '\t' || c == ' '; };
    while (!text.empty() && pad(text.front())) text.remove_prefix(1);
    while (!text.empty() && pad(text.back())) text.remove_suffix(1);
    return text;
}

std::vector<std::string_view> SplitFields(std::string_view line) {
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = line.find(',', start);
        fields.push_back(Trim(line.substr(
            start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
        if (comma == std::string_view::npos) return fields;
        start = comma + 1;
    }
}

// "yyyy年MM月dd日 HH:mm:ss" -> its time, Asia/Shanghai; nullopt when malformed. The CJK
// characters are three bytes each in UTF-8.
std::optional<projections::TimeMicros> BillTime(std::string_view text) {
    if (text.size() != 26 || text.substr(4, 3) != "年" || text.substr(9, 3) != "月" ||
        text.substr(14, 3) != "日" || text[17] != ' ') {
        return std::nullopt;
    }
    const std::string dashed = std::string(text.substr(0, 4)) + "-" +
                               std::string(text.substr(7, 2)) + "-" +
                               std::string(text.substr(12, 2)) + " " + std::string(text.substr(18));
    return projections::ParseShanghaiDashed(dashed);
}

// "#起始日期：[2026年11月30日 00:00:00]   终止日期：[2026年12月01日 00:00:00]": nullopt when the
// line is not the dates line; otherwise checks that it names exactly `date`'s Shanghai day,
// [date 00:00:00, date+1 00:00:00) (a monthly bill is not a daily one). Throws BillError.
bool CheckDates(std::string_view line, const std::string& date, std::int64_t line_number) {
    constexpr std::string_view kStart = "#起始日期：[";
    constexpr std::string_view kEnd = "终止日期：[";
    if (line.substr(0, kStart.size()) != kStart) return false;
    const std::optional<projections::TimeMicros> day =
        projections::ParseShanghaiDashed(date + " 00:00:00");
    PAYLEDGER_ASSERT(day.has_value());  // Reconcile checked --date.
    constexpr projections::TimeMicros kDayMicros = 86'400'000'000;
    line.remove_prefix(kStart.size());
    const std::size_t start_close = line.find(']');
    const std::size_t end_open = line.find(kEnd);
    std::optional<projections::TimeMicros> start, end;
    if (start_close != std::string_view::npos && end_open != std::string_view::npos &&
        end_open > start_close && !line.empty() && line.back() == ']') {
        start = BillTime(line.substr(0, start_close));
        const std::size_t end_at = end_open + kEnd.size();
        end = BillTime(line.substr(end_at, line.size() - 1 - end_at));
    }
    if (!start || !end) {
        throw BillError(AtLine(line_number) +
                        "the dates line is not #起始日期：[yyyy年MM月dd日 HH:mm:ss]   "
                        "终止日期：[yyyy年MM月dd日 HH:mm:ss]");
    }
    if (*start != *day || *end != *day + kDayMicros) {
        throw BillError(AtLine(line_number) + "the bill's #起始日期 and 终止日期 must be --date " +
                        date + " 00:00:00 and the next day's 00:00:00: not a daily bill of " +
                        date);
    }
    return true;
}

// "#账号：[20881234567890120156]": false when the line is not the account line; otherwise, with
// a `seller_id`, checks that it names that account (the user id alone, or followed by the
// four digits Alipay appends for the kind of account). Throws BillError.
bool CheckAccount(std::string_view line, const std::string& seller_id, std::int64_t line_number) {
    constexpr std::string_view kAccount = "#账号：[";
    if (line.substr(0, kAccount.size()) != kAccount) return false;
    if (seller_id.empty()) return true;
    line.remove_prefix(kAccount.size());
    const std::size_t close = line.find(']');
    if (close == std::string_view::npos) {
        throw BillError(AtLine(line_number) + "the account line is not #账号：[...]");
    }
    const std::string_view account = line.substr(0, close);
    const bool digits = account.find_first_not_of("0123456789") == std::string_view::npos;
    const bool ours =
        digits && account.substr(0, seller_id.size()) == seller_id &&
        (account.size() == seller_id.size() || account.size() == seller_id.size() + 4);
    if (!ours) {
        throw BillError(AtLine(line_number) + "the bill is account " +
                        std::string(account.substr(0, 64)) + "'s (#账号), not alipay.seller_id " +
                        seller_id + "'s: another merchant's bill");
    }
    return true;
}

// "#交易合计：1笔，退款合计：1笔" -> {1, 1}.
std::optional<std::pair<std::int64_t, std::int64_t>> FooterCounts(std::string_view line,
                                                                  std::int64_t line_number) {
    constexpr std::string_view kPayments = "#交易合计：";
    constexpr std::string_view kRefunds = "，退款合计：";
    constexpr std::string_view kUnit = "笔";
    if (line.substr(0, kPayments.size()) != kPayments) return std::nullopt;
    line.remove_prefix(kPayments.size());
    const auto count = [&](std::string_view text) {
        if (text == "0") return std::int64_t{0};
        const std::optional<std::int64_t> value = projections::ParseMinorUnits(text);
        if (!value) throw BillError(AtLine(line_number) + "the footer's counts are not numbers");
        return *value;
    };
    const std::size_t first_unit = line.find(kUnit);
    if (first_unit == std::string_view::npos ||
        line.substr(first_unit + kUnit.size(), kRefunds.size()) != kRefunds) {
        throw BillError(AtLine(line_number) + "the footer is not #交易合计：N笔，退款合计：M笔");
    }
    const std::int64_t payments = count(line.substr(0, first_unit));
    line.remove_prefix(first_unit + kUnit.size() + kRefunds.size());
    const std::size_t second_unit = line.find(kUnit);
    if (second_unit == std::string_view::npos) {
        throw BillError(AtLine(line_number) + "the footer is not #交易合计：N笔，退款合计：M笔");
    }
    return std::pair{payments, count(line.substr(0, second_unit))};
}

struct Columns {
    std::size_t count = 0;
    std::size_t trade_no = 0, out_trade_no = 0, kind = 0, finished_at = 0, amount = 0,
                refund_no = 0;
};

Columns ReadColumns(std::string_view header, std::int64_t line_number) {
    const std::vector<std::string_view> names = SplitFields(header);
    Columns columns{.count = names.size()};
    const auto need = [&](std::string_view name) {
        const auto it = std::find(names.begin(), names.end(), name);
        if (it == names.end()) {
            throw BillError(AtLine(line_number) + "the header has no " + std::string(name));
        }
        return static_cast<std::size_t>(it - names.begin());
    };
    columns.trade_no = need("支付宝交易号");
    columns.out_trade_no = need("商户订单号");
    columns.kind = need("业务类型");
    columns.finished_at = need("完成时间");
    columns.amount = need("订单金额（元）");
    columns.refund_no = need("退款批次号/请求号");
    return columns;
}

BillEntry Entry(const Columns& columns, const std::vector<std::string_view>& fields, bool refund,
                std::int64_t line_number) {
    BillEntry entry{
        .line_number = line_number,
        .event_type = refund ? EventType::kRefundSucceeded : EventType::kPaymentSucceeded,
        .out_trade_no = std::string(fields[columns.out_trade_no]),
        .currency = "CNY"};
    const std::string_view refund_no = fields[columns.refund_no];
    entry.platform_id =
        std::string(refund && !refund_no.empty() ? refund_no : fields[columns.trade_no]);
    entry.payment_id = std::string(fields[columns.trade_no]);
    std::string_view amount = fields[columns.amount];
    // A refund's amount is negative; its absolute value is the entry's. A payment's is not.
    if (refund && !amount.empty() && amount.front() == '-') amount.remove_prefix(1);
    const std::optional<std::int64_t> fen = projections::ParseMajorUnits(amount);
    if (!fen) {
        throw BillError(AtLine(line_number) + "订单金额（元） \"" +
                        std::string(fields[columns.amount]) +
                        "\" is not an amount of 0.01 ... 100000000000.00 yuan");
    }
    entry.amount = *fen;
    if (!projections::IsValidKey(entry.out_trade_no)) {
        throw BillError(AtLine(line_number) + "商户订单号 \"" + entry.out_trade_no +
                        "\" is not a valid out_trade_no");
    }
    if (!projections::IsValidPlatformId(entry.platform_id)) {
        throw BillError(AtLine(line_number) +
                        (refund && !refund_no.empty() ? "退款批次号/请求号" : "支付宝交易号") +
                        " must be " + projections::kPlatformIdRuleText);
    }
    if (!projections::IsValidPlatformId(entry.payment_id)) {
        throw BillError(AtLine(line_number) + "支付宝交易号 must be " +
                        projections::kPlatformIdRuleText);
    }
    const std::optional<projections::TimeMicros> time =
        projections::ParseShanghaiDashed(fields[columns.finished_at]);
    if (!time) {
        throw BillError(AtLine(line_number) + "完成时间 \"" +
                        std::string(fields[columns.finished_at]) + "\" is not yyyy-MM-dd HH:mm:ss");
    }
    entry.occurred_at = *time;
    return entry;
}

}  // namespace

BillTotals ParseAlipayBill(LineReader& lines, const std::string& date, const EntrySink& each,
                           const std::string& seller_id) {
    GbkDecoder gbk;
    std::string raw;
    std::optional<bool> utf8;  // Decided by the first line: a BOM means UTF-8.
    std::optional<Columns> columns;
    bool dates_seen = false;
    bool account_seen = false;
    std::optional<std::pair<std::int64_t, std::int64_t>> footer;
    std::int64_t rows = 0, payments = 0, refunds = 0;
    while (lines.Next(raw)) {
        const std::int64_t number = lines.line_number();
        std::string text;
        if (!utf8) utf8 = raw.rfind(kUtf8Bom, 0) == 0;
        if (*utf8) {
            text = number == 1 ? raw.substr(kUtf8Bom.size()) : raw;
            if (!IsValidUtf8(text)) {
                throw BillError(AtLine(number) + "is not UTF-8 text (the bill starts with a BOM)");
            }
        } else {
            std::optional<std::string> decoded = gbk.Decode(raw);
            if (!decoded) {
                throw BillError(AtLine(number) +
                                "is not GBK text (Alipay bills are GBK, or UTF-8 "
                                "with a BOM)");
            }
            text = std::move(*decoded);
        }
        if (Trim(text).empty()) continue;
        if (text.front() == '#') {
            if (CheckDates(Trim(text), date, number)) {
                dates_seen = true;
            } else if (CheckAccount(Trim(text), seller_id, number)) {
                account_seen = true;
            } else if (auto counts = FooterCounts(text, number)) {
                footer = counts;
            }
            continue;
        }
        if (footer) throw BillError(AtLine(number) + "a row after the footer");
        if (!columns) {
            // The account is named above the rows: no entry of another account's bill is
            // passed on.
            if (!account_seen && !seller_id.empty()) {
                throw BillError(AtLine(number) +
                                "the bill names no account (#账号) before its rows, and "
                                "alipay.seller_id is configured");
            }
            if (text.rfind("支付宝交易号", 0) != 0) {
                throw BillError(AtLine(number) +
                                "not an Alipay business detail bill (the header "
                                "starts with 支付宝交易号)");
            }
            columns = ReadColumns(text, number);
            continue;
        }
        const std::vector<std::string_view> fields = SplitFields(text);
        if (fields.size() != columns->count) {
            throw BillError(AtLine(number) + "has " + std::to_string(fields.size()) +
                            " fields, the header " + std::to_string(columns->count));
        }
        ++rows;
        const std::string_view kind = fields[columns->kind];
        if (kind != "交易" && kind != "退款") continue;  // Not a payment or a refund.
        const bool refund = kind == "退款";
        ++(refund ? refunds : payments);
        BillEntry entry = Entry(*columns, fields, refund, number);
        entry.raw_line = raw;
        each(entry);
    }
    if (!columns) throw BillError("not an Alipay business detail bill: no header line");
    if (!dates_seen) throw BillError("the bill has no #起始日期 line");
    if (!footer) {
        throw BillError("the bill is incomplete: no #交易合计：N笔，退款合计：M笔 footer");
    }
    if (footer->first != payments || footer->second != refunds) {
        throw BillError("the bill is incomplete: its footer counts " +
                        std::to_string(footer->first) + " payments and " +
                        std::to_string(footer->second) + " refunds, its rows " +
                        std::to_string(payments) + " and " + std::to_string(refunds));
    }
    return {.rows = rows};
}

}  // namespace payledger::ledger::reconcile
