#pragma once

// Shared by the fuzz targets (tests/fuzz/README.md): the input layout "<header lines>\n\n
// <body>", requests parsed by Beast with the server's limits (so a header holds only what
// the wire can carry), a fixed clock, and the checks every delivery must pass: what
// Verify() hands the writer has to be storable (the columns of schema/0001_ledger.sql, libpq text)
// and consistent.

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/channels/channel.hpp"
#include "api/channels/platform_channel.hpp"
#include "api/http/http.hpp"
#include "ledger/pg/storable_text.hpp"
#include "projections/validate.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace payledger::fuzz {

// The server's clock for every delivery, 2024-05-01T02:30:15Z: the Wechatpay-Timestamp of the v3
// seeds, so that seeds can carry a fresh timestamp.
inline constexpr std::int64_t kNowSeconds = 1714530615;
inline constexpr projections::TimeMicros kNowMicros = kNowSeconds * 1'000'000;
inline constexpr std::uint32_t kHeaderBytesMax = 16 * 1024;  // As api/http/server.cpp.

// Seeds write this for a signature that the harness computes (body and headers as parsed).
inline constexpr std::string_view kSignPlaceholder = "SIGN";

// "<line>\n<line>\n\n<body>": the header lines and the body. Without a blank line the whole
// input is the body.
struct Split {
    std::vector<std::string> lines{};
    std::string_view body{};
};

inline Split SplitInput(std::string_view input) {
    const std::size_t blank = input.find("\n\n");
    if (blank == std::string_view::npos) return {.body = input};
    Split split{.body = input.substr(blank + 2)};
    std::string_view head = input.substr(0, blank);
    while (!head.empty()) {
        const std::size_t end = head.find('\n');
        split.lines.emplace_back(head.substr(0, end));
        head = end == std::string_view::npos ? std::string_view{} : head.substr(end + 1);
    }
    return split;
}

// The request the server would hand to the application, or nullopt where Beast refuses it
// (then the server answers 400 and no channel sees it). Content-Length is added.
inline std::optional<api::Incoming> ParseIncoming(std::string_view target,
                                                  const std::vector<std::string>& lines,
                                                  std::string_view body) {
    std::string raw = "POST " + std::string(target) + " HTTP/1.1\r\nHost: payledger\r\n";
    for (const std::string& line : lines) raw += line + "\r\n";
    raw += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    raw.append(body);
    api::http::request_parser<api::http::string_body> parser;
    parser.header_limit(kHeaderBytesMax);
    parser.body_limit(api::kRequestBodyBytesMax);
    parser.eager(true);
    boost::beast::error_code error;
    parser.put(boost::asio::buffer(raw.data(), raw.size()), error);
    if (error || !parser.is_done()) return std::nullopt;
    return api::Incoming{
        .request = parser.release(), .peer = "127.0.0.1:40000", .received_at = kNowMicros};
}

// A request with `body` and no headers but Content-Type (the form and XML channels read
// only the body).
inline api::Incoming BodyOnly(std::string_view body, const char* content_type) {
    api::Incoming incoming{.peer = "127.0.0.1:40000", .received_at = kNowMicros};
    incoming.request = api::Request{api::http::verb::post, "/", 11};
    incoming.request.set(api::http::field::content_type, content_type);
    incoming.request.body() = std::string(body);
    incoming.request.prepare_payload();
    return incoming;
}

// PostgreSQL text cannot hold a NUL byte, and jsonb refuses "\u0000". The writer stores every
// text through ledger/pg/storable_text.hpp (StorableText, JsonWithoutNul), so what must hold is
// that the text is storable after them. Invalid UTF-8 is fine: StorableText replaces it.
inline bool Storable(std::string_view text) {
    return ledger::WithoutNul(std::string(text)).find('\0') == std::string::npos;
}

