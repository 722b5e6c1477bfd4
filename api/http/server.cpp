#include "api/http/server.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>

#include "api/http/request_framing.hpp"
#include "api/log.hpp"
#include "ledger/base/clock.hpp"

namespace payledger::api {
namespace {

namespace beast = boost::beast;
using tcp = net::ip::tcp;

}  // namespace

// One connection. Only its strand touches the socket; handlers hold shared_from_this().
class Server::Session : public std::enable_shared_from_this<Session> {
public:
    // `endpoint` is the peer's. The session holds the connection slot `id` (ConnectionSlots),
    // which it gives back when it ends.
    Session(tcp::socket socket, const tcp::endpoint& endpoint, bool proxy, ConnectionSlots::Id id,
            Server& server)
        : stream_(std::move(socket)),
          server_(server),
          id_(id),
          peer_address_(PeerKey(endpoint.address())),
          peer_(endpoint.address().to_string() + ":" + std::to_string(endpoint.port())),
          proxy_(proxy) {}
    ~Session() {
        server_.slots_.Close(id_);
        std::lock_guard lock{server_.sessions_mutex_};
        server_.sessions_.erase(id_);
    }

    // Closes the connection from its strand: its slot went to a new connection.
    void Evict() {
        net::post(stream_.get_executor(), [self = shared_from_this()] {
            beast::error_code ignored;
            self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
            self->stream_.socket().close(ignored);
        });
    }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    void Run() {
        net::dispatch(stream_.get_executor(),
                      beast::bind_front_handler(&Session::Read, shared_from_this()));
    }

private:
    void Read() {
        // Waiting for a request: a slot a new connection may take at the limit.
        server_.slots_.SetIdle(id_, true);
        parser_.emplace();
        framing_.Apply(*parser_);
        // Covers the whole request and keep-alive idling: a client trickling its header a
        // byte at a time is cut off here.
        stream_.expires_after(server_.options_.read_timeout);
        http::async_read(stream_, buffer_, *parser_,
                         beast::bind_front_handler(&Session::OnRead, shared_from_this()));
    }

    void OnRead(beast::error_code ec, std::size_t /*bytes_transferred*/) {
        server_.slots_.SetIdle(id_, false);
        if (ec == http::error::end_of_stream) return Close();
        // A body over its limit, or a chunked body whose framing takes it there, or a line of
        // its framing longer than the read buffer: the header is parsed, so answer 413 without
        // reading more, then close (request_framing.hpp).
        if (ec == http::error::body_limit ||
            (ec == http::error::buffer_overflow && parser_->is_header_done())) {
            keep_alive_ = false;
            version_ = parser_->get().version();
            return Write(
                ErrorResponse(http::status::payload_too_large, projections::Outcome::kMalformed,
                              "the request body, with its chunked framing, is over 64 KiB"),
                false);
        }
        if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
            keep_alive_ = false;
            return Write(ErrorResponse(http::status::request_header_fields_too_large,
                                       projections::Outcome::kMalformed,
                                       "the request header is over 16 KiB"),
                         false);
        }
        if (ec && ec.category() == beast::error_code{http::error::end_of_stream}.category()) {
            keep_alive_ = false;  // Not HTTP we can parse: answer 400, then close.
            return Write(ErrorResponse(http::status::bad_request, projections::Outcome::kMalformed,
                                       "malformed HTTP request: " + ec.message()),
                         false);
        }
        if (ec) return;  // Timeout, reset: dropping the last reference closes the socket.
        // Fields after a chunked body: Beast merges them into the head's, where one could
        // stand in for a field read after the whole request (X-Forwarded-For names the peer).
        // The platforms send none: refused, then closed (request_framing.hpp).
        if (framing_.TrailerFields(*parser_) > 0) {
            keep_alive_ = false;
            version_ = parser_->get().version();
            return Write(ErrorResponse(http::status::bad_request, projections::Outcome::kMalformed,
                                       "trailer fields after a chunked body are not accepted"),
                         false);
        }

        Incoming incoming{.request = parser_->release(),
                          .peer = peer_,
                          .peer_address = peer_address_,
                          .received_at = ledger::NowMicros(),
                          .started = std::chrono::steady_clock::now()};
        if (proxy_) NameForwardedClient(incoming);
        incoming.respond_stream = [self = shared_from_this()](
                                      Response header, std::unique_ptr<BodyProducer> producer) {
            net::post(self->stream_.get_executor(),
                      [self, header = std::move(header),
                       producer = std::shared_ptr<BodyProducer>(std::move(producer))]() mutable {
                          self->WriteStream(std::move(header), std::move(producer));
                      });
        };
        keep_alive_ = incoming.request.keep_alive();
        version_ = incoming.request.version();
        server_.RequestStarted();
        const bool probe = server_.IsProbe(incoming.request.target());
        net::post(probe ? server_.probes_.get_executor() : server_.workers_.get_executor(),
                  [self = shared_from_this(), incoming = std::move(incoming)]() mutable {
                      self->server_.handler_(std::move(incoming), [self](Response response) {
                          net::post(self->stream_.get_executor(),
                                    [self, response = std::move(response)]() mutable {
                                        self->Write(std::move(response), true);
                                    });
                      });
                  });
    }

