#include "support/http_client.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace payledger::testing {

namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr std::uint64_t kResponseBodyMax = 256ULL * 1024 * 1024;

// A body over this is recorded without its bytes (its status, headers and content type are
// still checked): only the 8 MiB page tests answer such bodies, and with them the recording
// of a run of every test was 559 MB instead of 8 MB.
constexpr std::size_t kRecordedBodyMax = 1024 * 1024;

// Appends one exchange, as one JSON line, to the file that PAYLEDGER_HTTP_RECORD names, when
// it is set: tests/openapi/validate_responses.py checks every recorded answer against
// api/openapi.yaml. Test processes run in parallel and share the file: it is opened with
// O_APPEND and each line is written by one write(), so lines never interleave.
void Record(http::verb method, const std::string& target,
            const http::response<http::string_body>& response) {
    const char* file = std::getenv("PAYLEDGER_HTTP_RECORD");
    if (file == nullptr || *file == '\0') return;
    nlohmann::json headers = nlohmann::json::object();
    for (const auto& field : response) {
        // Lower-case names: HTTP header names are case-insensitive.
        std::string name(field.name_string());
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        headers[name] = std::string(field.value());
    }
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    nlohmann::json line = {
        {"test", test == nullptr ? std::string()
                                 : std::string(test->test_suite_name()) + "." + test->name()},
        {"method", std::string(http::to_string(method))},
        {"path", target.substr(0, target.find('?'))},
        {"status", response.result_int()},
        {"content_type", std::string(response[http::field::content_type])},
        {"headers", std::move(headers)},
        {"body_size", response.body().size()}};
    if (response.body().size() <= kRecordedBodyMax) {
        line["body"] = response.body();
    } else {
        line["body_recorded"] = false;
    }
    std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    text += '\n';
    const int fd = ::open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << "cannot open PAYLEDGER_HTTP_RECORD " << file << ": "
                     << std::strerror(errno);
    const ssize_t written = ::write(fd, text.data(), text.size());
    const int write_errno = errno;
    ::close(fd);
    ASSERT_EQ(written, static_cast<ssize_t>(text.size()))
        << "cannot append to PAYLEDGER_HTTP_RECORD " << file << ": " << std::strerror(write_errno);
}

}  // namespace

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
        // Beast's default limit for a response body is 8 MiB, which a page of the feeds may
        // reach; the tests assert the sizes themselves, so the client reads what comes.
        http::response_parser<http::string_body> parser;
        parser.body_limit(kResponseBodyMax);
        if (!ec) http::read(*stream_, buffer_, parser, ec);
        http::response<http::string_body> response = parser.release();
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
        Record(method, target, response);
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
