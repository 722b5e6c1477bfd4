#include "api/cli/platform_audit.hpp"

#include <boost/beast/core/string.hpp>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "api/channels/alipay_form.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "ledger/platform_receipts.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

constexpr std::size_t kKeyFileBytesMax = 64 * 1024;
// The only signature type the wechat_v3 channel accepts (its Wechatpay-Signature-Type).
constexpr std::string_view kWechatV3SignatureType = "WECHATPAY2-SHA256-RSA2048";

std::string ReadText(const std::string& path, const std::string& field, std::size_t bytes_max) {
    std::ifstream file{path, std::ios::binary};
    if (!file) throw ConfigError(field + ": cannot read " + path);
    std::string text(bytes_max + 1, '\0');
    file.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(file.gcount()));
    if (text.size() > bytes_max) throw ConfigError(field + ": " + path + " is too large");
    return text;
}

// The public key in the file that `value` names (a path, relative to `base_dir` unless
// absolute), as the channels' sections read theirs.
PublicKey LoadPublicKey(const json& value, const std::string& field, const std::string& base_dir) {
    if (!value.is_string() || value.get<std::string>().empty()) {
        throw ConfigError(field + ": must be the path of a key file");
    }
    const std::string path = value.get<std::string>();
    const std::string full = path.front() == '/' ? path : base_dir + path;
    CheckFileMode(full, field, FileKind::kPublic);
    const std::optional<PublicKey> key = ParsePublicKey(ReadText(full, field, kKeyFileBytesMax));
    if (!key) {
        throw ConfigError(field + ": " + path +
                          " holds no RSA public key (PEM public key or certificate)");
    }
    return *key;
}

const json* Section(const json& root, const char* name) {
    const auto it = root.find(name);
    if (it == root.end()) return nullptr;
    if (!it->is_object()) throw ConfigError(std::string(name) + ": must be an object");
    return &*it;
}

PlatformKeys LoadKeys(const json& root, const std::string& base_dir) {
    PlatformKeys keys;
    if (const json* wechat = Section(root, "wechat_v3")) {
        if (const auto listed = wechat->find("platform_public_keys"); listed != wechat->end()) {
            if (!listed->is_object()) {
                throw ConfigError(
                    "wechat_v3.platform_public_keys: must be an object of serial -> key file "
                    "path");
            }
            for (const auto& [serial, path] : listed->items()) {
                keys.wechat_v3[serial] =
                    LoadPublicKey(path, "wechat_v3.platform_public_keys." + serial, base_dir);
            }
        }
    }
    if (const json* alipay = Section(root, "alipay")) {
        if (const auto path = alipay->find("alipay_public_key"); path != alipay->end()) {
            keys.alipay = LoadPublicKey(*path, "alipay.alipay_public_key", base_dir);
        }
    }
    return keys;
}

// The header `name` as the receipt keeps it (names compared without case, as HTTP's are);
// empty when absent or not a string.
std::string_view StoredHeader(const json& headers, std::string_view name) {
    for (const auto& [key, value] : headers.items()) {
        if (key.size() != name.size() || !value.is_string()) continue;
        if (boost::beast::iequals(key, name)) return value.get_ref<const std::string&>();
    }
    return {};
}

std::optional<std::string> WechatV3Problem(const PlatformKeys& keys, const json& headers,
                                           std::string_view body) {
    const std::string_view type = StoredHeader(headers, "Wechatpay-Signature-Type");
    if (!type.empty() && type != kWechatV3SignatureType) {
        return "Wechatpay-Signature-Type " + std::string(type) + " is not supported";
    }
    const std::string_view timestamp = StoredHeader(headers, "Wechatpay-Timestamp");
    const std::string_view nonce = StoredHeader(headers, "Wechatpay-Nonce");
    const std::string_view serial = StoredHeader(headers, "Wechatpay-Serial");
    const std::string_view signature = StoredHeader(headers, "Wechatpay-Signature");
    if (timestamp.empty() || nonce.empty() || serial.empty() || signature.empty()) {
        return std::string(
            "the receipt keeps no Wechatpay-Timestamp, -Nonce, -Serial and -Signature");
    }
    const auto key = keys.wechat_v3.find(std::string(serial));
    if (key == keys.wechat_v3.end()) {
        return "Wechatpay-Serial " + std::string(serial) +
               " names no key of wechat_v3.platform_public_keys";
    }
    const std::optional<std::string> raw = Base64Decode(signature);
    if (!raw) return std::string("Wechatpay-Signature is not base64");
    if (!RsaSha256Verify(key->second, WechatV3SignatureMessage(timestamp, nonce, body), *raw)) {
        return "Wechatpay-Signature does not verify with the platform key " + std::string(serial);
    }
    return std::nullopt;
}

