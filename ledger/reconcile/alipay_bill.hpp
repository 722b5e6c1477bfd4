#pragma once

#include <string>

#include "ledger/reconcile/bill.hpp"
#include "ledger/reconcile/bill_input.hpp"

namespace payledger::ledger::reconcile {

// The name every Alipay detail file's zip entry ends in
// (docs/reconciliation.md#alipay-business-detail-bill).
inline constexpr std::string_view kAlipayDetailSuffix = "_业务明细.csv";

// Alipay's business detail CSV (docs/reconciliation.md#alipay-business-detail-bill): GBK, or UTF-8
// when it starts with a BOM. Calls `each` for every payment (业务类型 交易) and refund (退款) row,
// in file order, and returns the row count once the footer's counts (#交易合计：N笔，退款合计：M笔)
// agree with the rows. Fields are split on commas and trimmed of the tabs and spaces Alipay pads
// them with. Throws BillError, naming the line, for anything else: text that is not GBK, no
// header, a #起始日期 that is not `date` (YYYY-MM-DD), a bad amount, key or time, a missing
// footer or counts that disagree with the rows.
// With a `seller_id` (alipay.seller_id, the merchant's 16-digit Alipay user id), the bill must
// be that account's: its #账号：[...] line names the seller_id, alone or followed by Alipay's
// four-digit account suffix (`20881234567890120156` is 2088123456789012's); another account,
// or no #账号 line, is refused before any entry is passed on. Empty: not checked.
BillTotals ParseAlipayBill(LineReader& lines, const std::string& date, const EntrySink& each,
                           const std::string& seller_id = {});

}  // namespace payledger::ledger::reconcile
