#include "api/log.hpp"

#include <cstdio>
#include <mutex>

#include "ledger/base/clock.hpp"
#include "projections/validate.hpp"

namespace payledger::api {

void LogJson(const char* level, const std::string& fields_json) noexcept {
    static std::mutex mutex;
    try {
        std::string line = "{\"ts\":\"" + projections::FormatRfc3339(ledger::NowMicros()) +
                           "\",\"level\":\"" + level + "\"";
        if (fields_json.size() > 2) {  // Splice the fields of a non-empty object.
            line += ",";
            line.append(fields_json, 1, std::string::npos);
        } else {
            line += "}";
        }
        line += "\n";
        std::lock_guard lock{mutex};
        std::fwrite(line.data(), 1, line.size(), stderr);
    } catch (...) {
        // Logging must never take a request down.
    }
}

}  // namespace payledger::api
