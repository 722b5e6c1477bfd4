#include "tests/support/webhook_receiver.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <stdexcept>
#include <tuple>

namespace payledger::testing {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

constexpr auto kReceiverAsTuple = net::as_tuple(net::use_awaitable);

std::string ReceiverLowerCase(std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
}

template <typename Stream>
net::awaitable<void> ServeReceiverRequests(Stream& stream, WebhookReceiver& receiver) {
    beast::flat_buffer buffer;
    for (;;) {
        http::request<http::string_body> request;
        const auto [read_error, read_bytes] =
            co_await http::async_read(stream, buffer, request, kReceiverAsTuple);
        if (read_error) co_return;  // The client closed (or gave up on a never_answer).
        ReceivedRequest received{.method = std::string(request.method_string()),
                                 .target = std::string(request.target()),
                                 .headers = {},
                                 .body = request.body()};
        for (const auto& field : request) {
            received.headers[ReceiverLowerCase(std::string(field.name_string()))] =
                std::string(field.value());
        }
        receiver.Record(received);
        // Whichever way this request ends (answered, never, the connection gone), it is no
        // longer waiting for the receiver once this scope is left.
        const struct AnswerDone {
            WebhookReceiver& receiver;
            ~AnswerDone() { receiver.Answered(); }
        } answer_done{receiver};
        const ReceiverAnswer answer = receiver.AnswerFor(received);
        if (answer.never_answer) continue;  // Wait for more, which never comes, or the close.
        if (answer.close_without_answer) co_return;
        if (answer.delay.count() > 0) {
            net::steady_timer timer{co_await net::this_coro::executor, answer.delay};
            const auto [timer_error] = co_await timer.async_wait(kReceiverAsTuple);
            if (timer_error) co_return;
        }
        if (answer.endless_chunk_extension) {
            const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;";
            const std::string filler(16 * 1024, 'a');
            auto [head_error, head_written] =
                co_await net::async_write(stream, net::buffer(head), kReceiverAsTuple);
            while (!head_error) {
                std::tie(head_error, head_written) =
                    co_await net::async_write(stream, net::buffer(filler), kReceiverAsTuple);
            }
            co_return;
        }
        http::response<http::string_body> response{static_cast<http::status>(answer.status),
                                                   request.version()};
        for (const auto& [name, value] : answer.headers) response.set(name, value);
        // These statuses have no body (Beast refuses to frame one).
        const bool bodiless = answer.status < 200 || answer.status == 204 || answer.status == 304;
        if (!bodiless) response.body() = answer.body;
        response.keep_alive(request.keep_alive() && !answer.announce_close);
        response.prepare_payload();
        const int fd = beast::get_lowest_layer(stream).socket().native_handle();
        int cork = answer.stale_after_answer.empty() ? 0 : 1;
        if (cork == 1) ::setsockopt(fd, IPPROTO_TCP, TCP_CORK, &cork, sizeof cork);
        const auto [write_error, written] =
            co_await http::async_write(stream, response, kReceiverAsTuple);
        if (!write_error && cork == 1) {
            const auto [stale_error, stale_written] = co_await net::async_write(
                stream, net::buffer(answer.stale_after_answer), kReceiverAsTuple);
            cork = 0;
            ::setsockopt(fd, IPPROTO_TCP, TCP_CORK, &cork, sizeof cork);
            if (stale_error) co_return;
        }
        if (write_error || answer.close_after_answer) co_return;
        // After `Connection: close` the connection stays open: the client must close it.
    }
}

net::awaitable<void> ServeReceiverConnection(WebhookReceiver& receiver, tcp::socket socket,
                                             std::shared_ptr<ssl::context> tls) {
    if (!tls) {
        beast::tcp_stream stream{std::move(socket)};
        co_await ServeReceiverRequests(stream, receiver);
        co_return;
    }
    beast::ssl_stream<beast::tcp_stream> stream{std::move(socket), *tls};
    const auto [handshake_error] =
        co_await stream.async_handshake(ssl::stream_base::server, kReceiverAsTuple);
    if (handshake_error) co_return;  // The client refused our certificate, as tests expect.
    co_await ServeReceiverRequests(stream, receiver);
}

net::awaitable<void> AcceptReceiverConnections(WebhookReceiver& receiver, tcp::acceptor& acceptor,
                                               std::shared_ptr<ssl::context> tls) {
    for (;;) {
        auto [accept_error, socket] = co_await acceptor.async_accept(kReceiverAsTuple);
        if (accept_error) co_return;
        receiver.CountConnection();
        net::co_spawn(acceptor.get_executor(),
                      ServeReceiverConnection(receiver, std::move(socket), tls), net::detached);
    }
}

// OpenSSL objects owned for the length of one function.
using CertKeyPointer = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using CertPointer = std::unique_ptr<X509, decltype(&X509_free)>;
using CertBioPointer = std::unique_ptr<BIO, decltype(&BIO_free)>;

void RequireCertStep(bool ok, const char* what) {
    if (!ok) throw std::runtime_error(std::string("test certificate: ") + what + " failed");
}

std::string CertBioText(BIO* bio) {
    char* data = nullptr;
    // BIO_get_mem_data is a macro with a C cast; this is what it expands to.
    const long size = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data);
    return std::string(data, static_cast<std::size_t>(size));
}

