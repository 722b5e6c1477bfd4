#pragma once

#include <functional>
#include <string>

namespace payledger::api {

// Writes one JSON object per line to stderr, with "ts" and "level" added. `fields_json` is a
// JSON object text. Thread-safe; never throws. Callers put no secrets and no bodies in it.
void LogJson(const char* level, const std::string& fields_json) noexcept;

// Where a background component (the deliverer, the feed window, the gauges, the query
// scheduler) sends its log lines: a level and a JSON object text, as LogJson takes them. serve
// passes LogJson; a test may collect them.
using Log = std::function<void(const std::string& level, const std::string& json)>;

}  // namespace payledger::api
