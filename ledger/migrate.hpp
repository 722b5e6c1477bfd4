#pragma once

#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace payledger::ledger {

// Applies the migrations of schema/ that `connection`'s schema has not recorded yet, in
// order, in one transaction under an advisory lock, so several processes may migrate at
// once: one applies, the others wait and then find nothing to do. Returns the names
// applied now. Throws pqxx exceptions on failure (nothing is applied then).
std::vector<std::string> Migrate(pqxx::connection& connection);

}  // namespace payledger::ledger
