// The durability barrier for readers (ledger/durability.hpp).
#include "ledger/durability.hpp"

#include <pqxx/nontransaction>
#include <pqxx/transaction>
#include <string>
#include <vector>

#include "ledger/binary_params.hpp"

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

// The primary's current timeline: the first eight hex digits of its WAL segment's name.
constexpr const char* kPrimaryTimeline =
    "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint";

}  // namespace

std::int64_t AwaitSynchronousStandbys(pqxx::connection_base& primary) {
    const std::vector<std::optional<std::string>> answers = ExecPipelineThenCommit(
        primary, {{.sql = "BEGIN"}, {.sql = kBarrier}, {.sql = kPrimaryTimeline}});
    return std::stoll(answers.at(2).value());
}

std::optional<std::int64_t> StreamingTimeline(pqxx::connection_base& replica) {
    pqxx::nontransaction tx{replica};
    const pqxx::result rows =
        tx.exec("SELECT received_tli FROM pg_stat_wal_receiver WHERE status = 'streaming'");
    if (rows.empty() || rows[0][0].is_null()) return std::nullopt;
    return rows[0][0].as<std::int64_t>();
}

}  // namespace payledger::ledger
