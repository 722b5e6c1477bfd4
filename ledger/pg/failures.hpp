#pragma once

#include <exception>
#include <string>

namespace payledger::ledger {

// The one classification of what can go wrong below a request
// (docs/write-path.md#failures-and-retries), shared by the committer (whether to retry, reconnect
// or write one by one) and the request boundary (which status to answer,
// api/routes/route_helpers.hpp StatusOf). A client error is never an exception: it is a Refusal
// value (api/channels/refusal.hpp) and gets its outcome's status.
enum class FailureKind {
    kRetryable,        // The database could not answer now; nothing was committed. 503.
    kInDoubt,          // A commit whose outcome is unknown: never retried here. 503.
    kInvariantBroken,  // Our code, or data it read, is wrong (InvariantError, a database
                       // rule such as a CHECK or trigger, any other exception). 500.
};

struct Failure {
    FailureKind kind = FailureKind::kInvariantBroken;
    // kRetryable only: running the same transaction again at once may succeed (a lost
    // connection, a serialization rollback), as libpqxx's transactor retries.
    bool retry_now = false;
    bool reconnect = false;  // The connection is unusable: drop it.
    // For the client: what failed, in our words. Never the driver's text, which names hosts,
    // ports, sockets and SQL.
    std::string answer{};
    std::string message{};  // For the operator's log: the answer and the driver's text.
};

// Classifies `error` (from std::current_exception() in a catch (...)). Never throws.
// REQUIRES: error != nullptr.
[[nodiscard]] Failure ClassifyFailure(const std::exception_ptr& error) noexcept;

}  // namespace payledger::ledger
