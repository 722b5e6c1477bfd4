#pragma once

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "projections/event.hpp"

namespace payledger::api {

namespace http = boost::beast::http;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using Respond = std::function<void(Response)>;

// A body produced piece by piece, for exports without a page limit (constant memory).
class BodyProducer {
public:
    virtual ~BodyProducer() = default;
    // The next piece, or "" at the end. Runs on a worker thread and may block; a throw
    // ends the response early (the client sees the chunked body cut short).
    virtual std::string Next() = 0;
};

// Answers with a chunked response: `header`'s status and fields, then the producer's pieces.
using RespondStream = std::function<void(Response header, std::unique_ptr<BodyProducer>)>;

// Requests over 64 KiB are refused before their body is read (docs/security.md#http-framing).
inline constexpr std::size_t kRequestBodyBytesMax = 64 * 1024;

// A request as the server hands it to the application.
struct Incoming {
    Request request{};
    std::string peer{};          // "address:port" of the client.
    std::string peer_address{};  // The client's address alone: what per-peer limits count.
    projections::TimeMicros received_at = 0;
    std::chrono::steady_clock::time_point started{};
    RespondStream respond_stream{};  // For streamed answers instead of Respond.
};

// Builds a response with the given status, content type and body.
[[nodiscard]] Response MakeResponse(http::status status, std::string content_type,
                                    std::string body);

// The error body (docs/api.md#the-http-api): {"code":"FAIL","outcome":…,"message":…[,"seq":…]}.
[[nodiscard]] Response ErrorResponse(http::status status, projections::Outcome outcome,
                                     const std::string& message, std::int64_t seq = 0);

}  // namespace payledger::api
