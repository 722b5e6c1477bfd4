#include "ledger/reconcile/store.hpp"

namespace payledger::ledger::reconcile {
namespace {

constexpr const char* kColumns =
    "id, platform, to_char(date, 'YYYY-MM-DD'), bill_sha256, "
    "(extract(epoch FROM ran_at) * 1000000)::bigint, counts::text, ok";

ReconciliationRow RowOf(const pqxx::row& row) {
    return {.id = row[0].as<std::int64_t>(),
            .platform = row[1].as<std::string>(),
            .date = row[2].as<std::string>(),
            .bill_sha256 = row[3].as<std::string>(),
            .ran_at = row[4].as<std::int64_t>(),
            .counts_json = row[5].as<std::string>(),
            .ok = row[6].as<bool>()};
}

}  // namespace

std::vector<ReconciliationRow> ReadReconciliationsAfter(pqxx::transaction_base& tx,
                                                        std::int64_t after, std::int64_t limit) {
    const pqxx::result rows =
        tx.exec_params(std::string("SELECT ") + kColumns +
                           " FROM reconciliations WHERE id > $1 ORDER BY id LIMIT $2",
                       after, limit);
    std::vector<ReconciliationRow> out;
    out.reserve(rows.size());
    for (const pqxx::row& row : rows) out.push_back(RowOf(row));
    return out;
}

std::optional<ReconciliationRow> ReadReconciliation(pqxx::transaction_base& tx, std::int64_t id) {
    const pqxx::result rows =
        tx.exec_params(std::string("SELECT ") + kColumns +
                           ", differences::text FROM reconciliations WHERE id = $1",
                       id);
    if (rows.empty()) return std::nullopt;
    ReconciliationRow out = RowOf(rows[0]);
    out.differences_json = rows[0][7].as<std::string>();
    return out;
}

}  // namespace payledger::ledger::reconcile
