#include "api/subscriptions/webhook_client.hpp"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <cerrno>
#include <memory>

#include "api/http/json_output.hpp"
#include "api/http/request_framing.hpp"
#include "api/subscriptions/webhook_url.hpp"
#include "ledger/base/bytes.hpp"
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
    // Some of the response arrived (a failure then is not a kept connection found closed).
    bool response_started = false;
    // The response was read whole and allows the connection to serve the next request.
    bool reusable = false;
    // Send's keep_answer: the answer's head and body go to the result.
    bool keep_answer = false;
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

    // Bounded like the server's reads (request_framing.hpp): the buffer, the head, and the
    // body with its chunked framing, so that a receiver answering an endless chunk-size line,
    // extension or trailer holds at most kReadBufferBytesMax of this process's memory.
    beast::flat_buffer buffer{kReadBufferBytesMax};
    ChunkFramingBudget framing;  // Outlives the parser, which refers to it.
    ResponseParser parser;
    framing.Apply(parser, kWebhookResponseHeadBytesMax, kWebhookResponseBodyBytesMax);
    socket.expires_at(exchange.deadline);
    const auto [head_error, head_bytes] =
        co_await http::async_read_header(stream, buffer, parser, kAsTuple);
    // A Content-Length over the bound fails as body_limit once the head is parsed, and what
    // follows the head may overflow the buffer: the status is there, and the body is not
    // wanted.
    const bool body_too_large =
        (head_error == http::error::body_limit || head_error == http::error::buffer_overflow) &&
        parser.is_header_done();
    exchange.response_started = parser.got_some() || buffer.size() != 0;
    if (head_error && !body_too_large) {
        co_return FailExchange(exchange, WebhookFailure::kReceive, "response from", head_error);
    }
    exchange.result.status = static_cast<int>(parser.get().result_int());
    const auto retry_after = parser.get().find(http::field::retry_after);
    if (retry_after != parser.get().end()) {
        exchange.result.retry_after_seconds = ParseRetryAfterSeconds(retry_after->value());
    }
    if (exchange.keep_answer && body_too_large) {
        exchange.result.failure = WebhookFailure::kReceive;
        exchange.result.error = "the answer from " + WhereOf(exchange.url) + " is over " +
                                std::to_string(kWebhookResponseBodyBytesMax / 1024) + " KiB";
    }
    bool body_read = !body_too_large;
    if (!body_too_large && !parser.is_done()) {
        // The body is read so that the receiver sees its answer taken, not a reset; past the
        // bounds (body_limit: its data with its chunked framing; buffer_overflow: a line or a
        // trailer longer than the buffer) or on any error it is left and the connection is not
        // kept. The status stands either way.
        const auto [body_error, body_bytes] =
            co_await http::async_read(stream, buffer, parser, kAsTuple);
        body_read = !body_error;
        if (body_error && exchange.keep_answer) {
            // The answer is wanted whole: one cut short is no answer.
            FailExchange(
                exchange, WebhookFailure::kReceive, "response from", body_error,
                body_error == http::error::body_limit || body_error == http::error::buffer_overflow
                    ? "the answer is over " + std::to_string(kWebhookResponseBodyBytesMax / 1024) +
                          " KiB"
                    : std::string{});
        }
    }
    if (exchange.keep_answer && exchange.result.failure == WebhookFailure::kNone) {
        for (const auto& field : parser.get()) {
            std::string name(field.name_string());
            for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            exchange.result.answer_headers.emplace_back(std::move(name),
                                                        std::string(field.value()));
        }
        exchange.result.answer_body = std::move(parser.get().body());
    }
    // A connection is not kept with bytes beyond the response (they would be read as the next
    // one's), nor after an interim (1xx) answer (its final answer would come on it later).
    exchange.reusable = body_read && parser.is_done() && parser.get().keep_alive() &&
                        exchange.request.keep_alive() && buffer.size() == 0 &&
                        exchange.result.status >= 200;
}

}  // namespace

// The client's io_context and its kept connection: at most one of `plain` and `tls`.
struct WebhookClient::State {
    explicit State(std::optional<std::string> ca_file) : ca_file_for_tests(std::move(ca_file)) {}

    // Cancel's work, on the io_context's thread: the sockets closed, so that every operation
    // on them ends now (operation_aborted); the streams stay, for their handlers to finish.
    void CloseSockets() {
        beast::error_code ignored;
        if (plain) plain->socket().close(ignored);
        if (tls) beast::get_lowest_layer(*tls).socket().close(ignored);
    }

    // Forgets the kept connection (closing its socket).
    void Drop() {
        plain.reset();
        tls.reset();
        kept_for.clear();
    }

