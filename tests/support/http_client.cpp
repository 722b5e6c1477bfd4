#include "support/http_client.hpp"

#include <gtest/gtest.h>

namespace payledger::testing {

namespace beast = boost::beast;
namespace http = beast::http;

nlohmann::json HttpResult::Json() const {
    nlohmann::json value = nlohmann::json::parse(body, nullptr, false);
    EXPECT_FALSE(value.is_discarded()) << "not JSON: " << body;
    return value;
}

void HttpClient::Connect() {
    stream_.emplace(io_);
    boost::beast::get_lowest_layer(*stream_).socket().open(boost::asio::ip::tcp::v4());
    boost::beast::get_lowest_layer(*stream_).socket().bind(
        {boost::asio::ip::make_address(source_address_), 0});
    stream_->connect(
        boost::asio::ip::tcp::endpoint{boost::asio::ip::make_address("127.0.0.1"), port_});
    buffer_.clear();
}

HttpResult HttpClient::Send(http::verb method, const std::string& target, const std::string& body,
                            const std::map<std::string, std::string>& headers) {
    for (int attempt = 0;; ++attempt) {
        if (!stream_) Connect();
        http::request<http::string_body> request{method, target, 11};
        request.set(http::field::host, "127.0.0.1");
        for (const auto& [name, value] : headers) request.set(name, value);
        request.body() = body;
        request.prepare_payload();
        request.keep_alive(true);
        beast::error_code ec;
        http::write(*stream_, request, ec);
        http::response<http::string_body> response;
        if (!ec) http::read(*stream_, buffer_, response, ec);
        if (ec) {
            // A keep-alive connection the server closed: reconnect once and resend. Only
            // for a failure before any answer, so nothing is delivered twice unknowingly.
            stream_.reset();
            if (attempt == 0 &&
                (ec == http::error::end_of_stream || ec == boost::asio::error::connection_reset ||
                 ec == boost::asio::error::broken_pipe)) {
                continue;
            }
            throw beast::system_error(ec);
        }
        HttpResult result{.status = static_cast<int>(response.result_int()),
                          .body = response.body()};
        for (const auto& field : response) {
            result.headers[std::string(field.name_string())] = std::string(field.value());
        }
        if (!response.keep_alive()) stream_.reset();
        return result;
    }
}

HttpResult HttpClient::Get(const std::string& target, const std::string& token) {
    std::map<std::string, std::string> headers;
    if (!token.empty()) headers["Authorization"] = "Bearer " + token;
    return Send(http::verb::get, target, {}, headers);
}

HttpResult HttpClient::Post(const std::string& target, const std::string& body,
                            const std::map<std::string, std::string>& headers) {
    return Send(http::verb::post, target, body, headers);
}

}  // namespace payledger::testing
