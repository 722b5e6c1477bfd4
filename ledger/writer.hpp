#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <span>
#include <string>
#include <vector>

#include "ledger/chain.hpp"  // Sha256HexDigits.
#include "ledger/rows.hpp"
#include "projections/decide.hpp"  // Claims.
#include "projections/event.hpp"
#include "projections/order_fold.hpp"

namespace payledger::ledger {

// One delivery that reached the service, ready for the ledger. `verdict` is kAppended when
// the ledger must decide (`event` is then set); any other verdict was reached before the
// ledger (malformed, bad_signature, mismatch with the configuration, ignored) and only the
// receipt is recorded.
// What the writer sends of a delivery that no batch changes, rendered ahead of the batch by
// PrepareForWrite (issue 10: rendered on the writing thread, which holds the writer lock, it
// was about half of that thread's time).
struct PreparedDelivery {
    // The receipt row's members that do not depend on the batch, as JSON: "source":...,
    // "received_at":..., "peer":..., "headers":..., "body_length":..., "out_trade_no":...
    std::string receipt_members{};
    std::string event_data{};  // The event's data as a JSON string; empty without an event.
    Sha256HexDigits body_sha256{};
};

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
    std::chrono::steady_clock::duration lock_wait{};
};

// Writes a batch of deliveries in one transaction on `connection` and commits it, in two round
// trips: takes the writer lock (SPEC §7) and reads the sequences and the stored events of the
// orders named; plans the batch with projections::PlanBatch (pure: outcomes in order, so two
// copies in one batch give appended, then duplicate; the new events; the order rows; the
// balance deltas); then writes it in one statement, which checks every row count against the
// plan's, and commits.
// Returns one result per delivery, in order, valid only because the commit succeeded.
// Throws pqxx exceptions (nothing committed, or pqxx::in_doubt_error when the session was lost
// during the write and COMMIT) and InvariantError (rolled back).
[[nodiscard]] std::vector<DeliveryResult> WriteBatch(pqxx::connection& connection,
                                                     std::span<const Delivery> deliveries,
                                                     BatchStats* stats = nullptr);

class TransactionBlock;  // ledger/writer.cpp

// The writing session of one connection (issue 10): writes batches as WriteBatch does, and
// while deliveries keep coming, opens the next batch (BEGIN, the writer lock, the read) in the
// round trip of this batch's write and COMMIT, so that a batch under load takes one round trip
// instead of two. Not thread-safe; the connection is only used through it while it lives.
class WriterSession {
public:
    explicit WriterSession(pqxx::connection& connection);
    ~WriterSession();  // Rolls back a batch that was opened and not written.
    WriterSession(const WriterSession&) = delete;
    WriterSession& operator=(const WriterSession&) = delete;

    // Returns the next batch (empty: none), which must then stay where it is, the same
    // deliveries at the same place, until it is written.
    using TakeNext = std::function<std::span<const Delivery>()>;

    // Writes `deliveries` and commits them, as WriteBatch (same results, same exceptions).
    // Once the batch is planned, and if its writer lock was granted at once (the lock is the
    // committer's alone), `take_next` (when set) is asked for the next batch, and that batch
    // is opened in the same round trip as this COMMIT; its own Write finds it open. When the
    // opening fails after this COMMIT, this batch's results are returned all the same (it
    // committed: its last receipt is read to know) and the next Write opens its batch again;
    // a session lost during that round trip leaves this batch in doubt, as without an opening.
    [[nodiscard]] std::vector<DeliveryResult> Write(std::span<const Delivery> deliveries,
                                                    const TakeNext& take_next,
                                                    BatchStats* stats = nullptr);

private:
    pqxx::connection& connection_;
    std::unique_ptr<TransactionBlock> block_;
    // The batch opened with the last COMMIT (where its deliveries are), and its read.
    const Delivery* opened_first_ = nullptr;
    std::size_t opened_size_ = 0;
    pqxx::result opened_rows_{};
};

}  // namespace payledger::ledger
