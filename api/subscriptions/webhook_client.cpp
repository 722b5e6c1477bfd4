#include "api/subscriptions/webhook_client.hpp"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <memory>

#include "api/http/json_output.hpp"
#include "api/subscriptions/webhook_url.hpp"
#include "ledger/bytes.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr auto kAsTuple = net::as_tuple(net::use_awaitable);

// One POST's request, deadline and result, shared by the steps of the exchange.
struct WebhookExchange {
    WebhookUrl url{};
    http::request<http::string_body> request{};
    Clock::time_point deadline{};
    std::chrono::milliseconds timeout{};
    WebhookResult result{};
};

std::string WhereOf(const WebhookUrl& url) {
    return (url.host_is_address && url.host.find(':') != std::string::npos ? "[" + url.host + "]"
                                                                           : url.host) +
           ":" + std::to_string(url.port);
}

// Records a failure of `step`; a Beast timeout is kTimeout whatever the step.
void FailExchange(WebhookExchange& exchange, WebhookFailure failure, std::string_view step,
                  const beast::error_code& error, std::string detail = {}) {
    if (error == beast::error::timeout) {
        exchange.result.failure = WebhookFailure::kTimeout;
        exchange.result.error = "no answer within " + std::to_string(exchange.timeout.count()) +
                                " ms (" + std::string(step) + " " + WhereOf(exchange.url) + ")";
        return;
    }
    exchange.result.failure = failure;
    exchange.result.error = std::string(step) + " " + WhereOf(exchange.url) + ": " +
                            (detail.empty() ? error.message() : detail);
}

// The context that trusts the system's CAs (or the test CA file), verifying peers, TLS 1.2
// or later.
std::shared_ptr<ssl::context> MakeClientContext(const std::optional<std::string>& ca_file) {
    auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
    beast::error_code error;
    if (ca_file) {
        context->load_verify_file(*ca_file, error);
    } else {
        context->set_default_verify_paths(error);
    }
    // A context that failed to load trusts nothing, and every handshake fails (kTls).
    context->set_verify_mode(ssl::verify_peer);
    return context;
}

// Loading the system's CA store takes milliseconds: once per process. Creating streams from
// one SSL_CTX on several threads at once is safe; nothing changes it after this.
std::shared_ptr<ssl::context> SystemTrustContext() {
    static const std::shared_ptr<ssl::context> context = MakeClientContext(std::nullopt);
    return context;
}

// Writes the request, reads the response head (the status), then at most
// kWebhookResponseBodyBytesMax of the body, each within the deadline.
template <typename Stream>
net::awaitable<void> SendAndReceive(Stream& stream, WebhookExchange& exchange) {
    beast::tcp_stream& socket = beast::get_lowest_layer(stream);
    socket.expires_at(exchange.deadline);
    const auto [write_error, written] =
        co_await http::async_write(stream, exchange.request, kAsTuple);
    if (write_error) {
        co_return FailExchange(exchange, WebhookFailure::kSend, "send to", write_error);
    }

    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.header_limit(kWebhookResponseHeadBytesMax);
    parser.body_limit(kWebhookResponseBodyBytesMax);
    socket.expires_at(exchange.deadline);
    const auto [head_error, head_bytes] =
        co_await http::async_read_header(stream, buffer, parser, kAsTuple);
    // A Content-Length over the bound fails as body_limit once the head is parsed: the
    // status is there, and the body is not wanted.
    const bool body_too_large = head_error == http::error::body_limit && parser.is_header_done();
    if (head_error && !body_too_large) {
        co_return FailExchange(exchange, WebhookFailure::kReceive, "response from", head_error);
    }
    exchange.result.status = static_cast<int>(parser.get().result_int());
    const auto retry_after = parser.get().find(http::field::retry_after);
    if (retry_after != parser.get().end()) {
        exchange.result.retry_after_seconds = ParseRetryAfterSeconds(retry_after->value());
    }
    if (!body_too_large && !parser.is_done()) {
        // The body is read so that the receiver sees its answer taken, not a reset; past the
        // bound (body_limit) or on any error it is left. The status stands either way.
        const auto [body_error, body_bytes] =
            co_await http::async_read(stream, buffer, parser, kAsTuple);
        static_cast<void>(body_error);
    }
}

