#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/channels/channel.hpp"
#include "api/channels/platform_channel.hpp"
#include "api/config.hpp"
#include "api/subscriptions/webhook_client.hpp"
#include "ledger/write/writer.hpp"
#include "projections/event.hpp"

namespace payledger::api {

// Asking the platforms about an order (docs/query.md): each platform's order query and close
// request, signed its own way, and its answer, verified before it is parsed and mapped to what
// the ledger records: the same events, through the same write path and checks, as the
// platform's notification would have made. Pure: no network, no database; the clock and the
// nonces are arguments. Thread-safe.

// Which platform, and asked what.
enum class QueryChannel { kWechatV2, kWechatV3, kAlipay };
enum class QueryAction { kQuery, kClose };

[[nodiscard]] std::string_view ToString(QueryChannel channel);  // wechat_v2, wechat_v3, alipay
[[nodiscard]] std::optional<QueryChannel> ParseQueryChannel(std::string_view text);
// The receipts' source of an answer: <channel>_query or <channel>_close.
[[nodiscard]] projections::Source SourceOf(QueryChannel channel, QueryAction action);

// One request to a platform, ready for WebhookClient::Send.
struct PlatformRequest {
    std::string method{};  // GET or POST
    std::string url{};     // api_base and target
    std::string target{};  // The path and query as sent (and, for WeChat Pay v3, signed).
    WebhookHeaders headers{};
    std::string body{};
};

// What varies between two requests: the time they are made and their nonce.
struct RequestMoment {
    projections::TimeMicros now = 0;
    std::string nonce{};  // 32 characters of A-Z0-9 (WeChat's nonce_str alphabet).
};

// WeChat Pay v3: GET /v3/pay/transactions/out-trade-no/{n}?mchid= (query) or POST .../close
// with {"mchid"} (close), `Authorization: WECHATPAY2-SHA256-RSA2048 mchid=…,nonce_str=…,
// timestamp=…,serial_no=…,signature=…` over "METHOD\nTARGET\nTIMESTAMP\nNONCE\nBODY\n" with the
// merchant API private key. The order number is path-escaped as the SDKs do (Go's PathEscape).
// REQUIRES: config.query.
[[nodiscard]] PlatformRequest WechatV3Request(const WechatV3Config& config, QueryAction action,
                                              std::string_view out_trade_no,
                                              const RequestMoment& moment);
// The Authorization header's value for one request (the signing step of WechatV3Request).
[[nodiscard]] std::string WechatV3Authorization(std::string_view mchid, std::string_view serial,
                                                const PrivateKey& key, std::string_view method,
                                                std::string_view target, std::string_view body,
                                                std::int64_t timestamp, std::string_view nonce);
// "METHOD\nTARGET\nTIMESTAMP\nNONCE\nBODY\n": what a v3 request's signature covers.
[[nodiscard]] std::string WechatV3RequestMessage(std::string_view method, std::string_view target,
                                                 std::int64_t timestamp, std::string_view nonce,
                                                 std::string_view body);
// A path segment escaped as Go's url.PathEscape does (A-Z a-z 0-9 - _ . ~ and $&+:=@ kept).
[[nodiscard]] std::string PathEscape(std::string_view segment);

// WeChat Pay v2: POST /pay/orderquery or /pay/closeorder, XML of appid, mch_id,
// out_trade_no, nonce_str (and sign_type for HMAC-SHA256), signed as notifications are with
// api_key. REQUIRES: config.query.
[[nodiscard]] PlatformRequest WechatV2Request(const WechatV2Config& config, QueryAction action,
                                              std::string_view out_trade_no,
                                              const RequestMoment& moment);

// Alipay: POST to the gateway, a form of app_id, method alipay.trade.query or alipay.trade.close,
// format JSON, charset utf-8, sign_type RSA2, timestamp (Asia/Shanghai), version 1.0,
// biz_content {"out_trade_no"}, sign: RSA2 over every field but sign, sorted, k=v joined by &.
// REQUIRES: config.query.
[[nodiscard]] PlatformRequest AlipayRequest(const AlipayConfig& config, QueryAction action,
                                            std::string_view out_trade_no,
                                            const RequestMoment& moment);
// What an Alipay OpenAPI request's signature covers: every field but `sign`, sorted, `k=v&…`.
[[nodiscard]] std::string AlipayRequestSignContent(const PlatformFields& fields);

// What an answer says, for the schedule (docs/query.md#mapping).
enum class AnswerKind {
    kFinal,         // A state the ledger records (paid, closed); `delivery` is its receipt.
    kNotFinal,      // Not paid yet, or not known yet: ask again on schedule.
    kClosed,        // A close the platform confirmed; `delivery` appends PAYMENT_CLOSED.
    kClosePaid,     // A close refused because the order was paid meanwhile: query at once.
    kBadSignature,  // The answer did not verify: `delivery` is its bad_signature receipt.
    kRefused,       // Verified, but not this order's or this merchant's: a mismatch receipt.
    kFailed,        // No usable answer: a timeout, a refused connection, a 5xx, an error.
};
[[nodiscard]] std::string_view ToString(AnswerKind kind);

// An answer as the schedule and the ledger take it.
struct PlatformAnswer {
    AnswerKind kind = AnswerKind::kFailed;
    // The platform's state in its own words (NOTPAY, WAIT_BUYER_PAY, ORDER_NOT_EXIST, SUCCESS…),
    // or the failure (timeout, bad_signature, http 503…), at most 64 characters.
    std::string answer{};
    // For kFinal, kClosed, kBadSignature and kRefused: the receipt for the ledger (and, final, the
    // event): source <channel>_query or <channel>_close, the answer's body, its verifying headers
    // and the request's method and target (`Payledger-Request`), the platform as peer.
    std::optional<ledger::Delivery> delivery{};
};

// The exchange as WebhookClient::Send(…, keep_answer = true) returned it.
struct AskedExchange {
    QueryChannel channel = QueryChannel::kWechatV3;
    QueryAction action = QueryAction::kQuery;
    std::string out_trade_no{};
    PlatformRequest request{};
    WebhookResult result{};
    projections::TimeMicros received_at = 0;
    std::string peer{};  // host:port of the platform's api_base
};

// Verifies and maps one answer. `config` holds the channel's section (the platform keys, the
// merchant ids). Never throws for what a platform sends.
[[nodiscard]] PlatformAnswer ReadWechatV3Answer(const WechatV3Config& config,
                                                const AskedExchange& exchange);
[[nodiscard]] PlatformAnswer ReadWechatV2Answer(const WechatV2Config& config,
                                                const AskedExchange& exchange);
[[nodiscard]] PlatformAnswer ReadAlipayAnswer(const AlipayConfig& config,
                                              const AskedExchange& exchange);

// The exact text of the top-level member `name` of the JSON object `body` (its value from the
// first to the last byte, as received), or nullopt when `body` is not an object that has it: what
// Alipay signs of an OpenAPI answer (docs/query.md#verification).
[[nodiscard]] std::optional<std::string_view> RawJsonMember(std::string_view body,
                                                            std::string_view name);

}  // namespace payledger::api
