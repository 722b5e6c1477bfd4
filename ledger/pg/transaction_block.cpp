#include "ledger/pg/transaction_block.hpp"

#include <utility>

#include "projections/assert.hpp"

namespace payledger::ledger {

TransactionBlock::~TransactionBlock() {
    if (!open_) return;
    try {
        session_.exec("ROLLBACK");
    } catch (...) {
        // The session is broken: the server ends the transaction with it, and the committer
        // connects again (IdleSessionEnded, or the next query's error).
    }
}

pqxx::result TransactionBlock::Open(const std::string& sql) {
    PAYLEDGER_ASSERT(!open_ && sql.starts_with("BEGIN;"));
    open_ = true;  // Even if it fails: BEGIN may have arrived.
    return session_.exec(sql);
}

void TransactionBlock::CommitAfter(const std::string& name, std::vector<std::string> params) {
    PAYLEDGER_ASSERT(open_);
    std::vector<PipelineStatement> statements;
    statements.push_back({.name = name, .params = std::move(params)});
    (void)Finish(statements);
}

std::vector<std::optional<std::string>> TransactionBlock::OpenAndCommit(
    const std::vector<PipelineStatement>& statements) {
    PAYLEDGER_ASSERT(!open_ && !statements.empty() && statements.front().sql == "BEGIN");
    open_ = true;  // Even if it fails: BEGIN may have arrived.
    return Finish(statements);
}

std::vector<std::optional<std::string>> TransactionBlock::Finish(
    const std::vector<PipelineStatement>& statements) {
    std::vector<std::optional<std::string>> firsts;
    try {
        firsts = ExecPipelineThenCommit(session_.conn(), statements);
    } catch (const pqxx::in_doubt_error&) {
        open_ = false;  // The session is dropped (ClassifyFailure): nothing to roll back.
        throw;
    } catch (const pqxx::broken_connection&) {
        open_ = false;
        throw;
    } catch (...) {
        // A refusal on a session that ExecPipelineThenCommit closed: nothing to roll back (and
        // a ROLLBACK would only make libpqxx reconnect for it).
        if (!session_.conn().is_open()) open_ = false;
        throw;
    }
    // Done, as the statements and COMMIT succeeded.
    open_ = false;
    return firsts;
}

}  // namespace payledger::ledger
