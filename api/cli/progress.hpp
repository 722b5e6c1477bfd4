#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "ledger/integrity/verify.hpp"

namespace payledger::api {

// Progress of a long-running command on a terminal: "<label>: done/total <unit>, rate/s,
// time left" ("<label>: done <unit>, rate/s" when the total is unknown), redrawn in place
// on stderr. Quiet (an empty Progress) when stdout is not a terminal.
class ProgressPrinter {
public:
    // `total` may be an estimate; 0 when unknown.
    ProgressPrinter(std::string label, std::int64_t total, std::string unit = "events");
    ~ProgressPrinter();
    ProgressPrinter(const ProgressPrinter&) = delete;
    ProgressPrinter& operator=(const ProgressPrinter&) = delete;

    // The callback for ledger::Verify, ledger::Rebuild and ledger::Audit; empty when quiet.
    [[nodiscard]] ledger::Progress Callback();

    // Ends the progress line, so that what follows starts on a line of its own. Idempotent;
    // the destructor calls it.
    void Finish();

    // True when stdout is a terminal.
    [[nodiscard]] static bool Enabled();

private:
    void Print(std::int64_t done);

    std::string label_;
    std::int64_t total_ = 0;
    std::string unit_;
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    bool printed_ = false;
};

}  // namespace payledger::api
