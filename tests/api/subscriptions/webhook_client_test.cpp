// Tests of api/subscriptions/webhook_client.hpp against real servers on 127.0.0.1 started by
// each test (tests/support/webhook_receiver.hpp). WebhookClient's kept connection: reused (plain
// and TLS), replaced when the receiver closed it, Connection: close honoured, one per receiver,
// a timeout never sent again. PostWebhook: the request as sent, the statuses and Retry-After a
// receiver answers, a large answer, a receiver that never answers and one that never accepts (the
// timeout honoured within 1 s), a refused port, bad URLs, and TLS: a self-signed certificate and a
// test CA's refused against the system's CAs, accepted against the test CA, and refused for another
// host name. Only loopback traffic.

#include "api/subscriptions/webhook_client.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "ledger/base/bytes.hpp"
#include "tests/support/webhook_receiver.hpp"

namespace payledger::api {
namespace {

using testing::ReceivedRequest;
using testing::ReceiverAnswer;
using testing::TestCertificate;
using testing::WebhookReceiver;
using WebhookClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kWebhookClientTimeout{5'000};

std::string ReceiverUrl(const WebhookReceiver& receiver, const std::string& scheme = "http",
                        const std::string& host = "127.0.0.1", const std::string& path = "/hook") {
    return scheme + "://" + host + ":" + std::to_string(receiver.port()) + path;
}

WebhookReceiver::Answer AnswerWithStatus(int status,
                                         std::map<std::string, std::string> headers = {}) {
    return [status, headers](const ReceivedRequest&) {
        return ReceiverAnswer{.status = status, .headers = headers, .body = "ok"};
    };
}

// A port that nothing listens on: bound, then released.
unsigned short ClosedLoopbackPort() {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor acceptor{io, {boost::asio::ip::make_address("127.0.0.1"), 0}};
    const unsigned short port = acceptor.local_endpoint().port();
    acceptor.close();
    return port;
}

// A file in a folder of this test, removed at the end.
class PemTempFile {
public:
    explicit PemTempFile(const std::string& text) {
        const char* base = std::getenv("PAYLEDGER_TEST_TMPDIR");
        path_ = std::filesystem::path(base != nullptr ? base : "/tmp") /
                ("webhook-client-test-" + std::to_string(::getpid()) + "-" +
                 std::to_string(next_++) + ".pem");
        std::ofstream{path_} << text;
    }
    ~PemTempFile() { std::filesystem::remove(path_); }
    [[nodiscard]] std::string path() const { return path_.string(); }

private:
    static inline int next_ = 0;
    std::filesystem::path path_{};
};

TEST(PostWebhook, SendsTheRequestAsGiven) {
    WebhookReceiver receiver{AnswerWithStatus(204)};
    const std::string body = R"({"type":"ledger.events","data":{"events":[]}})";
    const WebhookResult result =
        PostWebhook(ReceiverUrl(receiver, "http", "127.0.0.1", "/hooks/payledger?team=2"),
                    {{"content-type", "application/json"},
                     {"webhook-id", "fulfilment:1-2"},
                     {"webhook-timestamp", "1700000000"},
                     {"webhook-signature", "v1,abc="}},
                    body, kWebhookClientTimeout);
    EXPECT_EQ(result.status, 204);
    EXPECT_EQ(result.failure, WebhookFailure::kNone);
    EXPECT_EQ(result.error, "");
    EXPECT_EQ(result.retry_after_seconds, std::nullopt);
    const std::vector<ReceivedRequest> requests = receiver.Requests();
    ASSERT_EQ(requests.size(), 1U);
    const ReceivedRequest& request = requests[0];
    EXPECT_EQ(request.method, "POST");
    EXPECT_EQ(request.target, "/hooks/payledger?team=2");
    EXPECT_EQ(request.body, body);
    EXPECT_EQ(request.headers.at("host"), "127.0.0.1:" + std::to_string(receiver.port()));
    EXPECT_EQ(request.headers.at("content-type"), "application/json");
    EXPECT_EQ(request.headers.at("content-length"), std::to_string(body.size()));
    EXPECT_EQ(request.headers.at("webhook-id"), "fulfilment:1-2");
    EXPECT_EQ(request.headers.at("webhook-timestamp"), "1700000000");
    EXPECT_EQ(request.headers.at("webhook-signature"), "v1,abc=");
    EXPECT_EQ(request.headers.at("user-agent"), "payledger");
    EXPECT_EQ(request.headers.at("connection"), "close");
    EXPECT_EQ(request.headers.count("authorization"), 0U);
}

TEST(PostWebhook, ReturnsEveryStatusAndDeltaSecondsRetryAfter) {
    struct StatusCase {
        int status = 0;
        std::map<std::string, std::string> headers{};
        std::optional<std::int64_t> retry_after{};
    };
    const std::vector<StatusCase> cases = {
        {200, {}, std::nullopt},
        {299, {}, std::nullopt},
        {301, {{"Location", "http://elsewhere/"}}, std::nullopt},  // Not followed.
        {404, {}, std::nullopt},
        {410, {}, std::nullopt},
        {500, {}, std::nullopt},
        {429, {{"Retry-After", "7"}}, 7},
        {503, {{"Retry-After", "120"}}, 120},
        {503, {{"Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"}}, std::nullopt},  // Ignored.
        {500, {{"Retry-After", "3"}}, 3},  // Reported; the caller decides on 429/503 only.
    };
    for (const StatusCase& c : cases) {
        WebhookReceiver receiver{AnswerWithStatus(c.status, c.headers)};
        const WebhookResult result =
            PostWebhook(ReceiverUrl(receiver), {}, "{}", kWebhookClientTimeout);
        EXPECT_EQ(result.status, c.status);
        EXPECT_EQ(result.failure, WebhookFailure::kNone) << c.status;
        EXPECT_EQ(result.error, "") << c.status;
        EXPECT_EQ(result.retry_after_seconds, c.retry_after) << c.status;
        EXPECT_EQ(receiver.Requests().size(), 1U) << c.status;
    }
}

TEST(PostWebhook, AnAnswerLargerThanTheBoundIsReadInPartAndNotAnError) {
    WebhookReceiver receiver{[](const ReceivedRequest&) {
        return ReceiverAnswer{.status = 200, .body = std::string(8 * 1024 * 1024, 'x')};
    }};
    const WebhookClock::time_point start = WebhookClock::now();
    const WebhookResult result =
        PostWebhook(ReceiverUrl(receiver), {}, "{}", kWebhookClientTimeout);
    EXPECT_EQ(result.status, 200);
    EXPECT_EQ(result.failure, WebhookFailure::kNone);
    EXPECT_LT(WebhookClock::now() - start, milliseconds{2'000});  // Not a timeout in disguise.
}

// The framing bomb the server is protected from (docs/security.md), from a receiver: `200`, then a
// chunk-size line whose extension never ends. The read stops at the bounded buffer, well within
// the timeout; the status stands, and the connection is never used again.
TEST(WebhookClient, AnEndlessChunkExtensionKeepsTheStatusAndDropsTheConnection) {
    std::atomic<int> answered{0};
    WebhookReceiver receiver{[&answered](const ReceivedRequest&) {
        return answered.fetch_add(1) == 0 ? ReceiverAnswer{.endless_chunk_extension = true}
                                          : ReceiverAnswer{.status = 204};
    }};
    WebhookClient client;
    const WebhookClock::time_point start = WebhookClock::now();
    const WebhookResult bomb = client.Post(ReceiverUrl(receiver), {}, "{}", kWebhookClientTimeout);
    EXPECT_EQ(bomb.status, 200) << bomb.error;
    EXPECT_EQ(bomb.failure, WebhookFailure::kNone);
    EXPECT_LT(WebhookClock::now() - start, milliseconds{2'000});  // Not a timeout in disguise.
    const WebhookResult next = client.Post(ReceiverUrl(receiver), {}, "{}", kWebhookClientTimeout);
    EXPECT_EQ(next.status, 204) << next.error;
    EXPECT_EQ(client.connections_opened(), 2U);
}

TEST(PostWebhook, AReceiverThatNeverAnswersTimesOutWithinTheTimeout) {
    WebhookReceiver receiver{
        [](const ReceivedRequest&) { return ReceiverAnswer{.never_answer = true}; }};
    const WebhookClock::time_point start = WebhookClock::now();
    const WebhookResult result = PostWebhook(ReceiverUrl(receiver), {}, "{}", milliseconds{1'000});
    const auto elapsed = WebhookClock::now() - start;
    EXPECT_EQ(result.status, 0);
    EXPECT_EQ(result.failure, WebhookFailure::kTimeout);
    EXPECT_EQ(result.error, "no answer within 1000 ms (response from 127.0.0.1:" +
                                std::to_string(receiver.port()) + ")");
    EXPECT_GE(elapsed, milliseconds{1'000});
    EXPECT_LT(elapsed, milliseconds{2'000});
    EXPECT_EQ(receiver.Requests().size(), 1U);  // It got the request, and said nothing.
}

// A listener whose connections are never accepted: the kernel completes the TCP handshake,
// and nothing else happens: the response, or the TLS handshake, never comes.
TEST(PostWebhook, AListenerThatNeverAcceptsTimesOut) {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor acceptor{io, {boost::asio::ip::make_address("127.0.0.1"), 0}};
    const std::string url =
        "https://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()) + "/";
    for (const std::string& target : {url, "http" + url.substr(5)}) {
        const WebhookClock::time_point start = WebhookClock::now();
        const WebhookResult result = PostWebhook(target, {}, "{}", milliseconds{1'000});
        const auto elapsed = WebhookClock::now() - start;
        EXPECT_EQ(result.status, 0) << target;
        EXPECT_EQ(result.failure, WebhookFailure::kTimeout) << target;
        EXPECT_GE(elapsed, milliseconds{1'000}) << target;
        EXPECT_LT(elapsed, milliseconds{2'000}) << target;
    }
}

TEST(PostWebhook, ARefusedConnectionIsAConnectFailure) {
    const unsigned short port = ClosedLoopbackPort();
    const WebhookResult result =
        PostWebhook("http://alice:s3cret@127.0.0.1:" + std::to_string(port) + "/hook", {}, "{}",
                    kWebhookClientTimeout);
    EXPECT_EQ(result.status, 0);
    EXPECT_EQ(result.failure, WebhookFailure::kConnect);
    EXPECT_EQ(result.error,
              "connect to 127.0.0.1:" + std::to_string(port) + ": Connection refused");
    EXPECT_EQ(result.error.find("s3cret"), std::string::npos);
    EXPECT_EQ(result.error.find("alice"), std::string::npos);
}

TEST(PostWebhook, BadUrlsFailBeforeAnyNetwork) {
    for (const std::string url : {"ftp://127.0.0.1/x", "http://", "not a url", "http://h:0/"}) {
        const WebhookResult result = PostWebhook(url, {}, "{}", kWebhookClientTimeout);
        EXPECT_EQ(result.status, 0) << url;
        EXPECT_EQ(result.failure, WebhookFailure::kBadUrl) << url;
        EXPECT_TRUE(result.error.starts_with("the URL must")) << result.error;
    }
}

TEST(PostWebhook, AnUnknownHostIsAResolveFailure) {
    const WebhookResult result =
        PostWebhook("http://payledger-test-host.invalid/hook", {}, "{}", kWebhookClientTimeout);
    EXPECT_EQ(result.status, 0);
    EXPECT_EQ(result.failure, WebhookFailure::kResolve);
    EXPECT_TRUE(result.error.starts_with("resolve payledger-test-host.invalid:80: "))
        << result.error;
}

TEST(PostWebhook, UserInfoIsSentAsBasicCredentials) {
    WebhookReceiver receiver{AnswerWithStatus(200)};
    const WebhookResult result =
        PostWebhook("http://alice:p%40ss@127.0.0.1:" + std::to_string(receiver.port()) + "/", {},
                    "{}", kWebhookClientTimeout);
    EXPECT_EQ(result.status, 200);
    ASSERT_EQ(receiver.Requests().size(), 1U);
    EXPECT_EQ(receiver.Requests()[0].headers.at("authorization"),
              "Basic " + ledger::Base64Encode("alice:p@ss"));
    EXPECT_EQ(receiver.Requests()[0].headers.at("host"),
              "127.0.0.1:" + std::to_string(receiver.port()));
}

TEST(WebhookClient, KeepsTheConnectionBetweenPosts) {
    WebhookReceiver receiver{AnswerWithStatus(200)};
    WebhookClient client;
    for (std::size_t i = 0; i < 3; ++i) {
        const WebhookResult result =
            client.Post(ReceiverUrl(receiver), {{"webhook-id", std::to_string(i)}},
                        std::string(100 * i, 'x'), kWebhookClientTimeout);
        EXPECT_EQ(result.status, 200) << i << ": " << result.error;
    }
    const std::vector<ReceivedRequest> requests = receiver.Requests();
    ASSERT_EQ(requests.size(), 3U);
    for (std::size_t i = 0; i < requests.size(); ++i) {
        EXPECT_EQ(requests[i].headers.at("webhook-id"), std::to_string(i));
        EXPECT_EQ(requests[i].body, std::string(100 * i, 'x'));
        EXPECT_EQ(requests[i].headers.count("connection"), 0U);  // HTTP/1.1: kept.
    }
    EXPECT_EQ(receiver.connections(), 1U);
    EXPECT_EQ(client.connections_opened(), 1U);
}

TEST(WebhookClient, AKeptConnectionTheReceiverClosedIsReplaced) {
    // Each answer is followed by a close, as a receiver's idle timeout would: the next POST
    // finds the connection at its end (or, if the close comes late, fails on it before any
    // answer and is sent again), and goes on a new one without the caller seeing a failure.
    WebhookReceiver receiver{[](const ReceivedRequest&) {
        return ReceiverAnswer{.status = 200, .close_after_answer = true};
    }};
    WebhookClient client;
    for (int i = 0; i < 3; ++i) {
        const WebhookResult result =
            client.Post(ReceiverUrl(receiver), {}, std::to_string(i), kWebhookClientTimeout);
        EXPECT_EQ(result.status, 200) << i << ": " << result.error;
        EXPECT_EQ(result.failure, WebhookFailure::kNone) << i;
    }
    const std::vector<ReceivedRequest> requests = receiver.Requests();
    ASSERT_EQ(requests.size(), 3U);  // None twice: each closed connection had read nothing.
    EXPECT_EQ(requests[2].body, "2");
    EXPECT_EQ(receiver.connections(), 3U);
    EXPECT_EQ(client.connections_opened(), 3U);
}

TEST(WebhookClient, AKeptConnectionClosedAsTheRequestCameIsReplacedAndTheRequestSentAgain) {
    // The second request meets a receiver that closes the kept connection without a word (its
    // idle timeout firing as the request came): sent again, once, on a new connection.
    std::atomic<int> seen{0};
    WebhookReceiver receiver{[&seen](const ReceivedRequest&) {
        return ReceiverAnswer{.status = 200, .close_without_answer = seen.fetch_add(1) == 1};
    }};
    WebhookClient client;
    EXPECT_EQ(client.Post(ReceiverUrl(receiver), {}, "a", kWebhookClientTimeout).status, 200);
    const WebhookResult result = client.Post(ReceiverUrl(receiver), {}, "b", kWebhookClientTimeout);
    EXPECT_EQ(result.status, 200) << result.error;
    const std::vector<ReceivedRequest> requests = receiver.Requests();
    ASSERT_EQ(requests.size(), 3U);
    EXPECT_EQ(requests[1].body, "b");
    EXPECT_EQ(requests[2].body, "b");  // The same request twice: a receiver deduplicates.
    EXPECT_EQ(receiver.connections(), 2U);
}

TEST(WebhookClient, ANewConnectionClosedWithoutAnAnswerIsAFailureNotSentAgain) {
    WebhookReceiver receiver{[](const ReceivedRequest&) {
        return ReceiverAnswer{.status = 200, .close_without_answer = true};
    }};
    WebhookClient client;
    const WebhookResult result = client.Post(ReceiverUrl(receiver), {}, "a", kWebhookClientTimeout);
    EXPECT_EQ(result.status, 0);
    EXPECT_EQ(result.failure, WebhookFailure::kReceive);
    EXPECT_EQ(receiver.Requests().size(), 1U);
    EXPECT_EQ(receiver.connections(), 1U);
}

TEST(WebhookClient, ConnectionCloseFromTheReceiverIsHonoured) {
    WebhookReceiver receiver{[](const ReceivedRequest&) {
        return ReceiverAnswer{.status = 200, .announce_close = true};
    }};
    WebhookClient client;
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(client.Post(ReceiverUrl(receiver), {}, "{}", kWebhookClientTimeout).status, 200);
    }
    EXPECT_EQ(receiver.Requests().size(), 3U);
    EXPECT_EQ(receiver.connections(), 3U);
}

TEST(WebhookClient, AnotherReceiverGetsAConnectionOfItsOwn) {
    WebhookReceiver first{AnswerWithStatus(200)};
    WebhookReceiver second{AnswerWithStatus(201)};
    WebhookClient client;
    EXPECT_EQ(client.Post(ReceiverUrl(first), {}, "{}", kWebhookClientTimeout).status, 200);
    EXPECT_EQ(client.Post(ReceiverUrl(second), {}, "{}", kWebhookClientTimeout).status, 201);
    EXPECT_EQ(client.Post(ReceiverUrl(first), {}, "{}", kWebhookClientTimeout).status, 200);
    EXPECT_EQ(first.Requests().size(), 2U);
    EXPECT_EQ(first.connections(), 2U);
    EXPECT_EQ(second.connections(), 1U);
    EXPECT_EQ(client.connections_opened(), 3U);
}

TEST(WebhookClient, ATimeoutOnAKeptConnectionIsNotSentAgain) {
    // The first request is answered; the second is received and never answered: a timeout,
    // not a closed connection, so it is not sent again; the third goes on a new connection.
    std::atomic<int> seen{0};
    WebhookReceiver receiver{[&seen](const ReceivedRequest&) {
        return ReceiverAnswer{.status = 200, .never_answer = seen.fetch_add(1) == 1};
    }};
    WebhookClient client;
    EXPECT_EQ(client.Post(ReceiverUrl(receiver), {}, "a", kWebhookClientTimeout).status, 200);
    const WebhookResult timed_out = client.Post(ReceiverUrl(receiver), {}, "b", milliseconds{500});
    EXPECT_EQ(timed_out.status, 0);
    EXPECT_EQ(timed_out.failure, WebhookFailure::kTimeout);
    EXPECT_EQ(client.Post(ReceiverUrl(receiver), {}, "c", kWebhookClientTimeout).status, 200);
    const std::vector<ReceivedRequest> requests = receiver.Requests();
    ASSERT_EQ(requests.size(), 3U);
    EXPECT_EQ(requests[1].body, "b");
    EXPECT_EQ(requests[2].body, "c");
    EXPECT_EQ(receiver.connections(), 2U);
}

TEST(PostWebhook, ASelfSignedCertificateIsRefused) {
    const TestCertificate self_signed =
        testing::MakeTestServerCertificate({"DNS:localhost", "IP:127.0.0.1"}, std::nullopt);
    WebhookReceiver receiver{
        AnswerWithStatus(200),
        testing::TlsIdentity{.certificate_chain_pem = self_signed.certificate_pem,
                             .private_key_pem = self_signed.private_key_pem}};
    for (const std::string host : {"localhost", "127.0.0.1"}) {
        const WebhookResult result =
            PostWebhook(ReceiverUrl(receiver, "https", host), {}, "{}", kWebhookClientTimeout);
        EXPECT_EQ(result.status, 0) << host;
        EXPECT_EQ(result.failure, WebhookFailure::kTls) << host;
        EXPECT_NE(result.error.find("self-signed certificate"), std::string::npos) << result.error;
    }
    EXPECT_EQ(receiver.Requests().size(), 0U);
    EXPECT_EQ(receiver.connections(), 2U);  // It did reach the server.
}

class PostWebhookTlsTest : public ::testing::Test {
protected:
    // A server certificate for `names`, signed by the test CA, served by a new receiver.
    std::unique_ptr<WebhookReceiver> ReceiverFor(
        const std::vector<std::string>& names,
        WebhookReceiver::Answer answer = AnswerWithStatus(200)) {
        const TestCertificate leaf = testing::MakeTestServerCertificate(names, ca_);
        return std::make_unique<WebhookReceiver>(
            std::move(answer), testing::TlsIdentity{.certificate_chain_pem = leaf.certificate_pem,
                                                    .private_key_pem = leaf.private_key_pem});
    }

    TestCertificate ca_ = testing::MakeTestCa("payledger test CA");
    PemTempFile ca_file_{ca_.certificate_pem};
};

TEST_F(PostWebhookTlsTest, ACertificateOfTheTrustedCaIsAcceptedByNameAndByAddress) {
    const auto receiver = ReceiverFor({"DNS:localhost", "IP:127.0.0.1"});
    for (const std::string host : {"localhost", "127.0.0.1"}) {
        const WebhookResult result =
            PostWebhook(ReceiverUrl(*receiver, "https", host), {}, "{\"a\":1}",
                        kWebhookClientTimeout, ca_file_.path());
        EXPECT_EQ(result.status, 200) << host << ": " << result.error;
        EXPECT_EQ(result.failure, WebhookFailure::kNone) << host;
    }
    ASSERT_EQ(receiver->Requests().size(), 2U);
    EXPECT_EQ(receiver->Requests()[0].body, "{\"a\":1}");
}

TEST_F(PostWebhookTlsTest, TheTestCaIsNotTrustedWithoutItsFile) {
    const auto receiver = ReceiverFor({"DNS:localhost", "IP:127.0.0.1"});
    const WebhookResult result =
        PostWebhook(ReceiverUrl(*receiver, "https", "localhost"), {}, "{}", kWebhookClientTimeout);
    EXPECT_EQ(result.failure, WebhookFailure::kTls);
    EXPECT_NE(result.error.find("unable to get local issuer certificate"), std::string::npos)
        << result.error;
    EXPECT_EQ(receiver->Requests().size(), 0U);
}

TEST_F(PostWebhookTlsTest, ACertificateForAnotherNameIsRefused) {
    const auto receiver = ReceiverFor({"DNS:hooks.example.com", "IP:127.0.0.2"});
    for (const std::string host : {"localhost", "127.0.0.1"}) {
        const WebhookResult result = PostWebhook(ReceiverUrl(*receiver, "https", host), {}, "{}",
                                                 kWebhookClientTimeout, ca_file_.path());
        EXPECT_EQ(result.status, 0) << host;
        EXPECT_EQ(result.failure, WebhookFailure::kTls) << host;
        EXPECT_TRUE(result.error.starts_with("TLS handshake with " + host)) << result.error;
    }
    EXPECT_EQ(receiver->Requests().size(), 0U);
}

TEST_F(PostWebhookTlsTest, AClientKeepsItsTlsConnectionBetweenPosts) {
    const auto receiver = ReceiverFor({"DNS:localhost"});
    WebhookClient client{ca_file_.path()};
    for (int i = 0; i < 3; ++i) {
        const WebhookResult result = client.Post(ReceiverUrl(*receiver, "https", "localhost"), {},
                                                 "{}", kWebhookClientTimeout);
        EXPECT_EQ(result.status, 200) << i << ": " << result.error;
    }
    EXPECT_EQ(receiver->Requests().size(), 3U);
    EXPECT_EQ(receiver->connections(), 1U);  // One TCP connection, one TLS handshake.
    EXPECT_EQ(client.connections_opened(), 1U);
}

// A receiver that sends a second answer nobody asked for, in a TLS record of its own but in the
// same TCP segment as the first: that record is already off the socket (in the BIO that Asio fills,
// or OpenSSL's read buffer) when the first answer is read, so the socket looks quiet. The next
// POST must not take it for its own answer: the kept connection is dropped, and the next answer
// comes on a new one.
TEST_F(PostWebhookTlsTest, AStaleRecordAfterTheAnswerIsNeverReadAsTheNextAnswer) {
    std::atomic<int> answered{0};
    const auto receiver = ReceiverFor({"DNS:localhost"}, [&answered](const ReceivedRequest&) {
        if (answered.fetch_add(1) > 0) return ReceiverAnswer{.status = 204};
        return ReceiverAnswer{
            .status = 200,
            .body = "ok",
            .stale_after_answer = "HTTP/1.1 500 Stale\r\nContent-Length: 0\r\n\r\n"};
    });
    WebhookClient client{ca_file_.path()};
    const std::string url = ReceiverUrl(*receiver, "https", "localhost");
    const WebhookResult first = client.Post(url, {}, "{}", kWebhookClientTimeout);
    EXPECT_EQ(first.status, 200) << first.error;
    const WebhookResult second = client.Post(url, {}, "{}", kWebhookClientTimeout);
    EXPECT_EQ(second.status, 204) << second.error;
    EXPECT_EQ(receiver->Requests().size(), 2U);
    EXPECT_EQ(client.connections_opened(), 2U);
}

TEST_F(PostWebhookTlsTest, PlainHttpToATlsServerIsNotAStatus) {
    const auto receiver = ReceiverFor({"IP:127.0.0.1"});
    const WebhookResult result = PostWebhook(ReceiverUrl(*receiver), {}, "{}", milliseconds{2'000});
    EXPECT_EQ(result.status, 0);
    EXPECT_NE(result.failure, WebhookFailure::kNone);
}

}  // namespace
}  // namespace payledger::api
