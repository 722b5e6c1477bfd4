#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ledger/base/bytes.hpp"       // Sha256Digest.
#include "ledger/integrity/chain.hpp"  // ChainValue.
#include "projections/event.hpp"
#include "projections/plan.hpp"  // LedgerState.

namespace payledger::ledger {

// What one writer knows of the ledger after its own last batch: the next ids of both
// sequences, the chain's head, and the stored events of the orders its recent batches named
// (none: an order known to have none), with every field the plan reads as the database stores
// it (not `data` nor `recorded_at`, which the plan never reads). Valid only while no
// other batch wrote: WriteBatch checks that under the writer lock (schema 0007), and plans a
// batch whose orders are all known without reading, in one round trip instead of two.
// Bounded: two generations of at most orders_max / 2 orders each; an order found in the older
// is moved to the newer, and when the newer is full the older is dropped.
// A dropped generation is not destroyed here: freeing 25 000 orders' maps, vectors and strings
// took 6-11 ms (measured), which on the committer's path stalled a batch's answers and the next
// batch. It waits in TakeDropped() for its owner to free it elsewhere (the Committer: on a
// thread of its own); what is not taken by the next drop is destroyed then, as before.
// It also learns orders it has not seen from reads made outside the writer lock, beside the
// writer (Learn, the Committer's prefetch: docs/write-path.md#the-writer-cache), so that a batch
// whose orders were registered long ago, or by another process, is planned without a read of
// its own under the lock.
// It also knows which bodies receipt_bodies holds because its own batches stored them
// (StoredBodies): a retried notice is most often the same bytes as the one that appended, and
// its batch then sends no body for the database to look up (docs/write-path.md#the-writer-cache).
// Thread-safe (one mutex; the writer takes it a few times a batch), but written by one writer
// only: one per writing connection, like the connection.
class WriterCache {
public:
    using Generation = std::unordered_map<std::string, std::vector<projections::Event>>;
    // A SHA-256 is uniform: its first 8 bytes are its hash.
    struct DigestHash {
        std::size_t operator()(const Sha256Digest& digest) const noexcept;
    };
    using Digests = std::unordered_set<Sha256Digest, DigestHash>;

    explicit WriterCache(std::size_t orders_max);

    // Forgets everything (after a batch that failed or may have committed).
    void Clear();
    [[nodiscard]] bool valid() const;
    [[nodiscard]] std::size_t size() const;
    // The generations dropped since the last call (at most the last two drops' worth), for
    // the caller to destroy where it costs nothing.
    [[nodiscard]] std::vector<Generation> TakeDropped();

    // The state for orders `keys`, when known for all of them.
    [[nodiscard]] std::optional<projections::LedgerState> StateFor(
        const std::set<std::string>& keys, ChainValue& head);
    // After a committed batch that was planned on the state `before` (its next ids): the
    // ledger as it left it, the next ids `after`, the chain's `head`, and the events of every
    // order it named (an empty vector for one without). When `before` is not where the cache
    // left the ledger, another writer wrote in between: what else the cache held is forgotten.
    // `stored_bodies`: the keys of the bodies the batch's receipts certainly stored (or found
    // stored), those of every receipt but a duplicate.
    void Remember(const projections::LedgerState& before, std::int64_t next_seq_after,
                  std::int64_t next_receipt_id_after, const ChainValue& head,
                  std::map<std::string, std::vector<projections::Event>> events,
                  const std::vector<Sha256Digest>& stored_bodies = {});

    // Forgets everything unless the ledger read under the writer lock (its next ids `state`,
    // its chain's `head`) is the one the cache knows: other ids mean another writer's batches
    // (Remember would forget then too), the same ids with another head a ledger that lost
    // batches this cache remembers (a failover to a standby without them).
    void ForgetUnlessAt(const projections::LedgerState& state, const ChainValue& head);

    // Of `digests`, the bodies receipt_bodies holds because this writer's committed batches
    // stored them, when the ledger is still the one the cache knows (its next ids and chain's
    // head are `state`'s and `head`): every receipt this writer committed is then in it, since
    // the head is the chain over all of them, and receipt_bodies is append-only. Empty
    // otherwise. A body named here is not sent again: a wrong answer would leave a receipt
    // naming bytes nobody stored, so the cache forgets them whenever it forgets the ledger.
    [[nodiscard]] Digests StoredBodies(const std::vector<Sha256Digest>& digests,
                                       const projections::LedgerState& state,
                                       const ChainValue& head) const;

    // Of `keys`, those the cache does not know (what a prefetch should read).
    [[nodiscard]] std::vector<std::string> Unknown(const std::vector<std::string>& keys) const;
    // The stored events of orders read outside the writer lock (an empty vector: an order with
    // none), in one snapshot whose chain's head was `snapshot_head`. The cache learns those it
    // does not know yet when that snapshot is the ledger it knows now, or the ledger before one
    // of this writer's last kHistoryMax batches (then only the orders those batches did not name:
    // they changed no other). Either way nothing else wrote between the snapshot and the ledger
    // the cache knows, and WriteBatch's check under the lock (schema 0007) proves that nothing
    // wrote since, or forgets everything. Returns how many orders it learned (0 when the
    // snapshot is another ledger's).
    std::size_t Learn(const ChainValue& snapshot_head,
                      std::map<std::string, std::vector<projections::Event>> events);

private:
    // Moves `generation` to dropped_, keeping dropped_ to kDroppedMax generations.
    void Drop(Generation& generation);  // Caller holds mutex_.
    void Insert(const std::string& key, std::vector<projections::Event> events);  // Likewise.
    void ClearLocked();                                                           // Likewise.
    // Whether the ledger with next ids `state` and chain's `head` is the one the cache knows.
    [[nodiscard]] bool KnowsLocked(const projections::LedgerState& state,
                                   const ChainValue& head) const;  // Likewise.
    static constexpr std::size_t kDroppedMax = 2;

    const std::size_t generation_max_;
    mutable std::mutex mutex_;
    bool valid_ = false;
    std::int64_t next_seq_ = 0;
    std::int64_t next_receipt_id_ = 0;
    ChainValue head_{};
    // This writer's last batches that continued the ledger the cache knew, oldest first: the
    // head before each, and the orders it named (Learn). A prefetch's read takes a millisecond
    // or two, in which the writer commits a batch or two.
    struct Written {
        ChainValue head_before{};
        std::vector<std::string> keys{};
    };
    static constexpr std::size_t kHistoryMax = 16;
    std::deque<Written> history_{};
    Generation newer_;
    Generation older_;
    std::vector<Generation> dropped_;  // TakeDropped().
    // StoredBodies(): two generations of at most generation_max_ keys each, as the orders.
    Digests newer_bodies_;
    Digests older_bodies_;
};

// Tells `cache` what a committed batch, `plan` planned on `state` with the chain's `head` after
// it, left: the events of each order named in `keys` as the database stores them, and the next
// ids. After the COMMIT, so a failure here (out of memory) must not fail the committed batch:
// it only makes the cache forget.
// `stored_bodies` as Remember's.
void RememberCommitted(WriterCache& cache, const std::set<std::string>& keys,
                       const projections::LedgerState& state, const projections::BatchPlan& plan,
                       const ChainValue& head,
                       const std::vector<Sha256Digest>& stored_bodies = {}) noexcept;

}  // namespace payledger::ledger