net::awaitable<void> RunExchange(WebhookExchange& exchange,
                                 std::shared_ptr<ssl::context> tls_context) {
    const auto executor = co_await net::this_coro::executor;
    tcp::resolver resolver{executor};
    const auto [resolve_error, endpoints] = co_await resolver.async_resolve(
        exchange.url.host, std::to_string(exchange.url.port), kAsTuple);
    if (resolve_error) {
        co_return FailExchange(exchange, WebhookFailure::kResolve, "resolve", resolve_error);
    }
    if (Clock::now() >= exchange.deadline) {
        co_return FailExchange(exchange, WebhookFailure::kTimeout, "resolve",
                               beast::error::timeout);
    }
    if (!tls_context) {
        beast::tcp_stream stream{executor};
        stream.expires_at(exchange.deadline);
        const auto [connect_error, endpoint] = co_await stream.async_connect(endpoints, kAsTuple);
        if (connect_error) {
            co_return FailExchange(exchange, WebhookFailure::kConnect, "connect to", connect_error);
        }
        co_await SendAndReceive(stream, exchange);
        co_return;
    }
    beast::ssl_stream<beast::tcp_stream> stream{executor, *tls_context};
    // SSL_set_tlsext_host_name is a macro with a C cast; this is what it expands to.
    if (!exchange.url.host_is_address &&
        SSL_ctrl(stream.native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 exchange.url.host.data()) != 1) {
        co_return FailExchange(exchange, WebhookFailure::kTls, "TLS with", {},
                               "the host name cannot be sent in SNI");
    }
    stream.set_verify_callback(ssl::host_name_verification(exchange.url.host));
    beast::tcp_stream& socket = beast::get_lowest_layer(stream);
    socket.expires_at(exchange.deadline);
    const auto [connect_error, endpoint] = co_await socket.async_connect(endpoints, kAsTuple);
    if (connect_error) {
        co_return FailExchange(exchange, WebhookFailure::kConnect, "connect to", connect_error);
    }
    socket.expires_at(exchange.deadline);
    const auto [handshake_error] =
        co_await stream.async_handshake(ssl::stream_base::client, kAsTuple);
    if (handshake_error) {
        // OpenSSL's own reason ("certificate verify failed") says less than the chain's.
        const long verify = SSL_get_verify_result(stream.native_handle());
        std::string detail = handshake_error.message();
        if (verify != X509_V_OK) {
            detail += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
        }
        co_return FailExchange(exchange, WebhookFailure::kTls, "TLS handshake with",
                               handshake_error, std::move(detail));
    }
    co_await SendAndReceive(stream, exchange);
    // No TLS close_notify: the answer is in, and waiting for the peer's would only spend time.
}

bool HasLineBreak(std::string_view text) { return text.find_first_of("\r\n") != text.npos; }

}  // namespace

std::optional<std::int64_t> ParseRetryAfterSeconds(std::string_view text) {
    const auto first = text.find_first_not_of(" \t");
    if (first == std::string_view::npos) return std::nullopt;
    const auto last = text.find_last_not_of(" \t");
    return projections::ParseDigits(text.substr(first, last - first + 1), INT64_MAX);
}

WebhookResult PostWebhook(std::string_view url, const WebhookHeaders& headers,
                          std::string_view body, std::chrono::milliseconds timeout,
                          const std::optional<std::string>& ca_file_for_tests) {
    PAYLEDGER_ASSERT(timeout.count() > 0);
    WebhookExchange exchange;
    exchange.timeout = timeout;
    exchange.deadline = Clock::now() + timeout;
    Checked<WebhookUrl> parsed = ParseWebhookUrl(url);
    if (!parsed) {
        exchange.result.failure = WebhookFailure::kBadUrl;
        exchange.result.error = "the URL " + parsed.refusal().message;
        return exchange.result;
    }
    exchange.url = std::move(*parsed);

    http::request<http::string_body>& request = exchange.request;
    request.method(http::verb::post);
    request.target(exchange.url.target);
    request.version(11);
    request.set(http::field::host, exchange.url.host_header);
    request.set(http::field::user_agent, "payledger");
    if (exchange.url.basic_credentials) {
        request.set(http::field::authorization,
                    "Basic " + ledger::Base64Encode(*exchange.url.basic_credentials));
    }
    for (const auto& [name, value] : headers) {
        PAYLEDGER_ASSERT(!HasLineBreak(name));
        PAYLEDGER_ASSERT(!HasLineBreak(value));
        request.set(name, value);
    }
    request.keep_alive(false);
    request.body() = std::string(body);
    request.prepare_payload();

    std::shared_ptr<ssl::context> tls_context;
    if (exchange.url.tls) {
        tls_context =
            ca_file_for_tests ? MakeClientContext(ca_file_for_tests) : SystemTrustContext();
    }
    net::io_context io{1};
    std::exception_ptr thrown;
    net::co_spawn(io, RunExchange(exchange, std::move(tls_context)),
                  [&thrown](std::exception_ptr error) { thrown = std::move(error); });
    io.run();
    if (thrown) std::rethrow_exception(thrown);
    return exchange.result;
}

}  // namespace payledger::api
