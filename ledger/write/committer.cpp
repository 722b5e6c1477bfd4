#include "ledger/write/committer.hpp"

#include <algorithm>
#include <utility>

#include "ledger/pg/failures.hpp"
#include "ledger/write/writer_statements.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// A Pending's own structures, the event and the caller's `done` (which captures the request
// headers, at most 16 KiB, but mostly far less): counted per delivery beside its texts.
constexpr std::size_t kDeliveryOverheadBytes = 2 * 1024;

}  // namespace

DeliveryResult Unavailable(Failure failure) {
    return DeliveryResult{.outcome = projections::Outcome::kUnavailable,
                          .message = std::move(failure.answer),
                          .detail = std::move(failure.message),
                          .failure = failure.kind};
}

DeliveryResult Unavailable(std::string message) {
    return Unavailable(Failure{.kind = FailureKind::kRetryable, .answer = std::move(message)});
}

std::size_t Committer::QueuedBytes(const Delivery& delivery) {
    const Receipt& receipt = delivery.receipt;
    std::size_t bytes = kDeliveryOverheadBytes + receipt.body.size() + receipt.headers.size() +
                        receipt.peer.size() + delivery.message.size();
    if (delivery.event) bytes += delivery.event->data.size();
    if (delivery.rendered) {
        bytes += delivery.rendered->peer.size() + delivery.rendered->headers.size() +
                 delivery.rendered->event_data.size();
    }
    return bytes;
}

Committer::Committer(Options options) : options_(std::move(options)) {
    PAYLEDGER_ASSERT(options_.batch_max >= 1);
    PAYLEDGER_ASSERT(options_.queue_bytes_max >= 1);
    PAYLEDGER_ASSERT(options_.batch_bytes_max >= 1);
    PAYLEDGER_ASSERT(options_.transaction_attempts_max >= 1);
    if (options_.cache_orders_max > 0) {
        cache_ = std::make_unique<WriterCache>(options_.cache_orders_max);
    }
    answer_thread_ = std::thread([this] { AnswerLoop(); });
    if (cache_ != nullptr && options_.prefetch) {
        prefetch_thread_ = std::thread([this] { PrefetchLoop(); });
    }
    thread_ = std::thread([this] {
        Run();
        {
            std::lock_guard lock{answers_mutex_};
            written_all_ = true;
        }
        answers_ready_.notify_one();
    });
}

Committer::~Committer() { Stop(); }

void Committer::Submit(Delivery delivery, Done done) {
    // Here, on the submitting thread: the writing thread holds the writer lock.
    RenderForWrite(delivery);
    const std::size_t bytes = QueuedBytes(delivery);
    if (cache_ != nullptr && options_.prefetch && delivery.event) {
        std::lock_guard lock{prefetch_mutex_};
        if (prefetch_waiting_.size() < kPrefetchWaitingMax) {
            prefetch_waiting_.push_back(delivery.event->out_trade_no);
            prefetch_ready_.notify_one();
        }
    }
    const char* refusal = nullptr;
    {
        std::lock_guard lock{mutex_};
        // The byte budget counts what is queued: a delivery that would take the queue past it
        // is refused, whatever its own size (the budget is far above one request).
        const bool fits =
            queue_.size() < options_.queue_max && queue_bytes_ + bytes <= options_.queue_bytes_max;
        if (!stopping_ && fits) {
            queue_.push_back(Pending{std::move(delivery), std::move(done), bytes});
            queue_bytes_ += bytes;
            stats_.queue_depth = queue_.size();
            stats_.queue_bytes = queue_bytes_;
            ready_.notify_one();
            return;
        }
        // Read under the lock: Stop() sets it from another thread.
        refusal = stopping_ ? "the service is stopping" : "the write queue is full";
        if (!stopping_) ++stats_.queue_full_refusals;
    }
    Answer(done, Unavailable(refusal));
}

void Committer::Stop() {
    {
        std::lock_guard lock{mutex_};
        stopping_ = true;
    }
    ready_.notify_all();
    {
        std::lock_guard lock{prefetch_mutex_};
        prefetch_stopping_ = true;
    }
    prefetch_ready_.notify_all();
    // Two threads may stop at once (a signal handler's thread and the destructor).
    std::lock_guard join_lock{join_mutex_};
    if (prefetch_thread_.joinable()) prefetch_thread_.join();
    if (thread_.joinable()) thread_.join();
    if (answer_thread_.joinable()) answer_thread_.join();
    if (disposal_.joinable()) disposal_.join();  // The writing thread, its user, has ended.
}

