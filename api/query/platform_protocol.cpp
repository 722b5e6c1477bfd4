#include "api/query/platform_protocol.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "api/channels/alipay_channel.hpp"
#include "api/channels/alipay_form.hpp"
#include "api/channels/json_input.hpp"
#include "api/channels/platform_crypto.hpp"
#include "api/channels/wechat_v2_channel.hpp"
#include "api/channels/wechat_v2_xml.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "api/crypto.hpp"
#include "api/http/json_output.hpp"
#include "api/subscriptions/webhook_url.hpp"
#include "ledger/base/bytes.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::EventType;

constexpr std::size_t kAnswerTextBytesMax = 64;
constexpr std::int64_t kMicrosPerRequestSecond = 1'000'000;

constexpr std::array<std::pair<QueryChannel, std::string_view>, 3> kChannelNames{{
    {QueryChannel::kWechatV2, "wechat_v2"},
    {QueryChannel::kWechatV3, "wechat_v3"},
    {QueryChannel::kAlipay, "alipay"},
}};

// The answer's words, bounded (they go to the schedule's row and the order object).
std::string AnswerText(std::string_view text) {
    std::string out(text.substr(0, kAnswerTextBytesMax));
    for (char& c : out) {
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7F) c = '?';
    }
    return out;
}

PlatformAnswer Failed(std::string answer) {
    return {.kind = AnswerKind::kFailed, .answer = AnswerText(answer)};
}

// Why no usable answer came: the transport's failure, or an HTTP status the platform gives when
// it cannot answer now (5xx, 429: ask again later, never a verdict).
std::optional<PlatformAnswer> TransportFailure(const WebhookResult& result) {
    switch (result.failure) {
        case WebhookFailure::kNone:
            break;
        case WebhookFailure::kTimeout:
            return Failed("timeout");
        case WebhookFailure::kBadUrl:
            return Failed("bad url");
        case WebhookFailure::kResolve:
            return Failed("resolve");
        case WebhookFailure::kConnect:
            return Failed("connect");
        case WebhookFailure::kTls:
            return Failed("tls");
        case WebhookFailure::kSend:
            return Failed("send");
        case WebhookFailure::kReceive:
            return Failed(result.status != 0 ? "answer too large" : "receive");
        case WebhookFailure::kCancelled:
            return Failed("cancelled");
    }
    if (result.status >= 500 || result.status == 429) {
        return Failed("http " + std::to_string(result.status));
    }
    return std::nullopt;
}

std::string_view AnswerHeader(const WebhookResult& result, std::string_view lower_name) {
    for (const auto& [name, value] : result.answer_headers) {
        if (name == lower_name) return value;
    }
    return {};
}

// The receipt of an answer (docs/query.md#mapping): the answer's body, the
// headers that verify it (each kept as BaseReceipt keeps a request's: whole in its platform form,
// else cut and marked), the request's method and target, and the platform as its peer.
ledger::Receipt AnswerReceipt(const AskedExchange& exchange,
                              std::initializer_list<KeptHeader> kept) {
    json headers = json::object();
    for (const KeptHeader& header : kept) {
        std::string lower(header.name);
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const std::string_view value = AnswerHeader(exchange.result, lower);
        if (value.empty()) continue;
        const bool whole = header.form != nullptr && header.form(value);
        headers[std::string(header.name)] =
            whole ? std::string(value) : CutForStorage(value, kStoredHeaderBytesMax);
    }
    headers["Payledger-Request"] = CutForStorage(
        exchange.request.method + " " + exchange.request.target, kStoredHeaderBytesMax);
    ledger::Receipt receipt{.source = SourceOf(exchange.channel, exchange.action),
                            .received_at = exchange.received_at,
                            .peer = exchange.peer,
                            .headers = Dump(headers),
                            .body = exchange.result.answer_body};
    ClaimOutTradeNo(receipt, exchange.out_trade_no);
    return receipt;
}

