// ledger::ClassifyFailure, the one table that decides what the committer does with a failed
// batch (retry at once, reconnect, write one by one, give up) and which status a request gets.
// Every exception the write path can meet, built as libpqxx and our code build them, with the
// classification it must get: a commit in doubt is never retried; a lost connection is
// retried on a new one; a read-only server (SQLSTATE 25006) is left for another; a lock
// timeout (55P03) is "not now"; a broken rule (a unique violation, InvariantError, any other
// exception) is ours to answer 500.
#include "ledger/pg/failures.hpp"

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <utility>

#include "ledger/pg/connection_pool.hpp"
#include "ledger/pg/database.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

template <typename Error, typename... Args>
std::exception_ptr Thrown(Args&&... args) {
    try {
        throw Error(std::forward<Args>(args)...);
    } catch (...) {
        return std::current_exception();
    }
}

struct Case {
    std::string what;
    std::function<std::exception_ptr()> error;
    FailureKind kind = FailureKind::kInvariantBroken;
    bool retry_now = false;
    bool reconnect = false;
    std::string message_part{};
};

TEST(ClassifyFailure, EveryKindOfErrorGetsItsClassification) {
    const Case cases[] = {
        {"a commit in doubt", [] { return Thrown<pqxx::in_doubt_error>("connection lost"); },
         FailureKind::kInDoubt, /*retry_now=*/false, /*reconnect=*/true, "commit outcome unknown"},
        {"a lost connection",
         [] { return Thrown<pqxx::broken_connection>("server closed the connection"); },
         FailureKind::kRetryable, true, true, "database connection lost"},
        {"a read-only server found at connect (Connect's check)",
         [] { return Thrown<ReadOnlyServer>("the server is in recovery"); },
         FailureKind::kRetryable, true, true, "database connection lost"},
        {"a serialization rollback",
         [] { return Thrown<pqxx::serialization_failure>("could not serialize"); },
         FailureKind::kRetryable, true, false, "transaction rolled back"},
        {"a deadlock", [] { return Thrown<pqxx::deadlock_detected>("deadlock detected"); },
         FailureKind::kRetryable, true, false, "transaction rolled back"},
        {"a write on a read-only server (25006)",
         [] {
             return Thrown<pqxx::sql_error>("cannot execute INSERT in a read-only transaction",
                                            "INSERT", "25006");
         },
         FailureKind::kRetryable, true, true, "read-only"},
        {"the writer lock's lock_timeout (55P03)",
         [] {
             return Thrown<pqxx::sql_error>("canceling statement due to lock timeout", "SELECT",
                                            "55P03");
         },
         FailureKind::kRetryable, false, false, "database unavailable"},
        {"a statement_timeout (57014)",
         [] {
             return Thrown<pqxx::sql_error>("canceling statement due to statement timeout",
                                            "SELECT", "57014");
         },
         FailureKind::kRetryable, false, false, "database unavailable"},
        {"an administrator's shutdown (57P01)",
         [] { return Thrown<pqxx::sql_error>("terminating connection", "", "57P01"); },
         FailureKind::kRetryable, false, false, "database unavailable"},
        {"too many connections (53300)",
         [] { return Thrown<pqxx::sql_error>("too many clients", "", "53300"); },
         FailureKind::kRetryable, false, false, "database unavailable"},
        {"a connection exception answered as SQL (08006)",
         [] { return Thrown<pqxx::sql_error>("connection failure", "", "08006"); },
         FailureKind::kRetryable, false, false, "database unavailable"},
        {"a unique violation",
         [] { return Thrown<pqxx::unique_violation>("duplicate key", "INSERT", "23505"); },
         FailureKind::kInvariantBroken, false, false, "duplicate key"},
        {"a CHECK or trigger (P0001)",
         [] { return Thrown<pqxx::sql_error>("append-only", "UPDATE", "P0001"); },
         FailureKind::kInvariantBroken, false, false, "append-only"},
        {"another libpqxx failure",
         [] { return Thrown<pqxx::failure>("lost synchronization with the server"); },
         FailureKind::kRetryable, false, true, "database error"},
        {"no pooled connection to be had",
         [] { return Thrown<PoolExhausted>("every connection is in use"); },
         FailureKind::kRetryable, false, false, "every connection is in use"},
        {"an InvariantError", [] { return Thrown<InvariantError>("fold: two payments"); },
         FailureKind::kInvariantBroken, false, false, "fold: two payments"},
        {"a std::exception", [] { return Thrown<std::runtime_error>("bad_alloc, say"); },
         FailureKind::kInvariantBroken, false, false, "bad_alloc, say"},
        {"something that is no exception", [] { return Thrown<int>(42); },
         FailureKind::kInvariantBroken, false, false, "unknown exception"},
    };
    for (const Case& c : cases) {
        const Failure failure = ClassifyFailure(c.error());
        EXPECT_EQ(failure.kind, c.kind) << c.what;
        EXPECT_EQ(failure.retry_now, c.retry_now) << c.what;
        EXPECT_EQ(failure.reconnect, c.reconnect) << c.what;
        EXPECT_NE(failure.message.find(c.message_part), std::string::npos)
            << c.what << ": " << failure.message;
        // The driver's text is for the log only: the answer is our own words (the pool's
        // message is ours too).
        if (c.what != "no pooled connection to be had") {
            EXPECT_EQ(failure.message.find(failure.answer), 0U) << c.what;
            const std::string driver_text = [&] {
                try {
                    std::rethrow_exception(c.error());
                } catch (const std::exception& e) {
                    return std::string(e.what());
                } catch (...) {
                    return std::string("unknown exception");
                }
            }();
            EXPECT_EQ(failure.answer.find(driver_text), std::string::npos)
                << c.what << ": " << failure.answer;
        }
        // Only a failure that committed nothing may be tried again at once.
        if (failure.kind != FailureKind::kRetryable) {
            EXPECT_FALSE(failure.retry_now) << c.what;
        }
    }
}

TEST(ClassifyFailure, EveryFailureKindIsReachable) {
    bool seen[3] = {false, false, false};
    const std::exception_ptr errors[] = {Thrown<pqxx::broken_connection>("lost"),
                                         Thrown<pqxx::in_doubt_error>("unknown"),
                                         Thrown<InvariantError>("broken")};
    for (const std::exception_ptr& error : errors) {
        switch (ClassifyFailure(error).kind) {
            case FailureKind::kRetryable:
                seen[0] = true;
                break;
            case FailureKind::kInDoubt:
                seen[1] = true;
                break;
            case FailureKind::kInvariantBroken:
                seen[2] = true;
                break;
        }
    }
    EXPECT_TRUE(seen[0] && seen[1] && seen[2]);
}

}  // namespace
}  // namespace payledger::ledger
