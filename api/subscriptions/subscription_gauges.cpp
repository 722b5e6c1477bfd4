#include "api/subscriptions/subscription_gauges.hpp"

#include <nlohmann/json.hpp>
#include <utility>

#include "api/http/json_output.hpp"
#include "api/subscriptions/deliverer.hpp"  // EventFilterOf.
#include "ledger/base/clock.hpp"
#include "ledger/subscriptions/subscriptions.hpp"

namespace payledger::api {

SubscriptionGauges::SubscriptionGauges(std::vector<SubscriptionConfig> subscriptions,
                                       Options options, Log log)
    : subscriptions_(std::move(subscriptions)),
      options_(std::move(options)),
      log_(std::move(log)) {}

SubscriptionGauges::~SubscriptionGauges() { Stop(); }

void SubscriptionGauges::Start() {
    if (subscriptions_.empty() || thread_.joinable()) return;
    thread_ = std::thread([this] { Run(); });
}

void SubscriptionGauges::Stop() {
    {
        std::lock_guard lock{mutex_};
        stopping_ = true;
    }
    wanted_.notify_all();
    if (thread_.joinable()) thread_.join();
}

std::vector<SubscriptionGauges::Sample> SubscriptionGauges::Latest() {
    std::vector<Sample> latest;
    {
        std::lock_guard lock{mutex_};
        latest = latest_;
        asked_ = std::chrono::steady_clock::now();
    }
    wanted_.notify_all();
    return latest;
}

std::uint64_t SubscriptionGauges::samples_taken() const {
    std::lock_guard lock{mutex_};
    return samples_;
}

std::vector<SubscriptionGauges::Sample> SubscriptionGauges::Read(
    pqxx::connection& connection) const {
    std::vector<Sample> samples;
    pqxx::read_transaction tx{connection};
    for (const SubscriptionConfig& config : subscriptions_) {
        const std::optional<ledger::SubscriptionState> state =
            ledger::ReadSubscription(tx, config.name);
        const ledger::SubscriptionLag lag = ledger::ReadLag(
            tx, state ? state->after : 0, EventFilterOf(config), ledger::NowMicros());
        samples.push_back({.name = config.name,
                           .lag_events = lag.lag_events,
                           .lag_seconds = lag.lag_seconds,
                           .disabled = state && state->disabled});
    }
    return samples;
}

void SubscriptionGauges::Run() {
    using Clock = std::chrono::steady_clock;
    std::unique_ptr<pqxx::connection> connection;
    std::optional<Clock::time_point> sampled_at;
    for (;;) {
        {
            std::unique_lock lock{mutex_};
            // Asleep until a scrape asks, and then not again within the interval.
            wanted_.wait(lock, [&] {
                return stopping_ || (asked_ && Clock::now() - *asked_ < options_.wanted_for &&
                                     (!sampled_at || *asked_ > *sampled_at));
            });
            if (stopping_) return;
            if (sampled_at) {
                const Clock::time_point due = *sampled_at + options_.interval;
                // A timed wait for the interval to pass; Stop ends it early.
                if (wanted_.wait_until(lock, due, [&] { return stopping_; })) return;
            }
        }
        sampled_at = Clock::now();
        try {
            if (connection == nullptr || ledger::IdleSessionEnded(*connection)) {
                connection = ledger::Connect(options_.database_url, options_.session);
            }
            std::vector<Sample> samples = Read(*connection);
            std::lock_guard lock{mutex_};
            latest_ = std::move(samples);
            ++samples_;
        } catch (const std::exception& error) {
            connection.reset();
            log_("warning", Dump(nlohmann::json{{"msg", "subscription gauges not sampled"},
                                                {"error", error.what()}}));
        }
    }
}

}  // namespace payledger::api
