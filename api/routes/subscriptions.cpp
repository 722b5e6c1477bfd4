#include "api/routes/subscriptions.hpp"

#include <nlohmann/json.hpp>

#include "api/channels/json_input.hpp"
#include "api/http/json_output.hpp"
#include "api/http/prometheus.hpp"
#include "api/routes/admin_input.hpp"
#include "api/routes/route_helpers.hpp"
#include "api/subscriptions/webhook_url.hpp"
#include "ledger/base/clock.hpp"
#include "ledger/subscriptions/subscriptions.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

json TimeOrNull(const std::optional<projections::TimeMicros>& time) {
    return time ? json(projections::FormatRfc3339Micros(*time)) : json(nullptr);
}

// `active` (caught up or delivering), `retrying` (the last attempt failed) or `disabled`.
const char* StateWord(const ledger::SubscriptionState& state) {
    if (state.disabled) return "disabled";
    return state.consecutive_failures > 0 ? "retrying" : "active";
}

// One subscription as the admin API shows it; a subscription no process has seen yet shows
// its cursor at 0 and no attempt.
json SubscriptionJson(const SubscriptionConfig& config,
                      const std::optional<ledger::SubscriptionState>& stored,
                      pqxx::transaction_base& tx) {
    const ledger::SubscriptionState state =
        stored.value_or(ledger::SubscriptionState{.name = config.name});
    const ledger::SubscriptionLag lag =
        ledger::ReadLag(tx, state.after, EventFilterOf(config), ledger::NowMicros());
    return {{"name", config.name},
            {"url", UrlWithoutUserInfo(config.url)},
            {"state", StateWord(state)},
            {"after", state.after},
            {"head", lag.head},
            {"lag_events", lag.lag_events},
            {"lag_seconds", lag.lag_seconds},
            {"consecutive_failures", state.consecutive_failures},
            {"last_error", state.last_error ? json(*state.last_error) : json(nullptr)},
            {"last_attempt_at", TimeOrNull(state.last_attempt_at)},
            {"next_attempt_at", TimeOrNull(state.next_attempt_at)}};
}

const SubscriptionConfig* Find(const SubscriptionDeliverer& deliverer, const std::string& name) {
    for (const SubscriptionConfig& config : deliverer.subscriptions()) {
        if (config.name == name) return &config;
    }
    return nullptr;
}

json ChangeJson(const ledger::SubscriptionChange& change) {
    return {{"id", change.id},
            {"name", change.name},
            {"from", change.from},
            {"to", change.to},
            {"why", std::string(ledger::ToString(change.why))},
            {"at", projections::FormatRfc3339Micros(change.at)}};
}

}  // namespace

Response SubscriptionsState(const SubscriptionDeliverer& deliverer, ledger::ConnectionPool& pool) {
    ledger::ConnectionPool::Lease connection = pool.Acquire();
    pqxx::read_transaction tx{*connection};
    json items = json::array();
    for (const SubscriptionConfig& config : deliverer.subscriptions()) {
        items.push_back(SubscriptionJson(config, ledger::ReadSubscription(tx, config.name), tx));
    }
    return JsonResponse(http::status::ok, {{"subscriptions", std::move(items)}});
}

Response ControlSubscription(SubscriptionDeliverer& deliverer, ledger::ConnectionPool& pool,
                             const Incoming& incoming, const std::string& name,
                             const std::string& action) {
    const SubscriptionConfig* config = Find(deliverer, name);
    if (config == nullptr) {
        return ErrorResponse(http::status::not_found, projections::Outcome::kUnknownOrder,
                             "no subscription " + name + " in this process's config");
    }
    ledger::ConnectionPool::Lease connection = pool.Acquire();
    // The row exists once the subscription's thread has looked; an admin may come first.
    (void)ledger::EnsureSubscription(*connection, name, config->start);
    std::optional<ledger::SubscriptionState> state;
    if (action == "enable") {
        state = ledger::Enable(*connection, name);
    } else {
        const Checked<std::int64_t> after = RewindCursor(incoming.request.body());
        if (!after) return BadRequest(after.refusal().message);
        const std::int64_t to = *after;
        std::int64_t head = 0;
        {
            pqxx::read_transaction tx{*connection};
            head =
                tx.exec("SELECT coalesce(max(seq), 0) FROM ledger_events")[0][0].as<std::int64_t>();
        }
        // Forward within the feed skips events a receiver can never take; beyond the head it
        // would skip events that have not happened yet.
        if (to > head) {
            return BadRequest("after " + std::to_string(to) + " is beyond the feed's head " +
                              std::to_string(head));
        }
        state = ledger::Rewind(*connection, name, to);
    }
    PAYLEDGER_ASSERT(state.has_value());  // Ensured above.
    deliverer.Poke(name);
    pqxx::read_transaction tx{*connection};
    return JsonResponse(http::status::ok, SubscriptionJson(*config, state, tx));
}

Response SubscriptionChanges(ledger::ConnectionPool& pool, const Incoming& incoming) {
    std::variant<PageQuery, Response> query = ParsePageQuery(incoming, false, true);
    if (Response* refused = std::get_if<Response>(&query)) return std::move(*refused);
    const PageQuery& page = std::get<PageQuery>(query);
    ledger::ConnectionPool::Lease connection = pool.Acquire();
    pqxx::read_transaction tx{*connection};
    const std::vector<ledger::SubscriptionChange> changes =
        page.before ? ledger::ReadChangesBefore(tx, *page.before, page.limit)
                    : ledger::ReadChanges(tx, page.after, page.limit);
    return PageResponse("changes", page, changes, ChangeJson,
                        [](const ledger::SubscriptionChange& change) { return change.id; });
}

std::string SubscriptionMetrics(SubscriptionDeliverer& deliverer) {
    if (deliverer.subscriptions().empty()) return {};
    using Type = PrometheusText::Type;
    PrometheusText out;
    PrometheusText::Family& lag_events = out.Add("payledger_subscription_lag_events", Type::kGauge,
                                                 "Matching events after the cursor.");
    PrometheusText::Family& lag_seconds =
        out.Add("payledger_subscription_lag_seconds", Type::kGauge,
                "Age of the oldest undelivered matching event; 0 when none.");
    PrometheusText::Family& delivered =
        out.Add("payledger_subscription_delivered_events_total", Type::kCounter,
                "Events this process delivered and its receiver acknowledged.");
    PrometheusText::Family& failures =
        out.Add("payledger_subscription_failures_total", Type::kCounter,
                "Attempts of this process that failed.");
    PrometheusText::Family& disabled = out.Add("payledger_subscription_disabled", Type::kGauge,
                                               "1 while disabled (after a 410), else 0.");
    // The gauges as sampled in the background (at most once a second while scraped), the
    // counters as they are: a scrape, which needs no token, does no database work.
    for (const SubscriptionGauges::Sample& sample : deliverer.Gauges()) {
        const PrometheusText::Labels label{{"subscription", sample.name}};
        lag_events.Sample(label, sample.lag_events);
        lag_seconds.Sample(label, sample.lag_seconds);
        disabled.Sample(label, sample.disabled ? 1 : 0);
    }
    for (const SubscriptionConfig& config : deliverer.subscriptions()) {
        const SubscriptionDeliverer::Counters* counters = deliverer.counters(config.name);
        const PrometheusText::Labels label{{"subscription", config.name}};
        delivered.Sample(label, counters->delivered_events.load());
        failures.Sample(label, counters->failures.load());
    }
    return out.Text();
}

}  // namespace payledger::api
