#pragma once

#include <string>

#include "api/http/http.hpp"
#include "api/subscriptions/deliverer.hpp"
#include "ledger/pg/connection_pool.hpp"

namespace payledger::api {

// The subscriptions' state, control and audit trail (docs/subscriptions.md#inside-serve). Each
// reads or writes the primary through `pool` (a subscription's state is the deliverer's, and a
// cursor moved by an admin must be read back at once). Database failures are not caught
// here: App::Handle classifies them.

// GET /v1/admin/subscriptions: every subscription of this process's config, with its state
// and lag. `url` without user info.
[[nodiscard]] Response SubscriptionsState(const SubscriptionDeliverer& deliverer,
                                          ledger::ConnectionPool& pool);

// POST /v1/admin/subscriptions/{name}/rewind (body {"after": <seq>}) or .../enable: moves the
// cursor or enables, records the change, wakes the subscription's thread, and answers its
// state. 404 for a name this process's config does not have; 400 for a bad body or a cursor
// beyond the feed's head.
[[nodiscard]] Response ControlSubscription(SubscriptionDeliverer& deliverer,
                                           ledger::ConnectionPool& pool, const Incoming& incoming,
                                           const std::string& name, const std::string& action);

// GET /v1/subscriptions/changes?after=&limit= (or before=): the append-only record of cursor
// moves, disables and enables, paged like the feeds.
[[nodiscard]] Response SubscriptionChanges(ledger::ConnectionPool& pool, const Incoming& incoming);

// The subscriptions' lines of /metrics: per subscription its lag (events, seconds) and whether
// it is disabled, as last sampled in the background (no database work), the events this process
// delivered and its failures.
[[nodiscard]] std::string SubscriptionMetrics(SubscriptionDeliverer& deliverer);

}  // namespace payledger::api
