#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/log.hpp"
#include "api/subscriptions/delivery_decision.hpp"
#include "api/subscriptions/feed_window.hpp"
#include "api/subscriptions/subscription_config.hpp"
#include "api/subscriptions/subscription_gauges.hpp"
#include "api/subscriptions/webhook_client.hpp"
#include "ledger/base/clock.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/read/feed_notifier.hpp"
#include "ledger/subscriptions/subscriptions.hpp"

namespace payledger::api {

// Delivers the ledger's events to the receivers of this process's subscriptions
// (docs/subscriptions.md#inside-serve): one thread per subscription, so that a receiver that fails
// or never answers holds its own subscription only, and never the write path.
//
// Each thread, while this process holds the subscription's lease (ledger::SubscriptionLease: at
// most one process delivers a subscription at a time; another takes over when this one dies):
//   1. reads the subscription's state (its cursor, whether it is disabled, when the next
//      attempt is due after failures);
//   2. takes the next batch: 1 to batch_max matching events after the cursor, in seq order,
//      consecutive among the matching ones, from the process's FeedWindow when the cursor lies
//      inside it (the feed read once for every subscription), else from PostgreSQL
//      (ledger::ReadMatchingBatch); none: waits for the feed to grow (the window, or
//      ledger::FeedNotifier: at once after a commit of this process, within a second after
//      another's);
//   3. POSTs it, signed with Standard Webhooks (webhook-id `<name>:<first>-<last>`); a retry of
//      the batch keeps its id and its events;
//   4. on any 2xx moves the cursor to the batch's last seq by compare-and-set, stored in
//      PostgreSQL before the next batch is read; on 410 disables the subscription (recorded in
//      subscription_changes); on anything else records the failure and waits the back-off (1 s
//      doubling to 300 s, jitter, Retry-After on 429 and 503), then sends the same batch again.
//      It never skips an event by itself.
// A cursor moved meanwhile (an admin's rewind, or another process) makes the compare-and-set
// fail: the thread drops its batch and reads the state again. So does a lease lost while a POST
// was in flight: each taking of the lease increments the subscription's lease token
// (ledger::TakeLeaseToken), and every outcome is stored only with the token its process took,
// so a process whose session ended meanwhile stores nothing once another has taken over.
//
// Thread-safe. Stop() ends every thread at once: a POST in flight is cancelled (WebhookClient::
// Cancel) and its outcome not stored.
class SubscriptionDeliverer {
public:
    struct Options {
        std::string database_url{};
        ledger::SessionSettings session{};
        // How often a thread without the lease tries to take it: another process's death is
        // noticed within this (plus the server's own detection of the dead session).
        std::chrono::milliseconds lease_retry{5'000};
        // How long a thread waits for the feed before it reads its state again anyway (an
        // admin's enable or rewind by another process, a lease lost).
        std::chrono::milliseconds idle_recheck{1'000};
        // After a batch short of batch_max was acknowledged, how long before the next is
        // read, so that events gather into fuller batches under a steady stream (as Kafka's
        // linger.ms): adds at most this to an event's delivery, 0 turns it off.
        std::chrono::milliseconds linger{20};
        // The shared FeedWindow's events_max; 0: no window, each thread reads PostgreSQL itself.
        std::size_t window_events_max = kFeedWindowEventsMaxDefault;
        std::optional<std::string> ca_file_for_tests{};  // WebhookClient's; tests only.
        // The clock of every decision and attempt (a test may set its own).
        std::function<projections::TimeMicros()> now = ledger::NowMicros;
    };

    // What /metrics shows of one subscription delivered by this process.
    struct Counters {
        std::atomic<std::uint64_t> delivered_events{0};
        std::atomic<std::uint64_t> failures{0};
    };

    SubscriptionDeliverer(std::vector<SubscriptionConfig> subscriptions, Options options,
                          ledger::FeedNotifier& notifier, Log log);
    ~SubscriptionDeliverer();  // Stop().
    SubscriptionDeliverer(const SubscriptionDeliverer&) = delete;
    SubscriptionDeliverer& operator=(const SubscriptionDeliverer&) = delete;

    // Starts one thread per subscription. Each creates its subscription's row on its first
    // look (ledger::EnsureSubscription), whether or not it gets the lease.
    void Start();
    // Ends every thread and releases the leases (another process takes over at once). Does not
    // wait for a receiver: a POST in flight is cancelled, and its batch is sent again by whoever
    // delivers the subscription next.
    void Stop();
    // Makes `name`'s thread read its state now (after an admin's rewind or enable).
    void Poke(const std::string& name);

    [[nodiscard]] const std::vector<SubscriptionConfig>& subscriptions() const {
        return subscriptions_;
    }
    // Null for a name that is not configured.
    [[nodiscard]] const Counters* counters(const std::string& name) const;
    // The subscriptions' gauges as last sampled in the background (SubscriptionGauges): no
    // database work here.
    [[nodiscard]] std::vector<SubscriptionGauges::Sample> Gauges() { return gauges_.Latest(); }
    [[nodiscard]] std::uint64_t gauge_samples_taken() const { return gauges_.samples_taken(); }

private:
    struct Worker;
    // One POST of the held batch.
    struct Attempt {
        std::int64_t first = 0;  // The batch's first and last seq.
        std::int64_t last = 0;
        projections::TimeMicros at = 0;
        std::string id{};  // webhook-id: `<name>:<first>-<last>`.
        WebhookResult result{};
    };
    void Run(Worker& worker);
    // One pass of Run's loop (lease, stored state, batch, POST, the verdict stored; each
    // decision by delivery_decision.hpp); returns how long to wait before the next (zero: at
    // once).
    std::chrono::milliseconds Step(Worker& worker);
    // Whether this thread may deliver: the process holds the subscription's lease (taken now if
    // it can be) and the thread a fencing token taken under it. False: another process holds
    // it, or the lease's session failed; what the thread knew is forgotten.
    bool HoldLease(Worker& worker, ledger::SubscriptionLease& lease);
    // An outcome the compare-and-set refused: said, and the token dropped.
    void NotStored(Worker& worker, const Attempt& attempt);
    // The thread's session, made again when it has died; the subscription's row ensured.
    pqxx::connection& Session(Worker& worker);
    // The stored state: what the last compare-and-set stored, or read.
    ledger::SubscriptionState StoredState(Worker& worker, pqxx::connection& connection);
    // Signs and POSTs worker.pending (not empty).
    Attempt Send(Worker& worker);
    // Stores the verdict by compare-and-set on worker.known_after with worker.lease_token (both
    // set); false when the cursor had moved meanwhile or another process took the lease over.
    // `state`: as stored before the attempt.
    bool Store(Worker& worker, pqxx::connection& connection, ledger::SubscriptionState state,
               const Verdict& verdict, const Attempt& attempt);
    // When nothing is pending: the next batch into worker.pending, from the window or from
    // PostgreSQL; none (pending stays empty): how long to wait, having waited for the feed
    // already when idle.
    std::chrono::milliseconds TakeBatch(Worker& worker, pqxx::connection& connection);
    // The process's lease connection, made again when it has died.
    std::shared_ptr<ledger::SubscriptionLease> Lease();
    // Waits up to `duration`, ending early on Stop or Poke.
    void Wait(Worker& worker, std::chrono::milliseconds duration);

    const std::vector<SubscriptionConfig> subscriptions_;
    const Options options_;
    ledger::FeedNotifier& notifier_;
    const Log log_;
    std::vector<std::unique_ptr<Worker>> workers_;
    std::map<std::string, Worker*> by_name_;
    std::unique_ptr<FeedWindow> window_;  // Null without subscriptions or window_events_max.
    SubscriptionGauges gauges_;
    std::atomic<bool> stopping_{false};
    std::mutex lease_mutex_;
    std::shared_ptr<ledger::SubscriptionLease> lease_;  // Guarded by lease_mutex_.
};

// Which events `config` delivers, as the ledger's reads take it.
[[nodiscard]] projections::EventFilter EventFilterOf(const SubscriptionConfig& config);

// The body of one delivery: {"type":"ledger.events","timestamp":…,"data":{"subscription":…,
// "events":[…]}}, events as the feed answers them (FeedItem::json), written as Dump (compact,
// keys in order) would write it.
[[nodiscard]] std::string DeliveryBody(const std::string& subscription,
                                       const std::vector<FeedItemPtr>& events,
                                       projections::TimeMicros attempt_at);

}  // namespace payledger::api
