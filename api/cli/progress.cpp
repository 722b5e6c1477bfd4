#include "api/cli/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace payledger::api {

ProgressPrinter::ProgressPrinter(std::string label, std::int64_t total, std::string unit)
    : label_(std::move(label)), total_(total), unit_(std::move(unit)) {}

ProgressPrinter::~ProgressPrinter() { Finish(); }

void ProgressPrinter::Finish() {
    if (printed_) std::fputs("\n", stderr);
    printed_ = false;
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
    if (total_ <= 0) {
        std::fprintf(stderr, "\r%s: %lld %s, %.0f/s   ", label_.c_str(),
                     static_cast<long long>(done), unit_.c_str(), rate);
        std::fflush(stderr);
        printed_ = true;
        return;
    }
    char left[32] = "?";
    if (rate > 0 && total_ > done) {
        std::snprintf(left, sizeof left, "%.0f s", static_cast<double>(total_ - done) / rate);
    } else if (total_ <= done) {
        std::snprintf(left, sizeof left, "0 s");
    }
    std::fprintf(stderr, "\r%s: %lld/%lld %s, %.0f/s, %s left   ", label_.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_), unit_.c_str(), rate,
                 left);
    std::fflush(stderr);
    printed_ = true;
}

}  // namespace payledger::api
