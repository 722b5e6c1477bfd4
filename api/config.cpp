#include "api/config.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/channels/platform_config.hpp"
#include "ledger/pg/conninfo.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

constexpr std::size_t kSecretBytesMin = 16;
constexpr std::size_t kTokenBytesMin = 16;
// limits.unverified_bytes_per_minute is at least one largest body with its receipt, or no
// unverified delivery of that size could ever be stored.
constexpr std::size_t kRequestBodyBytesMaxForLimits = kUnverifiedDeliveryBytesMax;

std::string RequireString(const json& object, const std::string& key, const std::string& path) {
    const auto it = object.find(key);
    if (it == object.end()) throw ConfigError(path + "." + key + ": missing");
    if (!it->is_string() || it->get<std::string>().empty()) {
        throw ConfigError(path + "." + key + ": must be a non-empty string");
    }
    return it->get<std::string>();
}

void ParseListen(const std::string& text, const std::string& field, Config& config) {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
        throw ConfigError(field + ": must be host:port, got \"" + text + "\"");
    }
    const std::string port_text = text.substr(colon + 1);
    const std::optional<std::int64_t> port = projections::ParseDigits(port_text, 65535);
    if (!port) throw ConfigError(field + ": invalid port \"" + port_text + "\"");
    config.listen_host = text.substr(0, colon);
    config.listen_port = static_cast<unsigned short>(*port);
}

std::string ParseToken(const json& token, const std::string& field) {
    if (!token.is_string()) throw ConfigError(field + ": must be a string");
    if (token.get<std::string>().size() < kTokenBytesMin) {
        throw ConfigError(field + ": every token must be at least " +
                          std::to_string(kTokenBytesMin) + " characters");
    }
    return token.get<std::string>();
}

std::vector<std::string> ParseTokens(const json& tokens, const char* role) {
    const std::string field = std::string("tokens.") + role;
    const auto it = tokens.find(role);
    if (it == tokens.end()) return {};
    if (!it->is_array()) throw ConfigError(field + ": must be an array of strings");
    std::vector<std::string> out;
    for (const json& token : *it) out.push_back(ParseToken(token, field));
    return out;
}

// tokens.merchant: strings, or {"token": "…", "accounts": ["shop-1", …]} (README.md#configuration).
std::vector<MerchantToken> ParseMerchantTokens(const json& tokens) {
    const std::string field = "tokens.merchant";
    const auto it = tokens.find("merchant");
    if (it == tokens.end()) return {};
    if (!it->is_array()) throw ConfigError(field + ": must be an array");
    std::vector<MerchantToken> out;
    for (const json& entry : *it) {
        if (!entry.is_object()) {
            out.push_back({.token = ParseToken(entry, field)});
            continue;
        }
        const auto token = entry.find("token");
        const auto accounts = entry.find("accounts");
        const auto prefix = entry.find("out_trade_no_prefix");
        if (token == entry.end()) throw ConfigError(field + "[].token: missing");
        if (accounts == entry.end() && prefix == entry.end()) {
            throw ConfigError(field +
                              "[].accounts: missing; a token object names accounts, "
                              "out_trade_no_prefix or both (a plain string may "
                              "register anything)");
        }
        MerchantToken scoped{.token = ParseToken(*token, field + "[].token")};
        if (accounts != entry.end()) {
            if (!accounts->is_array() || accounts->empty()) {
                throw ConfigError(field + "[].accounts: must be a non-empty array of account ids");
            }
            scoped.accounts.emplace();
            for (const json& account : *accounts) {
                if (!account.is_string() || !projections::IsValidKey(account.get<std::string>())) {
                    throw ConfigError(field + "[].accounts: every account id must be " +
                                      projections::kKeyRuleText);
                }
                scoped.accounts->push_back(account.get<std::string>());
            }
        }
        if (prefix != entry.end()) {
            // A prefix is the start of a key: the key's alphabet, and room for one more
            // character after it.
            if (!prefix->is_string() || !projections::IsValidKey(prefix->get<std::string>()) ||
                prefix->get<std::string>().size() >= projections::kKeyBytesMax) {
                throw ConfigError(field + "[].out_trade_no_prefix: must be 1 to " +
                                  std::to_string(projections::kKeyBytesMax - 1) +
                                  " characters of the order number's alphabet");
            }
            scoped.out_trade_no_prefix = prefix->get<std::string>();
        }
        out.push_back(std::move(scoped));
    }
    return out;
}

