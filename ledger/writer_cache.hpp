#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ledger/chain.hpp"  // ChainValue.
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

// Tells `cache` what a committed batch, `plan` planned on `state` with the chain's `head` after
// it, left: the events of each order named in `keys` as the database stores them, and the next
// ids. After the COMMIT, so a failure here (out of memory) must not fail the committed batch:
// it only makes the cache forget.
void RememberCommitted(WriterCache& cache, const std::set<std::string>& keys,
                       const projections::LedgerState& state, const projections::BatchPlan& plan,
                       const ChainValue& head) noexcept;

}  // namespace payledger::ledger
