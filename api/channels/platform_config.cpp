#include "api/channels/platform_config.hpp"

#include <boost/asio/ip/address.hpp>
#include <fstream>
#include <sstream>

#include "api/subscriptions/webhook_url.hpp"
#include "ledger/integrity/checkpoint.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

constexpr std::size_t kApiV3KeyBytes = 32;  // The AES-256 key.
constexpr std::size_t kKeyFileBytesMax = 64 * 1024;
constexpr std::size_t kSerialBytesMax = 64;
constexpr std::size_t kAlipayUserIdDigits = 16;  // 2088 + 12 digits.

const json& Section(const json& root, const char* name) {
    const json& section = root.at(name);
    if (!section.is_object()) throw ConfigError(std::string(name) + ": must be an object");
    return section;
}

std::string RequireString(const json& object, const std::string& field) {
    const std::string key = field.substr(field.rfind('.') + 1);
    const auto it = object.find(key);
    if (it == object.end()) throw ConfigError(field + ": missing");
    if (!it->is_string() || it->get<std::string>().empty()) {
        throw ConfigError(field + ": must be a non-empty string");
    }
    return it->get<std::string>();
}

std::string ReadKeyFile(const std::string& path, const std::string& base_dir,
                        const std::string& field, FileKind kind) {
    std::string full = path;
    if (!base_dir.empty() && path.front() != '/') {
        full = base_dir.back() == '/' ? base_dir + path : base_dir + "/" + path;
    }
    CheckFileMode(full, field, kind);
    std::ifstream file{full, std::ios::binary};
    if (!file) throw ConfigError(field + ": cannot read the key file " + full);
    std::ostringstream text;
    text << file.rdbuf();
    if (text.str().size() > kKeyFileBytesMax) {
        throw ConfigError(field + ": the key file " + full + " is too large");
    }
    return text.str();
}

PublicKey LoadPublicKey(const json& object, const std::string& field, const std::string& base_dir) {
    const std::string path = RequireString(object, field);
    const std::optional<PublicKey> key =
        ParsePublicKey(ReadKeyFile(path, base_dir, field, FileKind::kPublic));
    if (!key) {
        throw ConfigError(field + ": " + path +
                          " holds no RSA public key (PEM public key or certificate)");
    }
    return *key;
}

std::optional<PrivateKey> LoadSimulateKey(const json& section, const std::string& field,
                                          const std::string& base_dir) {
    if (!section.contains("simulate_private_key")) return std::nullopt;
    const std::string path = RequireString(section, field);
    const std::optional<PrivateKey> key =
        ParsePrivateKey(ReadKeyFile(path, base_dir, field, FileKind::kSecret));
    if (!key) throw ConfigError(field + ": " + path + " holds no RSA private key (PEM)");
    return key;
}

// A certificate serial in upper-case hex, or a WeChat Pay public-key id
// (docs/platforms.md#platform-keys-and-their-rotation).
bool IsValidSerial(const std::string& serial) {
    if (serial.empty() || serial.size() > kSerialBytesMax) return false;
    if (serial.rfind("PUB_KEY_ID_", 0) == 0) {
        for (const char c : serial) {
            if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
        }
        return true;
    }
    for (const char c : serial) {
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'))) return false;
    }
    return true;
}

std::optional<PrivateKey> LoadPrivateKey(const json& object, const std::string& field,
                                         const std::string& base_dir) {
    const std::string path = RequireString(object, field);
    const std::optional<PrivateKey> key =
        ParsePrivateKey(ReadKeyFile(path, base_dir, field, FileKind::kSecret));
    if (!key) throw ConfigError(field + ": " + path + " holds no RSA private key (PEM)");
    return key;
}

// A `query` section's api_base: https://, or http:// to a loopback address only (a simulator on
// this machine: nobody on the path can read or change what is asked and answered).
QueryEndpoint ParseEndpoint(const json& query, const std::string& section) {
    const std::string field = section + ".query.api_base";
    std::string base = RequireString(query, field);
    const Checked<WebhookUrl> url = ParseWebhookUrl(base);
    if (!url) throw ConfigError(field + ": " + url.refusal().message);
    boost::system::error_code not_an_address;
    const boost::asio::ip::address address =
        boost::asio::ip::make_address(url->host, not_an_address);
    const bool loopback = url->host == "localhost" || (!not_an_address && address.is_loopback());
    if (!url->tls && !loopback) {
        throw ConfigError(field + ": must be https://, or http:// to a loopback address");
    }
    if (url->basic_credentials) throw ConfigError(field + ": must not hold user info");
    while (!base.empty() && base.back() == '/') base.pop_back();
    return QueryEndpoint{.api_base = std::move(base)};
}

const json* QuerySection(const json& section, const std::string& name) {
    const auto query = section.find("query");
    if (query == section.end()) return nullptr;
    if (!query->is_object()) throw ConfigError(name + ".query: must be an object");
    return &*query;
}

WechatV2Config ParseWechatV2(const json& section) {
    WechatV2Config config{.appid = RequireString(section, "wechat_v2.appid"),
                          .mch_id = RequireString(section, "wechat_v2.mch_id"),
                          .api_key = RequireString(section, "wechat_v2.api_key")};
    if (section.contains("sign_type")) {
        const std::string sign_type = RequireString(section, "wechat_v2.sign_type");
        if (sign_type == "MD5") {
            config.sign_type = WechatV2SignType::kMd5;
        } else if (sign_type == "HMAC-SHA256") {
            config.sign_type = WechatV2SignType::kHmacSha256;
        } else {
            throw ConfigError("wechat_v2.sign_type: must be MD5 or HMAC-SHA256, got \"" +
                              sign_type + "\"");
        }
    }
    if (const json* query = QuerySection(section, "wechat_v2")) {
        config.query = ParseEndpoint(*query, "wechat_v2");
    }
    return config;
}

