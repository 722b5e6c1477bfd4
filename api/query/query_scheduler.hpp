#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/config.hpp"
#include "api/log.hpp"
#include "api/query/platform_protocol.hpp"
#include "api/query/query_schedule.hpp"
#include "api/subscriptions/webhook_client.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/query/order_queries.hpp"
#include "ledger/write/committer.hpp"

namespace payledger::api {

// Asks the platform once about `out_trade_no` (docs/query.md): builds `channel`'s request for
// `action`, sends it on `client` within `timeout`, and verifies and reads the answer. Never
// throws for what the network or the platform does (those are answers: kFailed).
// REQUIRES: the channel's section has `query`.
[[nodiscard]] PlatformAnswer AskPlatform(const Config& config, QueryChannel channel,
                                         QueryAction action, const std::string& out_trade_no,
                                         WebhookClient& client, std::chrono::milliseconds timeout);

// Puts an answer's receipt (and event) through the committer, as a notification's, and waits
// for the ledger's result: none when the answer holds nothing to store.
[[nodiscard]] std::optional<ledger::DeliveryResult> StoreAnswer(ledger::Committer& committer,
                                                                PlatformAnswer& answer);

// The schedule of asking the platforms (docs/query.md#when), run by `serve` when a channel's
// section has `query`. One thread claims due orders from PostgreSQL (ledger::ClaimDueQueries: at
// most as many as it has idle askers, each held by this process alone) and records what each
// attempt decided (NextStep, ledger::RecordAttempts); `schedule.concurrency` asker threads each
// ask the platform on a connection of its own (WebhookClient) and put the answer through the
// committer. No database transaction or writer lock is held while a platform is asked: a slow or
// silent platform holds its asker only, never a callback; and while the write path carries
// callbacks the askers yield to them (PaceAskers, from the committer's counters). Thread-safe;
// Stop() cancels the exchanges in flight (WebhookClient::Cancel) rather than wait out their
// timeouts: their orders' leases run out, and they are asked about again, as after a process that
// died mid-attempt.
class QueryScheduler {
public:
    struct Options {
        std::string database_url{};
        ledger::SessionSettings session{};
        // How often the claimer looks for due orders when nothing woke it.
        std::chrono::milliseconds poll{1'000};
        std::optional<std::string> ca_file_for_tests{};  // WebhookClient's; tests only.
    };

    QueryScheduler(const Config& config, ledger::Committer& committer, Options options, Log log);
    ~QueryScheduler();  // Stop().
    QueryScheduler(const QueryScheduler&) = delete;
    QueryScheduler& operator=(const QueryScheduler&) = delete;

    void Start();
    void Stop();

    // The lines of /metrics (no database work: the due gauge is the claimer's last count):
    // payledger_queries_total{channel,answer}, payledger_query_closes_total{channel},
    // payledger_query_due, payledger_query_paced.
    [[nodiscard]] std::string MetricsText() const;

private:
    struct Job {
        ledger::DueQuery due{};
        std::chrono::steady_clock::time_point claimed{};  // When due.database_now was read.
    };
    struct Done {
        ledger::DueQuery due{};
        ledger::AttemptRecord record{};
        std::chrono::steady_clock::duration took{};  // The attempt, answer stored.
        std::chrono::steady_clock::time_point ended{};
    };
    void ClaimLoop();
    void AskLoop();
    [[nodiscard]] Done Attempt(const Job& job, WebhookClient& client);
    void Count(QueryChannel channel, QueryAction action, AnswerKind kind);
    [[nodiscard]] WriteLoadSample SampleWriteLoad() const;
    // How many due orders the claimer may take now (mutex_ held): no more than `pace` lets
    // ask at once, counting those asking and those claimed not yet taken, none before
    // `resume_at`, and no more than there are idle askers to take them.
    [[nodiscard]] std::size_t ClaimableLocked(const AskerPace& pace,
                                              std::chrono::steady_clock::time_point resume_at,
                                              std::chrono::steady_clock::time_point now) const;

    const Config& config_;
    ledger::Committer& committer_;
    const Options options_;
    const Log log_;
    std::vector<std::string> channels_;  // Those with a `query` section.
    mutable std::mutex mutex_;
    std::condition_variable work_ready_;
    std::condition_variable done_ready_;
    std::deque<Job> jobs_;   // Guarded by mutex_.
    std::deque<Done> done_;  // Guarded by mutex_.
    std::size_t idle_ = 0;   // Guarded by mutex_: askers waiting for a job.
    bool more_due_ = false;  // Guarded by mutex_: the last claim took all it asked for.
    bool stopping_ = false;  // Guarded by mutex_.
    // Each asker's client, while its thread runs, for Stop to cancel. Guarded by mutex_.
    std::vector<WebhookClient*> clients_{};
    std::thread claimer_{};
    std::vector<std::thread> askers_{};
    // Per channel (QueryChannel's order), per answer: final, not_final, bad_signature, failed;
    // and confirmed closes.
    std::array<std::array<std::atomic<std::uint64_t>, 4>, 3> answers_{};
    std::array<std::atomic<std::uint64_t>, 3> closes_{};
    std::atomic<std::int64_t> due_{0};
    std::atomic<std::uint64_t> answers_submitted_{0};  // Answers put through the committer.
    std::atomic<bool> paced_{false};                   // The askers yield to the callbacks.
};

}  // namespace payledger::api
