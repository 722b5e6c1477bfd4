#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace payledger::testing {

// A webhook receiver on 127.0.0.1 for tests: a real HTTP/1.1 server (plain, or TLS with a
// given certificate) on a thread of its own, which records every request and answers each
// as `answer` says. Stops in its destructor.

struct ReceivedRequest {
    std::string method{};
    std::string target{};
    std::map<std::string, std::string> headers{};  // Names in lower case.
    std::string body{};
};

struct ReceiverAnswer {
    int status = 200;
    std::map<std::string, std::string> headers{};
    std::string body{};
    bool never_answer = false;  // Keep the connection open and say nothing.
    // Answer without `Connection: close`, then close the connection, as a server closing an
    // idle kept connection does.
    bool close_after_answer = false;
    // Answer with `Connection: close`, and leave closing the connection to the client.
    bool announce_close = false;
    // Close the connection without answering (after recording the request).
    bool close_without_answer = false;
    // Answer `200` with `Transfer-Encoding: chunked` and a first chunk-size line `1;` whose
    // extension never ends: bytes at line rate until the client goes away.
    bool endless_chunk_extension = false;
    // Bytes written right after the answer, in the same TCP segment (TCP_CORK) but, over TLS, in
    // a record of their own: a second answer nobody asked for.
    std::string stale_after_answer{};
    // Answer this long after the request arrived (a timer: the receiver's thread serves the
    // other connections meanwhile), as a platform across a network does.
    std::chrono::milliseconds delay{0};
};

// A PEM certificate chain and its private key, for a TLS receiver.
struct TlsIdentity {
    std::string certificate_chain_pem{};
    std::string private_key_pem{};
};

class WebhookReceiver {
public:
    using Answer = std::function<ReceiverAnswer(const ReceivedRequest&)>;

    // Listens on 127.0.0.1 at a free port. `answer` runs on the receiver's thread.
    explicit WebhookReceiver(Answer answer, std::optional<TlsIdentity> tls = std::nullopt);
    ~WebhookReceiver();
    WebhookReceiver(const WebhookReceiver&) = delete;
    WebhookReceiver& operator=(const WebhookReceiver&) = delete;

    [[nodiscard]] unsigned short port() const { return port_; }
    // Copies of the requests received so far, in order. Thread-safe.
    [[nodiscard]] std::vector<ReceivedRequest> Requests() const;
    // Waits until at least `count` requests arrived; false when `timeout` passed first.
    [[nodiscard]] bool WaitForRequests(std::size_t count, std::chrono::milliseconds timeout) const;
    // How many connections were accepted (also those that never sent a whole request).
    [[nodiscard]] std::size_t connections() const { return connections_.load(); }
    // The most requests that were waiting for their answers at once (arrived, and neither
    // answered nor left unanswered on purpose) since the receiver started or the last reset.
    // Thread-safe.
    [[nodiscard]] std::size_t InFlightMax() const;
    void ResetInFlightMax();

    // Called by the connections (not for tests).
    void Record(ReceivedRequest request);
    [[nodiscard]] ReceiverAnswer AnswerFor(const ReceivedRequest& request) const {
        return answer_(request);
    }
    void CountConnection() { connections_.fetch_add(1); }
    void Answered();  // A recorded request's answer was written (or never will be).

private:
    Answer answer_;
    std::atomic<std::size_t> connections_{0};
    mutable std::mutex mutex_{};
    mutable std::condition_variable arrived_{};
    std::vector<ReceivedRequest> requests_{};
    std::size_t in_flight_ = 0;      // Guarded by mutex_.
    std::size_t in_flight_max_ = 0;  // Guarded by mutex_.
    // After the members above: destroying io_ destroys the connections' unfinished coroutines,
    // which count their requests answered (Answered) on the way out.
    boost::asio::io_context io_{1};
    boost::asio::ip::tcp::acceptor acceptor_{io_};
    unsigned short port_ = 0;
    std::thread thread_{};
};

// Certificates made with OpenSSL for TLS tests, valid from an hour ago for a day.
struct TestCertificate {
    std::string certificate_pem{};
    std::string private_key_pem{};
};
// A certificate authority (CA:TRUE, keyCertSign), self-signed.
[[nodiscard]] TestCertificate MakeTestCa(const std::string& common_name);
// A server certificate for `names` (subjectAltName entries such as "DNS:localhost",
// "IP:127.0.0.1"), signed by `issuer`, or by itself when `issuer` is nullopt.
[[nodiscard]] TestCertificate MakeTestServerCertificate(
    const std::vector<std::string>& names, const std::optional<TestCertificate>& issuer);

}  // namespace payledger::testing
