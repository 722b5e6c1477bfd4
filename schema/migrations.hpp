#pragma once

#include <span>
#include <string_view>

namespace payledger::schema {

// One file of schema/: its name without `.sql` ("0001_init") and its SQL text.
struct Migration {
    std::string_view name;
    std::string_view sql;
};

// Every migration, in the order they are applied (by file name).
[[nodiscard]] std::span<const Migration> Migrations();

}  // namespace payledger::schema
