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

#include "ledger/database.hpp"
#include "ledger/writer.hpp"

namespace payledger::ledger {

// Group commit (issue 6): one thread owns one connection and writes every delivery of this
// process. It takes whatever deliveries are waiting (up to `batch_max`) and writes them in
// one transaction with WriteBatch, so the WAL flush and the writer lock are paid once per
// batch. A lone delivery is written at once: the batch closes when the queue is empty.
//
// Thread-safe. `done` runs on the committer's thread after the commit that holds the
// delivery (or after the failure that answers it `unavailable`); it must not block.
class Committer {
public:
    using Done = std::function<void(DeliveryResult)>;

    struct Options {
        std::string url{};
        SessionSettings session{};
        std::size_t batch_max = 256;
        std::size_t queue_max = 10'000;
        int transaction_attempts_max = 3;
    };

    explicit Committer(Options options);
    ~Committer();
    Committer(const Committer&) = delete;
    Committer& operator=(const Committer&) = delete;

    // Queues `delivery`. When the queue is full or the committer is stopping, `done` runs at
    // once, on the caller's thread, with kUnavailable.
    void Submit(Delivery delivery, Done done);

    // Writes what is queued, then stops the thread. Idempotent.
    void Stop();

    struct Stats {
        std::atomic<std::uint64_t> batches{0};
        std::atomic<std::uint64_t> deliveries{0};
        std::atomic<std::uint64_t> failures{0};          // Batches answered unavailable.
        std::atomic<std::uint64_t> lock_wait_micros{0};  // Sum over batches.
        std::atomic<std::uint64_t> queue_depth{0};
    };
    [[nodiscard]] const Stats& stats() const { return stats_; }

private:
    struct Pending {
        Delivery delivery;
        Done done;
    };

    void Run();
    // A batch as WriteBatch takes it: the deliveries side by side, and who to answer.
    struct Batch {
        std::vector<Delivery> deliveries;
        std::vector<Done> dones;
    };

    void WriteWithRetries(Batch& batch);
    void WriteOneByOne(Batch& batch);
    std::vector<DeliveryResult> WriteOnce(const Batch& batch, std::size_t first, std::size_t count);

    const Options options_;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<Pending> queue_;
    bool stopping_ = false;
    std::unique_ptr<pqxx::connection> connection_;  // Only the committer thread uses it.
    Stats stats_;
    std::thread thread_;
};

// The result for a delivery whose transaction did not commit.
[[nodiscard]] DeliveryResult Unavailable(std::string message);

}  // namespace payledger::ledger
