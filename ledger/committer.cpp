#include "ledger/committer.hpp"

#include <utility>

#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// SQLSTATEs that mean "not now" rather than "never": answer 503 and let the platform retry.
bool IsTransient(const pqxx::sql_error& error) {
    const std::string& state = error.sqlstate();
    return state == "55P03"     // lock_not_available: lock_timeout on the writer lock.
           || state == "57014"  // query_canceled: statement_timeout.
           || state == "57P01"  // admin_shutdown.
           || state == "57P02" || state == "57P03" || state.rfind("08", 0) == 0 ||
           state == "53300";  // too_many_connections.
}

DeliveryResult InternalError(std::string message) {
    DeliveryResult result = Unavailable(std::move(message));
    result.internal_error = true;
    return result;
}

}  // namespace

DeliveryResult Unavailable(std::string message) {
    return DeliveryResult{.outcome = projections::Outcome::kUnavailable,
                          .message = std::move(message)};
}

Committer::Committer(Options options) : options_(std::move(options)) {
    PAYLEDGER_ASSERT(options_.batch_max >= 1);
    PAYLEDGER_ASSERT(options_.transaction_attempts_max >= 1);
    thread_ = std::thread([this] { Run(); });
}

Committer::~Committer() { Stop(); }

void Committer::Submit(Delivery delivery, Done done) {
    const char* refusal = nullptr;
    {
        std::lock_guard lock{mutex_};
        if (!stopping_ && queue_.size() < options_.queue_max) {
            queue_.push_back(Pending{std::move(delivery), std::move(done)});
            stats_.queue_depth = queue_.size();
            ready_.notify_one();
            return;
        }
        // Read under the lock: Stop() sets it from another thread.
        refusal = stopping_ ? "the service is stopping" : "the write queue is full";
    }
    Answer(done, Unavailable(refusal));
}

void Committer::Stop() {
    {
        std::lock_guard lock{mutex_};
        stopping_ = true;
    }
    ready_.notify_all();
    // Two threads may stop at once (a signal handler's thread and the destructor).
    std::lock_guard join_lock{join_mutex_};
    if (thread_.joinable()) thread_.join();
}

void Committer::Run() {
    for (;;) {
        Batch batch;
        {
            std::unique_lock lock{mutex_};
            ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // Stopping, and everything queued is written.
            while (!queue_.empty() && batch.deliveries.size() < options_.batch_max) {
                batch.deliveries.push_back(std::move(queue_.front().delivery));
                batch.dones.push_back(std::move(queue_.front().done));
                queue_.pop_front();
            }
            stats_.queue_depth = queue_.size();
        }
        // The transaction is over (committed or given up) before anyone is answered, so an
        // answer can neither re-run nor re-answer the batch.
        std::vector<DeliveryResult> results = WriteWithRetries(batch);
        PAYLEDGER_ASSERT(results.size() == batch.dones.size());
        for (std::size_t i = 0; i < results.size(); ++i) {
            Answer(batch.dones[i], std::move(results[i]));
        }
    }
}

void Committer::Answer(const Done& done, DeliveryResult result) noexcept {
    try {
        done(std::move(result));
    } catch (...) {
        // The delivery's fate is decided and stored; its answer is the caller's to log.
        ++stats_.answer_failures;
    }
}

std::vector<DeliveryResult> Committer::WriteOnce(const Batch& batch, std::size_t first,
                                                 std::size_t count) {
    if (connection_ == nullptr || !connection_->is_open()) {
        connection_ = Connect(options_.url, options_.session);
    }
    BatchStats batch_stats;
    std::vector<DeliveryResult> results =
        WriteBatch(*connection_, std::span(batch.deliveries).subspan(first, count), &batch_stats);
    stats_.lock_wait_micros += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(batch_stats.lock_wait).count());
    ++stats_.batches;
    stats_.deliveries += count;
    return results;
}

std::vector<DeliveryResult> Committer::WriteWithRetries(const Batch& batch) {
    std::string failure;
    for (int attempt = 1; attempt <= options_.transaction_attempts_max; ++attempt) {
        try {
            return WriteOnce(batch, 0, batch.deliveries.size());
        } catch (const pqxx::in_doubt_error& error) {
            // The commit may or may not have happened: never retry it (libpqxx transactor).
            // The platform's retry will find a duplicate or append.
            connection_.reset();
            failure = std::string("commit outcome unknown: ") + error.what();
            break;
        } catch (const pqxx::broken_connection& error) {
            connection_.reset();  // Nothing was committed; reconnect and try again.
            failure = std::string("database connection lost: ") + error.what();
        } catch (const pqxx::transaction_rollback& error) {
            failure = std::string("transaction rolled back: ") + error.what();
        } catch (const pqxx::sql_error& error) {
            if (IsTransient(error)) {
                failure = std::string("database unavailable: ") + error.what();
                break;
            }
            return WriteOneByOne(batch);
        } catch (const InvariantError&) {
            return WriteOneByOne(batch);
        } catch (const std::exception& error) {
            connection_.reset();
            failure = std::string("database error: ") + error.what();
            break;
        }
    }
    ++stats_.failures;
    return std::vector<DeliveryResult>(batch.deliveries.size(), Unavailable(failure));
}

std::vector<DeliveryResult> Committer::WriteOneByOne(const Batch& batch) {
    // One delivery broke a rule that the whole batch rolled back for. Write each alone, so
    // that the others are not failed with it.
    std::vector<DeliveryResult> results;
    results.reserve(batch.deliveries.size());
    for (std::size_t i = 0; i < batch.deliveries.size(); ++i) {
        DeliveryResult result;
        try {
            result = std::move(WriteOnce(batch, i, 1).front());
        } catch (const pqxx::in_doubt_error& error) {
            connection_.reset();
            result = Unavailable(std::string("commit outcome unknown: ") + error.what());
        } catch (const pqxx::broken_connection& error) {
            connection_.reset();
            result = Unavailable(std::string("database connection lost: ") + error.what());
        } catch (const pqxx::sql_error& error) {
            result = IsTransient(error) ? Unavailable(error.what()) : InternalError(error.what());
        } catch (const std::exception& error) {
            result = InternalError(error.what());
        }
        results.push_back(std::move(result));
    }
    return results;
}

}  // namespace payledger::ledger
