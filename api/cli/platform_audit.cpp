#include "api/cli/platform_audit.hpp"

#include <boost/beast/core/string.hpp>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "api/channels/alipay_channel.hpp"
#include "api/channels/alipay_form.hpp"
#include "api/channels/json_input.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "api/query/platform_protocol.hpp"
#include "ledger/base/bytes.hpp"
#include "ledger/integrity/platform_receipts.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

constexpr std::size_t kKeyFileBytesMax = 64 * 1024;
constexpr std::size_t kApiV3KeyBytes = 32;  // AES-256, as the wechat_v3 section requires.
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
        if (const auto mchid = wechat->find("mchid");
            mchid != wechat->end() && mchid->is_string()) {
            keys.wechat_v3_mchid = mchid->get<std::string>();
        }
        if (const auto appid = wechat->find("appid");
            appid != wechat->end() && appid->is_string()) {
            keys.wechat_v3_appid = appid->get<std::string>();
        }
        if (const auto key = wechat->find("api_v3_key"); key != wechat->end()) {
            if (!key->is_string() || key->get_ref<const std::string&>().size() != kApiV3KeyBytes) {
                throw ConfigError("wechat_v3.api_v3_key: must be exactly 32 bytes (the APIv3 key)");
            }
            keys.wechat_v3_api_v3_key = key->get<std::string>();
        }
    }
    if (const json* alipay = Section(root, "alipay")) {
        if (const auto path = alipay->find("alipay_public_key"); path != alipay->end()) {
            keys.alipay = LoadPublicKey(*path, "alipay.alipay_public_key", base_dir);
        }
        if (const auto seller = alipay->find("seller_id");
            seller != alipay->end() && seller->is_string()) {
            keys.alipay_seller_id = seller->get<std::string>();
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
    const std::optional<std::string> raw = ledger::Base64Decode(signature);
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
    const std::optional<std::string> raw = ledger::Base64Decode(sign);
    if (!raw) return std::string("sign is not base64");
    if (!RsaSha256Verify(*keys.alipay, AlipaySignContent(*fields), *raw)) {
        return std::string("sign does not verify with the Alipay public key");
    }
    return std::nullopt;
}

// A query's or a close's answer (docs/query.md): which platform, asked what.
struct Asked {
    QueryChannel channel = QueryChannel::kWechatV3;
    QueryAction action = QueryAction::kQuery;
};

// The answers the platforms sign with their keys: WeChat Pay APIv3's and Alipay's.
std::optional<Asked> AskedOf(projections::Source source) {
    for (const QueryChannel channel : {QueryChannel::kWechatV3, QueryChannel::kAlipay}) {
        for (const QueryAction action : {QueryAction::kQuery, QueryAction::kClose}) {
            if (SourceOf(channel, action) == source) return Asked{channel, action};
        }
    }
    return std::nullopt;
}

bool SignsWithPublicKey(projections::Source source) {
    return source == projections::Source::kWechatV3 || source == projections::Source::kAlipay ||
           AskedOf(source).has_value();
}

// The member of an Alipay OpenAPI answer that its sign covers.
std::string AlipayAnswerMember(QueryAction action) {
    return action == QueryAction::kQuery ? "alipay_trade_query_response"
                                         : "alipay_trade_close_response";
}

// Alipay signs an OpenAPI answer over the exact text of its response member (docs/query.md).
std::optional<std::string> AlipayAnswerProblem(const PlatformKeys& keys, QueryAction action,
                                               std::string_view body) {
    if (!keys.alipay) return std::string("no alipay.alipay_public_key is configured");
    const std::optional<json> parsed = ParseJsonObject(body);
    if (!parsed) return std::string("the body is not a JSON object");
    const std::string member = AlipayAnswerMember(action);
    const std::optional<std::string_view> signed_text = RawJsonMember(body, member);
    if (!signed_text) return "the body has no " + member;
    const std::optional<std::string> sign = StringMember(*parsed, "sign");
    if (!sign || sign->empty()) return std::string("sign is missing");
    const std::optional<std::string> raw = ledger::Base64Decode(*sign);
    if (!raw) return std::string("sign is not base64");
    if (!RsaSha256Verify(*keys.alipay, *signed_text, *raw)) {
        return std::string("sign does not verify with the Alipay public key");
    }
    return std::nullopt;
}

// `what`: "notice", or "answer" for a query's or a close's (docs/query.md).
std::string Says(std::string_view field, std::string_view notice, std::string_view event,
                 std::string_view what = "notice") {
    return "the signed " + std::string(what) + " says " + std::string(field) + " " +
           std::string(notice) + ", the event " + std::string(event);
}

std::string OrNone(const std::optional<std::string>& text) { return text.value_or("none"); }

// The first field in which the stored event differs from the one the notice records.
std::optional<std::string> EventDiffers(const projections::Event& notice,
                                        const projections::Event& stored,
                                        std::string_view what = "notice") {
    if (notice.out_trade_no != stored.out_trade_no) {
        return Says("out_trade_no", notice.out_trade_no, stored.out_trade_no, what);
    }
    if (notice.event_type != stored.event_type) {
        return Says("event_type", projections::ToString(notice.event_type),
                    projections::ToString(stored.event_type), what);
    }
    if (notice.amount != stored.amount) {
        return Says("amount", std::to_string(notice.amount), std::to_string(stored.amount), what);
    }
    // A refund notice without a currency takes its order's: nothing to compare then.
    if (!notice.currency.empty() && notice.currency != stored.currency) {
        return Says("currency", notice.currency, stored.currency.empty() ? "none" : stored.currency,
                    what);
    }
    if (notice.transaction_id != stored.transaction_id) {
        return Says("transaction_id", OrNone(notice.transaction_id), OrNone(stored.transaction_id),
                    what);
    }
    if (notice.occurred_at != stored.occurred_at) {
        return Says("occurred_at", projections::FormatRfc3339(notice.occurred_at),
                    projections::FormatRfc3339(stored.occurred_at), what);
    }
    return std::nullopt;
}

// The stored event's data as a JSON object (an empty one when it is not one).
json StoredData(const projections::Event& event) {
    json data = json::parse(event.data, nullptr, /*allow_exceptions=*/false);
    return data.is_object() ? data : json::object();
}

// A kept value for a message: a string as it is, anything else as JSON, "none" when absent.
std::string Shown(const json* value) {
    if (value == nullptr) return "none";
    return value->is_string() ? value->get<std::string>() : value->dump();
}

std::optional<std::string> AlipayNoticeProblem(projections::TimeMicros received_at,
                                               std::string_view body,
                                               const projections::Event& event) {
    const Checked<PlatformFields> fields = DecodeForm(body);
    if (!fields) return "the body is not a form: " + fields.refusal().message;
    const Checked<NoticeEvent> notice = AlipayNoticeEvent(*fields, received_at);
    if (!notice) return "the signed notice records no event: " + notice.refusal().message;
    if (auto differs = EventDiffers(notice->event, event)) return differs;
    // The notice's id, which tells one notice behind two events (an empty one is not kept).
    const std::string_view notify_id = FieldOr(*fields, "notify_id");
    const json data = StoredData(event);
    const auto kept = data.find("notify_id");
    const json* stored = kept == data.end() ? nullptr : &*kept;
    if (notify_id.empty() ? stored != nullptr
                          : stored == nullptr || *stored != json(std::string(notify_id))) {
        return Says("notify_id", notify_id.empty() ? "none" : notify_id, Shown(stored));
    }
    return std::nullopt;
}

// The WeChat Pay APIv3 event_type that records an event of `type`, empty for none.
std::string_view WechatV3EventType(projections::EventType type) {
    switch (type) {
        case projections::EventType::kPaymentSucceeded:
            return "TRANSACTION.SUCCESS";
        case projections::EventType::kRefundSucceeded:
            return "REFUND.SUCCESS";
        case projections::EventType::kOrderCreated:
        case projections::EventType::kPaymentClosed:
            return {};
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

std::optional<std::string> WechatV3NoticeProblem(const PlatformKeys& keys,
                                                 projections::TimeMicros received_at,
                                                 std::string_view body,
                                                 const projections::Event& event) {
    const std::optional<json> envelope = ParseJsonObject(body);
    if (!envelope) return std::string("the signed body is not a JSON object");
    // In plain text: what kind of notice it is, and the fields the event's data keeps of it.
    const std::string notice_type = StringMember(*envelope, "event_type").value_or("none");
    if (notice_type != WechatV3EventType(event.event_type)) {
        return Says("event_type", notice_type, projections::ToString(event.event_type));
    }
    const json data = StoredData(event);
    const json kept_fields = WechatV3EnvelopeData(*envelope);
    for (const auto& [name, value] : kept_fields.items()) {
        const auto kept = data.find(name);
        if (kept == data.end() || *kept != value) {
            return Says(name, Shown(&value), Shown(kept == data.end() ? nullptr : &*kept));
        }
    }
    if (!keys.wechat_v3_api_v3_key) return std::nullopt;
    // With the merchant's APIv3 key: the encrypted order, amount, number and time too.
    const Checked<json> resource = OpenWechatV3Resource(*keys.wechat_v3_api_v3_key, *envelope);
    if (!resource) return "the signed notice's resource: " + resource.refusal().message;
    const Checked<NoticeEvent> notice = WechatV3NoticeEvent(*envelope, *resource, received_at);
    if (!notice) return "the signed notice records no event: " + notice.refusal().message;
    return EventDiffers(notice->event, event);
}

// The event a signed answer records, read again as the scheduler read it (the same
// ReadWechatV3Answer or ReadAlipayAnswer, on the stored headers and body, asked about the event's
// order at the receipt's time), against the stored one: every field and the data.
std::optional<std::string> AnswerEventProblem(const PlatformKeys& keys, Asked asked,
                                              projections::TimeMicros received_at,
                                              const json& headers, std::string_view body,
                                              const projections::Event& event) {
    AskedExchange exchange{.channel = asked.channel,
                           .action = asked.action,
                           .out_trade_no = event.out_trade_no,
                           .received_at = received_at};
    exchange.result.answer_body = std::string(body);
    for (const auto& [name, value] : headers.items()) {
        if (!value.is_string()) continue;
        std::string lower = name;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        exchange.result.answer_headers.emplace_back(std::move(lower), value.get<std::string>());
    }
    PlatformAnswer answer;
    if (asked.channel == QueryChannel::kWechatV3) {
        if (!keys.wechat_v3_mchid) {
            return std::string("no wechat_v3.mchid is configured to compare the answer's with");
        }
        // Only a query's 200 and a close's 204 ever append (docs/query.md#mapping).
        exchange.result.status = asked.action == QueryAction::kQuery ? 200 : 204;
        WechatV3Config config{.appid = keys.wechat_v3_appid.value_or(""),
                              .mchid = *keys.wechat_v3_mchid,
                              .platform_public_keys = keys.wechat_v3};
        answer = ReadWechatV3Answer(config, exchange);
    } else {
        if (!keys.alipay) return std::string("no alipay.alipay_public_key is configured");
        exchange.result.status = 200;
        AlipayConfig config{.alipay_public_key = *keys.alipay,
                            .seller_id = keys.alipay_seller_id.value_or("")};
        answer = ReadAlipayAnswer(config, exchange);
    }
    const bool records = answer.kind == AnswerKind::kFinal || answer.kind == AnswerKind::kClosed;
    if (!records || !answer.delivery || !answer.delivery->event) {
        const std::string why = answer.delivery && !answer.delivery->message.empty()
                                    ? answer.delivery->message
                                    : answer.answer;
        return "the signed answer records no event: " + std::string(ToString(answer.kind)) +
               (why.empty() ? "" : " (" + why + ")");
    }
    const projections::Event& recorded = answer.delivery->event.value();
    if (auto differs = EventDiffers(recorded, event, "answer")) return differs;
    const json recorded_data = json::parse(recorded.data, nullptr, /*allow_exceptions=*/false);
    if (recorded_data != StoredData(event)) {
        return Says("data", recorded_data.dump(), StoredData(event).dump(), "answer");
    }
    return std::nullopt;
}

// How many receipts of each kind the check read.
struct CheckedCounts {
    std::int64_t alipay = 0;
    std::int64_t wechat_v3 = 0;
    std::int64_t alipay_answers = 0;     // alipay_query and alipay_close
    std::int64_t wechat_v3_answers = 0;  // wechat_v3_query and wechat_v3_close
    std::int64_t shared = 0;             // Later events behind one signed notice.
};

// What `checked` says: per channel, how many receipts and which comparisons.
std::string CheckedLines(const PlatformKeys& keys, const CheckedCounts& counts) {
    const std::int64_t alipay = counts.alipay;
    const std::int64_t wechat_v3 = counts.wechat_v3;
    const std::int64_t shared = counts.shared;
    std::string lines =
        "platform signatures: alipay: " + std::to_string(alipay) +
        " receipts: the signature, and out_trade_no, event_type, amount, currency, "
        "transaction_id, occurred_at and notify_id of the signed notice against the event\n"
        "platform signatures: wechat_v3: " +
        std::to_string(wechat_v3) +
        " receipts: the signature, and event_type, id, create_time and summary of the signed "
        "envelope against the event";
    lines += keys.wechat_v3_api_v3_key
                 ? "; with wechat_v3.api_v3_key, out_trade_no, amount, currency, transaction_id "
                   "and occurred_at of the decrypted resource too\n"
                 : "; not its encrypted out_trade_no, amount and transaction_id (no "
                   "wechat_v3.api_v3_key)\n";
    lines +=
        "platform signatures: one signed notice (same body, notify_id or id) behind "
        "several events: " +
        (shared == 0 ? std::string("none") : std::to_string(shared) + " later events") + "\n";
    lines += "platform signatures: answers to queries and closes: alipay " +
             std::to_string(counts.alipay_answers) + ", wechat_v3 " +
             std::to_string(counts.wechat_v3_answers) +
             " receipts: the signature, and the answer read again as when it was asked (its "
             "order, merchant and state) against the event, its data included\n";
    return lines;
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
    // Not an aggregate initializer: g++ 12 destroys a default-initialized member twice when an
    // initializer after it throws (ConfigError, here).
    AuditSetup setup;
    setup.keys = LoadKeys(root, base_dir);
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
    const std::optional<Asked> asked = AskedOf(source);
    if (asked && asked->channel == QueryChannel::kAlipay) {
        return AlipayAnswerProblem(keys, asked->action, body);
    }
    if (source != projections::Source::kWechatV3 && !asked) {
        return "it came through " + std::string(projections::ToString(source)) +
               ", which the platform does not sign";
    }
    const json parsed = json::parse(headers, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_object()) return std::string("its headers are not a JSON object");
    return WechatV3Problem(keys, parsed, body);
}

std::optional<std::string> NoticeEventProblem(const PlatformKeys& keys, projections::Source source,
                                              projections::TimeMicros received_at,
                                              std::string_view body,
                                              const projections::Event& event) {
    if (source == projections::Source::kAlipay) {
        return AlipayNoticeProblem(received_at, body, event);
    }
    if (source != projections::Source::kWechatV3) {
        return "it came through " + std::string(projections::ToString(source)) +
               ", whose notices record nothing the platform signs";
    }
    return WechatV3NoticeProblem(keys, received_at, body, event);
}

ledger::AuditCheck PlatformSignaturesCheck(PlatformKeys keys, std::string* checked) {
    return [keys = std::move(keys), checked](pqxx::transaction_base& tx,
                                             const ledger::AuditBreakSink& add) {
        const auto add_break = [&add](std::int64_t seq, std::int64_t receipt_id,
                                      projections::Source source, const std::string& why) {
            add("event " + std::to_string(seq) + " not signed by the platform: receipt " +
                std::to_string(receipt_id) + " (" + std::string(projections::ToString(source)) +
                "): " + why);
        };
        CheckedCounts counts;
        ledger::ForEachPlatformReceipt(tx, [&](const ledger::PlatformReceipt& receipt) {
            const projections::Source event_source = receipt.event.source;
            std::optional<std::string> problem;
            if (!receipt.body) {
                problem = "its body is missing";
            } else if (event_source != receipt.source && SignsWithPublicKey(event_source)) {
                problem = "the event names " + std::string(projections::ToString(event_source)) +
                          ", its receipt came through " +
                          std::string(projections::ToString(receipt.source));
            } else {
                problem =
                    PlatformSignatureProblem(keys, receipt.source, receipt.headers, *receipt.body);
                // A valid signature over some genuine notice (or answer) proves nothing of this
                // event unless it records this very event.
                const std::optional<Asked> asked = AskedOf(receipt.source);
                if (!problem && asked) {
                    const json headers =
                        json::parse(receipt.headers, nullptr, /*allow_exceptions=*/false);
                    problem = AnswerEventProblem(keys, *asked, receipt.received_at,
                                                 headers.is_object() ? headers : json::object(),
                                                 *receipt.body, receipt.event);
                } else if (!problem) {
                    problem = NoticeEventProblem(keys, receipt.source, receipt.received_at,
                                                 *receipt.body, receipt.event);
                }
            }
            if (receipt.source == projections::Source::kAlipay) ++counts.alipay;
            if (receipt.source == projections::Source::kWechatV3) ++counts.wechat_v3;
            if (const std::optional<Asked> asked = AskedOf(receipt.source)) {
                ++(asked->channel == QueryChannel::kAlipay ? counts.alipay_answers
                                                           : counts.wechat_v3_answers);
            }
            if (problem) add_break(receipt.event.seq, receipt.receipt_id, receipt.source, *problem);
        });
        // One genuine notice behind two events: the notice ids grouped here are the events'
        // data, checked against the signed notices above (a difference is a break there).
        ledger::ForEachSharedNotice(tx, [&](const ledger::SharedNotice& notice) {
            ++counts.shared;
            add_break(notice.seq, notice.receipt_id, notice.source,
                      "the same signed notice backs event " + std::to_string(notice.first_seq));
        });
        if (checked != nullptr) *checked = CheckedLines(keys, counts);
    };
}

}  // namespace payledger::api
