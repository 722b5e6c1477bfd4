#pragma once

#include <stdexcept>
#include <string>

#include "ledger/integrity/verify.hpp"

namespace payledger::ledger {

// Thrown by Rebuild before anything changes when this session could not give the new tables
// the owner and the privileges of the old ones (it is neither their owner nor a member of it,
// for instance). The message says what is missing.
class RebuildRefused : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// docs/integrity.md#rebuild: rebuilds `orders` and `balances` from the events while the service
// keeps appending, then swaps them in atomically.
//   1. Build: in a REPEATABLE READ, READ ONLY snapshot, streams the events, folds them with
//      projections::FoldOrder and bulk-copies the rows into new tables (no lock taken).
//   2. Swap: under the writer lock (appends pause here only), applies the events committed
//      since the snapshot, then replaces the live tables with the new ones in one
//      transaction, which also gives the new tables the old ones' owner and exact ACL
//      (pg_class.relacl: every grantee, grant option and grantor, PUBLIC included), so that
//      every role, the service's own included, keeps its rights throughout.
//   3. Verifies, and returns verify's report.
// A failure at any point before the swap commits leaves the live projections untouched.
// Throws RebuildRefused, pqxx exceptions and InvariantError.
[[nodiscard]] VerifyReport Rebuild(const std::string& url, const Progress& progress = {});

// The two phases of Rebuild, for tests that append between them. BuildRebuildTables returns
// the last seq of the snapshot it built from; SwapRebuildTables takes it.
[[nodiscard]] std::int64_t BuildRebuildTables(const std::string& url,
                                              const Progress& progress = {});
void SwapRebuildTables(const std::string& url, std::int64_t snapshot_seq);

}  // namespace payledger::ledger
