#include "api/subscriptions/deliverer.hpp"

#include <atomic>
#include <nlohmann/json.hpp>
#include <pqxx/nontransaction>
#include <random>
#include <utility>

#include "api/http/json_output.hpp"
#include "api/subscriptions/delivery_decision.hpp"
#include "api/subscriptions/webhook_client.hpp"
#include "api/subscriptions/webhook_signature.hpp"
#include "api/subscriptions/webhook_url.hpp"
#include "ledger/base/clock.hpp"
#include "ledger/read/durability.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

}  // namespace

projections::EventFilter EventFilterOf(const SubscriptionConfig& config) {
    return projections::MakeEventFilter(config.event_types, config.accounts);
}

std::string DeliveryBody(const std::string& subscription, const std::vector<FeedItemPtr>& events,
                         projections::TimeMicros attempt_at) {
    // Each event's text was written once, by MakeFeedItem; json's objects keep their keys in
    // order, so Dump would write data, events, subscription, timestamp, type.
    std::size_t size = 128 + subscription.size();
    for (const FeedItemPtr& event : events) size += event->json.size() + 1;
    std::string body;
    body.reserve(size);
    body += R"({"data":{"events":[)";
    for (std::size_t i = 0; i < events.size(); ++i) {
        if (i != 0) body += ',';
        body += events[i]->json;
    }
    body += R"(],"subscription":)";
    body += Dump(json(subscription));
    body += R"(},"timestamp":)";
    body += Dump(json(projections::FormatRfc3339(attempt_at)));
    body += R"(,"type":"ledger.events"})";
    return body;
}

// One subscription's thread and what it keeps between passes.
struct SubscriptionDeliverer::Worker {
    const SubscriptionConfig& config;
    const projections::EventFilter filter;
    Counters counters{};
    std::mutex mutex{};
    std::condition_variable wake{};
    bool poked = false;  // Guarded by mutex.
    std::thread thread{};
    // The thread's own state.
    std::unique_ptr<pqxx::connection> connection{};
    // The receiver's connection, kept between batches (WebhookClient). Made under `mutex`, so
    // that Stop can cancel its exchange from another thread.
    std::unique_ptr<WebhookClient> client{};
    bool ensured = false;
    // The cursor as this thread last saw it stored; nullopt: none known (not yet read, or
    // forgotten).
    std::optional<std::int64_t> known_after{};
    // The lease token this thread took when its process took the lease (ledger::TakeLeaseToken),
    // carried by every outcome it stores; nullopt while the process does not hold the lease.
    std::optional<std::int64_t> lease_token{};
    // The batch in flight, after known_after: sent again, unchanged, until acknowledged or
    // the cursor moves.
    std::vector<FeedItemPtr> pending{};
    // Where the next read starts: the cursor, or past events already seen not to match. Set
    // with known_after, read only while it is known.
    std::int64_t scan_from = 0;
    // The stored state as this thread's last compare-and-set left it: the next step need not
    // read it. Only this thread moves the cursor while its process holds the lease; an admin's
    // rewind meanwhile makes the next compare-and-set fail (then the state is read again), and
    // one in this process also sets `reread` (Poke).
    std::optional<ledger::SubscriptionState> advanced{};
    std::atomic<bool> reread = false;
    std::mt19937_64 random{std::random_device{}()};

    // Drops what the thread knows of the stored state and the batch it holds: the next step
    // starts again from what is stored.
    void Forget() {
        pending.clear();
        known_after.reset();
        advanced.reset();
    }
};

SubscriptionDeliverer::SubscriptionDeliverer(std::vector<SubscriptionConfig> subscriptions,
                                             Options options, ledger::FeedNotifier& notifier,
                                             Log log)
    : subscriptions_(std::move(subscriptions)),
      options_(std::move(options)),
      notifier_(notifier),
      log_(std::move(log)),
      gauges_(subscriptions_,
              SubscriptionGauges::Options{.database_url = options_.database_url,
                                          .session = options_.session},
              log_) {
    for (const SubscriptionConfig& config : subscriptions_) {
        workers_.push_back(
            std::unique_ptr<Worker>(new Worker{.config = config, .filter = EventFilterOf(config)}));
        by_name_[config.name] = workers_.back().get();
    }
    if (!subscriptions_.empty() && options_.window_events_max > 0) {
        window_ = std::make_unique<FeedWindow>(
            FeedWindow::Options{.database_url = options_.database_url,
                                .session = options_.session,
                                .events_max = options_.window_events_max,
                                .idle_recheck = options_.idle_recheck},
            notifier_, log_);
    }
}

SubscriptionDeliverer::~SubscriptionDeliverer() { Stop(); }

