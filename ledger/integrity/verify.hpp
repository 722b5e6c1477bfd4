#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "ledger/pg/database.hpp"

namespace payledger::ledger {

// At most this many differing keys are listed per projection (docs/integrity.md#verify).
inline constexpr std::size_t kDifferencesListedMax = 20;

struct Difference {
    std::string key;  // out_trade_no, or account_id:currency.
    std::string what;
};

// One projection compared: the fold of the events against the live table.
struct ProjectionCheck {
    std::string name;       // "orders" or "balances".
    std::int64_t rows = 0;  // Of the fold of the events.
    std::string digest{};   // Canonical digest of the fold.
    std::int64_t live_rows = 0;
    std::string live_digest{};
    std::int64_t difference_count = 0;
    std::vector<Difference> differences{};  // The first kDifferencesListedMax.

    [[nodiscard]] bool ok() const { return difference_count == 0; }
};

struct VerifyReport {
    std::vector<ProjectionCheck> projections{};  // orders, then balances.
    std::int64_t events = 0;

    [[nodiscard]] bool ok() const;
};

// Called now and then with the number of events read so far: every kProgressEveryEvents events
// (verify's and rebuild's folds both).
using Progress = std::function<void(std::int64_t events_read)>;
inline constexpr std::int64_t kProgressEveryEvents = 50'000;

// docs/integrity.md#verify: read-only and online. In one consistent snapshot (REPEATABLE READ, READ
// ONLY, exported from one session to a second one), streams all events and folds them with
// projections::FoldOrder, streams the live projections from the same snapshot, and compares
// them row by row. Memory stays constant in the number of orders (balances: one entry per
// account and currency). Never takes the writer lock. Throws pqxx exceptions. A statement
// timeout of 0 is none (the command line); the online endpoint gives one.
[[nodiscard]] VerifyReport Verify(const std::string& url, const Progress& progress = {},
                                  std::chrono::milliseconds statement_timeout = {});

// The lines `verify` prints (docs/integrity.md#verify), each ending in "\n".
[[nodiscard]] std::string FormatReport(const VerifyReport& report);

// Settings for the long-running sessions of verify and rebuild: no statement timeout.
[[nodiscard]] SessionSettings LongRunningSession();

}  // namespace payledger::ledger
