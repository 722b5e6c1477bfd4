#pragma once

namespace payledger::ledger {

// Where a subscription seen for the first time begins (its config's `start`; no libpqxx here,
// so that the config reads it without the database's headers).
enum class SubscriptionStart {
    kBeginning,  // after = 0: every event of the ledger.
    kNow,        // after = the newest seq committed at that moment.
};

}  // namespace payledger::ledger
