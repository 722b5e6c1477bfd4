#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "ledger/pg/database.hpp"
#include "ledger/write/committer_limits.hpp"
#include "ledger/write/writer.hpp"

namespace payledger::ledger {

// Group commit (docs/write-path.md#group-commit): one thread owns one connection and writes every
// delivery of this process. It takes whatever deliveries are waiting (up to `batch_max`) and writes
// them in one transaction with WriteBatch, so the WAL flush and the writer lock are paid once per
// batch. A lone delivery is written at once: the batch closes when the queue is empty.
//
// Thread-safe. `done` runs exactly once per delivery, on the committer's answer thread, after
// the transaction that holds the delivery committed (or definitively failed, answering it
// `unavailable`), outside any code that retries; it must not block for long. The writing
// thread hands each batch's answers over as one task, so it goes back to writing at once and
// a batch of N costs one thread wake-up, not N (thread hand-offs were the largest part of the
// kernel's time under load). Answers keep commit order. A `done` that throws is counted in
// stats().answer_failures and changes nothing else: the batch stays committed and the other
// deliveries are answered as usual.
class Committer {
public:
    using Done = std::function<void(DeliveryResult)>;

    struct Options {
        std::string url{};
        SessionSettings session{};
        std::size_t batch_max = 256;
        std::size_t queue_max = 10'000;
        std::size_t queue_bytes_max = kWriteQueueBytesMaxDefault;  // limits.write_queue_bytes_max.
        std::size_t batch_bytes_max = 4 * 1024 * 1024;
        int transaction_attempts_max = 3;
        // WriterCache's bound (`limits.writer_cache_orders`, docs/write-path.md#the-writer-cache);
        // 0: every batch reads.
        std::size_t cache_orders_max = kWriterCacheOrdersDefault;
        // With a cache: a thread of its own, on a connection of its own, reads the orders of
        // queued deliveries that the cache does not know, outside the writer lock, while the
        // writer writes the batch before (PrefetchState), so that their batch is written in one
        // round trip too (docs/write-path.md#the-writer-cache).
        bool prefetch = true;
        // Told the newest seq of each batch that appended events, after its COMMIT and before
        // its answers (the waiting feed and the subscriptions: ledger::FeedNotifier::Committed).
        // On the writing thread: it must be cheap and must not block. A throw is ignored.
        std::function<void(std::int64_t)> on_committed{};
    };

    explicit Committer(Options options);
    ~Committer();
    Committer(const Committer&) = delete;
    Committer& operator=(const Committer&) = delete;

    // Queues `delivery` (moved in: its body is never copied). When the queue is full (in
    // count or in bytes) or the committer is stopping, `done` runs at once, on the caller's
    // thread, with kUnavailable (a throw from it is counted, never propagated).
    void Submit(Delivery delivery, Done done);

    // What one queued delivery counts against queue_bytes_max: its variable-length texts (the
    // rendered ones too, once RenderForWrite ran) plus a fixed allowance for the structures
    // around them and the caller's `done`.
    [[nodiscard]] static std::size_t QueuedBytes(const Delivery& delivery);

    // Writes what is queued, answers it, then stops both threads. Idempotent.
    void Stop();

    struct Stats {
        std::atomic<std::uint64_t> batches{0};
        std::atomic<std::uint64_t> deliveries{0};
        std::atomic<std::uint64_t> failures{0};          // Batches answered unavailable.
        std::atomic<std::uint64_t> lock_wait_micros{0};  // Sum over batches.
        // Committed batches planned on the state read under the lock (the others: from the
        // WriterCache, in one round trip).
        std::atomic<std::uint64_t> state_reads{0};
        // BatchStats' steps, summed over committed batches.
        std::atomic<std::uint64_t> read_micros{0};
        std::atomic<std::uint64_t> plan_micros{0};
        std::atomic<std::uint64_t> write_micros{0};
        std::atomic<std::uint64_t> queue_depth{0};
        std::atomic<std::uint64_t> queue_bytes{0};          // QueuedBytes of what is queued.
        std::atomic<std::uint64_t> queue_full_refusals{0};  // Submits answered at once.
        std::atomic<std::uint64_t> answer_failures{0};      // `done` calls that threw.
        std::atomic<std::uint64_t> prefetch_reads{0};       // Reads of the prefetch thread.
        std::atomic<std::uint64_t> prefetched_orders{0};    // Orders the cache learned from them.
        // When the transaction in progress began (steady_clock's count since its epoch); 0
        // while none is. A commit waiting for a synchronous standby that is gone waits here.
        std::atomic<std::int64_t> write_began_at{0};
    };
    [[nodiscard]] const Stats& stats() const { return stats_; }
    // How long the transaction in progress has taken so far at `now`; zero while none is.
    [[nodiscard]] std::chrono::steady_clock::duration WriteInProgressFor(
        std::chrono::steady_clock::time_point now) const;

private:
    struct Pending {
        Delivery delivery;
        Done done;
        std::size_t bytes = 0;  // QueuedBytes(delivery), counted once at Submit.
    };

