#include "projections/assert.hpp"

#include <string>

namespace payledger {

void InvariantFailed(const char* condition, const char* file, int line) {
    throw InvariantError(std::string("invariant failed: ") + condition + " at " + file + ":" +
                         std::to_string(line));
}

}  // namespace payledger
