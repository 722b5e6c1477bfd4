#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "ledger/reconcile/bill.hpp"

namespace payledger::ledger::reconcile {

// `payledger simulate-bill <wechat|alipay> --date D [--out FILE] [--drop N] [--alter N]`
// (docs/reconciliation.md#simulated-statements): the statement the platform would send for the
// ledger's payments and refunds of that Asia/Shanghai day from the platform's channels
// (LedgerSources), in its format (docs/reconciliation.md#wechat-pay-trade-bill,
// docs/reconciliation.md#alipay-business-detail-bill), with the first `drop` rows (in time order)
// left out and the `alter` rows after them one fen higher. Its summary agrees with the rows it has,
// as the platform's would.
struct SimulateBillOptions {
    Platform platform = Platform::kWechat;
    std::string date{};      // YYYY-MM-DD.
    std::string out_path{};  // Empty: stdout. WeChat: ".gz" gzips. Alipay: ".zip" zips.
    std::int64_t drop = 0;
    std::int64_t alter = 0;
    // WeChat: 商户号 and 公众账号ID per channel; a row of a channel without them is refused.
    std::string wechat_v2_mch_id{}, wechat_v2_appid{};
    std::string wechat_v3_mch_id{}, wechat_v3_appid{};
    std::string alipay_account{};  // Alipay: the account (#账号, the zip's names).
};

struct SimulateBillReport {
    std::int64_t rows = 0;  // Rows written.
    std::int64_t dropped = 0;
    std::int64_t altered = 0;
};

// Writes the statement; what was dropped or altered is described on `log` (one line each).
// Streams: one page of events in memory at a time (a zip is written from a temporary file).
// Throws BillError for options it cannot honour, pqxx exceptions when the database fails.
SimulateBillReport SimulateBill(const std::string& database_url, const SimulateBillOptions& options,
                                std::ostream& stdout_stream, std::ostream& log);

// Zips the GBK CSV at `csv_path` into `zip_path` as Alipay does: the detail file
// `<account>_<yyyymmdd>_业务明细.csv` and a small `(汇总)` file, both named in GBK without the
// UTF-8 flag. Throws BillError.
void ZipAlipayBill(const std::string& zip_path, const std::string& csv_path,
                   const std::string& account, const std::string& date);

}  // namespace payledger::ledger::reconcile
