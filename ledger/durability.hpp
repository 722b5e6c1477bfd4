#pragma once

#include <cstdint>
#include <optional>
#include <pqxx/connection_base>

namespace payledger::ledger {

// docs/design.md#what-a-reader-is-shown: a reader of the feeds (and a subscription) is shown an
// event only once it is as durable as an acknowledged append, so that no failover can take
// back what a reader already saw and give its seq to another event.
//
// With synchronous_standby_names set, a commit that waits for the synchronous standby stays
// invisible to other sessions on the primary until the standby confirms it, but it is visible
// before that (1) on asynchronous replicas, which receive and replay the primary's flushed WAL
// at once, (2) on the primary when the wait is cancelled (pg_cancel_backend, a timeout: the
// commit stays, locally), and (3) on the primary after a crash restart, whose recovery makes
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
// Returns the primary's timeline. Throws pqxx::in_doubt_error when the wait was cancelled or
// the session lost during it (the same warning ExecPipelineThenCommit turns into in doubt),
// and the errors of a statement otherwise.
std::int64_t AwaitSynchronousStandbys(pqxx::connection_base& primary);

// The timeline `replica` streams from now, none when its WAL receiver is not streaming. What
// a replica has replayed belongs to the primary's history when the replica streams the
// primary's timeline; a replica left with WAL of a demoted primary cannot stream the new
// one.
[[nodiscard]] std::optional<std::int64_t> StreamingTimeline(pqxx::connection_base& replica);

}  // namespace payledger::ledger
