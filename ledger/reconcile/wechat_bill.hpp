#pragma once

#include <string>
#include <vector>

#include "ledger/reconcile/bill.hpp"
#include "ledger/reconcile/bill_input.hpp"

namespace payledger::ledger::reconcile {

// WeChat Pay's ALL trade bill (docs/reconciliation.md#wechat-pay-trade-bill), in the 27-field
// layout or the older 24-field one (recognised by the header): calls `each` for every payment
// (交易状态 SUCCESS) and refund (REFUND) row, in file order, and returns the row count once the
// summary row agrees with the rows (总交易单数, 订单总金额 and 申请退款总金额; 总交易额 and
// 总退款金额 in the older layout). Rows are split on the "`," separators, never on bare commas.
// Throws BillError, naming the line, for anything else: no header, a row of another
// merchant (商户号 not in `mch_ids`), a bad amount, key, currency or time, an unknown
// 交易状态, a missing summary or one that disagrees with the rows.
// REQUIRES: mch_ids is not empty.
BillTotals ParseWechatBill(LineReader& lines, const std::vector<std::string>& mch_ids,
                           const EntrySink& each);

}  // namespace payledger::ledger::reconcile
