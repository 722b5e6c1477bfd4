#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace payledger::testing {

struct HttpResult {
    int status = 0;
    std::string body{};
    std::map<std::string, std::string> headers{};

    // The body as JSON (fails the test when it is not).
    [[nodiscard]] nlohmann::json Json() const;
};

// A blocking HTTP/1.1 client on one keep-alive connection to 127.0.0.1:`port`, from
// `source_address` (any loopback address: 127.0.0.2 is another peer). Reconnects when the
// server closed the connection. Not thread-safe: one per thread. When the environment variable
// PAYLEDGER_HTTP_RECORD names a file, every exchange is appended to it as a JSON line, for
// tests/openapi/validate_responses.py (tests/CMakeLists.txt sets it for the HTTP tests).
class HttpClient {
public:
    explicit HttpClient(unsigned short port, std::string source_address = "127.0.0.1")
        : port_(port), source_address_(std::move(source_address)) {}

    HttpResult Send(boost::beast::http::verb method, const std::string& target,
                    const std::string& body = {},
                    const std::map<std::string, std::string>& headers = {});
    HttpResult Get(const std::string& target, const std::string& token = {});
    HttpResult Post(const std::string& target, const std::string& body,
                    const std::map<std::string, std::string>& headers = {});

private:
    void Connect();

    unsigned short port_ = 0;
    std::string source_address_;
    boost::asio::io_context io_{};
    std::optional<boost::beast::tcp_stream> stream_{};
    boost::beast::flat_buffer buffer_{};
};

}  // namespace payledger::testing
