#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace payledger::api {

// Webhook POSTs: WebhookClient keeps one connection to its receiver open between them (HTTP/1.1
// keep-alive), PostWebhook makes one on a connection of its own; nothing else is kept between
// calls but the TLS context of the system's CAs.

// At most this much of a response body is read; the rest is left unread (not an error).
inline constexpr std::size_t kWebhookResponseBodyBytesMax = 64 * 1024;
// A response head larger than this is a failure (kReceive).
inline constexpr std::uint32_t kWebhookResponseHeadBytesMax = 16 * 1024;

// Why no status came back. kNone when one did.
enum class WebhookFailure {
    kNone,
    kBadUrl,     // Not an http(s) URL with a host (ParseWebhookUrl refuses it).
    kResolve,    // The host name did not resolve.
    kConnect,    // No connection: refused, unreachable.
    kTimeout,    // The exchange did not finish within the timeout.
    kTls,        // The TLS handshake failed: certificate not trusted, wrong name, protocol.
    kSend,       // Writing the request failed.
    kReceive,    // No valid response head: closed, reset, malformed, too large.
    kCancelled,  // WebhookClient::Cancel ended it before an answer came.
};

struct WebhookResult {
    int status = 0;  // The response's status code; 0 when no response head was read.
    // The response's `Retry-After` as delta-seconds (any status: the caller decides which
    // statuses honour it). An HTTP-date, or anything else, is ignored: nullopt.
    std::optional<std::int64_t> retry_after_seconds{};
    WebhookFailure failure = WebhookFailure::kNone;
    // For a person and for logs, empty when a status came back: what failed and where
    // ("connect to 127.0.0.1:9000: Connection refused"). Names the host and port only,
    // never the URL's user info.
    std::string error{};
    // With WebhookClient::Send's `keep_answer` only: the answer's fields, names in lower case,
    // in order, and its whole body (an answer whose body, with its chunked framing, is over
    // kWebhookResponseBodyBytesMax is then a failure, kReceive, status kept).
    std::vector<std::pair<std::string, std::string>> answer_headers{};
    std::string answer_body{};
};

using WebhookHeaders = std::vector<std::pair<std::string, std::string>>;

// The longest a kept connection waits unused before the next POST opens a new one instead: below
// the shortest idle timeout common among receivers (Node.js servers close an idle connection
// after 5 s), so that a POST seldom meets a connection its receiver is closing.
inline constexpr std::chrono::milliseconds kWebhookKeptIdleMax{4'000};

// POSTs to receivers, one at a time, keeping the connection between them: a steady stream of
// batches to one receiver costs one TCP connection (and one TLS handshake) rather than one a
// batch. Not thread-safe: one per delivery thread.
//
// Post POSTs `body` to `url` (http:// or https://) with `headers` (as given, plus Host,
// Content-Length, User-Agent, and Authorization: Basic from the URL's user info when it has
// one), and returns the response's status. The whole exchange — connect, TLS handshake, write,
// and reading the response head — finishes within `timeout`, or the result is kTimeout. Name
// resolution is bounded by the system resolver's own timeouts (it runs inside getaddrinfo,
// which cannot be cancelled); an IP address is used as it is, without the resolver. After the
// head, up to kWebhookResponseBodyBytesMax of the body is read and discarded within the same
// deadline; a failure there does not change the status, which the receiver has already given.
//
// The connection is kept for the next Post when the response allows it (HTTP/1.1 without
// `Connection: close`), its body was read whole, and the next Post goes to the same scheme,
// host and port within kWebhookKeptIdleMax, finding nothing to read on it (neither its end
// nor anything unasked, such as a 408 before a close). A kept connection that fails before any byte
// of the response (the receiver closed it while it waited: a reset, an end of stream) is replaced
// by a new one and the request sent again, once, within the same deadline — the receiver may then
// see the request twice, which a webhook receiver deduplicates by its webhook-id
// (docs/subscriptions.md). Any other failure closes the connection.
//
// https:// verifies the peer's certificate chain against the system's CAs (or, for tests
// only, against `ca_file_for_tests`, a PEM file, instead), and its name against the URL's
// host (DNS name or IP address); the host name is sent in SNI.
//
// Blocks the calling thread, on an io_context of its own: call it from a delivery thread,
// never from an I/O thread. Never throws for a failure of the network or the receiver (those
// are results); throws std::bad_alloc and InvariantError only.
// REQUIRES: no header name or value holds CR or LF; timeout > 0.
class WebhookClient {
public:
    explicit WebhookClient(std::optional<std::string> ca_file_for_tests = std::nullopt);
    ~WebhookClient();
    WebhookClient(const WebhookClient&) = delete;
    WebhookClient& operator=(const WebhookClient&) = delete;

    [[nodiscard]] WebhookResult Post(std::string_view url, const WebhookHeaders& headers,
                                     std::string_view body, std::chrono::milliseconds timeout);
    // The same exchange with `method` (GET or POST), and with `keep_answer` the answer's head and
    // whole body kept in the result: the platforms' query and close APIs (docs/query.md), whose
    // answers are verified and parsed.
    [[nodiscard]] WebhookResult Send(std::string_view method, std::string_view url,
                                     const WebhookHeaders& headers, std::string_view body,
                                     std::chrono::milliseconds timeout, bool keep_answer);
    // Closes the kept connection, if any (a subscription about to wait long, say).
    void Close();
    // Ends the exchange in flight, if any, and makes every later one end at once, as
    // kCancelled (an answer already read whole is kept): a stopping process does not wait out
    // a receiver's timeout. Name resolution already running inside getaddrinfo still ends
    // within the resolver's own timeouts. The one method callable from any thread, at any
    // time while the client lives.
    void Cancel();
    // Connections this client has opened (connected, whether or not a response came).
    [[nodiscard]] std::uint64_t connections_opened() const;

    struct State;  // The io_context and the kept connection (webhook_client.cpp).

private:
    friend WebhookResult PostWebhook(std::string_view, const WebhookHeaders&, std::string_view,
                                     std::chrono::milliseconds, const std::optional<std::string>&);
    std::unique_ptr<State> state_;
};

// One POST on a connection of its own, closed after it (`Connection: close`), as
// WebhookClient::Post says otherwise. Thread-safe.
[[nodiscard]] WebhookResult PostWebhook(std::string_view url, const WebhookHeaders& headers,
                                        std::string_view body, std::chrono::milliseconds timeout,
                                        const std::optional<std::string>& ca_file_for_tests = {});

// A `Retry-After` value as delta-seconds: plain digits, optional surrounding spaces or
// tabs; nullopt otherwise (an HTTP-date included). Very large values stay large: the
// back-off clamps them.
[[nodiscard]] std::optional<std::int64_t> ParseRetryAfterSeconds(std::string_view text);

}  // namespace payledger::api
