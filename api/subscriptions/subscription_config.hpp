#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/subscriptions/webhook_signature.hpp"
#include "ledger/subscriptions/subscription_start.hpp"
#include "projections/event.hpp"

namespace payledger::api {

// Bounds of a subscription's settings, with their defaults.
inline constexpr std::int64_t kSubscriptionBatchMaxDefault = 100;
inline constexpr std::int64_t kSubscriptionBatchMaxLimit = 1000;
inline constexpr std::chrono::seconds kSubscriptionTimeoutDefault{10};
inline constexpr std::chrono::seconds kSubscriptionTimeoutMax{60};
inline constexpr std::size_t kSubscriptionSecretsMax = 16;  // A rotation needs two or three.

// One entry of the config's `subscriptions`: the ledger's events pushed to a receiver.
struct SubscriptionConfig {
    std::string name{};  // Unique; the alphabet of out_trade_no, 1 to 64 characters.
    // As configured, user info included: show it only through UrlWithoutUserInfo.
    std::string url{};
    // Every request is signed with each, in this order. The config's texts are not kept.
    std::vector<WebhookSecret> secrets{};
    std::set<projections::EventType> event_types{
        projections::EventType::kOrderCreated, projections::EventType::kPaymentSucceeded,
        projections::EventType::kPaymentClosed, projections::EventType::kRefundSucceeded};
    std::optional<std::set<std::string>> accounts{};  // nullopt: every account.
    ledger::SubscriptionStart start = ledger::SubscriptionStart::kBeginning;
    std::int64_t batch_max = kSubscriptionBatchMaxDefault;      // 1 to kSubscriptionBatchMaxLimit.
    std::chrono::seconds timeout{kSubscriptionTimeoutDefault};  // 1 s to kSubscriptionTimeoutMax.
    bool operator==(const SubscriptionConfig&) const = default;
};

// The config's `subscriptions` array. Throws ConfigError (api/config.hpp) whose message
// names the entry and the field ("subscriptions[2].secret: ...") and never holds a secret
// or the URL's user info. Unknown fields are refused, so that a misspelt filter
// ("event_type") cannot widen what is delivered.
[[nodiscard]] std::vector<SubscriptionConfig> ParseSubscriptions(const nlohmann::json& array);

}  // namespace payledger::api
