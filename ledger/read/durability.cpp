// The durability barrier for readers (ledger/read/durability.hpp).
#include "ledger/read/durability.hpp"

#include <pqxx/binarystring>
#include <pqxx/nontransaction>
#include <pqxx/transaction>
#include <string>
#include <vector>

#include "ledger/pg/binary_params.hpp"
#include "ledger/pg/transaction_block.hpp"

namespace payledger::ledger {
namespace {

// A transactional logical message (pg_logical_emit_message(true, ...)) takes a transaction id
// and writes a WAL record, so the COMMIT writes a commit record beyond every commit visible
// before it, flushes it and waits, as synchronous_commit says, for the synchronous standbys to
// confirm it. A transaction id alone is not enough: PostgreSQL commits a transaction that
// wrote no WAL of its own asynchronously and without waiting for the standbys
// (RecordTransactionCommit: "wrote_xlog && markXidCommitted"), which is how a reader was once
// shown a payment that crash recovery had made visible before the standby had it. The setting
// is raised to `on` for this transaction when the session's is weaker (remote_apply is kept).
// Without synchronous standbys nothing is written (every commit an append makes visible is
// already flushed, and a replica receives only flushed WAL).
constexpr const char* kBarrier =
    "SELECT CASE WHEN current_setting('synchronous_standby_names') <> '' THEN "
    "set_config('synchronous_commit', CASE current_setting('synchronous_commit') "
    "WHEN 'remote_apply' THEN 'remote_apply' ELSE 'on' END, true) || "
    "pg_logical_emit_message(true, 'payledger.durability', '')::text END";

// Whether the primary holds the receipt $1 with the chain $2 (ReadLedgerHead on the replica).
constexpr const char* kHoldsHead =
    "SELECT EXISTS (SELECT 1 FROM callback_receipts WHERE id = $1::bigint AND chain = $2::bytea)";

}  // namespace

void AwaitSynchronousStandbys(pqxx::connection_base& primary) {
    TransactionBlock block{primary};
    (void)block.OpenAndCommit({{.sql = "BEGIN"}, {.sql = kBarrier}});
}

std::optional<LedgerHead> ReadLedgerHead(pqxx::connection_base& connection) {
    pqxx::nontransaction tx{connection};
    const pqxx::result rows =
        tx.exec("SELECT id, chain FROM callback_receipts ORDER BY id DESC LIMIT 1");
    if (rows.empty()) return std::nullopt;
    return LedgerHead{.receipt_id = rows[0][0].as<std::int64_t>(),
                      .chain = pqxx::binarystring(rows[0][1]).str()};
}

bool AwaitSynchronousStandbysHolding(pqxx::connection_base& primary,
                                     const std::optional<LedgerHead>& head) {
    if (!head) {
        AwaitSynchronousStandbys(primary);
        return true;
    }
    // The lookup runs before the COMMIT: what it finds was visible before the barrier's commit
    // record, so the COMMIT waits for the standbys to hold it as well.
    TransactionBlock block{primary};
    const std::vector<std::optional<std::string>> answers = block.OpenAndCommit(
        {{.sql = "BEGIN"},
         {.sql = kBarrier},
         {.sql = kHoldsHead, .params = {BinaryInt8(head->receipt_id), head->chain}}});
    return answers.at(2).value_or("f") == "t";
}

}  // namespace payledger::ledger
