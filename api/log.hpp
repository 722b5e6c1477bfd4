#pragma once

#include <string>

namespace payledger::api {

// Writes one JSON object per line to stderr, with "ts" and "level" added. `fields_json` is a
// JSON object text. Thread-safe; never throws. Callers put no secrets and no bodies in it.
void LogJson(const char* level, const std::string& fields_json) noexcept;

}  // namespace payledger::api
