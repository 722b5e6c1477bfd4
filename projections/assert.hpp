#pragma once

#include <stdexcept>

namespace payledger {

// Thrown when our code, or data it read, breaks an invariant. Never for client input (that is a
// Refusal value, api/channels/refusal.hpp): the transaction rolls back, the request answers 500,
// the service keeps going.
class InvariantError : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

[[noreturn]] void InvariantFailed(const char* condition, const char* file, int line);

}  // namespace payledger

// Checked in every build type; throws InvariantError.
#define PAYLEDGER_ASSERT(condition)                                       \
    do {                                                                  \
        if (condition) {                                                  \
        } else {                                                          \
            ::payledger::InvariantFailed(#condition, __FILE__, __LINE__); \
        }                                                                 \
    } while (false)