void Committer::Run() {
    for (;;) {
        Batch batch;
        {
            std::unique_lock lock{mutex_};
            ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // Stopping, and everything queued is written.
            // A batch closes at batch_max deliveries or batch_bytes_max, but always holds one.
            std::size_t batch_bytes = 0;
            while (!queue_.empty() && batch.deliveries.size() < options_.batch_max &&
                   (batch.deliveries.empty() ||
                    batch_bytes + queue_.front().bytes <= options_.batch_bytes_max)) {
                Pending& next = queue_.front();
                batch_bytes += next.bytes;
                queue_bytes_ -= next.bytes;
                batch.deliveries.push_back(std::move(next.delivery));
                batch.dones.push_back(std::move(next.done));
                queue_.pop_front();
            }
            stats_.queue_depth = queue_.size();
            stats_.queue_bytes = queue_bytes_;
        }
        // The transaction is over (committed or given up) before anyone is answered, so an
        // answer can neither re-run nor re-answer the batch.
        std::vector<DeliveryResult> results = WriteWithRetries(batch);
        PAYLEDGER_ASSERT(results.size() == batch.dones.size());
        TellCommitted(results);
        {
            std::lock_guard lock{answers_mutex_};
            answers_.push_back(Answers{std::move(batch.dones), std::move(results)});
        }
        answers_ready_.notify_one();
        DisposeDropped();
    }
}

void Committer::TellCommitted(const std::vector<DeliveryResult>& results) noexcept {
    if (!options_.on_committed) return;
    std::int64_t newest = 0;
    for (const DeliveryResult& result : results) {
        // An appended result exists only once its transaction committed.
        if (result.outcome == projections::Outcome::kAppended)
            newest = std::max(newest, result.seq);
    }
    if (newest == 0) return;
    try {
        options_.on_committed(newest);
    } catch (...) {
        // Only a waiter's hint is lost: the shared poll finds the commit within a second.
    }
}

void Committer::PrefetchLoop() {
    std::unique_ptr<pqxx::connection> connection;
    SessionSettings session = options_.session;
    session.application_name += "_prefetch";
    for (;;) {
        std::vector<std::string> keys;
        {
            std::unique_lock lock{prefetch_mutex_};
            prefetch_ready_.wait(
                lock, [this] { return prefetch_stopping_ || !prefetch_waiting_.empty(); });
            if (prefetch_stopping_) return;
            const std::size_t take = std::min(prefetch_waiting_.size(), kPrefetchReadMax);
            keys.assign(std::make_move_iterator(prefetch_waiting_.begin()),
                        std::make_move_iterator(prefetch_waiting_.begin() +
                                                static_cast<std::ptrdiff_t>(take)));
            prefetch_waiting_.erase(prefetch_waiting_.begin(),
                                    prefetch_waiting_.begin() + static_cast<std::ptrdiff_t>(take));
        }
        try {
            if (cache_->Unknown(keys).empty()) continue;  // No round trip for what it knows.
            if (connection == nullptr || IdleSessionEnded(*connection)) {
                connection = Connect(options_.url, session);
                pqxx::nontransaction settings{*connection};
                settings.exec(std::string(kPrefetchSessionSql));
            }
            stats_.prefetch_reads.fetch_add(1);
            stats_.prefetched_orders.fetch_add(PrefetchState(*connection, keys, *cache_));
        } catch (const std::exception&) {
            // A hint lost: the writer reads those orders under the lock itself. The database
            // is away or failing over; wait before the next try, or until stopped.
            connection.reset();
            std::unique_lock lock{prefetch_mutex_};
            prefetch_waiting_.clear();
            prefetch_ready_.wait_for(lock, std::chrono::milliseconds{500},
                                     [this] { return prefetch_stopping_; });
        }
    }
}

void Committer::DisposeDropped() noexcept {
    if (cache_ == nullptr) return;
    std::vector<WriterCache::Generation> dropped = cache_->TakeDropped();
    if (dropped.empty()) return;
    try {
        if (disposal_.joinable()) disposal_.join();  // The last one: a generation ago, done.
        disposal_ = std::thread([garbage = std::move(dropped)]() mutable { garbage.clear(); });
    } catch (...) {
        // No thread to be had (std::system_error): what was dropped is freed here instead,
        // with the lambda that had taken it.
    }
}

