#pragma once

#include <string>

#include "ledger/base/log.hpp"

namespace payledger::api {

// Writes one JSON object per line to stderr, with "ts" and "level" added. `fields_json` is a
// JSON object text. Thread-safe; never throws. Callers put no secrets and no bodies in it.
void LogJson(const char* level, const std::string& fields_json) noexcept;

// Where a background component sends its log lines: a level and a JSON object text, as LogJson
// takes them (ledger/base/log.hpp).
using Log = ledger::Log;

}  // namespace payledger::api
