#include "ledger/base/clock.hpp"

#include <chrono>

namespace payledger::ledger {

projections::TimeMicros NowMicros() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace payledger::ledger