// An integer from `min` to `max` at root.limits.<key>, or `fallback` when absent.
std::size_t ParseLimit(const json& limits, const char* key, std::size_t fallback, std::size_t max,
                       std::size_t min = 1) {
    const auto it = limits.find(key);
    if (it == limits.end()) return fallback;
    const std::string field = std::string("limits.") + key;
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() < min ||
        it->get<std::uint64_t>() > max) {
        throw ConfigError(field + ": must be an integer from " + std::to_string(min) + " to " +
                          std::to_string(max));
    }
    return static_cast<std::size_t>(it->get<std::uint64_t>());
}

// An array of address blocks (trusted_proxies, limits.reserved_for).
std::vector<Cidr> ParseCidrs(const json& value, const std::string& field) {
    if (!value.is_array()) throw ConfigError(field + ": must be an array of address blocks (CIDR)");
    std::vector<Cidr> blocks;
    for (std::size_t i = 0; i < value.size(); ++i) {
        const json& entry = value[i];
        const std::optional<Cidr> cidr =
            entry.is_string() ? Cidr::Parse(entry.get<std::string>()) : std::nullopt;
        if (!cidr) {
            throw ConfigError(field + "[" + std::to_string(i) +
                              "]: must be an address block such as \"10.0.0.0/8\" or "
                              "\"2001:db8::/32\", with its host bits zero");
        }
        blocks.push_back(*cidr);
    }
    return blocks;
}

// The longest a schedule's step, or the first query's delay, may be: a day, after which the
// daily statement is the net (docs/query.md#when).
constexpr std::int64_t kQueryStepSecondsMax = 24 * 60 * 60;
constexpr std::size_t kQueryStepsMax = 32;
constexpr std::size_t kQueryConcurrencyMax = 64;
constexpr std::int64_t kQueryTimeoutSecondsMax = 60;

}  // namespace

std::vector<std::chrono::seconds> DefaultQuerySteps() {
    std::vector<std::chrono::seconds> steps;
    for (const std::int64_t seconds : {60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400}) {
        steps.emplace_back(seconds);
    }
    return steps;
}

namespace {

// The top-level `query` section (docs/query.md#when).
QuerySchedule ParseQuerySchedule(const json& query) {
    if (!query.is_object()) throw ConfigError("query: must be an object");
    QuerySchedule schedule;
    const auto seconds = [](const json& value, const std::string& field, std::int64_t min,
                            std::int64_t max) {
        if (!value.is_number_unsigned() ||
            value.get<std::uint64_t>() < static_cast<std::uint64_t>(min) ||
            value.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
            throw ConfigError(field + ": must be an integer from " + std::to_string(min) + " to " +
                              std::to_string(max));
        }
        return std::chrono::seconds{value.get<std::int64_t>()};
    };
    if (const auto first = query.find("first_after_seconds"); first != query.end()) {
        schedule.first_after =
            seconds(*first, "query.first_after_seconds", 0, kQueryStepSecondsMax);
    }
    if (const auto steps = query.find("schedule_seconds"); steps != query.end()) {
        if (!steps->is_array() || steps->size() > kQueryStepsMax) {
            throw ConfigError("query.schedule_seconds: must be an array of at most " +
                              std::to_string(kQueryStepsMax) + " step lengths in seconds");
        }
        schedule.steps.clear();
        for (std::size_t i = 0; i < steps->size(); ++i) {
            schedule.steps.push_back(seconds((*steps)[i],
                                             "query.schedule_seconds[" + std::to_string(i) + "]", 1,
                                             kQueryStepSecondsMax));
        }
    }
    if (const auto concurrency = query.find("concurrency"); concurrency != query.end()) {
        schedule.concurrency = static_cast<std::size_t>(
            seconds(*concurrency, "query.concurrency", 1, kQueryConcurrencyMax).count());
    }
    if (const auto timeout = query.find("timeout_seconds"); timeout != query.end()) {
        schedule.timeout = seconds(*timeout, "query.timeout_seconds", 1, kQueryTimeoutSecondsMax);
    }
    return schedule;
}

// The URL payledger writes through (docs/availability.md#failover), checked by libpq's own parser.
std::string ParseWriteUrl(const std::string& url, const std::string& field) {
    try {
        return ledger::ForWrites(url);
    } catch (const ledger::ConninfoError& error) {
        throw ConfigError(field + ": not a valid PostgreSQL connection string: " + error.what());
    }
}

// read_database_url and read_max_lag_seconds (docs/availability.md#read-replicas).
void ParseReadReplica(const json& root, Config& config) {
    if (root.contains("read_database_url")) {
        const std::string url = RequireString(root, "read_database_url", "config");
        try {
            (void)ledger::ParseConninfo(url);
        } catch (const ledger::ConninfoError& error) {
            throw ConfigError("read_database_url: not a valid PostgreSQL connection string: " +
                              std::string(error.what()));
        }
        config.read_database_url = url;
    }
    const auto lag = root.find("read_max_lag_seconds");
    if (lag == root.end()) return;
    if (!config.read_database_url) {
        throw ConfigError("read_max_lag_seconds: only with read_database_url");
    }
    if (!lag->is_number_unsigned() || lag->get<std::uint64_t>() < 1 ||
        lag->get<std::uint64_t>() > static_cast<std::uint64_t>(kReadMaxLagMax.count())) {
        throw ConfigError("read_max_lag_seconds: must be an integer from 1 to " +
                          std::to_string(kReadMaxLagMax.count()));
    }
    config.read_max_lag =
        std::chrono::seconds{static_cast<std::int64_t>(lag->get<std::uint64_t>())};
}

}  // namespace

