#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <span>
#include <string>
#include <vector>

#include "ledger/base/bytes.hpp"  // Sha256Digest, Sha256HexDigits.
#include "ledger/integrity/chain.hpp"
#include "ledger/pg/failures.hpp"
#include "ledger/pg/rows.hpp"
#include "ledger/write/writer_cache.hpp"
#include "projections/decide.hpp"  // Claims.
#include "projections/event.hpp"
#include "projections/order_fold.hpp"

namespace payledger::ledger {

// What the writer sends of a delivery that no batch changes, rendered ahead of the batch by
// RenderForWrite (rendered on the writing thread, which holds the writer lock, it was about half
// of that thread's time).
struct RenderedDelivery {
    // The receipt's texts as the database stores them (storable_text.hpp): its peer, and its
    // headers, a JSON text, as is the event's data (empty without an event).
    std::string peer{};
    std::string headers{};
    std::string event_data{};
    Sha256Digest body_digest{};     // The body's SHA-256: its key in receipt_bodies.
    Sha256HexDigits body_sha256{};  // The same in hex, for the chain's line.
};

// One delivery that reached the service, ready for the ledger. `outcome` is kAppended when
// the ledger must decide (`event` is then set); any other outcome was reached before the
// ledger (malformed, bad_signature, mismatch with the configuration, ignored) and only the
// receipt is recorded.
struct Delivery {
    Receipt receipt{};  // id, outcome and seq are filled in by the writer.
    projections::Outcome outcome = projections::Outcome::kAppended;
    std::string message{};
    std::optional<projections::Event> event{};  // seq, receipt_id are filled in by the writer.
    projections::Claims claims{};               // What a refund notice names about its order.
    // Set by RenderForWrite, and then only valid while receipt and event stay as they were.
    std::optional<RenderedDelivery> rendered{};
};

// Renders what WriteBatch sends of `delivery` that no batch changes (a no-op when done).
// Committer::Submit calls it on the submitting thread; WriteBatch renders what is missing.
void RenderForWrite(Delivery& delivery);

// What became of one delivery, after the commit that holds it.
struct DeliveryResult {
    projections::Outcome outcome = projections::Outcome::kUnavailable;
    std::int64_t seq = 0;   // The appended or existing event (appended, duplicate, conflict).
    std::string message{};  // In the answer.
    // A failure's full text, the database driver's included, for the operator's log only:
    // never in an answer (it names hosts, ports, sockets and SQL).
    std::string detail{};
    std::optional<projections::OrderRow> order{};  // The order after this delivery, if known.
    // An ORDER_CREATED's: the data of the order's ORDER_CREATED (PlannedDelivery).
    std::string registered_data{};
    projections::TimeMicros registered_at = 0;
    std::int64_t receipt_id = 0;
    // Why the delivery's transaction did not commit (outcome kUnavailable), in the one
    // classification of failures: a broken invariant answers 500, the others 503
    // (api/channels/channel.hpp StatusOf).
    std::optional<FailureKind> failure{};
};

struct BatchStats {
    // The batch was planned from the state it read under the lock, not from a WriterCache.
    bool state_read = false;
    std::chrono::steady_clock::duration lock_wait{};
    // The batch's steps on this thread, one after another: the first round trip (lock and
    // read, the lock wait included; none when planned from a WriterCache), the plan and the
    // write's parameters (no I/O), and the last round trip (the write and COMMIT, the WAL
    // flush included; from a cache, BEGIN and the lock too).
    std::chrono::steady_clock::duration read{};
    std::chrono::steady_clock::duration plan{};
    std::chrono::steady_clock::duration write{};
};

// Writes a batch of deliveries in one transaction on `connection` and commits it, in two round
// trips: takes the writer lock (docs/write-path.md#the-writer-lock) and reads the sequences and the
// stored events of the orders named; plans the batch with projections::PlanBatch (pure: outcomes in
// order, so two copies in one batch give appended, then duplicate; the new events; the order rows;
// the balance deltas); then writes it in one statement, its rows bound in binary, which checks
// every row count against the plan's, and commits.
// With a `cache` that knows every order named, in one round trip: BEGIN, the lock and a check
// that nobody wrote since the cache's batch (schema 0007), the write and COMMIT; when the check
// or the write finds the cache wrong, the batch is rolled back and written as above. `cache`
// learns from every committed batch and forgets all after any failure.
// Returns one result per delivery, in order, valid only because the commit succeeded.
// Throws pqxx exceptions (nothing committed, or pqxx::in_doubt_error when the session was lost
// during the write and COMMIT) and InvariantError (rolled back).
[[nodiscard]] std::vector<DeliveryResult> WriteBatch(pqxx::connection& connection,
                                                     std::span<const Delivery> deliveries,
                                                     BatchStats* stats = nullptr,
                                                     WriterCache* cache = nullptr);

// Reads, outside the writer lock and in one snapshot, the stored events of the orders `keys`
// that `cache` does not know, and has the cache learn them (WriterCache::Learn: only when that
// snapshot is the ledger the cache knows, or the one before its last batch). Returns how many
// orders the cache learned. For a thread beside the writer's, on a connection of its own.
// Throws pqxx exceptions; the cache is unchanged then.
std::size_t PrefetchState(pqxx::connection& connection, const std::vector<std::string>& keys,
                          WriterCache& cache);

}  // namespace payledger::ledger