PlatformAnswer BadSignatureAnswer(ledger::Receipt receipt, Refusal refusal) {
    return {.kind = AnswerKind::kBadSignature,
            .answer = "bad_signature",
            .delivery = Rejected(std::move(receipt), std::move(refusal))};
}

// A verified answer about another order, or another merchant's: kept as a mismatch receipt.
PlatformAnswer RefusedAnswer(ledger::Receipt receipt, Refusal refusal) {
    return {.kind = AnswerKind::kRefused,
            .answer = "mismatch",
            .delivery = Rejected(std::move(receipt), std::move(refusal))};
}

std::optional<Refusal> CheckAskedOrder(std::string_view named, std::string_view asked) {
    if (named == asked) return std::nullopt;
    return Mismatch("the answer names out_trade_no " + std::string(named.substr(0, 64)) +
                    ", not the order asked about");
}

// A final answer's event through the ledger, its source the receipt's: its receipt names the
// order.
PlatformAnswer FinalAnswer(AnswerKind kind, std::string answer, ledger::Receipt receipt,
                           NoticeEvent notice) {
    notice.event.source = receipt.source;
    return {.kind = kind,
            .answer = AnswerText(answer),
            .delivery = Accepted(std::move(receipt), std::move(notice))};
}

// PAYMENT_CLOSED of `out_trade_no` (a close carries no amount: every close is the same close).
NoticeEvent CloseEvent(std::string_view out_trade_no, projections::TimeMicros at,
                       std::string data) {
    return NoticeEvent{.event = {.out_trade_no = std::string(out_trade_no),
                                 .event_type = EventType::kPaymentClosed,
                                 .occurred_at = at,
                                 .data = std::move(data)}};
}

std::string Text(const json& object, const char* key) {
    return StringMember(object, key).value_or(std::string{});
}

}  // namespace

