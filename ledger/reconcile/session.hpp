#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "ledger/pg/database.hpp"
#include "projections/event.hpp"

// What the parts of one `reconcile` run share (reconciliation.cpp, apply.cpp, record.cpp):
// the session's settings, the temporary tables' SQL they write, and the bill's private copy.
// Internal to ledger/reconcile.
namespace payledger::ledger::reconcile {

inline constexpr std::size_t kRowsPerBatch = 1000;  // Rows per insert and per FETCH.

// A 200 000-row bill is one statement of a few seconds; the service's 10 s would be tight.
extern const SessionSettings kSession;

// Rows of reconcile_differences, as a JSON array of objects ($1).
extern const char* const kInsertDifferences;

// A file of our own that holds the bill's bytes as they were read, removed when it goes.
class PrivateCopy {
public:
    // Mode 0600, a name no one else has. Throws BillError when it cannot be created.
    PrivateCopy();
    ~PrivateCopy();
    PrivateCopy(const PrivateCopy&) = delete;
    PrivateCopy& operator=(const PrivateCopy&) = delete;
    [[nodiscard]] const std::string& path() const { return path_; }

private:
    std::string path_;
};

// What CopyBill read: the SHA-256 (hex) of the bytes stored, and those very bytes in a
// private file for the parser.
struct BillCopy {
    std::string sha256{};
    std::unique_ptr<PrivateCopy> copy{};
};

}  // namespace payledger::ledger::reconcile
