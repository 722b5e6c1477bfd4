#include "ledger/reconcile/wechat_bill.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "ledger/base/bytes.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger::reconcile {
namespace {

using projections::EventType;

// The positions of the fields a reconciliation reads, found by name in the header.
struct Layout {
    std::size_t field_count = 0;
    std::size_t time = 0, mch_id = 0, transaction_id = 0, out_trade_no = 0, status = 0;
    std::size_t currency = 0, refund_id = 0, refund_status = 0;
    std::size_t order_amount = 0;   // 订单金额, or 总金额 in the older layout.
    std::size_t refund_amount = 0;  // 申请退款金额, or 退款金额 in the older layout.
    bool older = false;
};

std::vector<std::string_view> SplitOn(std::string_view text, std::string_view separator) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    for (;;) {
        const std::size_t at = text.find(separator, start);
        if (at == std::string_view::npos) {
            parts.push_back(text.substr(start));
            return parts;
        }
        parts.push_back(text.substr(start, at - start));
        start = at + separator.size();
    }
}

// A row or summary line: every field starts with a backtick
// (docs/reconciliation.md#wechat-pay-trade-bill).
std::optional<std::vector<std::string_view>> SplitBackticked(std::string_view line) {
    if (line.empty() || line.front() != '`') return std::nullopt;
    return SplitOn(line.substr(1), ",`");
}

std::optional<std::size_t> Find(const std::vector<std::string_view>& names, std::string_view name) {
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) return std::nullopt;
    return static_cast<std::size_t>(it - names.begin());
}

Layout ReadLayout(std::string_view header, std::int64_t line_number) {
    if (header.substr(0, kUtf8Bom.size()) == kUtf8Bom) header.remove_prefix(kUtf8Bom.size());
    const std::vector<std::string_view> names = SplitOn(header, ",");
    Layout layout{.field_count = names.size()};
    const auto need = [&](std::string_view name) {
        const std::optional<std::size_t> at = Find(names, name);
        if (!at) {
            throw BillError(AtLine(line_number) + "not a WeChat Pay ALL trade bill header (no " +
                            std::string(name) + ")");
        }
        return *at;
    };
    layout.time = need("交易时间");
    layout.mch_id = need("商户号");
    layout.transaction_id = need("微信订单号");
    layout.out_trade_no = need("商户订单号");
    layout.status = need("交易状态");
    layout.currency = need("货币种类");
    layout.refund_id = need("微信退款单号");
    layout.refund_status = need("退款状态");
    layout.older = !Find(names, "订单金额").has_value() && Find(names, "总金额").has_value();
    layout.order_amount = need(layout.older ? "总金额" : "订单金额");
    layout.refund_amount = need(layout.older ? "退款金额" : "申请退款金额");
    return layout;
}

std::int64_t Yuan(std::string_view text, std::string_view field, std::int64_t line_number) {
    const std::optional<std::int64_t> fen = ParseYuanOrZero(text);
    if (!fen) {
        throw BillError(AtLine(line_number) + std::string(field) + " \"" + std::string(text) +
                        "\" is not an amount in yuan with at most two decimals");
    }
    return *fen;
}

void AddChecked(std::int64_t& sum, std::int64_t amount, std::int64_t line_number) {
    if (sum > std::numeric_limits<std::int64_t>::max() - amount) {
        throw BillError(AtLine(line_number) + "the bill's amounts overflow");
    }
    sum += amount;
}

// The accumulated totals, to compare with the summary row.
struct Sums {
    std::int64_t rows = 0;
    std::int64_t order_amount = 0;
    std::int64_t refund_amount = 0;
};

class RowReader {
public:
    RowReader(const Layout& layout, const std::vector<std::string>& mch_ids, const EntrySink& each)
        : layout_(layout), mch_ids_(mch_ids), each_(each) {}

    void Row(const std::string& raw, const std::vector<std::string_view>& fields,
             std::int64_t line_number) {
        if (fields.size() != layout_.field_count) {
            throw BillError(AtLine(line_number) + "has " + std::to_string(fields.size()) +
                            " fields, the header " + std::to_string(layout_.field_count));
        }
        ++sums_.rows;
        const std::int64_t order_amount =
            Yuan(fields[layout_.order_amount], layout_.older ? "总金额" : "订单金额", line_number);
        const std::int64_t refund_amount =
            Yuan(fields[layout_.refund_amount], layout_.older ? "退款金额" : "申请退款金额",
                 line_number);
        AddChecked(sums_.order_amount, order_amount, line_number);
        AddChecked(sums_.refund_amount, refund_amount, line_number);

        const std::string_view mch_id = fields[layout_.mch_id];
        if (std::find(mch_ids_.begin(), mch_ids_.end(), mch_id) == mch_ids_.end()) {
            throw BillError(AtLine(line_number) + "商户号 " + std::string(mch_id) +
                            " is neither wechat_v2.mch_id nor wechat_v3.mchid: another "
                            "merchant's bill");
        }
        const std::string_view status = fields[layout_.status];
        if (status == "REVOKED") return;  // A revoked order: neither a payment nor a refund.
        if (status != "SUCCESS" && status != "REFUND") {
            throw BillError(AtLine(line_number) + "unknown 交易状态 " + std::string(status));
        }
        const bool refund = status == "REFUND";
        BillEntry entry{
            .line_number = line_number,
            .event_type = refund ? EventType::kRefundSucceeded : EventType::kPaymentSucceeded,
            .out_trade_no = std::string(fields[layout_.out_trade_no]),
            .platform_id = std::string(fields[refund ? layout_.refund_id : layout_.transaction_id]),
            .payment_id = std::string(fields[layout_.transaction_id]),
            .amount = refund ? refund_amount : order_amount,
            .currency = std::string(fields[layout_.currency]),
            .pending = refund && fields[layout_.refund_status] != "SUCCESS",
            .raw_line = raw};
        if (!projections::IsValidKey(entry.out_trade_no)) {
            throw BillError(AtLine(line_number) + "商户订单号 \"" + entry.out_trade_no +
                            "\" is not a valid out_trade_no");
        }
        if (!projections::IsValidPlatformId(entry.platform_id)) {
            throw BillError(AtLine(line_number) + (refund ? "微信退款单号" : "微信订单号") +
                            " must be " + projections::kPlatformIdRuleText);
        }
        if (!projections::IsValidPlatformId(entry.payment_id)) {
            throw BillError(AtLine(line_number) + "微信订单号 must be " +
                            projections::kPlatformIdRuleText);
        }
        if (!projections::IsValidAmount(entry.amount)) {
            throw BillError(AtLine(line_number) + (refund ? "申请退款金额" : "订单金额") +
                            " must be 0.01 ... 100000000000.00");
        }
        if (!projections::IsValidCurrency(entry.currency)) {
            throw BillError(AtLine(line_number) + "货币种类 \"" + entry.currency +
                            "\" is not an ISO 4217 code");
        }
        const std::optional<projections::TimeMicros> time =
            projections::ParseShanghaiDashed(fields[layout_.time]);
        if (!time) {
            throw BillError(AtLine(line_number) + "交易时间 \"" +
                            std::string(fields[layout_.time]) + "\" is not yyyy-MM-dd HH:mm:ss");
        }
        entry.occurred_at = *time;
        each_(entry);
    }

