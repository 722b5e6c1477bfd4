#pragma once

// FUZZ_CHECK for the fuzz targets (tests/fuzz/README.md): a failed invariant aborts, and
// libFuzzer reports it as a crash and saves the input.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

// Aborts with the failed condition: libFuzzer reports a crash and saves the input.
#define FUZZ_CHECK(condition)                                                              \
    do {                                                                                   \
        if (!(condition)) {                                                                \
            std::fprintf(stderr, "FUZZ_CHECK failed: %s at %s:%d\n", #condition, __FILE__, \
                         __LINE__);                                                        \
            std::abort();                                                                  \
        }                                                                                  \
    } while (false)

namespace payledger::fuzz {

inline std::string_view AsText(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

}  // namespace payledger::fuzz