    // From a trusted proxy: the peer is the client the proxy names, and the receipt keeps the
    // proxy's address beside it. A request without a usable X-Forwarded-For stays the proxy's.
    void NameForwardedClient(Incoming& incoming) const {
        std::string_view last;
        const auto [first, end] = incoming.request.equal_range("X-Forwarded-For");
        for (auto field = first; field != end; ++field) last = field->value();
        const std::optional<net::ip::address> client = ForwardedClient(last);
        if (!client) return;
        incoming.peer_address = PeerKey(*client);
        incoming.peer = client->to_string() + " via " + peer_;
    }

    void Write(Response response, bool counted) {
        response.version(version_);
        response.keep_alive(keep_alive_ && !server_.draining_);
        response_.emplace(std::move(response));
        stream_.expires_after(server_.options_.write_timeout);
        http::async_write(stream_, *response_,
                          [self = shared_from_this(), counted](beast::error_code ec, std::size_t) {
                              const bool close = !self->response_->keep_alive();
                              self->response_.reset();
                              self->OnWrite(ec, counted, close);
                          });
    }

    void OnWrite(beast::error_code ec, bool counted, bool close) {
        if (counted) server_.RequestFinished();
        if (ec) return;
        if (close) return Close();
        Read();
    }

    // A chunked response: the header now, then each piece the producer makes on a worker.
    void WriteStream(Response header, std::shared_ptr<BodyProducer> producer) {
        serializer_.reset();  // It refers to the previous header.
        stream_header_.emplace(header.result(), version_);
        for (const auto& field : header) {
            stream_header_->set(field.name_string(), field.value());
        }
        stream_header_->keep_alive(keep_alive_ && !server_.draining_);
        stream_header_->chunked(true);
        serializer_.emplace(*stream_header_);
        stream_.expires_after(server_.options_.write_timeout);
        http::async_write_header(
            stream_, *serializer_,
            [self = shared_from_this(), producer](beast::error_code ec, std::size_t) {
                if (ec) return self->OnWrite(ec, true, true);
                self->NextChunk(producer);
            });
    }

    void NextChunk(std::shared_ptr<BodyProducer> producer) {
        net::post(server_.workers_, [self = shared_from_this(), producer] {
            std::optional<std::string> piece;
            try {
                piece = producer->Next();
            } catch (const std::exception& error) {
                LogJson("error", std::string("{\"msg\":\"stream failed\",\"error\":") +
                                     nlohmann::json(error.what()).dump() + "}");
            }
            net::post(self->stream_.get_executor(),
                      [self, producer, piece = std::move(piece)]() mutable {
                          self->WriteChunk(producer, std::move(piece));
                      });
        });
    }

    void WriteChunk(std::shared_ptr<BodyProducer> producer, std::optional<std::string> piece) {
        stream_.expires_after(server_.options_.write_timeout);
        if (!piece) {
            // The producer failed: cut the body short, so the client cannot mistake it for
            // a complete export.
            server_.RequestFinished();
            beast::error_code ignored;
            stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
            return;
        }
        if (piece->empty()) {
            const bool close = !stream_header_->keep_alive();
            return net::async_write(
                stream_, http::make_chunk_last(),
                [self = shared_from_this(), close](beast::error_code ec, std::size_t) {
                    self->OnWrite(ec, true, close);
                });
        }
        chunk_ = std::move(*piece);
        net::async_write(stream_, http::make_chunk(net::buffer(chunk_)),
                         [self = shared_from_this(), producer](beast::error_code ec, std::size_t) {
                             if (ec) return self->OnWrite(ec, true, true);
                             self->NextChunk(producer);
                         });
    }

    void Close() {
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    }

    beast::tcp_stream stream_;
    Server& server_;
    const ConnectionSlots::Id id_;
    // Bounded: a line or head that does not fit ends the read (request_framing.hpp).
    beast::flat_buffer buffer_{kReadBufferBytesMax};
    ChunkFramingBudget framing_{};  // Before parser_, which refers to it.
    std::optional<RequestParser> parser_{};
    std::optional<Response> response_{};
    std::optional<http::response<http::empty_body>> stream_header_{};
    std::optional<http::response_serializer<http::empty_body>> serializer_{};
    std::string chunk_{};
    const std::string peer_address_;  // PeerKey of the connection's address.
    const std::string peer_;
    const bool proxy_;
    bool keep_alive_ = false;
    unsigned version_ = 11;
};

Server::Server(Handler handler, Options options)
    : handler_(std::move(handler)),
      options_(std::move(options)),
      slots_(options_.connections),
      workers_(options_.worker_threads),
      acceptor_(net::make_strand(io_)),
      accept_backoff_(acceptor_.get_executor()) {}

Server::~Server() { Shutdown(std::chrono::milliseconds{0}); }

