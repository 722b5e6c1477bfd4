#include "ledger/reconcile/alipay_bill.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include "projections/validate.hpp"

namespace payledger::ledger::reconcile {
namespace {

using projections::EventType;

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

std::string At(std::int64_t line_number) { return "line " + std::to_string(line_number) + ": "; }

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

// "#起始日期：[2026年11月30日 00:00:00]   终止日期：[…]" -> "2026-11-30".
std::optional<std::string> StartDate(std::string_view line) {
    constexpr std::string_view kPrefix = "#起始日期：[";
    if (line.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
    line.remove_prefix(kPrefix.size());
    // yyyy年MM月dd日: the CJK characters are three bytes each in UTF-8.
    const std::size_t year_end = line.find("年");
    const std::size_t month_end = line.find("月");
    const std::size_t day_end = line.find("日");
    if (year_end != 4 || month_end != 9 || day_end != 14) return std::string{};
    const std::string text = std::string(line.substr(0, 4)) + "-" + std::string(line.substr(7, 2)) +
                             "-" + std::string(line.substr(12, 2));
    return text;
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
        if (!value) throw BillError(At(line_number) + "the footer's counts are not numbers");
        return *value;
    };
    const std::size_t first_unit = line.find(kUnit);
    if (first_unit == std::string_view::npos ||
        line.substr(first_unit + kUnit.size(), kRefunds.size()) != kRefunds) {
        throw BillError(At(line_number) + "the footer is not #交易合计：N笔，退款合计：M笔");
    }
    const std::int64_t payments = count(line.substr(0, first_unit));
    line.remove_prefix(first_unit + kUnit.size() + kRefunds.size());
    const std::size_t second_unit = line.find(kUnit);
    if (second_unit == std::string_view::npos) {
        throw BillError(At(line_number) + "the footer is not #交易合计：N笔，退款合计：M笔");
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
            throw BillError(At(line_number) + "the header has no " + std::string(name));
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
    std::string_view amount = fields[columns.amount];
    // A refund's amount is negative; SPEC §10 takes its absolute value. A payment's is not.
    if (refund && !amount.empty() && amount.front() == '-') amount.remove_prefix(1);
    const std::optional<std::int64_t> fen = projections::ParseMajorUnits(amount);
    if (!fen) {
        throw BillError(At(line_number) + "订单金额（元） \"" +
                        std::string(fields[columns.amount]) +
                        "\" is not an amount of 0.01 ... 100000000000.00 yuan (SPEC §1)");
    }
    entry.amount = *fen;
    if (!projections::IsValidKey(entry.out_trade_no)) {
        throw BillError(At(line_number) + "商户订单号 \"" + entry.out_trade_no +
                        "\" is not a valid out_trade_no (SPEC §1)");
    }
    if (entry.platform_id.empty() || entry.platform_id.size() > 128) {
        throw BillError(At(line_number) + "支付宝交易号 must be 1-128 bytes");
    }
    const std::optional<projections::TimeMicros> time =
        projections::ParseShanghaiDashed(fields[columns.finished_at]);
    if (!time) {
        throw BillError(At(line_number) + "完成时间 \"" + std::string(fields[columns.finished_at]) +
                        "\" is not yyyy-MM-dd HH:mm:ss");
    }
    entry.occurred_at = *time;
    return entry;
}

}  // namespace

BillTotals ParseAlipayBill(LineReader& lines, const std::string& date, const EntrySink& each) {
    GbkDecoder gbk;
    std::string raw;
    std::optional<bool> utf8;  // Decided by the first line: a BOM means UTF-8.
    std::optional<Columns> columns;
    std::optional<std::string> start_date;
    std::optional<std::pair<std::int64_t, std::int64_t>> footer;
    std::int64_t rows = 0, payments = 0, refunds = 0;
    while (lines.Next(raw)) {
        const std::int64_t number = lines.line_number();
        std::string text;
        if (!utf8) utf8 = raw.rfind(kUtf8Bom, 0) == 0;
        if (*utf8) {
            text = number == 1 ? raw.substr(kUtf8Bom.size()) : raw;
        } else {
            std::optional<std::string> decoded = gbk.Decode(raw);
            if (!decoded) {
                throw BillError(At(number) +
                                "is not GBK text (Alipay bills are GBK, or UTF-8 "
                                "with a BOM)");
            }
            text = std::move(*decoded);
        }
        if (Trim(text).empty()) continue;
        if (text.front() == '#') {
            if (std::optional<std::string> found = StartDate(text)) {
                if (*found != date) {
                    throw BillError(At(number) + "the bill's #起始日期 is " +
                                    (found->empty() ? std::string("unreadable") : *found) +
                                    ", not --date " + date);
                }
                start_date = std::move(found);
            } else if (auto counts = FooterCounts(text, number)) {
                footer = counts;
            }
            continue;
        }
        if (footer) throw BillError(At(number) + "a row after the footer");
        if (!columns) {
            if (text.rfind("支付宝交易号", 0) != 0) {
                throw BillError(At(number) +
                                "not an Alipay business detail bill (the header "
                                "starts with 支付宝交易号)");
            }
            columns = ReadColumns(text, number);
            continue;
        }
        const std::vector<std::string_view> fields = SplitFields(text);
        if (fields.size() != columns->count) {
            throw BillError(At(number) + "has " + std::to_string(fields.size()) +
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
    if (!start_date) throw BillError("the bill has no #起始日期 line");
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
