#include "api/cli/simulate.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/url/parse.hpp>
#include <chrono>
#include <iostream>
#include <stdexcept>

namespace payledger::api {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

constexpr std::chrono::seconds kRequestTimeout{10};

struct Endpoint {
    std::string host{};
    std::string port{};
    std::string path_prefix{};  // Without the trailing "/".
};

// A host as a URL and a Host header write it: an IPv6 address in brackets.
std::string UrlHost(const std::string& host) {
    const bool ipv6 = host.find(':') != std::string::npos && !host.starts_with('[');
    return ipv6 ? "[" + host + "]" : host;
}

Endpoint ParseUrl(const std::string& url) {
    const boost::system::result<boost::urls::url_view> parsed = boost::urls::parse_uri(url);
    if (!parsed || parsed->scheme() != "http" || parsed->host().empty()) {
        throw std::invalid_argument("--url: must be http://host:port, got \"" + url + "\"");
    }
    // host_address(): "::1" for "[::1]", which the resolver takes; host() keeps the brackets.
    Endpoint endpoint{.host = parsed->host_address(),
                      .port = parsed->has_port() ? std::string(parsed->port()) : "80",
                      .path_prefix = parsed->path()};
    while (!endpoint.path_prefix.empty() && endpoint.path_prefix.back() == '/') {
        endpoint.path_prefix.pop_back();
    }
    return endpoint;
}

http::response<http::string_body> Post(const Endpoint& endpoint, const SimulatedNotice& notice) {
    net::io_context io;
    net::ip::tcp::resolver resolver{io};
    beast::tcp_stream stream{io};
    stream.expires_after(kRequestTimeout);
    stream.connect(resolver.resolve(endpoint.host, endpoint.port));
    http::request<http::string_body> request{http::verb::post, endpoint.path_prefix + notice.target,
                                             11};
    request.set(http::field::host, UrlHost(endpoint.host) + ":" + endpoint.port);
    request.set(http::field::user_agent, "payledger-simulate");
    for (const auto& [name, value] : notice.headers) request.set(name, value);
    request.body() = notice.body;
    request.prepare_payload();
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    beast::error_code ignored;
    stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    return response;
}

}  // namespace

int RunSimulate(const Config& config, const SimulateOptions& options, const std::string& url) {
    const SimulatedNotice notice = BuildNotice(config, options);
    // The listen address may be IPv6 ("::1:8080"): bracketed in the URL.
    const Endpoint endpoint = ParseUrl(url.empty() ? "http://" + UrlHost(config.listen_host) + ":" +
                                                         std::to_string(config.listen_port)
                                                   : url);
    std::cerr << "payledger: posting the " << options.channel << " " << options.kind
              << " notice for " << options.out_trade_no << " to http://" << UrlHost(endpoint.host)
              << ":" << endpoint.port << endpoint.path_prefix << notice.target << "\n";
    http::response<http::string_body> response;
    try {
        response = Post(endpoint, notice);
    } catch (const beast::system_error& error) {
        throw std::runtime_error("simulate: the request failed: " + error.code().message());
    }
    std::cout << "HTTP " << response.result_int() << " " << response.reason() << "\n";
    std::cout << response.body() << (response.body().empty() ? "" : "\n");
    std::cout.flush();
    const unsigned status = response.result_int();
    return status >= 200 && status < 300 ? 0 : 1;
}

}  // namespace payledger::api
