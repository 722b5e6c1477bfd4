#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/pg/database.hpp"
#include "ledger/subscriptions/subscription_start.hpp"
#include "projections/event.hpp"
#include "projections/event_filter.hpp"

namespace payledger::ledger {

// Subscriptions (schema/0010): one cursor per subscription over the global feed, moved only by
// compare-and-set, and an append-only record of the moves an admin makes.
//
// How a deliverer uses this file, on a thread of its own per subscription, while its process
// holds the subscription's SubscriptionLease:
//   1. state = EnsureSubscription(...) once; token = TakeLeaseToken(...) each time the lease is
//      taken; cursor = state.after.
//   2. batch = ReadMatchingBatch(tx, scan_from, filter, batch_max), scan_from starting at the
//      cursor; an empty batch: scan_from = batch.scanned_to, and wait (FeedNotifier) unless
//      !batch.caught_up().
//   3. POST the batch. On a 2xx: AdvanceCursor(name, token, cursor, last seq). On a failure:
//      RecordFailure(name, token, cursor, ...); on a 410: DisableAfterGone(name, token, cursor,
//      ...).
//   4. Any of these returning false means the stored cursor is no longer `cursor` (an admin
//      rewound or disabled it, or another process delivered) or the stored token is no longer
//      `token` (another process took the lease over): ReadSubscription again and go on from
//      what is stored, after taking the lease again. Nothing here ever moves a cursor that was
//      moved meanwhile, and no process that lost the lease changes the state.
//
// Every function taking a pqxx::connection runs one short transaction of its own on it and
// commits it; every function taking a transaction runs in the caller's and never takes the
// writer lock. All throw libpqxx's exceptions when the database fails; pqxx::in_doubt_error
// from a commit means the outcome is unknown: read the state before deciding anything.

// The class (first key) of the session-level advisory locks of SubscriptionLease, in the
// two-int4 key space of pg_advisory_lock, which never overlaps the one-int8 space of the keys
// in ledger/pg/database.hpp.
inline constexpr std::int32_t kSubscriptionLeaseLockClass = 0x70617973;  // "pays"
// What RecordFailure keeps of an error text, in bytes.
inline constexpr std::size_t kSubscriptionErrorBytesMax = 1000;
// ReadMatchingBatch examines at most this many positions (seq values) after `after` per read,
// so that a read stays short when the filter matches rarely; scanned_to says where it stopped.
inline constexpr std::int64_t kMatchingScanSeqsMax = 100'000;
// ReadLag examines at most this many events from each end (see SubscriptionLag). Measured on
// the 2-core machine: 100 000 from each end took 300 ms, so a tenth of it, about 30 ms at
// worst, for a subscription far behind; one that keeps up costs a few index entries.
inline constexpr std::int64_t kLagScanEventsMax = 10'000;

// The lease token of a subscription whose lease no process has taken yet (schema/0012).
inline constexpr std::int64_t kLeaseTokenNone = 0;

// One row of `subscriptions`.
struct SubscriptionState {
    std::string name{};
    std::int64_t after = 0;  // The cursor: the last seq acknowledged (or set by an admin).
    bool disabled = false;   // After a 410, until Enable.
    std::int32_t consecutive_failures = 0;
    std::optional<std::string> last_error{};
    std::optional<projections::TimeMicros> last_attempt_at{};
    std::optional<projections::TimeMicros> next_attempt_at{};
    projections::TimeMicros created_at = 0;
    bool operator==(const SubscriptionState&) const = default;
};

// Creates the subscription when it does not exist, with its cursor at `start`; an existing
// subscription keeps its state whatever `start` says. Returns the stored state.
// REQUIRES: projections::IsValidKey(name).
[[nodiscard]] SubscriptionState EnsureSubscription(pqxx::connection& connection,
                                                   const std::string& name,
                                                   SubscriptionStart start);

// Fences the subscription's lease (schema/0012): increments its stored lease token and returns
// it, committed (synchronous_commit at least on, as every session of ledger::Connect, so that a
// failover cannot hand the same token to a second holder). The outcome writes below hold only
// with the token returned last, so a process that lost the lease (its session ended while a POST
// was in flight) can no longer change the state once the new holder has taken its token. A
// deliverer takes it through SubscriptionLease::TakeToken, on the session that holds the lock,
// each time its process takes the lease and before it reads the state: on any other connection
// a process whose lock had just gone could still increment it after the next holder took its
// own, and fence the holder out.
// REQUIRES: `connection` holds `name`'s lease; the subscription exists.
[[nodiscard]] std::int64_t TakeLeaseToken(pqxx::connection& connection, const std::string& name);

// The stored state; nullopt for a name that has none (any text: an admin's path is fine).
[[nodiscard]] std::optional<SubscriptionState> ReadSubscription(pqxx::transaction_base& tx,
                                                                const std::string& name);
// The stored states of those of `names` that exist, in name order (bytewise).
[[nodiscard]] std::vector<SubscriptionState> ReadSubscriptions(
    pqxx::transaction_base& tx, const std::vector<std::string>& names);

// Each outcome write below holds only while the stored lease token is still `lease_token` (the
// one TakeLeaseToken returned to this process); with another it changes nothing and answers
// false, as with a stale cursor.

// A delivery of every matching event in (from, to] was acknowledged at `attempt_at`: moves the
// cursor from `from` to `to` and clears the failures, only while the stored cursor is still
// `from` and the subscription is not disabled. True when it moved. A deliverer whose `from` is
// stale (an admin rewound, or another process delivered) or whose token is (another process
// took the lease over) changes nothing and learns it here.
// Committed asynchronously (synchronous_commit off): a crash or a failover may take the last
// moves back, never forward, so what they lose is redelivered, never skipped.
// REQUIRES: 0 <= from < to; `connection` idle.
[[nodiscard]] bool AdvanceCursor(pqxx::connection& connection, const std::string& name,
                                 std::int64_t lease_token, std::int64_t from, std::int64_t to,
                                 projections::TimeMicros attempt_at);

// An attempt at `attempt_at` from the cursor `expected_after` failed with `error` (kept up to
// kSubscriptionErrorBytesMax bytes, as storable text); the next is due at `next_attempt_at`.
// Counts the failure only while the cursor is still `expected_after` and the subscription is
// not disabled. True when it was counted.
[[nodiscard]] bool RecordFailure(pqxx::connection& connection, const std::string& name,
                                 std::int64_t lease_token, std::int64_t expected_after,
                                 const std::string& error, projections::TimeMicros attempt_at,
                                 projections::TimeMicros next_attempt_at);

// The receiver answered 410 Gone to the batch after `expected_after`, at `attempt_at`: the
// subscription is disabled until Enable, and a change ('disabled: 410', from = to = the
// cursor) is recorded in the same transaction. Only while the cursor is still
// `expected_after` and the subscription is enabled; true when it was disabled.
[[nodiscard]] bool DisableAfterGone(pqxx::connection& connection, const std::string& name,
                                    std::int64_t lease_token, std::int64_t expected_after,
                                    projections::TimeMicros attempt_at);

// An admin moves the cursor to `to`, back (to deliver again) or forward (to skip what a
// receiver can never take), and a change ('rewind', from the old cursor) is recorded in the
// same transaction. The failures and the back-off are cleared, so delivery from `to` begins at
// once; a disabled subscription stays disabled. A cursor beyond the feed's head skips the
// events that will take the positions up to it: the caller decides whether to allow that.
// Returns the new state; nullopt (and nothing recorded) for an unknown name.
// REQUIRES: to >= 0.
[[nodiscard]] std::optional<SubscriptionState> Rewind(pqxx::connection& connection,
                                                      const std::string& name, std::int64_t to);

// An admin enables a subscription: a disabled one delivers again from its cursor at once, and a
// change ('enabled', from = to = the cursor) is recorded in the same transaction. Enabling an
// enabled subscription changes and records nothing. Returns the state; nullopt for an unknown
// name.
[[nodiscard]] std::optional<SubscriptionState> Enable(pqxx::connection& connection,
                                                      const std::string& name);

// Why a row of subscription_changes was written.
enum class ChangeWhy { kRewind, kDisabledGone, kEnabled };
// "rewind", "disabled: 410", "enabled": the stored and published words.
[[nodiscard]] std::string_view ToString(ChangeWhy why);
[[nodiscard]] std::optional<ChangeWhy> ParseChangeWhy(std::string_view text);

// One row of subscription_changes.
struct SubscriptionChange {
    std::int64_t id = 0;
    std::string name{};
    std::int64_t from = 0;
    std::int64_t to = 0;
    ChangeWhy why = ChangeWhy::kRewind;
    projections::TimeMicros at = 0;
    bool operator==(const SubscriptionChange&) const = default;
};

// At most `limit` changes with id > after, in id order; a reader paging by id never skips one
// (ids are taken in commit order, under kSubscriptionChangesLockKey).
// REQUIRES: 0 < limit <= kPageSizeMax (ledger/read/reads.hpp).
[[nodiscard]] std::vector<SubscriptionChange> ReadChanges(pqxx::transaction_base& tx,
                                                          std::int64_t after, std::int64_t limit);
// The at most `limit` changes just below `before`, in ascending id order.
// REQUIRES: 0 < limit <= kPageSizeMax.
[[nodiscard]] std::vector<SubscriptionChange> ReadChangesBefore(pqxx::transaction_base& tx,
                                                                std::int64_t before,
                                                                std::int64_t limit);

// What one ReadMatchingBatch read.
struct MatchingBatch {
    // At most `limit` events matching the filter, consecutive among the matching ones, in seq
    // order, each with seq in (after, scanned_to].
    std::vector<projections::Event> events{};
    // Every event with seq <= scanned_to that is, or will ever be, committed has been examined:
    // a later read from scanned_to misses no matching event. At least `after`.
    std::int64_t scanned_to = 0;
    // The newest seq committed when the read ran (0 for an empty ledger).
    std::int64_t head = 0;
    // False when the read stopped early (a full batch, or kMatchingScanSeqsMax positions):
    // read again from scanned_to at once, without waiting for a new event.
    [[nodiscard]] bool caught_up() const { return scanned_to >= head; }
};

// The next batch of matching events after `after`, in one statement (one snapshot). The scan
// walks ledger_events' primary key from `after` (an index range scan, stopping at `limit`
// matches or kMatchingScanSeqsMax positions), so its cost is bounded even when the filter
// matches rarely. scanned_to may be the head even though the last matching event returned is
// older: because every writer holds the writer lock until it commits, seq order is commit
// order, and an event with a smaller seq than the newest one visible is already visible too.
// Safe on a replica as well (replay applies the commits in the same order).
// `scan_seqs_max` (kMatchingScanSeqsMax) is there for tests.
// REQUIRES: after >= 0; 0 < limit <= kPageSizeMax (ledger/read/reads.hpp); scan_seqs_max > 0.
[[nodiscard]] MatchingBatch ReadMatchingBatch(pqxx::transaction_base& tx, std::int64_t after,
                                              const projections::EventFilter& filter,
                                              std::int64_t limit,
                                              std::int64_t scan_seqs_max = kMatchingScanSeqsMax);

// How far a subscription with cursor `after` is behind, at `now`.
struct SubscriptionLag {
    std::int64_t head = 0;        // The newest matching seq, or `after` when there is none.
    std::int64_t lag_events = 0;  // Matching events with seq > after.
    // Seconds from the recorded_at of the oldest matching event with seq > after to `now`;
    // 0 when there is none.
    double lag_seconds = 0;
    // False when more than kLagScanEventsMax events follow `after`: then only the first
    // kLagScanEventsMax of them were examined from the cursor, and as many from the newest;
    // lag_events counts the matches among the first (there are at least that many), head is
    // the newest match found (at most the true head), and when none of the first matched,
    // lag_seconds is the age of the last examined of them (no younger than the oldest
    // undelivered match, so an alert on it errs towards alerting).
    bool exact = true;
};

// The lag of a subscription at cursor `after`. Its cost is bounded by 2 * kLagScanEventsMax
// index entries and rows whatever the filter: a deliverer that keeps up keeps `after` within
// a batch of the head, and the answer is then exact and cheap.
// `scan_events_max` (kLagScanEventsMax) is there for tests.
// REQUIRES: after >= 0; scan_events_max > 0.
[[nodiscard]] SubscriptionLag ReadLag(pqxx::transaction_base& tx, std::int64_t after,
                                      const projections::EventFilter& filter,
                                      projections::TimeMicros now,
                                      std::int64_t scan_events_max = kLagScanEventsMax);

// Which process delivers which subscription: a dedicated connection holding one session-level
// advisory lock per subscription name, (kSubscriptionLeaseLockClass, hashtext(name)). The
// locks live exactly as long as the session. When the process exits or is killed, the kernel
// closes the socket and PostgreSQL frees them as soon as it sees that; when the host vanishes
// silently (power, network), the session's TCP keepalives and tcp_user_timeout, set on both
// ends of this connection (idle 5 s, then 3 probes 5 s apart; 20 s for unacknowledged data),
// make the server end it within about 20-25 s. Two names whose hashtext collides share a lock:
// they can only be held by the same process, so they serialise more, nothing worse.
//
// The connection must reach the primary directly: through a transaction pooler (pgbouncer in
// transaction mode) session locks mean nothing.
//
// Thread-safe (one mutex around the one connection). No method throws a database failure:
// any failure closes the connection, which frees every lock, and Alive() turns false; the
// owner then makes a new SubscriptionLease and acquires again. Destruction closes the
// connection, which frees every lock at once.
class SubscriptionLease {
public:
    // Connects to `url` (ledger::Connect, with `settings`), with the keepalive settings above
    // added to the connection string (unless it sets them) and to the server's session.
    // Throws what Connect throws (pqxx::broken_connection, ReadOnlyServer).
    SubscriptionLease(const std::string& url, const SessionSettings& settings);
    ~SubscriptionLease();
    SubscriptionLease(const SubscriptionLease&) = delete;
    SubscriptionLease& operator=(const SubscriptionLease&) = delete;

