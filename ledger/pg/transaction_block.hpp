#pragma once

#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "ledger/pg/binary_params.hpp"  // PipelineStatement.

namespace payledger::ledger {

// One transaction block on a nontransaction session, opened and committed in as few round
// trips as the writer needs: BEGIN goes out with the first statements (Open, a simple query
// string that begins with "BEGIN;"), COMMIT with the last (CommitAfter), or the whole block in
// one round trip (OpenAndCommit). libpqxx's own pqxx::work would send BEGIN and COMMIT in round
// trips of their own.
// Once opened and until the COMMIT succeeds, leaving the scope rolls the block back, so the
// session is usable for the next block (or, broken, replaced by its owner: the committer
// reconnects on IdleSessionEnded or the next query's error). A block whose session was lost, or
// closed by ExecPipelineThenCommit, sends no ROLLBACK: the server ends the transaction with the
// session.
// Not thread-safe; one block at a time per connection, as libpqxx's transactions.
class TransactionBlock {
public:
    explicit TransactionBlock(pqxx::connection_base& connection) : session_(connection) {}
    TransactionBlock(const TransactionBlock&) = delete;
    TransactionBlock& operator=(const TransactionBlock&) = delete;
    ~TransactionBlock();

    // The session, for quoting; run statements through the block only.
    pqxx::nontransaction& session() { return session_; }

    // Runs `sql`, which begins with "BEGIN;"; returns its last statement's rows.
    // REQUIRES: not opened yet. Throws what pqxx::nontransaction::exec throws.
    pqxx::result Open(const std::string& sql);

    // Runs the prepared statement `name` with `params` (binary), the block's last, and COMMIT,
    // in one round trip. Like pqxx::work::commit: a session lost while they were in flight
    // leaves the outcome unknown (pqxx::in_doubt_error, never to be retried); an error answered
    // by the server means nothing was committed (the pipeline skips the COMMIT after an error).
    // REQUIRES: opened.
    void CommitAfter(const std::string& name, std::vector<std::string> params);

    // Runs `statements`, the first a BEGIN, and COMMIT in one round trip: the whole block, with
    // CommitAfter's outcomes. Returns ExecPipelineThenCommit's first fields.
    // REQUIRES: not opened yet.
    std::vector<std::optional<std::string>> OpenAndCommit(
        const std::vector<PipelineStatement>& statements);

private:
    std::vector<std::optional<std::string>> Finish(
        const std::vector<PipelineStatement>& statements);

    pqxx::nontransaction session_;
    bool open_ = false;
};

}  // namespace payledger::ledger
