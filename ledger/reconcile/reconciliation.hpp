#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "ledger/reconcile/bill.hpp"
#include "projections/reconcile.hpp"

namespace payledger::ledger::reconcile {

// `payledger reconcile <platform> --bill FILE --date D [--apply]`
// (docs/reconciliation.md#the-command).
struct ReconcileOptions {
    Platform platform = Platform::kWechat;
    std::string bill_path{};
    std::string date{};  // YYYY-MM-DD, an Asia/Shanghai day.
    bool apply = false;
    // WeChat: the merchant ids a bill may name (wechat_v2.mch_id, wechat_v3.mchid).
    std::vector<std::string> wechat_mch_ids{};
    // Alipay: alipay.seller_id; when set, a bill whose #账号 names another account is refused.
    std::string alipay_seller_id{};
    // Runs after the entries are classified and before anything is applied: what a callback
    // committing at that moment does (tests). Empty in the command.
    std::function<void()> before_apply{};
    // Told how far the run is, now and then: the bill's entries read ("reading", total 0:
    // unknown), then with --apply the entries submitted of those to apply ("applying"), and
    // "done" just before the lines are printed. Empty: quiet.
    std::function<void(std::string_view phase, std::int64_t done, std::int64_t total)> progress{};
};

struct ReconcileReport {
    std::int64_t id = 0;  // reconciliations.id of the stored run.
    std::int64_t rows = 0;
    std::array<std::int64_t, projections::kCategoryCount> counts{};  // By Category.
    bool ok = false;  // Nothing but matched, pending and applied, and nothing failed.
    // Why --apply stopped part-way or the run could not be stored whole; empty when neither.
    // The run is stored all the same (with what was applied), and `reconcile` exits 2.
    std::string failure{};
};

// [D 00:00+08, D+1 00:00+08) of "YYYY-MM-DD" in microseconds, or nullopt when malformed.
[[nodiscard]] std::optional<std::pair<projections::TimeMicros, projections::TimeMicros>>
ShanghaiDay(std::string_view date);

// The payment and refund sources of a platform's channels (docs/reconciliation.md#the-ledger-side).
[[nodiscard]] std::vector<std::string> LedgerSources(Platform platform);

// Reconciles the bill with the ledger at `database_url` and prints its lines to `out`
// (docs/reconciliation.md#output-and-exit-codes). The bill streams through: its bytes and entries
// go to temporary tables of the session, the matching is a join there, so memory does not grow with
// the statement. With `apply`, every missing_in_ledger entry that passes a callback's checks is
// submitted through a Committer (the callbacks' write path: writer lock, unique key, projections,
// one receipt per entry whose body is the bill's raw line). Then the run is stored in
// `reconciliations` under the writer lock, and only then printed; why entries were not applied goes
// to `log`, if given. The file is read once (the bytes stored, hashed and parsed are the same) and
// must be at most kBillBytesMax. A key the bill names twice is classified entry by entry, never
// applied. A run that may have applied something is always stored: when --apply stops part-way, or
// the record cannot be written with its differences, `failure` says why.
// Throws BillError for a bill that cannot be reconciled (nothing stored, nothing applied),
// pqxx exceptions when the database fails before anything was applied.
ReconcileReport Reconcile(const std::string& database_url, const ReconcileOptions& options,
                          std::ostream& out, std::ostream* log = nullptr);

}  // namespace payledger::ledger::reconcile