// Every key and string of a JSON text is Storable; the text is a JSON object.
inline bool StorableJsonObject(const std::string& raw) {
    const nlohmann::json value = nlohmann::json::parse(ledger::JsonWithoutNul(raw), nullptr, false);
    if (value.is_discarded() || !value.is_object()) return false;
    std::vector<const nlohmann::json*> pending{&value};
    while (!pending.empty()) {
        const nlohmann::json* node = pending.back();
        pending.pop_back();
        if (node->is_string() && !Storable(node->get_ref<const std::string&>())) return false;
        if (node->is_object()) {
            for (const auto& [key, member] : node->items()) {
                if (!Storable(key)) return false;
                pending.push_back(&member);
            }
        } else if (node->is_array()) {
            for (const nlohmann::json& element : *node) pending.push_back(&element);
        }
    }
    return true;
}

// Every stored byte is bounded (docs/security.md#what-a-receipt-stores): each header value the
// receipt keeps is at most an evidence form's 2048 bytes, or cut to kStoredHeaderBytesMax with its
// marker; the message at most kStoredMessageBytesMax with its marker.
inline bool BoundedHeaders(const std::string& raw) {
    const nlohmann::json value = nlohmann::json::parse(raw, nullptr, false);
    if (value.is_discarded() || !value.is_object()) return false;
    constexpr std::size_t kMarkerBytesMax = 40;  // " …[cut from <n> bytes]"
    for (const auto& [name, member] : value.items()) {
        if (!member.is_string()) return false;
        // Dump replaced invalid UTF-8 by U+FFFD (three bytes for each byte at most).
        if (member.get_ref<const std::string&>().size() >
            3 * std::max<std::size_t>(2048, api::kStoredHeaderBytesMax + kMarkerBytesMax)) {
            return false;
        }
    }
    return true;
}

// The contract of Channel::Verify (api/channels/channel.hpp) and what the ledger's columns accept.
inline void CheckDelivery(const ledger::Delivery& delivery, projections::Source source,
                          std::string_view body) {
    using projections::EventType;
    const ledger::Receipt& receipt = delivery.receipt;
    FUZZ_CHECK(receipt.source == source);
    FUZZ_CHECK(receipt.received_at == kNowMicros);
    FUZZ_CHECK(receipt.body == body);
    FUZZ_CHECK(StorableJsonObject(receipt.headers));
    FUZZ_CHECK(BoundedHeaders(receipt.headers));
    FUZZ_CHECK(delivery.message.size() <= api::kStoredMessageBytesMax + 40);
    FUZZ_CHECK(!receipt.out_trade_no || projections::IsValidKey(*receipt.out_trade_no));
    FUZZ_CHECK(Storable(delivery.message));
    FUZZ_CHECK((delivery.outcome == projections::Outcome::kAppended) == delivery.event.has_value());
    if (!delivery.event) {
        FUZZ_CHECK(!delivery.message.empty());
        return;
    }
    const projections::Event& event = *delivery.event;
    FUZZ_CHECK(event.source == source);
    FUZZ_CHECK(event.event_type != EventType::kOrderCreated);
    FUZZ_CHECK(projections::IsValidKey(event.out_trade_no));
    FUZZ_CHECK(receipt.out_trade_no == event.out_trade_no);
    FUZZ_CHECK(StorableJsonObject(event.data));
    if (event.event_type == EventType::kPaymentClosed) {
        FUZZ_CHECK(event.amount == 0);
        return;
    }
    FUZZ_CHECK(projections::IsValidAmount(event.amount));
    FUZZ_CHECK(event.transaction_id && projections::IsValidPlatformId(*event.transaction_id));
    // A refund may leave the currency to its order; a payment always names one.
    FUZZ_CHECK(projections::IsValidCurrency(event.currency) ||
               (event.currency.empty() && event.event_type == EventType::kRefundSucceeded));
}

// Every answer the channel can give for this delivery builds without throwing.
inline void CheckAnswers(const api::Channel& channel, const ledger::Delivery& delivery) {
    using projections::Outcome;
    ledger::DeliveryResult result{.outcome = delivery.outcome, .message = delivery.message};
    (void)channel.Answer(result);
    if (delivery.event) {
        for (const Outcome outcome : {Outcome::kDuplicate, Outcome::kUnknownOrder,
                                      Outcome::kConflict, Outcome::kUnavailable}) {
            result.outcome = outcome;
            (void)channel.Answer(result);
        }
    }
    result.failure = ledger::FailureKind::kInvariantBroken;
    (void)channel.Answer(result);
}

}  // namespace payledger::fuzz
