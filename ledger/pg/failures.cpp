#include "ledger/pg/failures.hpp"

#include <pqxx/pqxx>

#include "ledger/pg/connection_pool.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// SQLSTATE read_only_sql_transaction: a write on a standby or in a read-only transaction.
constexpr const char* kReadOnlySqlTransaction = "25006";

// SQLSTATEs that mean "not now" rather than "never": answer 503 and let the platform retry.
bool IsTransient(const std::string& state) {
    return state == "55P03"     // lock_not_available: lock_timeout on the writer lock.
           || state == "57014"  // query_canceled: statement_timeout.
           || state == "57P01"  // admin_shutdown.
           || state == "57P02" || state == "57P03" || state.rfind("08", 0) == 0 ||
           state == "53300";  // too_many_connections.
}

// What the committer does next besides answering (Failure's fields of the same names).
struct Then {
    bool retry_now = false;
    bool reconnect = false;
};

// `answer` for the client, `detail` (the driver's text) only for the operator's log.
Failure Make(FailureKind kind, std::string answer, const std::string& detail, Then then = {}) {
    std::string message = detail.empty() ? answer : answer + ": " + detail;
    return Failure{.kind = kind,
                   .retry_now = then.retry_now,
                   .reconnect = then.reconnect,
                   .answer = std::move(answer),
                   .message = std::move(message)};
}

}  // namespace

Failure ClassifyFailure(const std::exception_ptr& error) noexcept {
    try {
        try {
            std::rethrow_exception(error);
        } catch (const pqxx::in_doubt_error& e) {
            // The commit may or may not have happened: never retry it (libpqxx transactor).
            // The platform's retry will find a duplicate or append.
            return Make(FailureKind::kInDoubt, "commit outcome unknown", e.what(),
                        {.reconnect = true});
        } catch (const pqxx::broken_connection& e) {
            return Make(FailureKind::kRetryable, "database connection lost", e.what(),
                        {.retry_now = true, .reconnect = true});
        } catch (const pqxx::transaction_rollback& e) {
            return Make(FailureKind::kRetryable, "transaction rolled back", e.what(),
                        {.retry_now = true});
        } catch (const pqxx::sql_error& e) {
            if (e.sqlstate() == kReadOnlySqlTransaction) {
                // docs/availability.md#failover: this session is on a read-only server (a standby,
                // or a primary that became one): nothing was written. Drop it; a new connection may
                // find the primary (target_session_attrs=read-write, Connect's check).
                return Make(FailureKind::kRetryable, "the database server is read-only", e.what(),
                            {.retry_now = true, .reconnect = true});
            }
            if (IsTransient(e.sqlstate())) {
                return Make(FailureKind::kRetryable, "database unavailable", e.what());
            }
            return Make(FailureKind::kInvariantBroken, "internal error", e.what());
        } catch (const pqxx::failure& e) {
            return Make(FailureKind::kRetryable, "database error", e.what(), {.reconnect = true});
        } catch (const PoolExhausted& e) {
            return Make(FailureKind::kRetryable, e.what(), "");
        } catch (const InvariantError& e) {
            return Make(FailureKind::kInvariantBroken, "internal error", e.what());
        } catch (const std::exception& e) {
            return Make(FailureKind::kInvariantBroken, "internal error", e.what());
        } catch (...) {
            return Make(FailureKind::kInvariantBroken, "internal error", "unknown exception");
        }
    } catch (...) {
        // Building a message failed (out of memory): still a classification.
        return Failure{};
    }
}

}  // namespace payledger::ledger
