#pragma once

#include <optional>
#include <ostream>
#include <pqxx/pqxx>
#include <string>

#include "ledger/reconcile/reconciliation.hpp"
#include "ledger/reconcile/session.hpp"
#include "projections/reconcile.hpp"

namespace payledger::ledger::reconcile {

// matched, pending and applied are not differences (docs/reconciliation.md#matching).
[[nodiscard]] bool IsDifference(projections::Category category);

// Stores the run: first the bill's bytes in reconciliation_bills (once per SHA-256), in a
// transaction of their own without the writer lock, since they may be hundreds of MiB; then
// the record, which names them by their SHA-256, under the writer lock (a reader paging by
// id never skips one, docs/write-path.md#the-writer-lock). A statement that fails is tried again; a
// session that is gone takes its temporary tables with it, so the run is then stored from the
// private copy without its differences.
// Sets report.id; returns why the full record could not be written, or nullopt.
[[nodiscard]] std::optional<std::string> Record(pqxx::connection& connection,
                                                const std::string& database_url,
                                                const ReconcileOptions& options,
                                                const BillCopy& bill, ReconcileReport& report);

// The output's lines (docs/reconciliation.md#output-and-exit-codes): the counts, then each
// difference in order.
void Print(pqxx::connection& connection, const ReconcileOptions& options,
           const ReconcileReport& report, std::ostream& out);

// Why entries were not applied, one line each, in the output's order.
void PrintReasons(pqxx::connection& connection, std::ostream& log);

}  // namespace payledger::ledger::reconcile