void Committer::AnswerLoop() {
    for (;;) {
        Answers answers;
        {
            std::unique_lock lock{answers_mutex_};
            answers_ready_.wait(lock, [this] { return written_all_ || !answers_.empty(); });
            if (answers_.empty()) return;  // Everything written is answered.
            answers = std::move(answers_.front());
            answers_.pop_front();
        }
        for (std::size_t i = 0; i < answers.results.size(); ++i) {
            Answer(answers.dones[i], std::move(answers.results[i]));
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
    // A session the server ended while idle (a restart, a failover) is replaced before the
    // batch rather than failing its first attempt.
    if (connection_ == nullptr || IdleSessionEnded(*connection_)) {
        // Perhaps to another server (a failover, docs/availability.md#failover): what the cache
        // knows is checked under the lock anyway, but a new session starts from what the ledger
        // says.
        if (cache_ != nullptr) cache_->Clear();
        connection_ = Connect(options_.url, options_.session);
    }
    BatchStats batch_stats;
    // Readiness and /metrics watch it: a write that never ends (a commit waiting for a standby
    // that is gone) would otherwise leave every callback waiting behind it, silently.
    stats_.write_began_at.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                                std::memory_order_relaxed);
    struct WriteEnds {
        std::atomic<std::int64_t>& began_at;
        ~WriteEnds() { began_at.store(0, std::memory_order_relaxed); }
    } write_ends{stats_.write_began_at};
    std::vector<DeliveryResult> results =
        WriteBatch(*connection_, std::span(batch.deliveries).subspan(first, count), &batch_stats,
                   cache_.get());
    const auto micros = [](std::chrono::steady_clock::duration duration) {
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(duration).count());
    };
    stats_.lock_wait_micros += micros(batch_stats.lock_wait);
    if (batch_stats.state_read) ++stats_.state_reads;
    stats_.read_micros += micros(batch_stats.read);
    stats_.plan_micros += micros(batch_stats.plan);
    stats_.write_micros += micros(batch_stats.write);
    ++stats_.batches;
    stats_.deliveries += count;
    return results;
}

std::chrono::steady_clock::duration Committer::WriteInProgressFor(
    std::chrono::steady_clock::time_point now) const {
    const std::int64_t began = stats_.write_began_at.load(std::memory_order_relaxed);
    if (began == 0) return std::chrono::steady_clock::duration::zero();
    return std::max(std::chrono::steady_clock::duration::zero(),
                    now.time_since_epoch() - std::chrono::steady_clock::duration{began});
}

std::vector<DeliveryResult> Committer::WriteWithRetries(const Batch& batch) {
    Failure failure;
    for (int attempt = 1; attempt <= options_.transaction_attempts_max; ++attempt) {
        try {
            return WriteOnce(batch, 0, batch.deliveries.size());
        } catch (...) {
            Failure classified = ClassifyFailure(std::current_exception());
            if (classified.reconnect) connection_.reset();
            failure = classified;
            switch (classified.kind) {
                case FailureKind::kRetryable:
                    if (classified.retry_now) continue;  // Nothing was committed: again.
                    break;
                case FailureKind::kInDoubt:
                    break;  // Never retried: the platform's retry finds a duplicate or appends.
                case FailureKind::kInvariantBroken:
                    // One delivery broke a rule the whole batch rolled back for.
                    return WriteOneByOne(batch);
            }
            break;
        }
    }
    ++stats_.failures;
    return std::vector<DeliveryResult>(batch.deliveries.size(), Unavailable(failure));
}

std::vector<DeliveryResult> Committer::WriteOneByOne(const Batch& batch) {
    // Write each delivery alone, so that the others are not failed with the one that broke
    // a rule; that one is answered 500, a database that fails meanwhile 503.
    std::vector<DeliveryResult> results;
    results.reserve(batch.deliveries.size());
    for (std::size_t i = 0; i < batch.deliveries.size(); ++i) {
        DeliveryResult result;
        try {
            result = std::move(WriteOnce(batch, i, 1).front());
        } catch (...) {
            Failure classified = ClassifyFailure(std::current_exception());
            if (classified.reconnect) connection_.reset();
            result = Unavailable(std::move(classified));
        }
        results.push_back(std::move(result));
    }
    return results;
}

}  // namespace payledger::ledger