    // Whether the kept connection is quiet: nothing to read, and not at its end. One that
    // its receiver closed (an idle timeout) or spoke on unasked (a 408 before a close) is not
    // used again. One recv with MSG_PEEK, which never blocks. REQUIRES: a connection is kept.
    bool KeptIsQuiet() {
        // TLS bytes already taken off the socket count: a record decrypted and unread, one in
        // OpenSSL's read buffer, or one still in the BIO that Asio fills from the socket (a
        // second answer, or a close_notify, that came in the same segment as the answer). Any
        // of them would be read as the next request's answer.
        if (tls) {
            SSL* ssl = tls->native_handle();
            if (SSL_has_pending(ssl) == 1 || BIO_ctrl_pending(SSL_get_rbio(ssl)) > 0) return false;
        }
        tcp::socket& socket = tls ? beast::get_lowest_layer(*tls).socket() : plain->socket();
        char byte = 0;
        const ssize_t got = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }

    // The context for https://: the system's CAs, or the test's (made once).
    ssl::context& TlsContext() {
        if (!ca_file_for_tests) return *SystemTrustContext();
        if (test_tls_context == nullptr) test_tls_context = MakeClientContext(ca_file_for_tests);
        return *test_tls_context;
    }

    const std::optional<std::string> ca_file_for_tests;
    std::shared_ptr<ssl::context> test_tls_context{};  // Outlives `tls`, declared before it.
    bool keep_alive = true;                            // False: PostWebhook's one-shot client.
    net::io_context io{1};
    std::optional<beast::tcp_stream> plain{};
    std::optional<beast::ssl_stream<beast::tcp_stream>> tls{};
    // "host:port" of the kept connection, with the scheme ("" when none is kept), and since
    // when it waits.
    std::string kept_for{};
    Clock::time_point kept_since{};
    std::uint64_t opened = 0;
    std::atomic<bool> cancelled{false};  // Set by Cancel, from any thread; never cleared.
};

namespace {

// What a kept connection serves: the scheme, host and port of a URL.
std::string ConnectionKeyOf(const WebhookUrl& url) {
    return (url.tls ? "https://" : "http://") + WhereOf(url);
}

// The endpoints to try: the URL's address as it is, or what the resolver answers for its name.
net::awaitable<std::optional<tcp::resolver::results_type>> EndpointsOf(WebhookExchange& exchange) {
    const std::string port = std::to_string(exchange.url.port);
    if (exchange.url.host_is_address) {
        beast::error_code error;
        const net::ip::address address = net::ip::make_address(exchange.url.host, error);
        PAYLEDGER_ASSERT(!error);  // ParseWebhookUrl took it for an address.
        co_return tcp::resolver::results_type::create(tcp::endpoint{address, exchange.url.port},
                                                      exchange.url.host, port);
    }
    tcp::resolver resolver{co_await net::this_coro::executor};
    auto [resolve_error, endpoints] =
        co_await resolver.async_resolve(exchange.url.host, port, kAsTuple);
    if (resolve_error) {
        FailExchange(exchange, WebhookFailure::kResolve, "resolve", resolve_error);
        co_return std::nullopt;
    }
    if (Clock::now() >= exchange.deadline) {
        FailExchange(exchange, WebhookFailure::kTimeout, "resolve", beast::error::timeout);
        co_return std::nullopt;
    }
    co_return std::move(endpoints);
}

// Opens a new connection for the exchange (the TLS handshake included) as the state's; false,
// with the failure recorded and nothing kept, when it cannot.
net::awaitable<bool> OpenConnection(WebhookClient::State& state, WebhookExchange& exchange) {
    state.Drop();
    const std::optional<tcp::resolver::results_type> endpoints = co_await EndpointsOf(exchange);
    if (!endpoints) co_return false;
    // Cancelled while the resolver ran: there was no socket to close then.
    if (state.cancelled.load()) {
        FailExchange(exchange, WebhookFailure::kConnect, "connect to", {}, "cancelled");
        co_return false;
    }
    const auto executor = co_await net::this_coro::executor;
    if (!exchange.url.tls) {
        beast::tcp_stream& stream = state.plain.emplace(executor);
        stream.expires_at(exchange.deadline);
        const auto [connect_error, endpoint] = co_await stream.async_connect(*endpoints, kAsTuple);
        if (connect_error) {
            state.Drop();
            FailExchange(exchange, WebhookFailure::kConnect, "connect to", connect_error);
            co_return false;
        }
        ++state.opened;
        co_return true;
    }
    beast::ssl_stream<beast::tcp_stream>& stream = state.tls.emplace(executor, state.TlsContext());
    // SSL_set_tlsext_host_name is a macro with a C cast; this is what it expands to.
    if (!exchange.url.host_is_address &&
        SSL_ctrl(stream.native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 exchange.url.host.data()) != 1) {
        state.Drop();
        FailExchange(exchange, WebhookFailure::kTls, "TLS with", {},
                     "the host name cannot be sent in SNI");
        co_return false;
    }
    stream.set_verify_callback(ssl::host_name_verification(exchange.url.host));
    beast::tcp_stream& socket = beast::get_lowest_layer(stream);
    socket.expires_at(exchange.deadline);
    const auto [connect_error, endpoint] = co_await socket.async_connect(*endpoints, kAsTuple);
    if (connect_error) {
        state.Drop();
        FailExchange(exchange, WebhookFailure::kConnect, "connect to", connect_error);
        co_return false;
    }
    ++state.opened;
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
        state.Drop();
        FailExchange(exchange, WebhookFailure::kTls, "TLS handshake with", handshake_error,
                     std::move(detail));
        co_return false;
    }
    co_return true;
}

