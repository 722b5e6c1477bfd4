#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/channels/platform_crypto.hpp"
#include "api/http/connection_slots.hpp"
#include "api/http/peer_limits.hpp"
#include "api/subscriptions/subscription_config.hpp"
#include "ledger/write/committer_limits.hpp"

namespace payledger::api {

// Raised for a configuration that cannot run; what() names the field
// (docs/api.md#configuration).
class ConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

enum class Role { kMerchant, kAuditor, kAdmin };

struct GenericConfig {
    std::string secret{};
};

// `wechat_v2` (docs/platforms.md#wechat-pay-apiv2): sign_type MD5 (default) or HMAC-SHA256.
enum class WechatV2SignType { kMd5, kHmacSha256 };

// Where a channel's `query` section sends its queries and closes (docs/query.md): `https://`,
// or `http://` to a loopback address (a simulator). The base URL as given, without a trailing
// slash.
struct QueryEndpoint {
    std::string api_base{};
};

struct WechatV2Config {
    std::string appid{};
    std::string mch_id{};
    std::string api_key{};  // The APIv2 key: signs notices, and its MD5 decrypts refunds.
    WechatV2SignType sign_type = WechatV2SignType::kMd5;
    // `wechat_v2.query`: queries sign with api_key and sign_type, as notices do.
    std::optional<QueryEndpoint> query{};
};

// `wechat_v3.query`: requests are signed with the merchant API private key, whose certificate
// serial goes in the Authorization header.
struct WechatV3QueryConfig {
    QueryEndpoint endpoint{};
    PrivateKey merchant_private_key{};
    std::string merchant_serial{};
};

// `alipay.query`: requests are signed RSA2 with the app private key.
struct AlipayQueryConfig {
    QueryEndpoint endpoint{};
    PrivateKey app_private_key{};
};

// The schedule's steps when the config names none: 1, 2, 5, 10, 30 minutes, 1, 2, 6, 24 hours.
[[nodiscard]] std::vector<std::chrono::seconds> DefaultQuerySteps();

// The top-level `query` section: when the platforms are asked (docs/query.md#when).
struct QuerySchedule {
    std::chrono::seconds first_after{60};
    std::vector<std::chrono::seconds> steps = DefaultQuerySteps();
    std::size_t concurrency = 8;
    std::chrono::seconds timeout{10};
};

// `wechat_v3` (docs/platforms.md#wechat-pay-apiv3). The simulate_* fields are optional, for
// `payledger simulate` only: the private key of a test platform key pair and the serial it signs
// as.
struct WechatV3Config {
    std::string appid{};
    std::string mchid{};
    std::string api_v3_key{};  // 32 bytes: the AES-256-GCM key of notification resources.
    std::map<std::string, PublicKey> platform_public_keys{};  // By Wechatpay-Serial.
    std::optional<PrivateKey> simulate_private_key{};
    std::string simulate_serial{};
    std::optional<WechatV3QueryConfig> query{};
};

// `alipay` (docs/platforms.md#alipay); simulate_private_key as for WechatV3Config.
struct AlipayConfig {
    std::string app_id{};
    PublicKey alipay_public_key{};
    std::string seller_id{};  // Optional: when set, every notice's seller_id must be it.
    std::optional<PrivateKey> simulate_private_key{};
    std::optional<AlipayQueryConfig> query{};
};

// `limits` (docs/security.md#peers-and-limits).
// The connection limits and their defaults are ConnectionLimits' (api/http/connection_slots.hpp).
// `limits.read_seconds`: [15], from 1 s to an hour.
inline constexpr std::chrono::seconds kReadSecondsDefault{15};
inline constexpr std::chrono::seconds kReadSecondsMax{60 * 60};

struct Limits : ConnectionLimits {
    std::size_t unverified_per_peer_per_minute = 120;  // The `rate_limited` outcome.
    // The bodies of unverified deliveries stored per minute, from all peers together.
    std::size_t unverified_bytes_per_minute = 64 * 1024 * 1024;
    // The committer's queue in bytes, so that a full queue of large bodies cannot exhaust memory.
    // Over it, deliveries answer 503 at once.
    std::size_t write_queue_bytes_max = ledger::kWriteQueueBytesMaxDefault;
    // How many orders the committer remembers from its own batches, to write a batch whose orders
    // it all knows in one round trip (docs/write-path.md#the-writer-cache); 0 reads every batch's
    // state. About 600 bytes an order, at most about 2 KiB.
    std::size_t writer_cache_orders = ledger::kWriterCacheOrdersDefault;
    // How long a connection may take to send a whole request, and stay idle between requests
    // (keep-alive): a client trickling its header a byte at a time is cut off after it.
    std::chrono::seconds read_seconds = kReadSecondsDefault;
};

// limits.write_queue_bytes_max is at least this: room for several full requests.
inline constexpr std::size_t kWriteQueueBytesMin = 1024 * 1024;

// `read_max_lag_seconds`: [30], from 1 s to a day.
inline constexpr std::chrono::seconds kReadMaxLagDefault{30};
inline constexpr std::chrono::seconds kReadMaxLagMax{24 * 60 * 60};

// `tokens.merchant` (docs/security.md#tenants): a plain token may register orders for any account;
// one given as an object only for the accounts it names.
struct MerchantToken {
    std::string token{};
    std::optional<std::vector<std::string>> accounts{};  // nullopt: any account.
    // Set: only order numbers that start with it, so that tenants sharing one platform
    // merchant account cannot take (and be credited for) each other's order numbers.
    std::optional<std::string> out_trade_no_prefix{};
    bool operator==(const MerchantToken&) const = default;
};

// The config file (README.md#configuration). Sections absent from the file leave their channel
// unserved (404).
struct Config {
    std::string listen_host = "127.0.0.1";
    unsigned short listen_port = 8080;
    // docs/availability.md#failover: as given, except that several hosts without
    // target_session_attrs get target_session_attrs=read-write (ledger::ForWrites).
    std::string database_url{};
    // docs/availability.md#read-replicas: a streaming replica for the auditor reads; none: they use
    // database_url.
    std::optional<std::string> read_database_url{};
    // Reads leave a replica that lags more than this (read_max_lag_seconds).
    std::chrono::seconds read_max_lag{kReadMaxLagDefault};
    std::vector<MerchantToken> merchant_tokens{};
    std::vector<std::string> auditor_tokens{};
    std::vector<std::string> admin_tokens{};
    std::optional<GenericConfig> generic{};
    std::optional<WechatV2Config> wechat_v2{};
    std::optional<WechatV3Config> wechat_v3{};
    std::optional<AlipayConfig> alipay{};
    Limits limits{};
    // Connections from these blocks are a reverse proxy's: the client is the address the
    // proxy appended last to X-Forwarded-For (api/http/peer_limits.hpp ForwardedClient).
    // limits.reserved_for: address blocks whose connections always get a slot (the platforms'
    // published ranges; docs/security.md#connection-slots).
    std::vector<Cidr> reserved_for{};
    std::vector<Cidr> trusted_proxies{};
    // `audit.signing_key` (docs/integrity.md#checkpoints): the Ed25519 private key PEM (read and
    // checked at start).
    std::optional<std::string> audit_signing_key_pem{};
    // The ledger's events pushed to receivers (api/subscriptions/subscription_config.hpp).
    std::vector<SubscriptionConfig> subscriptions{};
    // When the platforms are asked about orders registered with a channel whose section has a
    // `query` (docs/query.md); the defaults when the config has no top-level `query`.
    QuerySchedule query{};

    // True when some channel's section has a `query`: serve then runs the scheduler.
    [[nodiscard]] bool AsksPlatforms() const {
        return (wechat_v2 && wechat_v2->query) || (wechat_v3 && wechat_v3->query) ||
               (alipay && alipay->query);
    }
};

// File modes (docs/api.md#configuration). A secret file (the config, a private key) that users
// other than its owner may read or write, and a public file (a public key) that they may write,
// throw ConfigError naming `field`, the file and its mode.
enum class FileKind { kSecret, kPublic };
void CheckFileMode(const std::string& path, const std::string& field, FileKind kind);

// Reads and validates the JSON config at `path`, then applies PAYLEDGER_DATABASE_URL and
// PAYLEDGER_LISTEN from the environment. Throws ConfigError naming the field at fault.
[[nodiscard]] Config LoadConfig(const std::string& path);

// The same from JSON text (tests), with the environment overrides given explicitly. Relative
// key file paths are read from `base_dir` (LoadConfig: the config file's folder).
[[nodiscard]] Config ParseConfig(const std::string& text,
                                 const std::optional<std::string>& database_url_override,
                                 const std::optional<std::string>& listen_override,
                                 const std::string& base_dir = {});

}  // namespace payledger::api