    // Takes the lock of `name` without waiting. True when this lease holds it (now or
    // already); false when another session holds it, or the connection failed.
    [[nodiscard]] bool TryAcquire(const std::string& name);
    // True while this lease holds `name` and its connection has not been seen to fail.
    [[nodiscard]] bool Holds(const std::string& name) const;
    // The names held, in name order.
    [[nodiscard]] std::vector<std::string> Held() const;
    // Fences `name` (TakeLeaseToken) on this lease's own session: the increment can only
    // happen while this session lives, and so holds the lock; a session found dead takes no
    // token and frees every lock (Alive() turns false). The token, or nullopt when `name` is not
    // held or the session failed.
    [[nodiscard]] std::optional<std::int64_t> TakeToken(const std::string& name);
    // Lets another process take `name` (a no-op when not held).
    void Release(const std::string& name);
    // One round trip: false when the session has ended (then nothing is held any more; make
    // a new lease). Call it before each batch: a deliverer whose lease died must stop, since
    // another process may take the subscription over.
    [[nodiscard]] bool Alive();
    // No round trip: false when the session is known to have ended (closed, or the server
    // said something while it was idle). Alive() before a batch still decides.
    [[nodiscard]] bool Usable() const;

private:
    // Closes the connection after a failure: the server frees every lock.
    void DropLocked();

    mutable std::mutex mutex_;
    std::unique_ptr<pqxx::connection> connection_;  // Guarded by mutex_; null once dropped.
    std::set<std::string> held_;                    // Guarded by mutex_.
};

// `url` with libpq's TCP keepalive options (keepalives, keepalives_idle, keepalives_interval,
// keepalives_count, tcp_user_timeout) added where it does not set them, as key=value text.
// Throws ConninfoError (ledger/pg/conninfo.hpp) when `url` does not parse.
[[nodiscard]] std::string WithLeaseKeepalives(const std::string& url);

}  // namespace payledger::ledger
