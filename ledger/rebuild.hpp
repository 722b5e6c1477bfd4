#pragma once

#include <string>

#include "ledger/verify.hpp"

namespace payledger::ledger {

// SPEC §8 `rebuild`: rebuilds `orders` and `balances` from the events while the service keeps
// appending, then swaps them in atomically.
//   1. Build: in a REPEATABLE READ, READ ONLY snapshot, streams the events, folds them with
//      projections::FoldOrder and bulk-copies the rows into new tables (no lock taken).
//   2. Swap: under the writer lock (appends pause here only), applies the events committed
//      since the snapshot, then replaces the live tables with the new ones in one
//      transaction.
//   3. Verifies, and returns verify's report.
// A failure at any point before the swap commits leaves the live projections untouched.
// Throws pqxx exceptions and InvariantError.
[[nodiscard]] VerifyReport Rebuild(const std::string& url, const Progress& progress = {});

// The two phases of Rebuild, for tests that append between them. BuildRebuildTables returns
// the last seq of the snapshot it built from; SwapRebuildTables takes it.
[[nodiscard]] std::int64_t BuildRebuildTables(const std::string& url,
                                              const Progress& progress = {});
void SwapRebuildTables(const std::string& url, std::int64_t snapshot_seq);

}  // namespace payledger::ledger
