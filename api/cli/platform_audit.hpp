#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "api/channels/platform_crypto.hpp"
#include "api/config.hpp"
#include "ledger/audit.hpp"
#include "projections/event.hpp"

namespace payledger::api {

// `payledger audit --platform-signatures`: every event appended from WeChat Pay APIv3 or
// Alipay must come with a receipt that carries the platform's valid signature, verified again
// with the platforms' public keys alone (no secret), outside any time window: an outside
// auditor proves that the platform sent each such payment, whatever the service's host did.

// The public keys that verification needs, and nothing else of the channels' sections.
struct PlatformKeys {
    std::map<std::string, PublicKey> wechat_v3{};  // By Wechatpay-Serial.
    std::optional<PublicKey> alipay{};
};

// What `payledger audit` runs with: the config without its wechat_v3 and alipay sections
// (neither their secrets nor their merchant ids are needed), and those sections' public keys.
struct AuditSetup {
    Config config{};
    PlatformKeys keys{};
};

// Reads the config at `path` as LoadConfig does (its mode, PAYLEDGER_DATABASE_URL and the
// rest), except that of the wechat_v3 and alipay sections it reads only
// wechat_v3.platform_public_keys and alipay.alipay_public_key, each optional: an auditor's
// config may hold the database URL and the public keys alone. Throws ConfigError naming the
// field at fault.
[[nodiscard]] AuditSetup LoadAuditSetup(const std::string& path);

// nullopt when a receipt of `source` (wechat_v3: RSA-SHA256 over "<Wechatpay-Timestamp>\n
// <Wechatpay-Nonce>\n<body>\n" with the key Wechatpay-Serial names; alipay: RSA2 over the
// sorted form without sign and sign_type) with these stored headers (a JSON object) and body
// carries a valid platform signature; else why not. The time the notice was signed is not
// checked: it was at the notice's delivery.
[[nodiscard]] std::optional<std::string> PlatformSignatureProblem(const PlatformKeys& keys,
                                                                  projections::Source source,
                                                                  std::string_view headers,
                                                                  std::string_view body);

// The audit check: "event <seq> not signed by the platform: <why>" for every event appended
// from those channels (by its receipt's channel or its own source) whose receipt does not
// carry a valid platform signature. Reads the receipts in the audit's snapshot.
[[nodiscard]] ledger::AuditCheck PlatformSignaturesCheck(PlatformKeys keys);

}  // namespace payledger::api
