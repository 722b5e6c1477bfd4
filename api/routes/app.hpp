#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/channels/channel.hpp"
#include "api/channels/orders_channel.hpp"
#include "api/config.hpp"
#include "api/http/http.hpp"
#include "api/http/metrics.hpp"
#include "api/http/peer_limits.hpp"
#include "api/query/query_scheduler.hpp"
#include "api/routes/handlers.hpp"
#include "api/subscriptions/deliverer.hpp"
#include "ledger/pg/connection_pool.hpp"
#include "ledger/read/feed_notifier.hpp"
#include "ledger/read/read_router.hpp"
#include "ledger/write/committer.hpp"

namespace payledger::api {

// The HTTP application: routes each request to its handler (api/routes/route_table.hpp) and
// authorizes it. Handle runs on a worker thread and may block on the read pool; writes go to the
// committer, whose answer thread gives each delivery its answer, log line and metrics after the
// commit. The auditor reads go through a ReadRouter (docs/availability.md#read-replicas: the
// replica of read_database_url, else `pool`); the checkpoint uses `pool`. Thread-safe. App owns
// the state and authorizes; the handlers are free functions given what they use (handlers.hpp):
// deliveries.cpp, orders.cpp, reads.cpp, feeds.cpp, app_subscriptions.cpp, admin.cpp. Nothing that
// needs no token (/healthz, /readyz, /metrics) uses `pool`: /readyz has a connection of its own,
// and /metrics does no database work.
class App {
public:
    App(const Config& config, ledger::ConnectionPool& pool, ledger::Committer& committer,
        Metrics& metrics);

    // Answers `incoming` exactly once, possibly from another thread: through `respond`, or
    // through incoming.respond_stream for a streamed export. Never throws: a handler's
    // exception is classified once (route_helpers.hpp FailureResponse), logged, and answered
    // unless an answer was already sent.
    void Handle(Incoming incoming, Respond respond);

    // serve listens while it waits for its database and applies its migrations;
    // until then /healthz answers 200, /readyz and every read and write 503. Thread-safe.
    void SetReady() { ready_.store(true, std::memory_order_release); }

    // Subscriptions and the waiting feed (docs/subscriptions.md#inside-serve), when serve runs
    // them: the admin endpoints answer for `deliverer`'s subscriptions, and GET /v1/events?wait=
    // waits on `notifier`. Both outlive the App. Without them, the admin endpoints list no
    // subscription and a wait returns at once. Call before the server starts.
    void SetSubscriptions(SubscriptionDeliverer* deliverer, ledger::FeedNotifier* notifier) {
        subscriptions_ = deliverer;
        notifier_ = notifier;
    }
    // The schedule of asking the platforms (docs/query.md), whose counters /metrics shows.
    // Outlives the App. Call before the server starts.
    void SetQueryScheduler(const QueryScheduler* scheduler) { queries_ = scheduler; }

private:
    // nullopt when the bearer token holds `role` (or admin, for auditor endpoints).
    // `merchant_token`, when given, receives the matching merchant token (or null).
    std::optional<Response> Authorize(const Request& request, Role role,
                                      const MerchantToken** merchant_token = nullptr) const;

    Config config_;
    ledger::ConnectionPool& pool_;
    std::unique_ptr<ledger::ReadRouter>
        reads_;  // Auditor reads: docs/availability.md#read-replicas.
    ledger::Committer& committer_;
    Metrics& metrics_;
    // GET /readyz's own connection (it needs no token): readiness never waits behind the reads
    // of `pool_`, however many auditors, scrapers or exports hold them.
    ledger::ConnectionPool readiness_;
    // By path after callbacks/ (a route row's channel); std::less<> finds a string_view.
    std::map<std::string, std::unique_ptr<Channel>, std::less<>> channels_;
    OrdersChannel orders_;
    UnverifiedLimiter unverified_;
    UnverifiedBytesBudget unverified_bytes_;
    WritePath write_path_{committer_, metrics_, unverified_, unverified_bytes_};
    std::atomic<bool> verify_running_{false};
    std::atomic<bool> ready_{false};
    std::shared_ptr<std::atomic<int>> exports_active_ = std::make_shared<std::atomic<int>>(0);
    SubscriptionDeliverer* subscriptions_ = nullptr;
    const QueryScheduler* queries_ = nullptr;
    ledger::FeedNotifier* notifier_ = nullptr;
};

}  // namespace payledger::api
