#include "api/cli/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace payledger::api {

ProgressPrinter::ProgressPrinter(std::string label, std::int64_t total_events)
    : label_(std::move(label)), total_(total_events) {}

ProgressPrinter::~ProgressPrinter() {
    if (printed_) std::fputs("\n", stderr);
}

bool ProgressPrinter::Enabled() { return isatty(STDOUT_FILENO) == 1; }

ledger::Progress ProgressPrinter::Callback() {
    if (!Enabled()) return {};
    return [this](std::int64_t done) { Print(done); };
}

void ProgressPrinter::Print(std::int64_t done) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
    char left[32] = "?";
    if (rate > 0 && total_ > done) {
        std::snprintf(left, sizeof left, "%.0f s", static_cast<double>(total_ - done) / rate);
    } else if (total_ <= done) {
        std::snprintf(left, sizeof left, "0 s");
    }
    std::fprintf(stderr, "\r%s: %lld/%lld events, %.0f/s, %s left   ", label_.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_), rate, left);
    std::fflush(stderr);
    printed_ = true;
}

}  // namespace payledger::api
