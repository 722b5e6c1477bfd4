#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "ledger/verify.hpp"

namespace payledger::api {

// Progress of a long-running command on a terminal: "<label>: done/total events, rate/s,
// time left", redrawn in place on stderr. Quiet (an empty Progress) when stdout is not a
// terminal (SPEC §8).
class ProgressPrinter {
public:
    // `total_events` may be an estimate; 0 when unknown.
    ProgressPrinter(std::string label, std::int64_t total_events);
    ~ProgressPrinter();

    // The callback for ledger::Verify and ledger::Rebuild; empty when quiet.
    [[nodiscard]] ledger::Progress Callback();

    // True when stdout is a terminal.
    [[nodiscard]] static bool Enabled();

private:
    void Print(std::int64_t done);

    std::string label_;
    std::int64_t total_ = 0;
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    bool printed_ = false;
};

}  // namespace payledger::api
