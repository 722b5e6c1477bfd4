#pragma once

#include <cstdint>
#include <optional>
#include <pqxx/connection_base>
#include <string>

namespace payledger::ledger {

// docs/api.md#what-a-reader-is-shown: a reader of the feeds (and a subscription) is shown an
// event only once it is as durable as an acknowledged append, so that no failover can take
// back what a reader already saw and give its seq to another event.
//
// With synchronous_standby_names set, a commit that waits for the synchronous standby stays
// invisible to other sessions on the primary until the standby confirms it, but it is visible
// before that (1) on asynchronous replicas, which receive and replay the primary's flushed WAL
// at once, (2) on the primary when the wait is cancelled (pg_cancel_backend, pg_terminate_backend:
// the commit stays, locally), and (3) on the primary after a crash restart, whose recovery makes
// every commit in its WAL visible while nobody waits for the standby. A reader shown such a
// commit, and then a failover to that standby, would have read an event that the ledger no
// longer has.

// Waits on `primary` until the synchronous standbys hold every commit that was visible on the
// primary, or whose WAL had reached any replica, before the call: one transaction that writes a
// WAL record (a transactional logical message, only when synchronous_standby_names is set) and
// commits with synchronous_commit at least `on`, so that its COMMIT waits for the standbys to
// confirm WAL beyond every earlier commit, those that crash recovery made visible included.
// Without synchronous standbys, commits are visible only once flushed, and the transaction
// writes nothing.
// Throws pqxx::in_doubt_error when the wait was cancelled or
// the session lost during it (the same warning ExecPipelineThenCommit turns into in doubt),
// and the errors of a statement otherwise.
void AwaitSynchronousStandbys(pqxx::connection_base& primary);

// The newest receipt a server holds: its id and its chain, which covers every receipt and event
// before it (docs/integrity.md#the-receipt-chain). Two servers holding the same receipt with the
// same chain hold the same history up to it.
struct LedgerHead {
    std::int64_t receipt_id = 0;
    std::string chain{};
};

// The newest receipt `connection`'s server holds, none for an empty ledger. Needs only the right
// to read callback_receipts: no monitoring role.
[[nodiscard]] std::optional<LedgerHead> ReadLedgerHead(pqxx::connection_base& connection);

// AwaitSynchronousStandbys, and in the same transaction whether `primary` holds `head` (the same
// receipt, the same chain): true when it does, or when `head` is none (an empty ledger shows
// nothing). What a replica showed is then as durable as an acknowledged append when its head,
// read after what it showed, is held: the replica's history up to it is the primary's, and the
// barrier waited for the standbys to hold it. A replica with WAL of a demoted primary, or of a
// restored one, has a head the primary does not hold. One round trip; throws as
// AwaitSynchronousStandbys.
[[nodiscard]] bool AwaitSynchronousStandbysHolding(pqxx::connection_base& primary,
                                                   const std::optional<LedgerHead>& head);

}  // namespace payledger::ledger