    [[nodiscard]] const Sums& sums() const { return sums_; }

private:
    const Layout& layout_;
    const std::vector<std::string>& mch_ids_;
    const EntrySink& each_;
    Sums sums_;
};

void CheckSummary(std::string_view header, std::int64_t header_line, std::string_view row,
                  std::int64_t row_line, const Layout& layout, const Sums& sums) {
    const std::vector<std::string_view> names = SplitOn(header, ",");
    const std::optional<std::vector<std::string_view>> values = SplitBackticked(row);
    if (!values || values->size() != names.size()) {
        throw BillError(AtLine(row_line) + "the summary row does not match its header (line " +
                        std::to_string(header_line) + ")");
    }
    const auto value = [&](std::string_view name) {
        const std::optional<std::size_t> at = Find(names, name);
        if (!at) {
            throw BillError(AtLine(header_line) + "the summary header has no " + std::string(name));
        }
        return (*values)[*at];
    };
    const std::string_view count_text = value("总交易单数");
    const std::optional<std::int64_t> count = projections::ParseMinorUnits(count_text);
    const bool count_zero = count_text == "0";
    if (!count && !count_zero) {
        throw BillError(AtLine(row_line) + "总交易单数 \"" + std::string(count_text) +
                        "\" is not a count");
    }
    if (count.value_or(0) != sums.rows) {
        throw BillError("the bill is incomplete: its summary says 总交易单数 " +
                        std::string(count_text) + ", it has " + std::to_string(sums.rows) +
                        " detail rows");
    }
    const char* order_name = layout.older ? "总交易额" : "订单总金额";
    const char* refund_name = layout.older ? "总退款金额" : "申请退款总金额";
    const std::int64_t order_total = Yuan(value(order_name), order_name, row_line);
    const std::int64_t refund_total = Yuan(value(refund_name), refund_name, row_line);
    if (order_total != sums.order_amount) {
        throw BillError("the bill is incomplete: its summary says " + std::string(order_name) +
                        " " + std::string(value(order_name)) + ", its rows add up to " +
                        FormatYuan(sums.order_amount));
    }
    if (refund_total != sums.refund_amount) {
        throw BillError("the bill is incomplete: its summary says " + std::string(refund_name) +
                        " " + std::string(value(refund_name)) + ", its rows add up to " +
                        FormatYuan(sums.refund_amount));
    }
}

}  // namespace

BillTotals ParseWechatBill(LineReader& lines, const std::vector<std::string>& mch_ids,
                           const EntrySink& each) {
    PAYLEDGER_ASSERT(!mch_ids.empty());
    std::string line;
    if (!lines.Next(line)) throw BillError("the bill is empty");
    if (!IsValidUtf8(line)) throw BillError(AtLine(lines.line_number()) + "is not UTF-8 text");
    const Layout layout = ReadLayout(line, lines.line_number());
    RowReader rows{layout, mch_ids, each};
    std::optional<std::string> summary_header;
    std::int64_t summary_header_line = 0;
    bool summary_seen = false;
    while (lines.Next(line)) {
        const std::int64_t number = lines.line_number();
        if (!IsValidUtf8(line)) throw BillError(AtLine(number) + "is not UTF-8 text");
        if (line.empty()) continue;
        if (summary_seen) throw BillError(AtLine(number) + "text after the summary row");
        if (summary_header) {
            CheckSummary(*summary_header, summary_header_line, line, number, layout, rows.sums());
            summary_seen = true;
            continue;
        }
        if (line.rfind("总交易单数", 0) == 0) {
            summary_header = line;
            summary_header_line = number;
            continue;
        }
        const std::optional<std::vector<std::string_view>> fields = SplitBackticked(line);
        if (!fields) throw BillError(AtLine(number) + "neither a detail row nor the summary");
        rows.Row(line, *fields, number);
    }
    if (!summary_seen) throw BillError("the bill is incomplete: it has no summary row");
    return {.rows = rows.sums().rows};
}

}  // namespace payledger::ledger::reconcile