Config ParseConfig(const std::string& text, const std::optional<std::string>& database_url_override,
                   const std::optional<std::string>& listen_override, const std::string& base_dir) {
    json root;
    try {
        root = json::parse(text);
    } catch (const json::exception& error) {  // Syntax, or a number out of range (1e999).
        throw ConfigError(std::string("config: not valid JSON: ") + error.what());
    }
    if (!root.is_object()) throw ConfigError("config: must be a JSON object");
    Config config;

    if (listen_override) {
        ParseListen(*listen_override, "PAYLEDGER_LISTEN", config);
    } else if (root.contains("listen")) {
        ParseListen(RequireString(root, "listen", "config"), "listen", config);
    }
    if (database_url_override) {
        if (database_url_override->empty()) throw ConfigError("PAYLEDGER_DATABASE_URL: empty");
        config.database_url = ParseWriteUrl(*database_url_override, "PAYLEDGER_DATABASE_URL");
    } else {
        const auto it = root.find("database_url");
        if (it == root.end()) throw ConfigError("database_url: missing");
        config.database_url =
            ParseWriteUrl(RequireString(root, "database_url", "config"), "database_url");
    }
    ParseReadReplica(root, config);

    if (const auto tokens = root.find("tokens"); tokens != root.end()) {
        if (!tokens->is_object()) throw ConfigError("tokens: must be an object");
        config.merchant_tokens = ParseMerchantTokens(*tokens);
        config.auditor_tokens = ParseTokens(*tokens, "auditor");
        config.admin_tokens = ParseTokens(*tokens, "admin");
    }
    if (const auto generic = root.find("generic"); generic != root.end()) {
        if (!generic->is_object()) throw ConfigError("generic: must be an object");
        GenericConfig section{.secret = RequireString(*generic, "secret", "generic")};
        if (section.secret.size() < kSecretBytesMin) {
            throw ConfigError("generic.secret: must be at least " +
                              std::to_string(kSecretBytesMin) + " characters");
        }
        config.generic = section;
    }
    if (const auto limits = root.find("limits"); limits != root.end()) {
        if (!limits->is_object()) throw ConfigError("limits: must be an object");
        const Limits defaults;
        config.limits.unverified_per_peer_per_minute =
            ParseLimit(*limits, "unverified_per_peer_per_minute",
                       defaults.unverified_per_peer_per_minute, 1'000'000);
        config.limits.connections_per_peer =
            ParseLimit(*limits, "connections_per_peer", defaults.connections_per_peer, 1'000'000);
        config.limits.connections_max =
            ParseLimit(*limits, "connections_max", defaults.connections_max, 1'000'000);
        // Unset, a block's share is never below one peer's: raising connections_per_peer alone
        // must not turn into a start-up error (docs/security.md#peers-and-limits).
        config.limits.connections_per_prefix = ParseLimit(
            *limits, "connections_per_prefix",
            std::max(defaults.connections_per_prefix, config.limits.connections_per_peer),
            1'000'000);
        // At most 32 and 128: ParseLimit's bounds make the casts exact.
        config.limits.prefix_ipv4_bits = static_cast<unsigned>(
            ParseLimit(*limits, "prefix_ipv4_bits", defaults.prefix_ipv4_bits, 32, 8));
        config.limits.prefix_ipv6_bits = static_cast<unsigned>(
            ParseLimit(*limits, "prefix_ipv6_bits", defaults.prefix_ipv6_bits, 128, 16));
        if (config.limits.connections_per_prefix < config.limits.connections_per_peer) {
            throw ConfigError(
                "limits.connections_per_prefix: must be at least limits.connections_per_peer (" +
                std::to_string(config.limits.connections_per_peer) + ")");
        }
        if (const auto reserved = limits->find("reserved_for"); reserved != limits->end()) {
            config.reserved_for = ParseCidrs(*reserved, "limits.reserved_for");
        }
        config.limits.unverified_bytes_per_minute =
            ParseLimit(*limits, "unverified_bytes_per_minute", defaults.unverified_bytes_per_minute,
                       std::size_t{1} << 40, kRequestBodyBytesMaxForLimits);
        config.limits.write_queue_bytes_max =
            ParseLimit(*limits, "write_queue_bytes_max", defaults.write_queue_bytes_max,
                       std::size_t{1} << 40, kWriteQueueBytesMin);
        config.limits.writer_cache_orders =
            ParseLimit(*limits, "writer_cache_orders", defaults.writer_cache_orders, 10'000'000, 0);
        config.limits.read_seconds = std::chrono::seconds{ParseLimit(
            *limits, "read_seconds", static_cast<std::size_t>(kReadSecondsDefault.count()),
            static_cast<std::size_t>(kReadSecondsMax.count()))};
    }
    if (const auto proxies = root.find("trusted_proxies"); proxies != root.end()) {
        config.trusted_proxies = ParseCidrs(*proxies, "trusted_proxies");
    }
    if (const auto subscriptions = root.find("subscriptions"); subscriptions != root.end()) {
        config.subscriptions = ParseSubscriptions(*subscriptions);
    }
    if (const auto query = root.find("query"); query != root.end()) {
        config.query = ParseQuerySchedule(*query);
    }
    ParsePlatformSections(root, base_dir, config);
    return config;
}

