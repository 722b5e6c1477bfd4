#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "api/channels/platform_crypto.hpp"
#include "api/config.hpp"
#include "ledger/integrity/audit.hpp"
#include "projections/event.hpp"

namespace payledger::api {

// `payledger audit --platform-signatures`: every event appended from WeChat Pay APIv3 or
// Alipay (a notice, or an answer to a query or a close, docs/query.md) must come with a receipt
// that carries the platform's valid signature, verified again
// with the platforms' public keys alone (no secret), outside any time window: an outside
// auditor proves that the platform sent each such payment, whatever the service's host did.

// The public keys that verification needs, and nothing else of the channels' sections but
// the APIv3 key, which an auditor holds only with the merchant's cooperation.
struct PlatformKeys {
    std::map<std::string, PublicKey> wechat_v3{};  // By Wechatpay-Serial.
    std::optional<PublicKey> alipay{};
    // WeChat Pay APIv3 encrypts a notice's order, amount and number with this merchant
    // secret: without it only the envelope's plain fields can be compared with the event.
    std::optional<std::string> wechat_v3_api_v3_key{};
    // What an answer to a query or a close is compared with, as the scheduler compared it
    // (docs/query.md#verification): wechat_v3.mchid and .appid, alipay.seller_id.
    std::optional<std::string> wechat_v3_mchid{};
    std::optional<std::string> wechat_v3_appid{};
    std::optional<std::string> alipay_seller_id{};
};

// What `payledger audit` runs with: the config without its wechat_v3 and alipay sections
// (neither their secrets nor their merchant ids are needed), and those sections' public keys.
struct AuditSetup {
    Config config{};
    PlatformKeys keys{};
};

// Reads the config at `path` as LoadConfig does (its mode, PAYLEDGER_DATABASE_URL and the
// rest), except that of the wechat_v3 and alipay sections it reads only
// wechat_v3.platform_public_keys, .api_v3_key, .mchid and .appid, and alipay.alipay_public_key
// and .seller_id, each optional: an auditor's config may hold the database URL and the public keys
// alone. Throws ConfigError naming the field at fault.
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

// nullopt when the event that a receipt of `source` (wechat_v3 or alipay) appended is what its
// notice, whose signature verified, records; else the first difference, "the signed notice
// says <field> <value>, the event <value>", or why the notice records no event. Alipay: the
// notice mapped as the channel maps it (out_trade_no, event_type, amount, currency where the
// notice names one, transaction_id, occurred_at; a missing time is `received_at`) and its
// notify_id against the one the event's data keeps. WeChat Pay APIv3: event_type
// (TRANSACTION.SUCCESS for a payment, REFUND.SUCCESS for a refund) and the envelope fields
// the event's data keeps (id, event_type, create_time, summary); with the APIv3 key, the
// decrypted resource mapped as the channel maps it, compared as Alipay's.
[[nodiscard]] std::optional<std::string> NoticeEventProblem(const PlatformKeys& keys,
                                                            projections::Source source,
                                                            projections::TimeMicros received_at,
                                                            std::string_view body,
                                                            const projections::Event& event);

// The audit check: "event <seq> not signed by the platform: receipt <id> (<channel>): <why>"
// for every event appended from those channels (by its receipt's channel or its own source)
// whose receipt does not carry a valid platform signature, whose signed notice records another
// event (NoticeEventProblem; for an answer, the answer read again as the scheduler read it, asked
// about the event's order, records another event or other data), or whose signed notice already
// backs an earlier event ("the same signed notice backs event <seq>": the same body bytes, or the
// same notify_id or id). Reads the receipts in the audit's snapshot, in constant memory. When
// `checked` is given, it is set to lines (each ending in "\n") saying what was checked, for how
// many receipts of each channel: what `payledger audit` prints on stderr.
[[nodiscard]] ledger::AuditCheck PlatformSignaturesCheck(PlatformKeys keys,
                                                         std::string* checked = nullptr);

}  // namespace payledger::api
