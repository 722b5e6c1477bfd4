#pragma once

#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "ledger/reconcile/reconciliation.hpp"

namespace payledger::ledger::reconcile {

// --apply: every entry of the session's reconcile_differences marked `apply`, through the
// callbacks' write path (a Committer: writer lock, unique key, projections, a receipt per
// entry whose body is the bill's raw line). Returns why applying stopped part-way (the
// committer answered unavailable), or nullopt; what was applied until then is in
// `report`'s counts and reconcile_differences either way.
[[nodiscard]] std::optional<std::string> ApplyMissing(pqxx::connection& connection,
                                                      const std::string& database_url,
                                                      const ReconcileOptions& options,
                                                      const std::string& bill_sha256,
                                                      ReconcileReport& report);

}  // namespace payledger::ledger::reconcile
