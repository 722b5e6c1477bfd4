#pragma once

#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "projections/event.hpp"

namespace payledger::ledger::reconcile {

// One stored run of `reconcile` (docs/reconciliation.md#the-record), as auditors read it.
struct ReconciliationRow {
    std::int64_t id = 0;
    std::string platform{};
    std::string date{};  // YYYY-MM-DD.
    std::string bill_sha256{};
    projections::TimeMicros ran_at = 0;
    std::string counts_json = "{}";  // JSON object text.
    bool ok = false;
    std::string differences_json = "[]";  // JSON array text; "[]" in the pages of runs.
};

// At most `limit` runs with id > after, in id order, without their differences. Runs are
// inserted under the writer lock, so paging by id never skips one. REQUIRES: 0 < limit.
[[nodiscard]] std::vector<ReconciliationRow> ReadReconciliationsAfter(pqxx::transaction_base& tx,
                                                                      std::int64_t after,
                                                                      std::int64_t limit);

// One run with its differences, or nullopt.
[[nodiscard]] std::optional<ReconciliationRow> ReadReconciliation(pqxx::transaction_base& tx,
                                                                  std::int64_t id);

}  // namespace payledger::ledger::reconcile