void AddCertExtension(X509* certificate, X509* issuer, int nid, const std::string& value) {
    X509V3_CTX context;
    X509V3_set_ctx(&context, issuer, certificate, nullptr, nullptr, 0);
    X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str());
    RequireCertStep(extension != nullptr, "X509V3_EXT_conf_nid");
    RequireCertStep(X509_add_ext(certificate, extension, -1) == 1, "X509_add_ext");
    X509_EXTENSION_free(extension);
}

// A P-256 key and a certificate for it with the given subject and extensions, signed by the
// issuer's key (or its own).
TestCertificate MakeTestCertificate(const std::string& common_name, bool is_ca,
                                    const std::vector<std::string>& names,
                                    const std::optional<TestCertificate>& issuer) {
    static std::atomic<long> next_serial{1};
    CertKeyPointer key{EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"), EVP_PKEY_free};
    RequireCertStep(key != nullptr, "EVP_PKEY_Q_keygen");
    CertPointer certificate{X509_new(), X509_free};
    RequireCertStep(certificate != nullptr, "X509_new");
    X509* cert = certificate.get();
    RequireCertStep(X509_set_version(cert, 2) == 1, "X509_set_version");
    RequireCertStep(ASN1_INTEGER_set(X509_get_serialNumber(cert), next_serial.fetch_add(1)) == 1,
                    "ASN1_INTEGER_set");
    RequireCertStep(X509_gmtime_adj(X509_getm_notBefore(cert), -3600) != nullptr, "notBefore");
    RequireCertStep(X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600) != nullptr, "notAfter");
    RequireCertStep(X509_set_pubkey(cert, key.get()) == 1, "X509_set_pubkey");
    X509_NAME* subject = X509_get_subject_name(cert);
    RequireCertStep(
        X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                   -1, 0) == 1,
        "CN");

    CertPointer issuer_certificate{nullptr, X509_free};
    CertKeyPointer issuer_key{nullptr, EVP_PKEY_free};
    if (issuer) {
        CertBioPointer cert_bio{BIO_new_mem_buf(issuer->certificate_pem.data(),
                                                static_cast<int>(issuer->certificate_pem.size())),
                                BIO_free};
        issuer_certificate.reset(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
        CertBioPointer key_bio{BIO_new_mem_buf(issuer->private_key_pem.data(),
                                               static_cast<int>(issuer->private_key_pem.size())),
                               BIO_free};
        issuer_key.reset(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
        RequireCertStep(issuer_certificate != nullptr && issuer_key != nullptr,
                        "reading the issuer");
    }
    X509* signer = issuer ? issuer_certificate.get() : cert;
    RequireCertStep(X509_set_issuer_name(cert, X509_get_subject_name(signer)) == 1, "issuer name");
    AddCertExtension(cert, signer, NID_basic_constraints, is_ca ? "critical,CA:TRUE" : "CA:FALSE");
    AddCertExtension(cert, signer, NID_key_usage,
                     is_ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
    AddCertExtension(cert, signer, NID_subject_key_identifier, "hash");
    if (!is_ca) AddCertExtension(cert, signer, NID_ext_key_usage, "serverAuth");
    if (!names.empty()) {
        std::string alt_names;
        for (const std::string& name : names) alt_names += (alt_names.empty() ? "" : ",") + name;
        AddCertExtension(cert, signer, NID_subject_alt_name, alt_names);
    }
    RequireCertStep(X509_sign(cert, issuer ? issuer_key.get() : key.get(), EVP_sha256()) > 0,
                    "X509_sign");

    TestCertificate out;
    CertBioPointer cert_out{BIO_new(BIO_s_mem()), BIO_free};
    RequireCertStep(PEM_write_bio_X509(cert_out.get(), cert) == 1, "PEM_write_bio_X509");
    out.certificate_pem = CertBioText(cert_out.get());
    CertBioPointer key_out{BIO_new(BIO_s_mem()), BIO_free};
    RequireCertStep(PEM_write_bio_PrivateKey(key_out.get(), key.get(), nullptr, nullptr, 0, nullptr,
                                             nullptr) == 1,
                    "PEM_write_bio_PrivateKey");
    out.private_key_pem = CertBioText(key_out.get());
    return out;
}

}  // namespace

WebhookReceiver::WebhookReceiver(Answer answer, std::optional<TlsIdentity> tls)
    : answer_(std::move(answer)) {
    std::shared_ptr<ssl::context> tls_context;
    if (tls) {
        tls_context = std::make_shared<ssl::context>(ssl::context::tls_server);
        tls_context->use_certificate_chain(net::buffer(tls->certificate_chain_pem));
        tls_context->use_private_key(net::buffer(tls->private_key_pem), ssl::context::pem);
    }
    const tcp::endpoint endpoint{net::ip::make_address("127.0.0.1"), 0};
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    net::co_spawn(io_, AcceptReceiverConnections(*this, acceptor_, std::move(tls_context)),
                  net::detached);
    thread_ = std::thread([this] { io_.run(); });
}

WebhookReceiver::~WebhookReceiver() {
    io_.stop();
    thread_.join();
    // The connections' coroutines are destroyed with io_, unfinished; their sockets close.
}

void WebhookReceiver::Record(ReceivedRequest request) {
    {
        const std::lock_guard lock{mutex_};
        requests_.push_back(std::move(request));
        in_flight_max_ = std::max(in_flight_max_, ++in_flight_);
    }
    arrived_.notify_all();
}

void WebhookReceiver::Answered() {
    const std::lock_guard lock{mutex_};
    --in_flight_;
}

std::size_t WebhookReceiver::InFlightMax() const {
    const std::lock_guard lock{mutex_};
    return in_flight_max_;
}

void WebhookReceiver::ResetInFlightMax() {
    const std::lock_guard lock{mutex_};
    in_flight_max_ = in_flight_;
}

std::vector<ReceivedRequest> WebhookReceiver::Requests() const {
    const std::lock_guard lock{mutex_};
    return requests_;
}

bool WebhookReceiver::WaitForRequests(std::size_t count, std::chrono::milliseconds timeout) const {
    std::unique_lock lock{mutex_};
    return arrived_.wait_for(lock, timeout, [&] { return requests_.size() >= count; });
}

TestCertificate MakeTestCa(const std::string& common_name) {
    return MakeTestCertificate(common_name, true, {}, std::nullopt);
}

TestCertificate MakeTestServerCertificate(const std::vector<std::string>& names,
                                          const std::optional<TestCertificate>& issuer) {
    return MakeTestCertificate("payledger test server", false, names, issuer);
}

}  // namespace payledger::testing
