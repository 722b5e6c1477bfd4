#pragma once

#include <cstdint>
#include <string_view>

#include "api/channels/refusal.hpp"

namespace payledger::api {

// The bodies of the admin endpoints, read with checked access only: a member that is missing or
// of another type is a refusal naming it, never a dereference of nothing (nlohmann's const
// operator[] on a missing key only asserts, a no-op in a Release build). Pure: no database, so
// the fuzz target fuzz_admin reads them as the routes do (tests/fuzz/README.md).

// The cursor of POST /v1/admin/subscriptions/{name}/rewind, {"after": <seq>}: a JSON object
// whose `after` is a JSON integer from 0 to 2^63 - 1; otherwise malformed, the message naming
// what is wrong (1e3, 5.0 and "5" are not integers; nlohmann would turn 5.5 into 5).
[[nodiscard]] Checked<std::int64_t> RewindCursor(std::string_view body);

}  // namespace payledger::api
