#pragma once

// The handlers of the route table's operations (api/routes/route_table.hpp), each a free
// function given what it uses and nothing else. App (app.hpp) owns the state they share —
// the pools, the read router, the committer, the limits, the channels — and dispatches: one
// switch over the operation (App::Handle), after the route's access was checked there. A
// handler answers through its return value or, when it answers later (the write path, a
// waiting read, an export), through `respond` or incoming.respond_stream, exactly once.
// Database failures are not caught by the handlers: App::Handle classifies them once.

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/channels/channel.hpp"
#include "api/channels/orders_channel.hpp"
#include "api/config.hpp"
#include "api/http/http.hpp"
#include "api/http/metrics.hpp"
#include "api/http/peer_limits.hpp"
#include "api/query/query_scheduler.hpp"
#include "api/subscriptions/deliverer.hpp"
#include "ledger/pg/connection_pool.hpp"
#include "ledger/read/feed_notifier.hpp"
#include "ledger/read/read_router.hpp"
#include "ledger/write/committer.hpp"

namespace payledger::api {

// ---- The write path (deliveries.cpp, orders.cpp) ------------------------------------------------

// What every verified or refused delivery passes through on its way to the committer.
struct WritePath {
    ledger::Committer& committer;
    Metrics& metrics;
    UnverifiedLimiter& unverified;            // Per peer (docs/security.md#peers-and-limits).
    UnverifiedBytesBudget& unverified_bytes;  // All peers.
};

// A platform's callback: verified by its channel, then Deliver.
void HandleCallback(WritePath& path, const Channel& channel, Incoming incoming, Respond respond);

// POST /v1/orders: the body verified by the orders channel, the token's account scope and
// order-number prefix checked, then Deliver.
void HandleCreateOrder(WritePath& path, const OrdersChannel& orders, const MerchantToken& token,
                       Incoming incoming, Respond respond);

// Every channel's write path: the unverified limits, then the committer; counted, logged and
// answered in the channel's format after the commit, on the committer's answer thread.
// `path` and `channel` outlive the answer (App's members).
void Deliver(WritePath& path, const Channel& channel, ledger::Delivery delivery, Incoming incoming,
             Respond respond);

// ---- Reads (reads.cpp, feeds.cpp, app_subscriptions.cpp) -----------------------------------

// GET /v1/orders/{out_trade_no}[/events|/receipts] and /v1/accounts/{account_id}/balances;
// `queried`: the channels whose platforms this process asks (an order's query state).
[[nodiscard]] Response HandleRead(ledger::ReadRouter& reads, const std::set<std::string>& queried,
                                  const Incoming& incoming,
                                  const std::vector<std::string>& segments);

// GET /v1/events (`events`) or /v1/receipts: one page, shown only once no failover can take
// back what it shows (docs/api.md#what-a-reader-is-shown).
[[nodiscard]] Response HandleFeed(ledger::ReadRouter& reads, const Incoming& incoming, bool events);

// GET /v1/events with Accept: application/x-ndjson: every event after the cursor, up to the
// last one committed when the export starts, streamed without a page limit on a connection of
// its own; at most two at once, counted in `exports_active`.
void HandleEventExport(ledger::ReadRouter& reads,
                       const std::shared_ptr<std::atomic<int>>& exports_active, Incoming incoming,
                       Respond respond);

// What GET /v1/events?wait= uses; all outlive the waits.
struct FeedWaiting {
    ledger::ReadRouter& reads;
    ledger::FeedNotifier* notifier;  // Null: serve runs no feed notifier, a wait returns at once.
    Metrics& metrics;                // Counts the failures of a wait's later reads.
};

// GET /v1/events: a page, or with wait=, the page once an event follows `after` or the wait
// ran out, without holding a thread meanwhile.
void HandleEvents(FeedWaiting waiting, Incoming incoming, Respond respond);

// ---- Administration and probes (admin.cpp, app_subscriptions.cpp) -------------------------------

// POST /v1/admin/verify: one run at a time (`running`), each on connections of its own.
[[nodiscard]] Response HandleAdminVerify(const std::string& database_url,
                                         std::atomic<bool>& running);

// GET /v1/audit/checkpoint: the ledger's head signed with the configured key, read on `pool`.
[[nodiscard]] Response HandleAuditCheckpoint(const std::optional<std::string>& signing_key_pem,
                                             ledger::ConnectionPool& pool);

// GET /v1/admin/subscriptions; `deliverer` null: serve runs no subscription (an empty list).
[[nodiscard]] Response HandleSubscriptionList(const SubscriptionDeliverer* deliverer,
                                              ledger::ConnectionPool& pool);

// POST /v1/admin/subscriptions/{name}/rewind or .../enable (`action`); `deliverer` null: 404,
// as for a name this process's config does not have.
[[nodiscard]] Response HandleSubscriptionChange(SubscriptionDeliverer* deliverer,
                                                ledger::ConnectionPool& pool,
                                                const Incoming& incoming, const std::string& name,
                                                const std::string& action);

// GET /readyz waits at most this long for its connection, counted from when serve read the
// request (the probe lane answers checks that piled up at once).
inline constexpr std::chrono::milliseconds kReadinessWaitMax{2'000};
// A transaction of the committer in progress for longer than this makes /readyz 503: a batch
// takes milliseconds, and one that has not ended in 5 s is waiting on something that may
// never come (a commit waiting for a synchronous standby that is gone, in strict synchronous
// mode), with every callback behind it (docs/availability.md#failover).
inline constexpr std::chrono::seconds kWriteStalledAfter{5};

// What GET /readyz looks at.
struct ReadinessSources {
    ledger::ConnectionPool& connection;  // Its own: never behind the reads' pool.
    Metrics& metrics;                    // Receives the synchronous replication read.
    const ledger::Committer& committer;  // Whether a write has stalled.
};

// GET /readyz: `ready` false while serve waits for its database or migrates; `started`: when
// serve read the request.
[[nodiscard]] Response HandleReadiness(const ReadinessSources& sources, bool ready,
                                       std::chrono::steady_clock::time_point started);

// What GET /metrics renders (no database work).
struct MetricsSources {
    const Metrics& metrics;
    const ledger::ConnectionPool& pool;
    const ledger::Committer& committer;
    const ledger::ReadRouter& reads;
    const ledger::FeedNotifier* notifier;  // Null: no feed waiters to show.
    SubscriptionDeliverer* subscriptions;  // Null: no subscription.
    const QueryScheduler* queries;         // Null: no platform is asked.
};

// GET /metrics: the process's metrics, the feed's waiters, the subscriptions' and the queries'.
[[nodiscard]] Response HandleMetrics(const MetricsSources& sources);

}  // namespace payledger::api