std::string_view ToString(QueryChannel channel) {
    for (const auto& [value, name] : kChannelNames) {
        if (value == channel) return name;
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

std::optional<QueryChannel> ParseQueryChannel(std::string_view text) {
    for (const auto& [value, name] : kChannelNames) {
        if (name == text) return value;
    }
    return std::nullopt;
}

projections::Source SourceOf(QueryChannel channel, QueryAction action) {
    using projections::Source;
    const bool query = action == QueryAction::kQuery;
    switch (channel) {
        case QueryChannel::kWechatV2:
            return query ? Source::kWechatV2Query : Source::kWechatV2Close;
        case QueryChannel::kWechatV3:
            return query ? Source::kWechatV3Query : Source::kWechatV3Close;
        case QueryChannel::kAlipay:
            return query ? Source::kAlipayQuery : Source::kAlipayClose;
    }
    PAYLEDGER_ASSERT(false);
    return Source::kApi;
}

std::string_view ToString(AnswerKind kind) {
    switch (kind) {
        case AnswerKind::kFinal:
            return "final";
        case AnswerKind::kNotFinal:
            return "not_final";
        case AnswerKind::kClosed:
            return "closed";
        case AnswerKind::kClosePaid:
            return "close_paid";
        case AnswerKind::kBadSignature:
            return "bad_signature";
        case AnswerKind::kRefused:
            return "refused";
        case AnswerKind::kFailed:
            return "failed";
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

std::string PathEscape(std::string_view segment) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (const char c : segment) {
        const auto byte = static_cast<unsigned char>(c);
        const bool kept = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                          (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~' ||
                          c == '$' || c == '&' || c == '+' || c == ':' || c == '=' || c == '@';
        if (kept) {
            out += c;
        } else {
            out += '%';
            out += kHex[byte >> 4U];
            out += kHex[byte & 0x0FU];
        }
    }
    return out;
}

std::string WechatV3RequestMessage(std::string_view method, std::string_view target,
                                   std::int64_t timestamp, std::string_view nonce,
                                   std::string_view body) {
    std::string message;
    message.append(method).append("\n").append(target).append("\n");
    message.append(std::to_string(timestamp)).append("\n").append(nonce).append("\n");
    message.append(body).append("\n");
    return message;
}

std::string WechatV3Authorization(std::string_view mchid, std::string_view serial,
                                  const PrivateKey& key, std::string_view method,
                                  std::string_view target, std::string_view body,
                                  std::int64_t timestamp, std::string_view nonce) {
    const std::string signature = ledger::Base64Encode(
        RsaSha256Sign(key, WechatV3RequestMessage(method, target, timestamp, nonce, body)));
    return "WECHATPAY2-SHA256-RSA2048 mchid=\"" + std::string(mchid) + "\",nonce_str=\"" +
           std::string(nonce) + "\",timestamp=\"" + std::to_string(timestamp) + "\",serial_no=\"" +
           std::string(serial) + "\",signature=\"" + signature + "\"";
}

PlatformRequest WechatV3Request(const WechatV3Config& config, QueryAction action,
                                std::string_view out_trade_no, const RequestMoment& moment) {
    PAYLEDGER_ASSERT(config.query.has_value());
    const WechatV3QueryConfig& query = *config.query;
    PlatformRequest request;
    std::string path = "/v3/pay/transactions/out-trade-no/" + PathEscape(out_trade_no);
    if (action == QueryAction::kQuery) {
        request.method = "GET";
        path += "?mchid=" + PathEscape(config.mchid);
    } else {
        request.method = "POST";
        path += "/close";
        request.body = Dump(json{{"mchid", config.mchid}});
    }
    request.url = query.endpoint.api_base + path;
    // What the platform's server sees, and so what is signed: the base's own path too.
    const Checked<WebhookUrl> url = ParseWebhookUrl(request.url);
    PAYLEDGER_ASSERT(url.ok());  // The config checked api_base; the path is escaped.
    request.target = url->target;
    const std::int64_t timestamp = moment.now / kMicrosPerRequestSecond;
    request.headers = {{"Authorization",
                        WechatV3Authorization(
                            config.mchid, query.merchant_serial, query.merchant_private_key,
                            request.method, request.target, request.body, timestamp, moment.nonce)},
                       {"Accept", "application/json"}};
    if (action == QueryAction::kClose)
        request.headers.emplace_back("Content-Type", "application/json");
    return request;
}

PlatformRequest WechatV2Request(const WechatV2Config& config, QueryAction action,
                                std::string_view out_trade_no, const RequestMoment& moment) {
    PAYLEDGER_ASSERT(config.query.has_value());
    PlatformFields fields{{"appid", config.appid},
                          {"mch_id", config.mch_id},
                          {"out_trade_no", std::string(out_trade_no)},
                          {"nonce_str", moment.nonce}};
    if (config.sign_type != WechatV2SignType::kMd5) {
        fields["sign_type"] = std::string(ToString(config.sign_type));
    }
    fields["sign"] = WechatV2Sign(fields, config.api_key, config.sign_type);
    PlatformRequest request{
        .method = "POST",
        .url = config.query->api_base +
               (action == QueryAction::kQuery ? "/pay/orderquery" : "/pay/closeorder"),
        .headers = {{"Content-Type", "text/xml; charset=utf-8"}},
        .body = WechatV2Xml(fields, "xml")};
    const Checked<WebhookUrl> url = ParseWebhookUrl(request.url);
    PAYLEDGER_ASSERT(url.ok());
    request.target = url->target;
    return request;
}

std::string AlipayRequestSignContent(const PlatformFields& fields) {
    std::string content;
    for (const auto& [name, value] : fields) {  // A std::map: sorted by name.
        if (name == "sign" || value.empty()) continue;
        if (!content.empty()) content += '&';
        content.append(name).append("=").append(value);
    }
    return content;
}

PlatformRequest AlipayRequest(const AlipayConfig& config, QueryAction action,
                              std::string_view out_trade_no, const RequestMoment& moment) {
    PAYLEDGER_ASSERT(config.query.has_value());
    PlatformFields fields{
        {"app_id", config.app_id},
        {"method", action == QueryAction::kQuery ? "alipay.trade.query" : "alipay.trade.close"},
        {"format", "JSON"},
        {"charset", "utf-8"},
        {"sign_type", "RSA2"},
        {"timestamp", projections::FormatShanghaiDashed(moment.now)},
        {"version", "1.0"},
        {"biz_content", Dump(json{{"out_trade_no", std::string(out_trade_no)}})}};
    fields["sign"] = ledger::Base64Encode(
        RsaSha256Sign(config.query->app_private_key, AlipayRequestSignContent(fields)));
    PlatformRequest request{
        .method = "POST",
        .url = config.query->endpoint.api_base,
        .headers = {{"Content-Type", "application/x-www-form-urlencoded;charset=utf-8"}},
        .body = EncodeForm(fields)};
    const Checked<WebhookUrl> url = ParseWebhookUrl(request.url);
    PAYLEDGER_ASSERT(url.ok());
    request.target = url->target;
    return request;
}

namespace {

// A verified WeChat Pay answer's trade_state, v2 and v3 alike: SUCCESS, or REFUND (paid, then a
// refund began), is the payment `read_payment` reads from the answer; CLOSED or REVOKED is the
// close; NOTPAY, USERPAYING, ACCEPT, PAYERROR, and any state WeChat may add are not final.
template <typename ReadPayment>
PlatformAnswer WechatTradeStateAnswer(const std::string& state, ledger::Receipt receipt,
                                      const AskedExchange& exchange, ReadPayment read_payment) {
    if (state == "SUCCESS" || state == "REFUND") {
        Checked<NoticeEvent> payment = read_payment();
        if (!payment) return Failed("malformed answer: " + payment.refusal().message);
        return FinalAnswer(AnswerKind::kFinal, state, std::move(receipt), std::move(*payment));
    }
    if (state == "CLOSED" || state == "REVOKED") {
        return FinalAnswer(AnswerKind::kFinal, state, std::move(receipt),
                           CloseEvent(exchange.out_trade_no, exchange.received_at,
                                      Dump(json{{"trade_state", state}})));
    }
    return {.kind = AnswerKind::kNotFinal, .answer = AnswerText(state.empty() ? "?" : state)};
}

}  // namespace

// ---- WeChat Pay v3 answers ----------------------------------------------------------------

PlatformAnswer ReadWechatV3Answer(const WechatV3Config& config, const AskedExchange& exchange) {
    if (std::optional<PlatformAnswer> failed = TransportFailure(exchange.result)) return *failed;
    const WebhookResult& result = exchange.result;
    ledger::Receipt receipt = AnswerReceipt(exchange, {{"Wechatpay-Timestamp", IsUnixSecondsForm},
                                                       {"Wechatpay-Nonce", IsNonceForm},
                                                       {"Wechatpay-Signature", IsSignatureForm},
                                                       {"Wechatpay-Serial", IsSerialForm},
                                                       {"Request-ID"}});
    // Verified before anything of it is read (WeChat sends signature probes on answers too).
    const std::string_view timestamp = AnswerHeader(result, "wechatpay-timestamp");
    const std::string_view nonce = AnswerHeader(result, "wechatpay-nonce");
    const std::string_view serial = AnswerHeader(result, "wechatpay-serial");
    const std::string_view signature = AnswerHeader(result, "wechatpay-signature");
    if (timestamp.empty() || nonce.empty() || serial.empty() || signature.empty()) {
        return BadSignatureAnswer(
            std::move(receipt),
            BadSignature("Wechatpay-Timestamp, -Nonce, -Serial and -Signature are required"));
    }
    if (!IsUnixSecondsForm(timestamp) || !IsNonceForm(nonce) || !IsSerialForm(serial) ||
        !IsSignatureForm(signature)) {
        return BadSignatureAnswer(std::move(receipt),
                                  BadSignature("a Wechatpay header is not a value WeChat sends"));
    }
    const Checked<std::int64_t> signed_at =
        RequireSignedAt(timestamp, exchange.received_at, "Wechatpay-Timestamp");
    if (!signed_at) return BadSignatureAnswer(std::move(receipt), signed_at.refusal());
    const auto key = config.platform_public_keys.find(std::string(serial));
    if (key == config.platform_public_keys.end()) {
        return BadSignatureAnswer(
            std::move(receipt),
            BadSignature("Wechatpay-Serial " + std::string(serial) + " names no platform key"));
    }
    const std::optional<std::string> raw = ledger::Base64Decode(signature);
    if (!raw ||
        !RsaSha256Verify(key->second,
                         WechatV3SignatureMessage(timestamp, nonce, result.answer_body), *raw)) {
        return BadSignatureAnswer(
            std::move(receipt),
            BadSignature("Wechatpay-Signature does not verify with the platform key " +
                         std::string(serial)));
    }
    receipt.signature_verified = true;
    const std::optional<json> body = result.answer_body.empty()
                                         ? std::optional(json::object())
                                         : ParseJsonObject(result.answer_body);
    if (!body) return Failed("malformed answer");
    const std::string code = Text(*body, "code");
    if (exchange.action == QueryAction::kClose) {
        if (result.status == 204) {
            return FinalAnswer(AnswerKind::kClosed, "closed", std::move(receipt),
                               CloseEvent(exchange.out_trade_no, exchange.received_at, "{}"));
        }
        if (code == "ORDER_PAID" || code == "ORDERPAID") {
            return {.kind = AnswerKind::kClosePaid, .answer = AnswerText(code)};
        }
        return Failed("http " + std::to_string(result.status) + (code.empty() ? "" : " " + code));
    }
    if (result.status == 404 && code == "ORDER_NOT_EXIST") {
        return {.kind = AnswerKind::kNotFinal, .answer = "ORDER_NOT_EXIST"};
    }
    if (result.status != 200) {
        return Failed("http " + std::to_string(result.status) + (code.empty() ? "" : " " + code));
    }
    if (auto refused = CheckAskedOrder(Text(*body, "out_trade_no"), exchange.out_trade_no)) {
        return RefusedAnswer(std::move(receipt), *refused);
    }
    if (auto refused = CheckConfiguredId(Text(*body, "mchid"), "mchid", config.mchid)) {
        return RefusedAnswer(std::move(receipt), *refused);
    }
    if (body->contains("appid")) {
        if (auto refused = CheckConfiguredId(Text(*body, "appid"), "appid", config.appid)) {
            return RefusedAnswer(std::move(receipt), *refused);
        }
    }
    return WechatTradeStateAnswer(Text(*body, "trade_state"), std::move(receipt), exchange, [&] {
        return WechatV3TransactionPayment(*body, json::object(), exchange.received_at);
    });
}

// ---- WeChat Pay v2 answers ----------------------------------------------------------------

PlatformAnswer ReadWechatV2Answer(const WechatV2Config& config, const AskedExchange& exchange) {
    if (std::optional<PlatformAnswer> failed = TransportFailure(exchange.result)) return *failed;
    if (exchange.result.status != 200) {
        return Failed("http " + std::to_string(exchange.result.status));
    }
    const Checked<PlatformFields> xml = ParseFlatXml(exchange.result.answer_body, "xml");
    if (!xml) return Failed("malformed answer");
    const PlatformFields& fields = *xml;
    // return_code is the call's: FAIL means the request did not get through (no sign needed).
    if (FieldOr(fields, "return_code") != "SUCCESS") {
        return Failed("return_code " + std::string(FieldOr(fields, "return_code")) + ": " +
                      std::string(FieldOr(fields, "return_msg")));
    }
    ledger::Receipt receipt = AnswerReceipt(exchange, {});
    const std::string_view result_code = FieldOr(fields, "result_code");
    const std::string_view err_code = FieldOr(fields, "err_code");
    const std::string_view sign = FieldOr(fields, "sign");
    // A failure answer may come without sign; one that reports a state, or a success, must
    // have it: an unsigned "SUCCESS" never counts (docs/query.md#verification).
    const bool must_be_signed =
        result_code == "SUCCESS" || fields.contains("trade_state") || err_code == "ORDERCLOSED";
    if (!sign.empty() || must_be_signed) {
        if (sign.empty())
            return BadSignatureAnswer(std::move(receipt), BadSignature("sign is missing"));
        const std::string_view sign_type = FieldOr(fields, "sign_type");
        if (!sign_type.empty() && sign_type != ToString(config.sign_type)) {
            return BadSignatureAnswer(std::move(receipt),
                                      BadSignature("sign_type is not the configured one"));
        }
        if (!ConstantTimeEquals(WechatV2Sign(fields, config.api_key, config.sign_type), sign)) {
            return BadSignatureAnswer(
                std::move(receipt), BadSignature("sign does not match the fields and the API key"));
        }
        receipt.signature_verified = true;
    }
    if (exchange.action == QueryAction::kClose) {
        if (err_code == "ORDERPAID") return {.kind = AnswerKind::kClosePaid, .answer = "ORDERPAID"};
        if (result_code == "SUCCESS" || err_code == "ORDERCLOSED") {
            if (auto refused =
                    CheckConfiguredId(FieldOr(fields, "mch_id"), "mch_id", config.mch_id)) {
                return RefusedAnswer(std::move(receipt), *refused);
            }
            return FinalAnswer(
                AnswerKind::kClosed, result_code == "SUCCESS" ? "closed" : "ORDERCLOSED",
                std::move(receipt), CloseEvent(exchange.out_trade_no, exchange.received_at, "{}"));
        }
        return Failed("err_code " + std::string(err_code));
    }
    if (result_code != "SUCCESS") {
        if (err_code == "ORDERNOTEXIST")
            return {.kind = AnswerKind::kNotFinal, .answer = "ORDERNOTEXIST"};
        return Failed("err_code " + std::string(err_code));
    }
    if (auto refused = CheckAskedOrder(FieldOr(fields, "out_trade_no"), exchange.out_trade_no)) {
        return RefusedAnswer(std::move(receipt), *refused);
    }
    if (auto refused = CheckConfiguredId(FieldOr(fields, "appid"), "appid", config.appid)) {
        return RefusedAnswer(std::move(receipt), *refused);
    }
    if (auto refused = CheckConfiguredId(FieldOr(fields, "mch_id"), "mch_id", config.mch_id)) {
        return RefusedAnswer(std::move(receipt), *refused);
    }
    return WechatTradeStateAnswer(
        std::string(FieldOr(fields, "trade_state")), std::move(receipt), exchange,
        [&] { return WechatV2PaymentEvent(fields, exchange.received_at); });
}

// ---- Alipay answers -----------------------------------------------------------------------

namespace {

// Skips JSON whitespace from `at`.
std::size_t SkipSpace(std::string_view text, std::size_t at) {
    while (at < text.size() &&
           (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r')) {
        ++at;
    }
    return at;
}

// The end (one past) of the JSON string starting at `at` (a quote), or npos.
std::size_t StringEnd(std::string_view text, std::size_t at) {
    for (std::size_t i = at + 1; i < text.size(); ++i) {
        if (text[i] == '\\') {
            ++i;
        } else if (text[i] == '"') {
            return i + 1;
        }
    }
    return std::string_view::npos;
}

// The end (one past) of the JSON value starting at `at`, or npos: strings, objects and arrays
// by their brackets (strings inside skipped whole), anything else up to a delimiter.
std::size_t ValueEnd(std::string_view text, std::size_t at) {
    if (at >= text.size()) return std::string_view::npos;
    if (text[at] == '"') return StringEnd(text, at);
    if (text[at] != '{' && text[at] != '[') {
        while (at < text.size() && text[at] != ',' && text[at] != '}' && text[at] != ']' &&
               text[at] != ' ' && text[at] != '\n' && text[at] != '\r' && text[at] != '\t') {
            ++at;
        }
        return at;
    }
    int depth = 0;
    for (std::size_t i = at; i < text.size(); ++i) {
        if (text[i] == '"') {
            i = StringEnd(text, i);
            if (i == std::string_view::npos) return i;
            --i;
        } else if (text[i] == '{' || text[i] == '[') {
            ++depth;
        } else if (text[i] == '}' || text[i] == ']') {
            if (--depth == 0) return i + 1;
        }
    }
    return std::string_view::npos;
}

}  // namespace

std::optional<std::string_view> RawJsonMember(std::string_view body, std::string_view name) {
    // Only a body nlohmann reads as an object with unique keys: the scan below then walks valid
    // JSON, and the member it finds is the one the parsed object holds.
    if (!ParseJsonObject(body)) return std::nullopt;
    std::size_t at = SkipSpace(body, 0);
    if (at >= body.size() || body[at] != '{') return std::nullopt;
    at = SkipSpace(body, at + 1);
    while (at < body.size() && body[at] == '"') {
        const std::size_t key_end = StringEnd(body, at);
        if (key_end == std::string_view::npos) return std::nullopt;
        const nlohmann::json key =
            nlohmann::json::parse(body.substr(at, key_end - at), nullptr, false);
        at = SkipSpace(body, key_end);
        if (at >= body.size() || body[at] != ':') return std::nullopt;
        at = SkipSpace(body, at + 1);
        const std::size_t value_end = ValueEnd(body, at);
        if (value_end == std::string_view::npos) return std::nullopt;
        if (key.is_string() && key.get<std::string>() == name) {
            return body.substr(at, value_end - at);
        }
        at = SkipSpace(body, value_end);
        if (at < body.size() && body[at] == ',') at = SkipSpace(body, at + 1);
    }
    return std::nullopt;
}

PlatformAnswer ReadAlipayAnswer(const AlipayConfig& config, const AskedExchange& exchange) {
    if (std::optional<PlatformAnswer> failed = TransportFailure(exchange.result)) return *failed;
    if (exchange.result.status != 200) {
        return Failed("http " + std::to_string(exchange.result.status));
    }
    const std::string& body = exchange.result.answer_body;
    const std::optional<json> parsed = ParseJsonObject(body);
    if (!parsed) return Failed("malformed answer");
    const std::string member = exchange.action == QueryAction::kQuery
                                   ? "alipay_trade_query_response"
                                   : "alipay_trade_close_response";
    const std::optional<std::string_view> signed_text = RawJsonMember(body, member);
    if (!signed_text || !parsed->at(member).is_object()) {
        // A gateway error (error_response): the request did not get through.
        const auto error = parsed->find("error_response");
        return Failed(error != parsed->end() && error->is_object()
                          ? "error_response " + Text(*error, "code") + " " +
                                Text(*error, "sub_code")
                          : "no " + member);
    }
    ledger::Receipt receipt = AnswerReceipt(exchange, {});
    // Verified over the exact text of the response member, as received (never re-serialized).
    const std::optional<std::string> sign = StringMember(*parsed, "sign");
    if (!sign || sign->empty()) {
        return BadSignatureAnswer(std::move(receipt), BadSignature("sign is missing"));
    }
    const std::optional<std::string> raw = ledger::Base64Decode(*sign);
    if (!raw || !RsaSha256Verify(config.alipay_public_key, *signed_text, *raw)) {
        return BadSignatureAnswer(std::move(receipt),
                                  BadSignature("sign does not verify with the Alipay public key"));
    }
    receipt.signature_verified = true;
    const json& response = parsed->at(member);
    const std::string code = Text(response, "code");
    const std::string sub_code = Text(response, "sub_code");
    if (exchange.action == QueryAction::kClose) {
        if (code == "10000" || sub_code == "ACQ.TRADE_NOT_EXIST") {  // Never created: closed.
            return FinalAnswer(AnswerKind::kClosed, code == "10000" ? "closed" : sub_code,
                               std::move(receipt),
                               CloseEvent(exchange.out_trade_no, exchange.received_at, "{}"));
        }
        if (sub_code == "ACQ.TRADE_STATUS_ERROR") {
            return {.kind = AnswerKind::kClosePaid, .answer = AnswerText(sub_code)};
        }
        return Failed("code " + code + " " + sub_code);
    }
    if (code != "10000") {
        if (sub_code == "ACQ.TRADE_NOT_EXIST") {
            return {.kind = AnswerKind::kNotFinal, .answer = "ACQ.TRADE_NOT_EXIST"};
        }
        return Failed("code " + code + " " + sub_code);
    }
    if (auto refused = CheckAskedOrder(Text(response, "out_trade_no"), exchange.out_trade_no)) {
        return RefusedAnswer(std::move(receipt), *refused);
    }
    if (!config.seller_id.empty() && response.contains("seller_id")) {
        if (auto refused =
                CheckConfiguredId(Text(response, "seller_id"), "seller_id", config.seller_id)) {
            return RefusedAnswer(std::move(receipt), *refused);
        }
    }
    const std::string state = Text(response, "trade_status");
    const std::string paid_at = Text(response, "send_pay_date");
    // TRADE_CLOSED is unpaid and timed out, or paid and then refunded in full: send_pay_date
    // tells them apart.
    if (state == "TRADE_SUCCESS" || state == "TRADE_FINISHED" ||
        (state == "TRADE_CLOSED" && !paid_at.empty())) {
        const std::optional<std::int64_t> amount =
            projections::ParseMajorUnits(Text(response, "total_amount"));
        if (!amount) return Failed("malformed answer: total_amount");
        const Checked<std::string> trade_no =
            RequirePlatformId(Text(response, "trade_no"), "trade_no");
        if (!trade_no) return Failed("malformed answer: " + trade_no.refusal().message);
        const std::optional<projections::TimeMicros> occurred_at =
            PlatformTime(paid_at, exchange.received_at, ParseAlipayTime);
        if (!occurred_at) return Failed("malformed answer: send_pay_date");
        json data = json::object();
        for (const char* key : {"trade_status", "buyer_logon_id", "buyer_user_id", "receipt_amount",
                                "buyer_pay_amount", "send_pay_date"}) {
            if (const auto it = response.find(key); it != response.end() && it->is_string()) {
                data[key] = *it;
            }
        }
        NoticeEvent payment{.event = {.out_trade_no = exchange.out_trade_no,
                                      .event_type = EventType::kPaymentSucceeded,
                                      .amount = *amount,
                                      .currency = "CNY",
                                      .transaction_id = *trade_no,
                                      .occurred_at = *occurred_at,
                                      .data = Dump(data)}};
        return FinalAnswer(AnswerKind::kFinal, state, std::move(receipt), std::move(payment));
    }
    if (state == "TRADE_CLOSED") {
        return FinalAnswer(AnswerKind::kFinal, state, std::move(receipt),
                           CloseEvent(exchange.out_trade_no, exchange.received_at,
                                      Dump(json{{"trade_status", state}})));
    }
    // WAIT_BUYER_PAY, and any state Alipay may add: not final.
    return {.kind = AnswerKind::kNotFinal, .answer = AnswerText(state.empty() ? "?" : state)};
}

}  // namespace payledger::api