// The exchange on the kept connection when it serves the URL, else on a new one; a kept one
// found closed before any of the response is replaced once (WebhookClient).
net::awaitable<void> RunExchange(WebhookClient::State& state, WebhookExchange& exchange) {
    // Whatever failed once the client was cancelled failed because of it (its sockets closed).
    const auto cancelled = [&] {
        if (!state.cancelled.load() || exchange.result.failure == WebhookFailure::kNone) {
            return false;
        }
        exchange.result = {.failure = WebhookFailure::kCancelled,
                           .error = "cancelled (the process is stopping)"};
        state.Drop();
        return true;
    };
    if (state.cancelled.load()) {
        exchange.result.failure = WebhookFailure::kSend;  // Nothing was sent.
        (void)cancelled();
        co_return;
    }
    const std::string key = ConnectionKeyOf(exchange.url);
    bool reused = state.kept_for == key && Clock::now() - state.kept_since < kWebhookKeptIdleMax &&
                  state.KeptIsQuiet();
    for (;;) {
        if (!reused && !co_await OpenConnection(state, exchange)) {
            (void)cancelled();
            co_return;
        }
        if (state.tls) {
            co_await SendAndReceive(*state.tls, exchange);
        } else {
            co_await SendAndReceive(*state.plain, exchange);
        }
        if (cancelled()) co_return;
        const bool found_closed =
            exchange.result.failure == WebhookFailure::kSend ||
            (exchange.result.failure == WebhookFailure::kReceive && !exchange.response_started);
        if (!reused || !found_closed || Clock::now() >= exchange.deadline) break;
        // The receiver closed the kept connection as it waited (or as this request came):
        // nothing of an answer was read, so the request goes again on a new connection.
        exchange.result = {};
        reused = false;
    }
    // No TLS close_notify when a connection is dropped: the answer is in, and waiting for the
    // peer's would only spend time.
    if (exchange.reusable && state.keep_alive) {
        state.kept_for = key;
        state.kept_since = Clock::now();
    } else {
        state.Drop();
    }
}

bool HasLineBreak(std::string_view text) { return text.find_first_of("\r\n") != text.npos; }

}  // namespace

std::optional<std::int64_t> ParseRetryAfterSeconds(std::string_view text) {
    const auto first = text.find_first_not_of(" \t");
    if (first == std::string_view::npos) return std::nullopt;
    const auto last = text.find_last_not_of(" \t");
    return projections::ParseDigits(text.substr(first, last - first + 1), INT64_MAX);
}

WebhookClient::WebhookClient(std::optional<std::string> ca_file_for_tests)
    : state_(std::make_unique<State>(std::move(ca_file_for_tests))) {}

WebhookClient::~WebhookClient() = default;

void WebhookClient::Close() { state_->Drop(); }

void WebhookClient::Cancel() {
    state_->cancelled.store(true);
    // Runs in the exchange in flight, between two of its steps, or first thing in the next
    // Send's run (a handler posted while none runs waits in the queue). io_context::post is
    // thread-safe; the state is touched only on the thread running the exchange.
    net::post(state_->io, [state = state_.get()] { state->CloseSockets(); });
}

std::uint64_t WebhookClient::connections_opened() const { return state_->opened; }

WebhookResult WebhookClient::Post(std::string_view url, const WebhookHeaders& headers,
                                  std::string_view body, std::chrono::milliseconds timeout) {
    return Send("POST", url, headers, body, timeout, false);
}

WebhookResult WebhookClient::Send(std::string_view method, std::string_view url,
                                  const WebhookHeaders& headers, std::string_view body,
                                  std::chrono::milliseconds timeout, bool keep_answer) {
    PAYLEDGER_ASSERT(timeout.count() > 0);
    PAYLEDGER_ASSERT(method == "GET" || method == "POST");
    WebhookExchange exchange;
    exchange.keep_answer = keep_answer;
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
    request.method(method == "GET" ? http::verb::get : http::verb::post);
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
    request.keep_alive(state_->keep_alive);
    if (method == "POST") {
        request.body() = std::string(body);
        request.prepare_payload();
    }

    std::exception_ptr thrown;
    state_->io.restart();
    net::co_spawn(state_->io, RunExchange(*state_, exchange),
                  [&thrown](std::exception_ptr error) { thrown = std::move(error); });
    state_->io.run();
    if (thrown) {
        state_->Drop();
        std::rethrow_exception(thrown);
    }
    return exchange.result;
}

WebhookResult PostWebhook(std::string_view url, const WebhookHeaders& headers,
                          std::string_view body, std::chrono::milliseconds timeout,
                          const std::optional<std::string>& ca_file_for_tests) {
    WebhookClient client{ca_file_for_tests};
    client.state_->keep_alive = false;
    return client.Post(url, headers, body, timeout);
}

}  // namespace payledger::api
