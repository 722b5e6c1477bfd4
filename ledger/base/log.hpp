#pragma once

#include <functional>
#include <string>

namespace payledger::ledger {

// Where a background component (the feed's poll, the deliverer, the feed window, the gauges, the
// query scheduler) sends its log lines: a level ("info", "warning", "error") and one JSON object
// text. serve passes api::LogJson (api/log.hpp); a test may collect them. The one log callback
// type of the tree: api::Log is this.
using Log = std::function<void(const std::string& level, const std::string& json)>;

}  // namespace payledger::ledger
