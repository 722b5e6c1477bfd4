#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ledger/chain.hpp"
#include "ledger/checkpoint.hpp"
#include "ledger/verify.hpp"

namespace payledger::ledger {

// At most this many breaks are listed (SPEC §11).
inline constexpr std::size_t kBreaksListedMax = 20;

struct AuditReport {
    std::int64_t receipts = 0;
    std::int64_t events = 0;
    std::int64_t head_id = 0;       // The last receipt's id, 0 for an empty ledger.
    ChainValue head = kChainStart;  // Its stored chain.
    std::int64_t break_count = 0;
    std::vector<std::string>
        breaks{};  // "receipt <id> <what>" / "event <seq> <what>", first first.

    [[nodiscard]] bool ok() const { return break_count == 0; }
};

// SPEC §11 `audit`: in one snapshot (REPEATABLE READ, READ ONLY), streams every receipt in id
// order with the event it appended (constant memory), recomputes each receipt's chain from
// the previous receipt's stored chain and its line, and compares it with the stored one; an
// appended receipt must have its event (and the event's seq must be the receipt's), and
// every event must have its appending receipt. Each break is reported once: checking goes
// on from the stored values. Bodies are hashed here, not by the database. With a
// `checkpoint`, its signature must verify with `key` and the receipt it names must still
// hold its chain value in the same snapshot (a deleted tail is caught here). `progress`, when
// given, is told the receipts read now and then, and once at the end. Throws pqxx exceptions.
[[nodiscard]] AuditReport Audit(const std::string& url, const Checkpoint* checkpoint = nullptr,
                                const Ed25519Key* key = nullptr, const Progress& progress = {});

// The lines `audit` prints, each ending in "\n".
[[nodiscard]] std::string FormatAuditReport(const AuditReport& report);

}  // namespace payledger::ledger
