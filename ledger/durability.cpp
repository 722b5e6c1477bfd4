// The durability barrier for readers (ledger/durability.hpp).
#include "ledger/durability.hpp"

#include <pqxx/nontransaction>
#include <pqxx/transaction>
#include <string>
#include <vector>

#include "ledger/binary_params.hpp"

namespace payledger::ledger {
namespace {

// txid_current() assigns a transaction id, so the COMMIT writes a commit record and waits, as
// synchronous_commit says, for the synchronous standbys to confirm it: its WAL position is
// beyond every commit visible before it. Without synchronous standbys nothing is assigned or
// written (every visible commit is already flushed, and a replica receives only flushed WAL).
constexpr const char* kBarrier =
    "SELECT CASE WHEN current_setting('synchronous_standby_names') <> '' "
    "THEN txid_current() END";

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
