#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

#include "projections/event.hpp"

namespace payledger::ledger {

// The schedule of asking the platforms about orders (schema/0011, docs/query.md): the table
// order_queries, each row an order registered with a channel, made by the ledger's trigger in
// the ORDER_CREATED's transaction. Not ledger tables: no writer lock; each function is one
// statement on `connection`, in a transaction of its own. Throws pqxx exceptions.

// Sets the first query's delay the trigger schedules new orders with (serve's config).
void WriteQuerySettings(pqxx::connection& connection, std::chrono::seconds first_after);

// One order whose query or close is due, as it stands.
struct DueQuery {
    std::string out_trade_no{};
    std::string channel{};
    std::int64_t step = 0;
    std::string next_action{};  // query or close
    std::optional<projections::TimeMicros> expires_at{};
    bool close_refused = false;
    std::string status{};  // The order's (WAIT_PAY unless settled since it was scheduled).
    // The database's clock when this was read: the schedule's times (next_at, expires_at) are
    // compared with the database's now(), so its decisions take their now from there, not from
    // a serve whose clock may be minutes off.
    projections::TimeMicros database_now = 0;
};

// Takes up to `limit` orders of `channels` whose next_at has come, oldest first, that no other
// process holds, and holds them for `lease` (FOR UPDATE SKIP LOCKED on the due index, then
// leased_until): each due query is made by one process, and by another one when the first
// died before RecordAttempts.
[[nodiscard]] std::vector<DueQuery> ClaimDueQueries(pqxx::connection& connection,
                                                    const std::vector<std::string>& channels,
                                                    std::size_t limit,
                                                    std::chrono::milliseconds lease);

// What one attempt left (the schedule's decision) for `out_trade_no`: counted as an attempt
// when `asked` (a settled order's row is only ended), with the platform's answer in its own
// words, and the lease released.
struct AttemptRecord {
    bool asked = true;
    std::string answer{};
    std::int64_t step = 0;
    std::string next_action = "query";
    std::optional<projections::TimeMicros> next_at{};
    bool close_refused = false;
    bool closed = false;  // closed_at becomes now (once).
};
// The records of attempts (out_trade_no, record) in one transaction that commits
// without waiting for its WAL flush (synchronous_commit off): a schedule's state, not a fact of
// the ledger; a record lost in a crash only has its order asked again once the lease ends (what
// an answer settled is in the ledger, and the next attempt finds the order settled). One flush
// per answer bounded the queries at 112-179/s (bench/query).
void RecordAttempts(pqxx::connection& connection,
                    const std::vector<std::pair<std::string, AttemptRecord>>& records);

// How many orders of `channels` have their query or close due now (payledger_query_due).
[[nodiscard]] std::int64_t CountDueQueries(pqxx::connection& connection,
                                           const std::vector<std::string>& channels);

// The schedule's row of one order, for `payledger query` (by hand): nullopt without one.
[[nodiscard]] std::optional<DueQuery> ReadOrderQuery(pqxx::connection& connection,
                                                     const std::string& out_trade_no);

}  // namespace payledger::ledger
