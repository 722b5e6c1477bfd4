#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "api/log.hpp"
#include "api/subscriptions/subscription_config.hpp"
#include "ledger/pg/database.hpp"

namespace payledger::api {

// The subscriptions' gauges for GET /metrics (docs/operations.md#metrics), sampled in the
// background so that a scrape, which needs no token, costs no database work: each subscription's
// lag (matching events after its cursor, the age of the oldest) and whether it is disabled,
// read on a connection of this sampler's own at most once per `interval`, and only while
// somebody scrapes (a scrape within `wanted_for`); a scrape reads the last sample. Without the
// sampler, 256 parallel scrapers each took a connection of the read pool (shared with /readyz)
// and ran the lag reads (up to ~30 ms for a subscription far behind): /readyz answered 503.
// Thread-safe. The sampler's failures are logged and leave the last sample as it was.
class SubscriptionGauges {
public:
    struct Options {
        std::string database_url{};
        ledger::SessionSettings session{};
        std::chrono::milliseconds interval{1'000};
        std::chrono::milliseconds wanted_for{60'000};
    };

    // One subscription's gauges as last sampled.
    struct Sample {
        std::string name{};
        std::int64_t lag_events = 0;
        double lag_seconds = 0;
        bool disabled = false;
    };

    SubscriptionGauges(std::vector<SubscriptionConfig> subscriptions, Options options, Log log);
    ~SubscriptionGauges();  // Stop().
    SubscriptionGauges(const SubscriptionGauges&) = delete;
    SubscriptionGauges& operator=(const SubscriptionGauges&) = delete;

    void Start();
    void Stop();  // Idempotent; ends a sample in progress at its next statement.

    // The last sample of every subscription (empty before the first), without waiting, and
    // asks the sampler for fresh ones (at most once per interval).
    [[nodiscard]] std::vector<Sample> Latest();
    // How many samples were taken (tests wait for one).
    [[nodiscard]] std::uint64_t samples_taken() const;

private:
    void Run();
    [[nodiscard]] std::vector<Sample> Read(pqxx::connection& connection) const;

    const std::vector<SubscriptionConfig> subscriptions_;
    const Options options_;
    const Log log_;
    mutable std::mutex mutex_;
    std::condition_variable wanted_;
    std::vector<Sample> latest_{};                                  // Guarded by mutex_.
    std::optional<std::chrono::steady_clock::time_point> asked_{};  // Guarded by mutex_.
    std::uint64_t samples_ = 0;                                     // Guarded by mutex_.
    bool stopping_ = false;                                         // Guarded by mutex_.
    std::thread thread_{};
};

}  // namespace payledger::api
