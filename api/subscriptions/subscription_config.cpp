#include "api/subscriptions/subscription_config.hpp"

#include <array>
#include <nlohmann/json.hpp>
#include <string_view>

#include "api/config.hpp"
#include "api/subscriptions/webhook_url.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 8> kSubscriptionFields = {
    "name", "url", "secret", "event_types", "accounts", "start", "batch_max", "timeout_seconds"};

[[noreturn]] void RefuseSubscription(const std::string& field, const std::string& why) {
    throw ConfigError(field + ": " + why);
}

std::string RequireSubscriptionName(const json& entry, const std::string& at) {
    const auto it = entry.find("name");
    if (it == entry.end()) RefuseSubscription(at + ".name", "missing");
    if (!it->is_string() || !projections::IsValidKey(it->get<std::string>())) {
        RefuseSubscription(at + ".name", std::string("must be ") + projections::kKeyRuleText);
    }
    return it->get<std::string>();
}

std::string RequireSubscriptionUrl(const json& entry, const std::string& at) {
    const auto it = entry.find("url");
    if (it == entry.end()) RefuseSubscription(at + ".url", "missing");
    if (!it->is_string()) RefuseSubscription(at + ".url", "must be a string");
    const Checked<WebhookUrl> url = ParseWebhookUrl(it->get<std::string>());
    if (!url) RefuseSubscription(at + ".url", url.refusal().message);
    return it->get<std::string>();
}

// `secret`: one string, or a non-empty array of them during a rotation.
std::vector<WebhookSecret> RequireSubscriptionSecrets(const json& entry, const std::string& at) {
    const auto it = entry.find("secret");
    const std::string field = at + ".secret";
    if (it == entry.end()) RefuseSubscription(field, "missing");
    const auto parse = [](const json& text, const std::string& where) {
        if (!text.is_string()) RefuseSubscription(where, "must be a string");
        Checked<WebhookSecret> secret = ParseWebhookSecret(text.get<std::string>());
        if (!secret) RefuseSubscription(where, secret.refusal().message);
        return std::move(*secret);
    };
    if (!it->is_array()) return {parse(*it, field)};
    if (it->empty() || it->size() > kSubscriptionSecretsMax) {
        RefuseSubscription(field, "must be a string or an array of 1 to " +
                                      std::to_string(kSubscriptionSecretsMax) + " strings");
    }
    std::vector<WebhookSecret> secrets;
    for (std::size_t i = 0; i < it->size(); ++i) {
        secrets.push_back(parse((*it)[i], field + "[" + std::to_string(i) + "]"));
    }
    return secrets;
}

std::set<projections::EventType> ParseSubscriptionEventTypes(const json& types,
                                                             const std::string& field) {
    if (!types.is_array() || types.empty()) {
        RefuseSubscription(field, "must be a non-empty array of event types");
    }
    std::set<projections::EventType> out;
    for (std::size_t i = 0; i < types.size(); ++i) {
        const std::optional<projections::EventType> type =
            types[i].is_string() ? projections::ParseEventType(types[i].get<std::string>())
                                 : std::nullopt;
        if (!type) {
            RefuseSubscription(field + "[" + std::to_string(i) + "]",
                               "must be ORDER_CREATED, PAYMENT_SUCCEEDED, PAYMENT_CLOSED or "
                               "REFUND_SUCCEEDED");
        }
        if (!out.insert(*type).second) {
            RefuseSubscription(field + "[" + std::to_string(i) + "]", "repeats an event type");
        }
    }
    return out;
}

std::set<std::string> ParseSubscriptionAccounts(const json& accounts, const std::string& field) {
    if (!accounts.is_array() || accounts.empty()) {
        RefuseSubscription(field, "must be a non-empty array of account ids");
    }
    std::set<std::string> out;
    for (std::size_t i = 0; i < accounts.size(); ++i) {
        const std::string at = field + "[" + std::to_string(i) + "]";
        if (!accounts[i].is_string() || !projections::IsValidKey(accounts[i].get<std::string>())) {
            RefuseSubscription(at, std::string("must be ") + projections::kKeyRuleText);
        }
        if (!out.insert(accounts[i].get<std::string>()).second) {
            RefuseSubscription(at, "repeats an account id");
        }
    }
    return out;
}

// An integer from `min` to `max`. nlohmann reads 1.5 as a float and -3 as signed: both are
// checked by type before any get, so nothing is truncated or wrapped.
std::int64_t ParseSubscriptionCount(const json& value, const std::string& field, std::int64_t min,
                                    std::int64_t max) {
    if (!value.is_number_integer() ||
        (value.is_number_unsigned() &&
         value.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) ||
        value.get<std::int64_t>() < min || value.get<std::int64_t>() > max) {
        RefuseSubscription(
            field, "must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
    }
    return value.get<std::int64_t>();
}

SubscriptionConfig ParseSubscription(const json& entry, const std::string& at) {
    if (!entry.is_object()) RefuseSubscription(at, "must be an object");
    for (const auto& [key, value] : entry.items()) {
        bool known = false;
        for (const std::string_view field : kSubscriptionFields) known = known || key == field;
        // The key is the config's own text, not a secret: naming it helps find a typo.
        if (!known) RefuseSubscription(at + "." + key, "unknown field");
    }
    SubscriptionConfig out;
    out.name = RequireSubscriptionName(entry, at);
    out.url = RequireSubscriptionUrl(entry, at);
    out.secrets = RequireSubscriptionSecrets(entry, at);
    if (const auto it = entry.find("event_types"); it != entry.end()) {
        out.event_types = ParseSubscriptionEventTypes(*it, at + ".event_types");
    }
    if (const auto it = entry.find("accounts"); it != entry.end()) {
        out.accounts = ParseSubscriptionAccounts(*it, at + ".accounts");
    }
    if (const auto it = entry.find("start"); it != entry.end()) {
        if (*it == "beginning") {
            out.start = ledger::SubscriptionStart::kBeginning;
        } else if (*it == "now") {
            out.start = ledger::SubscriptionStart::kNow;
        } else {
            RefuseSubscription(at + ".start", "must be \"beginning\" or \"now\"");
        }
    }
    if (const auto it = entry.find("batch_max"); it != entry.end()) {
        out.batch_max =
            ParseSubscriptionCount(*it, at + ".batch_max", 1, kSubscriptionBatchMaxLimit);
    }
    if (const auto it = entry.find("timeout_seconds"); it != entry.end()) {
        out.timeout = std::chrono::seconds{ParseSubscriptionCount(*it, at + ".timeout_seconds", 1,
                                                                  kSubscriptionTimeoutMax.count())};
    }
    return out;
}

}  // namespace

std::vector<SubscriptionConfig> ParseSubscriptions(const json& array) {
    if (!array.is_array()) RefuseSubscription("subscriptions", "must be an array");
    std::vector<SubscriptionConfig> out;
    std::set<std::string> names;
    for (std::size_t i = 0; i < array.size(); ++i) {
        const std::string at = "subscriptions[" + std::to_string(i) + "]";
        SubscriptionConfig subscription = ParseSubscription(array[i], at);
        if (!names.insert(subscription.name).second) {
            RefuseSubscription(at + ".name", "\"" + subscription.name +
                                                 "\" is the name of an earlier subscription");
        }
        out.push_back(std::move(subscription));
    }
    return out;
}

}  // namespace payledger::api