void SubscriptionDeliverer::Start() {
    gauges_.Start();
    if (window_ != nullptr) window_->Start();
    for (const std::unique_ptr<Worker>& worker : workers_) {
        worker->thread = std::thread([this, &worker = *worker] { Run(worker); });
    }
}

void SubscriptionDeliverer::Stop() {
    if (stopping_.exchange(true)) return;
    for (const std::unique_ptr<Worker>& worker : workers_) {
        {
            std::lock_guard lock{worker->mutex};
            worker->poked = true;
            // A POST in flight ends now rather than at its timeout (up to a minute): its batch
            // stays undelivered as far as the cursor knows, and whoever holds the lease next
            // sends it again.
            if (worker->client != nullptr) worker->client->Cancel();
        }
        worker->wake.notify_all();
    }
    if (window_ != nullptr) window_->Stop();  // Ends the threads' waits for it.
    gauges_.Stop();
    for (const std::unique_ptr<Worker>& worker : workers_) {
        if (worker->thread.joinable()) worker->thread.join();
    }
    std::lock_guard lock{lease_mutex_};
    lease_.reset();  // Closing its session frees every lock at once.
}

void SubscriptionDeliverer::Poke(const std::string& name) {
    const auto it = by_name_.find(name);
    if (it == by_name_.end()) return;
    it->second->reread = true;
    {
        std::lock_guard lock{it->second->mutex};
        it->second->poked = true;
    }
    it->second->wake.notify_all();
}

const SubscriptionDeliverer::Counters* SubscriptionDeliverer::counters(
    const std::string& name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &it->second->counters;
}

std::shared_ptr<ledger::SubscriptionLease> SubscriptionDeliverer::Lease() {
    std::lock_guard lock{lease_mutex_};
    // No round trip here: Step asks the lease with Alive() right before each POST.
    if (lease_ == nullptr || !lease_->Usable()) {
        lease_.reset();  // Its locks are gone with its session.
        lease_ =
            std::make_shared<ledger::SubscriptionLease>(options_.database_url, options_.session);
    }
    return lease_;
}

void SubscriptionDeliverer::Wait(Worker& worker, std::chrono::milliseconds duration) {
    if (duration <= std::chrono::milliseconds::zero()) return;
    std::unique_lock lock{worker.mutex};
    // A timed wait, not a synchronisation: Stop and Poke end it early.
    worker.wake.wait_for(lock, duration, [&] { return worker.poked || stopping_.load(); });
    worker.poked = false;
}