void Server::Start() {
    // Before anything listens: a SIGTERM from now on is queued for ServeUntilSignal, never
    // the default action that would kill the process mid-request.
    signals_.emplace(io_, SIGINT, SIGTERM);
    const tcp::endpoint endpoint{net::ip::make_address(options_.host), options_.port};
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen(net::socket_base::max_listen_connections);
    port_ = acceptor_.local_endpoint().port();
    Accept();
    for (std::size_t i = 0; i < options_.io_threads; ++i) {
        threads_.emplace_back([this] { io_.run(); });
    }
}

void Server::Accept() {
    acceptor_.async_accept(net::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
        if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
        if (ec == net::error::no_descriptors || ec == net::error::no_buffer_space ||
            ec.value() == ENFILE || ec == net::error::no_memory) {
            // Out of file descriptors: accepting again at once would spin on the same error.
            // The connection stays in the listen backlog until a descriptor is free.
            return AcceptLater();
        }
        if (!ec) {
            beast::error_code endpoint_error;
            const tcp::endpoint peer = socket.remote_endpoint(endpoint_error);
            ConnectionSlots::Admission admission;
            const ConnectionSlots::Id id = next_session_id_++;
            bool proxy = false;
            if (!endpoint_error) {
                proxy = IsTrustedProxy(peer.address());
                admission = slots_.Open(
                    id, {.peer = PeerKey(peer.address()),
                         .prefix = PrefixKey(peer.address(), options_.connections.prefix_ipv4_bits,
                                             options_.connections.prefix_ipv6_bits),
                         .reserved = IsReserved(peer.address()),
                         .proxy = proxy});
            }
            if (!admission.admitted) {
                // Over a limit (in all with nothing idle to evict, for this peer, or for its
                // block): refuse rather than let a few peers degrade everyone.
                beast::error_code ignored;
                socket.close(ignored);
            } else {
                auto session = std::make_shared<Session>(std::move(socket), peer, proxy, id, *this);
                {
                    std::lock_guard lock{sessions_mutex_};
                    sessions_.emplace(id, session);
                }
                if (admission.evict) Evict(*admission.evict);
                session->Run();
            }
        }
        Accept();
    });
}

bool Server::IsTrustedProxy(const net::ip::address& address) const {
    return std::any_of(options_.trusted_proxies.begin(), options_.trusted_proxies.end(),
                       [&](const Cidr& block) { return block.Contains(address); });
}

bool Server::IsReserved(const net::ip::address& address) const {
    return std::any_of(options_.reserved_for.begin(), options_.reserved_for.end(),
                       [&](const Cidr& block) { return block.Contains(address); });
}

bool Server::IsProbe(std::string_view target) const {
    const std::string_view path = target.substr(0, target.find('?'));
    return std::find(options_.probe_paths.begin(), options_.probe_paths.end(), path) !=
           options_.probe_paths.end();
}

void Server::Evict(ConnectionSlots::Id id) {
    std::shared_ptr<Session> victim;
    {
        std::lock_guard lock{sessions_mutex_};
        const auto it = sessions_.find(id);
        if (it != sessions_.end()) victim = it->second.lock();
    }
    if (victim != nullptr) victim->Evict();
}

void Server::AcceptLater() {
    accept_backoff_.expires_after(std::chrono::milliseconds{50});
    accept_backoff_.async_wait([this](beast::error_code ec) {
        if (ec || !acceptor_.is_open()) return;
        Accept();
    });
}

void Server::RequestStarted() {
    std::lock_guard lock{in_flight_mutex_};
    ++requests_in_flight_;
}

void Server::RequestFinished() {
    std::lock_guard lock{in_flight_mutex_};
    if (--requests_in_flight_ == 0) in_flight_zero_.notify_all();
}

void Server::Shutdown(std::chrono::milliseconds grace) {
    if (stopped_.exchange(true)) return;
    draining_ = true;
    std::promise<void> closed;
    net::post(acceptor_.get_executor(), [this, &closed] {
        beast::error_code ignored;
        acceptor_.close(ignored);
        accept_backoff_.cancel();
        closed.set_value();
    });
    if (!threads_.empty()) closed.get_future().wait();
    {
        std::unique_lock lock{in_flight_mutex_};
        in_flight_zero_.wait_for(lock, grace, [this] { return requests_in_flight_ == 0; });
    }
    io_.stop();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    workers_.join();
    probes_.join();
}

void Server::ServeUntilSignal(std::chrono::milliseconds grace,
                              const std::function<void()>& before_shutdown) {
    if (!signals_) signals_.emplace(io_, SIGINT, SIGTERM);
    std::promise<int> received;
    signals_->async_wait(
        [&received](beast::error_code ec, int signal) { received.set_value(ec ? 0 : signal); });
    const int signal = received.get_future().get();
    LogJson("info", "{\"msg\":\"shutting down\",\"signal\":" + std::to_string(signal) + "}");
    if (before_shutdown) before_shutdown();
    Shutdown(grace);
}

}  // namespace payledger::api
