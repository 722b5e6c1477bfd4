#pragma once

#include <string>
#include <vector>

namespace payledger::ledger {

// A statement of a hot path, prepared once per connection by Connect. Each .cpp that runs
// statements lists its own, beside the SQL.
struct Statement {
    const char* name = "";
    std::string sql{};
};

[[nodiscard]] const std::vector<Statement>& WriterStatements();  // writer_statements.cpp
[[nodiscard]] const std::vector<Statement>& ReadStatements();    // reads.cpp

}  // namespace payledger::ledger
