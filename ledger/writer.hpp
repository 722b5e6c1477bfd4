#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ledger/chain.hpp"  // Sha256Digest, Sha256HexDigits.
#include "ledger/rows.hpp"
#include "projections/decide.hpp"  // Claims.
#include "projections/event.hpp"
#include "projections/order_fold.hpp"
#include "projections/plan.hpp"

namespace payledger::ledger {

// What the writer sends of a delivery that no batch changes, rendered ahead of the batch by
// PrepareForWrite (issue 10: rendered on the writing thread, which holds the writer lock, it
// was about half of that thread's time).
struct PreparedDelivery {
    // The receipt's texts as the database stores them (storable_text.hpp): its peer, and its
    // headers, a JSON text, as is the event's data (empty without an event).
    std::string peer{};
    std::string headers{};
    std::string event_data{};
    Sha256Digest body_digest{};     // The body's SHA-256: its key in receipt_bodies.
    Sha256HexDigits body_sha256{};  // The same in hex, for the chain's line.
};

// One delivery that reached the service, ready for the ledger. `verdict` is kAppended when
// the ledger must decide (`event` is then set); any other verdict was reached before the
// ledger (malformed, bad_signature, mismatch with the configuration, ignored) and only the
// receipt is recorded.
struct Delivery {
    Receipt receipt{};  // id, outcome and seq are filled in by the writer.
    projections::Outcome verdict = projections::Outcome::kAppended;
    std::string message{};
    std::optional<projections::Event> event{};  // seq, receipt_id are filled in by the writer.
    projections::Claims claims{};  // What a refund notice names about its order (SPEC §6).
    // Set by PrepareForWrite, and then only valid while receipt and event stay as they were.
    std::optional<PreparedDelivery> prepared{};
};

// Renders what WriteBatch sends of `delivery` that no batch changes (a no-op when done).
// Committer::Submit calls it on the submitting thread; WriteBatch renders what is missing.
void PrepareForWrite(Delivery& delivery);

// What became of one delivery, after the commit that holds it.
struct DeliveryResult {
    projections::Outcome outcome = projections::Outcome::kUnavailable;
    std::int64_t seq = 0;  // The appended or existing event (appended, duplicate, conflict).
    std::string message{};
    std::optional<projections::OrderRow> order{};  // The order after this delivery, if known.
    std::int64_t receipt_id = 0;
    bool internal_error = false;  // An invariant or a database rule failed: answer 500.
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

// What one writer knows of the ledger after its own last batch (issue 10): the next ids of
// both sequences, the chain's head, and the stored events of the orders its recent batches
// named (none: an order known to have none), with every field the plan reads as the database
// stores it (not `data` nor `recorded_at`, which the plan never reads). Valid only while no
// other batch wrote: WriteBatch checks that under the writer lock (schema 0007), and plans a
// batch whose orders are all known without reading, in one round trip instead of two.
// Bounded: two generations of at most orders_max / 2 orders each; an order found in the older
// is moved to the newer, and when the newer is full the older is dropped.
// A dropped generation is not destroyed here: freeing 25 000 orders' maps, vectors and strings
// took 6-11 ms (measured), which on the committer's path stalled a batch's answers and the next
// batch. It waits in TakeDropped() for its owner to free it elsewhere (the Committer: on a
// thread of its own); what is not taken by the next drop is destroyed then, as before.
// Not thread-safe: one per writing connection, like the connection.
class WriterCache {
public:
    using Generation = std::unordered_map<std::string, std::vector<projections::Event>>;

    explicit WriterCache(std::size_t orders_max);

    // Forgets everything (after a batch that failed or may have committed).
    void Clear();
    [[nodiscard]] bool valid() const { return valid_; }
    [[nodiscard]] std::size_t size() const { return newer_.size() + older_.size(); }
    // The generations dropped since the last call (at most the last two drops' worth), for
    // the caller to destroy where it costs nothing.
    [[nodiscard]] std::vector<Generation> TakeDropped() { return std::exchange(dropped_, {}); }

    // The state for orders `keys`, when known for all of them.
    [[nodiscard]] std::optional<projections::LedgerState> StateFor(
        const std::set<std::string>& keys, ChainValue& head);
    // After a committed batch that was planned on the state `before` (its next ids): the
    // ledger as it left it, the next ids `after`, the chain's `head`, and the events of every
    // order it named (an empty vector for one without). When `before` is not where the cache
    // left the ledger, another writer wrote in between: what else the cache held is forgotten.
    void Remember(const projections::LedgerState& before, std::int64_t next_seq_after,
                  std::int64_t next_receipt_id_after, const ChainValue& head,
                  std::map<std::string, std::vector<projections::Event>> events);

private:
    // Moves `generation` to dropped_, keeping dropped_ to kDroppedMax generations.
    void Drop(Generation& generation);
    static constexpr std::size_t kDroppedMax = 2;

    const std::size_t generation_max_;
    bool valid_ = false;
    std::int64_t next_seq_ = 0;
    std::int64_t next_receipt_id_ = 0;
    ChainValue head_{};
    Generation newer_;
    Generation older_;
    std::vector<Generation> dropped_;  // TakeDropped().
};

// Writes a batch of deliveries in one transaction on `connection` and commits it, in two round
// trips: takes the writer lock (SPEC §7) and reads the sequences and the stored events of the
// orders named; plans the batch with projections::PlanBatch (pure: outcomes in order, so two
// copies in one batch give appended, then duplicate; the new events; the order rows; the
// balance deltas); then writes it in one statement, its rows bound in binary, which checks
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

}  // namespace payledger::ledger