std::optional<std::string> AlipayProblem(const PlatformKeys& keys, std::string_view body) {
    if (!keys.alipay) return std::string("no alipay.alipay_public_key is configured");
    const Checked<PlatformFields> fields = DecodeForm(body);
    if (!fields) return "the body is not a form: " + fields.refusal().message;
    const std::string_view sign = FieldOr(*fields, "sign");
    if (sign.empty()) return std::string("sign is missing");
    const std::string_view sign_type = FieldOr(*fields, "sign_type");
    if (!sign_type.empty() && sign_type != "RSA2") {
        return "sign_type " + std::string(sign_type) + " is not RSA2";
    }
    const std::optional<std::string> raw = Base64Decode(sign);
    if (!raw) return std::string("sign is not base64");
    if (!RsaSha256Verify(*keys.alipay, AlipaySignContent(*fields), *raw)) {
        return std::string("sign does not verify with the Alipay public key");
    }
    return std::nullopt;
}

bool SignsWithPublicKey(projections::Source source) {
    return source == projections::Source::kWechatV3 || source == projections::Source::kAlipay;
}

}  // namespace

AuditSetup LoadAuditSetup(const std::string& path) {
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
    const std::string base_dir = slash == std::string::npos ? "./" : path.substr(0, slash + 1);
    json root = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (!root.is_object()) {
        // ParseConfig says what is wrong with it, as for any command.
        return {.config = ParseConfig(text.str(), env("PAYLEDGER_DATABASE_URL"),
                                      env("PAYLEDGER_LISTEN"), base_dir)};
    }
    AuditSetup setup{.keys = LoadKeys(root, base_dir)};
    root.erase("wechat_v3");
    root.erase("alipay");
    setup.config =
        ParseConfig(root.dump(), env("PAYLEDGER_DATABASE_URL"), env("PAYLEDGER_LISTEN"), base_dir);
    return setup;
}

std::optional<std::string> PlatformSignatureProblem(const PlatformKeys& keys,
                                                    projections::Source source,
                                                    std::string_view headers,
                                                    std::string_view body) {
    if (source == projections::Source::kAlipay) return AlipayProblem(keys, body);
    if (source != projections::Source::kWechatV3) {
        return "it came through " + std::string(projections::ToString(source)) +
               ", which the platform does not sign";
    }
    const json parsed = json::parse(headers, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_object()) return std::string("its headers are not a JSON object");
    return WechatV3Problem(keys, parsed, body);
}

ledger::AuditCheck PlatformSignaturesCheck(PlatformKeys keys) {
    return [keys = std::move(keys)](pqxx::transaction_base& tx, const ledger::AuditBreakSink& add) {
        ledger::ForEachPlatformReceipt(tx, [&](const ledger::PlatformReceipt& receipt) {
            std::optional<std::string> problem;
            if (!receipt.body) {
                problem = "its body is missing";
            } else if (receipt.event_source != receipt.source &&
                       SignsWithPublicKey(receipt.event_source)) {
                problem = "the event names " +
                          std::string(projections::ToString(receipt.event_source)) +
                          ", its receipt came through " +
                          std::string(projections::ToString(receipt.source));
            } else {
                problem =
                    PlatformSignatureProblem(keys, receipt.source, receipt.headers, *receipt.body);
            }
            if (!problem) return;
            add("event " + std::to_string(receipt.seq) + " not signed by the platform: receipt " +
                std::to_string(receipt.receipt_id) + " (" +
                std::string(projections::ToString(receipt.source)) + "): " + *problem);
        });
    };
}

}  // namespace payledger::api
