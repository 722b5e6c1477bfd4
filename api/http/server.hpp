#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/http/connection_slots.hpp"
#include "api/http/http.hpp"
#include "api/http/peer_limits.hpp"

namespace payledger::api {

namespace net = boost::asio;

// The HTTP/1.1 server (Beast): asynchronous I/O on `io_threads` threads, a strand per
// connection, and the application on a separate worker pool so that database work never
// blocks a network thread (Vinnie Falco, beast#1077). The application is a parameter, as in
// Beast's own examples: the server knows nothing of the routes (api/routes/app.hpp App::Handle
// is what serve passes), and api/http includes nothing from api/routes (a ctest checks it).
class Server {
public:
    // Answers `incoming` exactly once, through `respond` or incoming.respond_stream, possibly
    // from another thread; runs on the worker pool and never throws.
    using Handler = std::function<void(Incoming incoming, Respond respond)>;

    struct Options {
        std::string host = "127.0.0.1";
        unsigned short port = 8080;  // 0: any free port (tests).
        std::size_t io_threads = 2;
        std::size_t worker_threads = 8;
        std::chrono::seconds read_timeout{15};  // A whole request, and keep-alive idling.
        std::chrono::seconds write_timeout{15};
        ConnectionLimits connections{};  // The config's limits.connections_* and prefix_*_bits.
        // trusted_proxies: their connections count against connections_max only (one proxy
        // carries many clients), and each request's peer is the client it names
        // (X-Forwarded-For, peer_limits.hpp ForwardedClient).
        std::vector<Cidr> trusted_proxies{};
        // limits.reserved_for: blocks whose connections always get a slot (ConnectionSlots).
        std::vector<Cidr> reserved_for{};
        // Paths (the target before any query) handled on a thread of their own instead of the
        // worker pool: an orchestrator's readiness probe never queues behind the application's
        // requests (hundreds of /metrics scrapes, a burst of callbacks). One thread, so what is
        // handled there must bound its own time (HandleReadiness: one connection, a wait of 2 s).
        std::vector<std::string> probe_paths{};
    };

    Server(Handler handler, Options options);
    ~Server();

    // Binds and starts serving. Throws boost::system::system_error when the address is taken.
    void Start();
    [[nodiscard]] unsigned short port() const { return port_; }

    // Stops accepting, lets requests in flight finish (within `grace`), then stops the I/O
    // threads. Blocks until done. Idempotent.
    void Shutdown(std::chrono::milliseconds grace);

    // Blocks until SIGINT or SIGTERM, then runs `before_shutdown` (if any) and shuts down.
    void ServeUntilSignal(std::chrono::milliseconds grace,
                          const std::function<void()>& before_shutdown = {});

private:
    class Session;
    void Accept();
    // After an accept failed for want of file descriptors: wait, then accept again.
    void AcceptLater();
    void RequestStarted();
    void RequestFinished();
    [[nodiscard]] bool IsTrustedProxy(const net::ip::address& address) const;
    [[nodiscard]] bool IsReserved(const net::ip::address& address) const;
    // Whether a request for `target` is handled on probes_ (Options::probe_paths).
    [[nodiscard]] bool IsProbe(std::string_view target) const;
    // Closes the connection `id` whose slot ConnectionSlots gave to a new one.
    void Evict(ConnectionSlots::Id id);

    const Handler handler_;
    const Options options_;
    // Before io_: sessions that io_ still holds when it is destroyed give their slots back.
    ConnectionSlots slots_;
    std::mutex sessions_mutex_;
    std::unordered_map<ConnectionSlots::Id, std::weak_ptr<Session>> sessions_;  // Guarded.
    ConnectionSlots::Id next_session_id_ = 0;  // The acceptor's strand only.
    net::io_context io_{};
    std::optional<net::signal_set> signals_{};  // Made by Start, before it listens.
    net::thread_pool workers_;
    net::thread_pool probes_{1};  // Options::probe_paths.
    net::ip::tcp::acceptor acceptor_;
    std::vector<std::thread> threads_;
    unsigned short port_ = 0;
    std::atomic<bool> stopped_{false};
    std::atomic<bool> draining_{false};
    net::steady_timer accept_backoff_;
    std::mutex in_flight_mutex_;
    std::condition_variable in_flight_zero_;
    std::size_t requests_in_flight_ = 0;  // Guarded by in_flight_mutex_.
};

}  // namespace payledger::api