    void Run();
    // The answer thread: calls the `done`s of each written batch, in commit order.
    void AnswerLoop();
    // A batch as WriteBatch takes it: the deliveries side by side, and who to answer.
    struct Batch {
        std::vector<Delivery> deliveries;
        std::vector<Done> dones;
    };
    // A written batch: who to answer, and with what.
    struct Answers {
        std::vector<Done> dones;
        std::vector<DeliveryResult> results;
    };

    // Both return one result per delivery and call no `done`: they may run a transaction
    // more than once, so they have no effect outside the database (answers, metrics and log lines
    // come after, outside anything that retries).
    [[nodiscard]] std::vector<DeliveryResult> WriteWithRetries(const Batch& batch);
    [[nodiscard]] std::vector<DeliveryResult> WriteOneByOne(const Batch& batch);
    std::vector<DeliveryResult> WriteOnce(const Batch& batch, std::size_t first, std::size_t count);
    // Calls `done` with `result`; a throw is counted and goes no further.
    void Answer(const Done& done, DeliveryResult result) noexcept;
    // Frees what the cache dropped on a thread of its own (WriterCache::TakeDropped), after
    // the batch's answers were handed over: off the path of both the answers and the next
    // batch. One at a time; without a thread to be had, here.
    void DisposeDropped() noexcept;
    // Options::on_committed with the newest seq `results` appended, if any.
    void TellCommitted(const std::vector<DeliveryResult>& results) noexcept;
    // The prefetch thread: reads what the cache lacks of the orders Submit names.
    void PrefetchLoop();
    // The most order numbers waiting for the prefetch: beyond, they are dropped (a hint only).
    static constexpr std::size_t kPrefetchWaitingMax = 10'000;
    // The most orders one prefetch read asks for.
    static constexpr std::size_t kPrefetchReadMax = 512;

    const Options options_;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<Pending> queue_;                     // Guarded by mutex_.
    std::size_t queue_bytes_ = 0;                   // Guarded by mutex_.
    bool stopping_ = false;                         // Guarded by mutex_.
    std::mutex join_mutex_;                         // Serialises Stop()'s join.
    std::unique_ptr<pqxx::connection> connection_;  // Only the committer thread uses it.
    std::unique_ptr<WriterCache> cache_;            // Likewise; null when disabled.
    std::thread disposal_;                          // Likewise (DisposeDropped).
    std::mutex answers_mutex_;
    std::condition_variable answers_ready_;
    std::deque<Answers> answers_;  // Guarded by answers_mutex_.
    bool written_all_ = false;     // Guarded by answers_mutex_: Run() has returned.
    std::mutex prefetch_mutex_;
    std::condition_variable prefetch_ready_;
    std::vector<std::string> prefetch_waiting_;  // Guarded by prefetch_mutex_.
    bool prefetch_stopping_ = false;             // Guarded by prefetch_mutex_.
    Stats stats_;
    std::thread answer_thread_;
    std::thread prefetch_thread_;  // Only with a cache and Options::prefetch.
    std::thread thread_;
};

// The result for a delivery whose transaction did not commit, for `failure`'s reason: its answer
// in the answer, its message in the operator's log.
[[nodiscard]] DeliveryResult Unavailable(Failure failure);
// The result for a delivery refused before any transaction (the queue full, the service stopping
// or not ready): retryable, `message` in the answer.
[[nodiscard]] DeliveryResult Unavailable(std::string message);

}  // namespace payledger::ledger