WechatV3Config ParseWechatV3(const json& section, const std::string& base_dir) {
    WechatV3Config config{.appid = RequireString(section, "wechat_v3.appid"),
                          .mchid = RequireString(section, "wechat_v3.mchid"),
                          .api_v3_key = RequireString(section, "wechat_v3.api_v3_key")};
    if (config.api_v3_key.size() != kApiV3KeyBytes) {
        throw ConfigError("wechat_v3.api_v3_key: must be exactly 32 bytes (the APIv3 key)");
    }
    const auto keys = section.find("platform_public_keys");
    if (keys == section.end()) throw ConfigError("wechat_v3.platform_public_keys: missing");
    if (!keys->is_object() || keys->empty()) {
        throw ConfigError(
            "wechat_v3.platform_public_keys: must be an object of serial -> key file path");
    }
    for (const auto& [serial, path] : keys->items()) {
        const std::string field = "wechat_v3.platform_public_keys." + serial;
        if (!IsValidSerial(serial)) {
            throw ConfigError(field + ": the serial must be upper-case hex or PUB_KEY_ID_...");
        }
        if (!path.is_string()) throw ConfigError(field + ": must be the path of a key file");
        config.platform_public_keys[serial] = LoadPublicKey(json{{serial, path}}, field, base_dir);
    }
    config.simulate_private_key =
        LoadSimulateKey(section, "wechat_v3.simulate_private_key", base_dir);
    if (section.contains("simulate_serial")) {
        config.simulate_serial = RequireString(section, "wechat_v3.simulate_serial");
    } else if (config.platform_public_keys.size() == 1) {
        config.simulate_serial = config.platform_public_keys.begin()->first;
    }
    if (config.simulate_private_key &&
        !config.platform_public_keys.contains(config.simulate_serial)) {
        throw ConfigError(
            "wechat_v3.simulate_serial: must name one of wechat_v3.platform_public_keys");
    }
    if (const json* query = QuerySection(section, "wechat_v3")) {
        WechatV3QueryConfig parsed{
            .endpoint = ParseEndpoint(*query, "wechat_v3"),
            .merchant_private_key =
                *LoadPrivateKey(*query, "wechat_v3.query.merchant_private_key", base_dir),
            .merchant_serial = RequireString(*query, "wechat_v3.query.merchant_serial")};
        if (!IsValidSerial(parsed.merchant_serial) || parsed.merchant_serial.starts_with("PUB")) {
            throw ConfigError(
                "wechat_v3.query.merchant_serial: must be the merchant API certificate's serial, "
                "upper-case hex");
        }
        config.query = std::move(parsed);
    }
    return config;
}

// An Alipay user id (PID) as in seller_id and buyer_id: "2088" and twelve more digits.
bool IsValidAlipayUserId(const std::string& text) {
    return text.size() == kAlipayUserIdDigits && text.starts_with("2088") &&
           text.find_first_not_of("0123456789") == std::string::npos;
}

AlipayConfig ParseAlipay(const json& section, const std::string& base_dir) {
    AlipayConfig config{
        .app_id = RequireString(section, "alipay.app_id"),
        .alipay_public_key = LoadPublicKey(section, "alipay.alipay_public_key", base_dir),
        .simulate_private_key = LoadSimulateKey(section, "alipay.simulate_private_key", base_dir)};
    if (section.contains("seller_id")) {
        config.seller_id = RequireString(section, "alipay.seller_id");
        if (!IsValidAlipayUserId(config.seller_id)) {
            throw ConfigError(
                "alipay.seller_id: must be the merchant's Alipay user id, 16 digits starting "
                "with 2088");
        }
    }
    if (const json* query = QuerySection(section, "alipay")) {
        config.query = AlipayQueryConfig{
            .endpoint = ParseEndpoint(*query, "alipay"),
            .app_private_key = *LoadPrivateKey(*query, "alipay.query.app_private_key", base_dir)};
    }
    return config;
}

}  // namespace

void ParsePlatformSections(const json& root, const std::string& base_dir, Config& config) {
    if (root.contains("audit")) {
        const json& audit = Section(root, "audit");
        const std::string path = RequireString(audit, "audit.signing_key");
        std::string pem = ReadKeyFile(path, base_dir, "audit.signing_key", FileKind::kSecret);
        try {
            (void)ledger::Ed25519Key::PrivateFromPem(pem);
        } catch (const std::runtime_error& error) {
            throw ConfigError("audit.signing_key: " + path + ": " + error.what());
        }
        config.audit_signing_key_pem = std::move(pem);
    }
    if (root.contains("wechat_v2")) config.wechat_v2 = ParseWechatV2(Section(root, "wechat_v2"));
    if (root.contains("wechat_v3")) {
        config.wechat_v3 = ParseWechatV3(Section(root, "wechat_v3"), base_dir);
    }
    if (root.contains("alipay")) config.alipay = ParseAlipay(Section(root, "alipay"), base_dir);
}

}  // namespace payledger::api
