#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "ledger/integrity/chain.hpp"
#include "ledger/integrity/checkpoint.hpp"
#include "ledger/integrity/verify.hpp"

namespace payledger::ledger {

// At most this many lines of breaks are listed.
inline constexpr std::size_t kBreaksListedMax = 20;

struct AuditReport {
    std::int64_t receipts = 0;
    std::int64_t events = 0;
    std::int64_t head_id = 0;       // The last receipt's id, 0 for an empty ledger.
    ChainValue head = kChainStart;  // Its stored chain.
    std::int64_t break_count = 0;
    // "receipt <id> <what>" / "event <seq> <what>", first first: a break's line, and after a
    // break at a receipt that appended an event, a line naming the event (not a break of its
    // own). At most kBreaksListedMax lines.
    std::vector<std::string> breaks{};

    [[nodiscard]] bool ok() const { return break_count == 0; }
};

// A further check that `audit` runs in its snapshot after the chain's, reporting each break
// through `add` ("event <seq> <what>"): how `payledger audit --platform-signatures`, which
// needs the channels of api/, re-verifies the platforms' signatures. Throws pqxx exceptions.
using AuditBreakSink = std::function<void(std::string what)>;
using AuditCheck = std::function<void(pqxx::transaction_base& tx, const AuditBreakSink& add)>;

// `payledger audit`: in one snapshot (REPEATABLE READ, READ ONLY), streams every receipt in
// id order with the event it appended (constant memory), recomputes
// each receipt's chain from the previous receipt's stored chain and its line, and compares it
// with the stored one; an appended receipt must have its event (and the event's seq must be
// the receipt's), and every event must have its appending receipt. A receipt's body is inline
// (written before schema/0008; hashed here for its line) or stored once in receipt_bodies
// under the SHA-256 the receipt keeps (its line names that hash): every stored body is hashed
// here once against its key, a changed one is a break at the first receipt that names it, and
// a receipt that keeps its body (body_stored) but whose body is in neither place is a break.
// An appended event's source must be its receipt's ("event <seq> source <x> differs from its
// receipt <id>'s <y>"): the receipt's line names only the receipt's source.
// Each break is reported once: checking goes on from the stored values. A break at a receipt
// that appended an event is followed by a line naming that event ("event <seq> appended by
// receipt <id>: ..."), so that the money fact in question needs no lookup. With a
// `checkpoint`, its signature must verify with `key` and the receipt it names must still hold
// its chain value in the same snapshot (a deleted tail is caught here). `check`, when given,
// runs last in the same snapshot. `progress`, when given, is told the receipts read now and
// then, and once at the end. Throws pqxx exceptions.
[[nodiscard]] AuditReport Audit(const std::string& url, const Checkpoint* checkpoint = nullptr,
                                const Ed25519Key* key = nullptr, const Progress& progress = {},
                                const AuditCheck& check = {});

// The lines `audit` prints, each ending in "\n".
[[nodiscard]] std::string FormatAuditReport(const AuditReport& report);

}  // namespace payledger::ledger