void SubscriptionDeliverer::Run(Worker& worker) {
    while (!stopping_.load()) {
        std::chrono::milliseconds pause{0};
        try {
            pause = Step(worker);
        } catch (const std::exception& error) {
            // The database or the lease failed: start again from what is stored.
            worker.connection.reset();
            worker.Forget();
            log_("warning", Dump(json{{"msg", "subscription delivery failed"},
                                      {"subscription", worker.config.name},
                                      {"error", error.what()}}));
            pause = std::chrono::milliseconds{1'000};
        }
        // A wait longer than a kept connection may idle (a back-off, a disabled subscription):
        // close it now rather than leave it half-closed by the receiver until the next POST.
        if (pause > kWebhookKeptIdleMax && worker.client != nullptr) worker.client->Close();
        Wait(worker, pause);
    }
    const std::shared_ptr<ledger::SubscriptionLease> lease = [&] {
        std::lock_guard lock{lease_mutex_};
        return lease_;
    }();
    if (lease != nullptr) lease->Release(worker.config.name);
}

std::chrono::milliseconds SubscriptionDeliverer::TakeBatch(Worker& worker,
                                                           pqxx::connection& connection) {
    const SubscriptionConfig& config = worker.config;
    const auto idle_deadline = [&] {
        return ledger::FeedNotifier::Clock::now() + options_.idle_recheck;
    };
    if (window_ != nullptr) {
        std::optional<FeedSlice> slice =
            window_->Take(worker.scan_from, worker.filter, config.batch_max);
        if (!slice && window_->Bounds().second < worker.scan_from &&
            window_->WaitForEnd(worker.scan_from, idle_deadline())) {
            // The cursor was ahead of the window (this thread read PostgreSQL last, or the
            // window is catching up): it is not any more.
            slice = window_->Take(worker.scan_from, worker.filter, config.batch_max);
        }
        if (slice) {
            if (!slice->items.empty()) {
                // Past the barrier already. scan_from stays: a failed batch is taken again
                // from the cursor, and an acknowledged one moves it.
                worker.pending = std::move(slice->items);
                return std::chrono::milliseconds{0};
            }
            worker.scan_from = slice->scanned_to;
            if (!slice->caught_up) return std::chrono::milliseconds{0};
            // Idle. Timed out (nothing committed for a while): read the state, so that a
            // rewind by another process's admin is seen without a delivery to fail. Woken:
            // the cursor's next compare-and-set would notice a rewind; no round trip.
            if (!window_->WaitForEnd(slice->scanned_to + 1, idle_deadline())) {
                worker.advanced.reset();
            }
            return std::chrono::milliseconds{0};
        }
        if (stopping_.load()) return std::chrono::milliseconds{0};
        // Behind the window (catching up, rewound), or the window is failing: PostgreSQL.
    }
    ledger::MatchingBatch batch;
    {
        pqxx::nontransaction tx{connection};
        batch = ledger::ReadMatchingBatch(tx, worker.scan_from, worker.filter, config.batch_max);
    }
    if (batch.events.empty()) {
        worker.scan_from = batch.scanned_to;
        if (!batch.caught_up()) return std::chrono::milliseconds{0};
        // Idle: read the state after the wait, so that a rewind by another process's admin
        // is seen without a delivery to fail.
        worker.advanced.reset();
        // Wait for the feed to grow past what was read; a wake-up is only a hint.
        (void)notifier_.WaitBeyond(batch.scanned_to, idle_deadline());
        return std::chrono::milliseconds{0};
    }
    // docs/api.md#what-a-reader-is-shown: never deliver what a failover could take back.
    ledger::AwaitSynchronousStandbys(connection);
    worker.pending.reserve(batch.events.size());
    for (const projections::Event& event : batch.events) {
        worker.pending.push_back(MakeFeedItem(event));
    }
    return std::chrono::milliseconds{0};
}

pqxx::connection& SubscriptionDeliverer::Session(Worker& worker) {
    if (worker.connection == nullptr || ledger::IdleSessionEnded(*worker.connection)) {
        // A new session may reach a new primary (a failover while this thread waited): start
        // again from what is stored. scan_from may have passed events that were never
        // confirmed (an empty batch of a filter moves it to the head) and that the failover
        // took back; the new primary may give their seqs to events this filter matches.
        worker.Forget();
        worker.connection = ledger::Connect(options_.database_url, options_.session);
    }
    if (!worker.ensured) {
        (void)ledger::EnsureSubscription(*worker.connection, worker.config.name,
                                         worker.config.start);
        worker.ensured = true;
    }
    return *worker.connection;
}

ledger::SubscriptionState SubscriptionDeliverer::StoredState(Worker& worker,
                                                             pqxx::connection& connection) {
    // What this thread's last compare-and-set stored, unless an admin of this process asked
    // for a read (Poke). No transaction block: at READ COMMITTED each statement has its own
    // snapshot anyway, and the cursor's compare-and-set checks the state again.
    if (worker.advanced && !worker.reread.exchange(false)) return *worker.advanced;
    worker.advanced.reset();
    pqxx::nontransaction tx{connection};
    std::optional<ledger::SubscriptionState> state =
        ledger::ReadSubscription(tx, worker.config.name);
    PAYLEDGER_ASSERT(state.has_value());  // Ensured by Session, and never deleted.
    return std::move(*state);
}

SubscriptionDeliverer::Attempt SubscriptionDeliverer::Send(Worker& worker) {
    const SubscriptionConfig& config = worker.config;
    Attempt attempt{.first = worker.pending.front()->seq,
                    .last = worker.pending.back()->seq,
                    .at = options_.now()};
    attempt.id =
        config.name + ":" + std::to_string(attempt.first) + "-" + std::to_string(attempt.last);
    const std::int64_t timestamp = attempt.at / 1'000'000;
    const std::string body = DeliveryBody(config.name, worker.pending, attempt.at);
    if (worker.client == nullptr) {
        auto client = std::make_unique<WebhookClient>(options_.ca_file_for_tests);
        std::lock_guard lock{worker.mutex};
        worker.client = std::move(client);
        if (stopping_.load()) worker.client->Cancel();  // Stop looked before it was made.
    }
    attempt.result = worker.client->Post(
        config.url,
        {{"content-type", "application/json"},
         {"webhook-id", attempt.id},
         {"webhook-timestamp", std::to_string(timestamp)},
         {"webhook-signature", SignWebhook(config.secrets, attempt.id, timestamp, body)}},
        body, config.timeout);
    return attempt;
}

bool SubscriptionDeliverer::Store(Worker& worker, pqxx::connection& connection,
                                  ledger::SubscriptionState state, const Verdict& verdict,
                                  const Attempt& attempt) {
    const std::string& name = worker.config.name;
    const std::int64_t after = *worker.known_after;
    const std::int64_t token = *worker.lease_token;
    switch (verdict.kind) {
        case Verdict::Kind::kAdvance: {
            const std::size_t delivered = worker.pending.size();
            worker.pending.clear();
            if (!ledger::AdvanceCursor(connection, name, token, after, attempt.last, attempt.at)) {
                return false;
            }
            worker.counters.delivered_events += delivered;
            worker.known_after = attempt.last;
            worker.scan_from = attempt.last;
            // What the compare-and-set stored (ledger::AdvanceCursor).
            state.after = attempt.last;
            state.consecutive_failures = 0;
            state.last_error.reset();
            state.last_attempt_at = attempt.at;
            state.next_attempt_at.reset();
            worker.advanced = std::move(state);
            return true;
        }
        case Verdict::Kind::kDisable:
            ++worker.counters.failures;
            worker.pending.clear();
            if (!ledger::DisableAfterGone(connection, name, token, after, attempt.at)) return false;
            log_("warning", Dump(json{{"msg", "subscription disabled: the receiver answered 410"},
                                      {"subscription", name},
                                      {"after", after}}));
            return true;
        case Verdict::Kind::kRetry: {
            ++worker.counters.failures;
            worker.advanced.reset();  // The next step reads what this failure stores.
            const projections::TimeMicros next_attempt_at =
                attempt.at +
                std::chrono::duration_cast<std::chrono::microseconds>(verdict.wait).count();
            if (!ledger::RecordFailure(connection, name, token, after, verdict.error, attempt.at,
                                       next_attempt_at)) {
                return false;
            }
            log_("warning", Dump(json{{"msg", "subscription delivery failed"},
                                      {"subscription", name},
                                      {"webhook_id", attempt.id},
                                      {"error", verdict.error},
                                      {"retry_in_ms", verdict.wait.count()}}));
            return true;
        }
    }
    return false;
}

bool SubscriptionDeliverer::HoldLease(Worker& worker, ledger::SubscriptionLease& lease) {
    const std::string& name = worker.config.name;
    if (lease.Holds(name) && worker.lease_token) return true;
    worker.lease_token.reset();
    worker.Forget();
    if (!lease.TryAcquire(name)) {
        // Another process delivers it: try again later, from whatever is stored then.
        if (worker.client != nullptr) worker.client->Close();
        return false;
    }
    // Fenced: from here on, whatever a previous holder still stores is refused
    // (ledger::TakeLeaseToken), and the state read next is the one this thread goes on from.
    // Taken on the lease's own session, which holds the lock while it lives.
    worker.lease_token = lease.TakeToken(name);
    return worker.lease_token.has_value();  // None: the lease's session failed.
}

void SubscriptionDeliverer::NotStored(Worker& worker, const Attempt& attempt) {
    log_("info", Dump(json{{"msg",
                            "the delivery's outcome was not stored: the cursor moved, or "
                            "another process took the subscription over"},
                           {"subscription", worker.config.name},
                           {"webhook_id", attempt.id}}));
    // The next step takes a token again (on the lease's session, so only while this process
    // holds the lock): a refusal by token never repeats with the same one.
    worker.lease_token.reset();
}

std::chrono::milliseconds SubscriptionDeliverer::Step(Worker& worker) {
    const SubscriptionConfig& config = worker.config;
    pqxx::connection& connection = Session(worker);
    const std::shared_ptr<ledger::SubscriptionLease> lease = Lease();
    if (!HoldLease(worker, *lease)) return options_.lease_retry;
    // The stored state; then, when an attempt is due and nothing is held, the next batch.
    ledger::SubscriptionState state = StoredState(worker, connection);
    const Gate gate = DecideGate(state, worker.known_after, options_.now());
    if (gate.kind == Gate::Kind::kDisabled) {
        worker.Forget();
        return options_.idle_recheck;  // Until an admin enables it.
    }
    if (gate.cursor_moved) {
        worker.Forget();
        worker.known_after = state.after;
        worker.scan_from = state.after;
    }
    if (gate.kind == Gate::Kind::kBackingOff) return gate.wait;
    if (worker.pending.empty()) {
        const std::chrono::milliseconds wait = TakeBatch(worker, connection);
        if (worker.pending.empty()) return wait;
    }
    // Whoever holds the lease delivers: a session lost meanwhile may have let another process
    // take the subscription over.
    if (!lease->Alive()) return std::chrono::milliseconds{0};
    const Attempt attempt = Send(worker);
    // Stopping: nothing to store of an exchange cut short; the batch is sent again.
    if (attempt.result.failure == WebhookFailure::kCancelled) return std::chrono::milliseconds{0};
    const Verdict verdict = DecideOnAnswer(
        attempt.result, state.consecutive_failures, worker.pending.size(), config.batch_max,
        options_.linger, std::uniform_real_distribution<double>{0.0, 1.0}(worker.random));
    const bool stored = Store(worker, connection, std::move(state), verdict, attempt);
    if (!stored) NotStored(worker, attempt);
    const Next next = AfterStored(verdict, stored);
    if (next.forget) worker.Forget();
    return next.wait;
}

}  // namespace payledger::api