void CheckFileMode(const std::string& path, const std::string& field, FileKind kind) {
    struct stat status {};
    if (stat(path.c_str(), &status) != 0) return;  // Reading it reports what is wrong.
    const mode_t others =
        kind == FileKind::kSecret ? (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH) : (S_IWGRP | S_IWOTH);
    if ((status.st_mode & others) == 0) return;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(status.st_mode & 07777));
    throw ConfigError(field + ": " + path + " has mode " + mode + ": other users may " +
                      (kind == FileKind::kSecret ? "read or write it (chmod 600 " + path + ")"
                                                 : "write it (chmod 644 " + path + ")"));
}

Config LoadConfig(const std::string& path) {
    CheckFileMode(path, "config", FileKind::kSecret);
    std::ifstream file{path, std::ios::binary};
    if (!file) throw ConfigError("config: cannot read " + path);
    std::ostringstream text;
    text << file.rdbuf();
    const auto env = [](const char* name) -> std::optional<std::string> {
        const char* value = std::getenv(name);
        if (value == nullptr) return std::nullopt;
        return std::string(value);
    };
    const std::size_t slash = path.rfind('/');
    const std::string base_dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
    return ParseConfig(text.str(), env("PAYLEDGER_DATABASE_URL"), env("PAYLEDGER_LISTEN"),
                       base_dir);
}

}  // namespace payledger::api
