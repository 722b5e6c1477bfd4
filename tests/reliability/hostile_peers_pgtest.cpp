// Hostile peers against a real `payledger serve` (docs/security.md): the chunked framing bomb
// on many connections, a chunked body whose framing counts against the body limit, the total
// connection limit when nothing is idle, slots given fairly when a few peers hold them all, the
// byte budget of unverified deliveries across all peers (large headers included), the bytes a
// replayed notice with large headers adds, trailers refused, X-Forwarded-For believed from
// trusted proxies only, and order numbers a scoped token may not register.
// Each starts serve with the limits it tests and checks what serve answered and what the
// database holds.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/channels/generic_channel.hpp"
#include "support/http_client.hpp"
#include "support/polling.hpp"
#include "support/serve_process.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::api::hostile_peers_pgtest {
namespace {

using nlohmann::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::ServeProcess;
using testing::TestDatabase;

#define PAYLEDGER_REQUIRE_DB(db) \
    if (!(db).available()) GTEST_SKIP() << "no test database"

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

// A non-blocking TCP connection to 127.0.0.1:`port` from `source`; -1 when it fails.
int OpenFrom(const char* source, unsigned short port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, source, &local.sin_addr);
    sockaddr_in remote{};
    remote.sin_family = AF_INET;
    remote.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
        connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote) != 0) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

// True when the server closes `fd` within `within` (EOF or reset), whatever it answered first.
bool ClosedWithin(int fd, std::chrono::milliseconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
        if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        char buffer[4096];
        const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
    }
}

// POST /v1/orders of 100 fen for shop-1 with the merchant token.
HttpResult CreateOrder(HttpClient& client, const std::string& out_trade_no) {
    return client.Post("/v1/orders",
                       json{{"out_trade_no", out_trade_no},
                            {"account_id", "shop-1"},
                            {"amount", 100},
                            {"currency", "CNY"}}
                           .dump(),
                       {{"Authorization", std::string("Bearer ") + testing::kMerchantToken}});
}

std::string Signed(const std::string& body) {
    return GenericChannel::Sign(testing::kGenericSecret, testing::UnixNow(), body);
}

std::string Payment(const std::string& out_trade_no, std::int64_t amount) {
    return json{{"event_type", "PAYMENT_SUCCEEDED"},
                {"out_trade_no", out_trade_no},
                {"transaction_id", "T-" + out_trade_no},
                {"amount", amount}}
        .dump();
}

// Three ways to frame a request that never ends, each a stranger's: an endless chunk
// extension, an endless chunk-size line, an endless trailer.
std::string BombHead(int kind) {
    const std::string head =
        "POST /v1/callbacks/generic HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    switch (kind % 3) {
        case 0:
            return head + "1;";
        case 1:
            return head + "0000";
        default:
            return head + "0\r\nX-Trailer: ";
    }
}
char BombFill(int kind) { return kind % 3 == 1 ? '0' : 'a'; }

// The framing bomb that took serve from 15 MB to 826 MB in 1.6 s: many connections, each
// sending a chunked request whose framing never ends, as fast as the server reads. Each may
// send 8 MiB (a server that buffers the framing holds 1.6 GB), so serve's peak RSS under
// 256 MiB is the proof; every bomb connection is closed by the server well before its 15 s
// request timeout. Meanwhile signed callbacks from another peer keep their latency.
TEST(HostilePeersPgTest, TheChunkedFramingBombIsCutOffAndServeStaysUnder256MiB) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DB(db);
    constexpr std::size_t kBombs = 200;
    constexpr std::size_t kBombBytesMax = 8 << 20;
    constexpr int kCallbacks = 200;
    ServeProcess server{db.url()};
    HttpClient merchant{server.port()};
    for (int i = 0; i < kCallbacks; ++i) {
        ASSERT_EQ(CreateOrder(merchant, "BOMB-" + std::to_string(i)).status, 201);
    }

    std::vector<double> latencies_ms;
    std::thread callbacks([&] {
        HttpClient platform{server.port(), "127.0.0.2"};
        for (int i = 0; i < kCallbacks; ++i) {
            const std::string body = Payment("BOMB-" + std::to_string(i), 100);
            const auto started = std::chrono::steady_clock::now();
            const HttpResult result = platform.Post("/v1/callbacks/generic", body,
                                                    {{"Payledger-Signature", Signed(body)}});
            latencies_ms.push_back(std::chrono::duration<double, std::milli>(
                                       std::chrono::steady_clock::now() - started)
                                       .count());
            EXPECT_EQ(result.status, 200) << result.body;
        }
    });

    std::vector<int> fds;
    std::vector<std::size_t> sent(kBombs, 0);
    std::vector<bool> closed(kBombs, false);
    for (std::size_t b = 0; b < kBombs; ++b) {
        const int fd = OpenFrom("127.0.0.1", server.port());
        ASSERT_GE(fd, 0) << "bomb connection " << b;
        const std::string head = BombHead(static_cast<int>(b));
        ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(head.size()));
        fds.push_back(fd);
    }
    const std::string fill(64 * 1024, 'a');
    const std::string zeros(64 * 1024, '0');
    const auto bomb_started = std::chrono::steady_clock::now();
    const auto deadline = bomb_started + std::chrono::seconds{60};
    bool all_done = false;
    while (!all_done && std::chrono::steady_clock::now() < deadline) {
        all_done = true;
        for (std::size_t b = 0; b < kBombs; ++b) {
            if (closed[b] || sent[b] >= kBombBytesMax) continue;
            all_done = false;
            const std::string& bytes = BombFill(static_cast<int>(b)) == '0' ? zeros : fill;
            const ssize_t n = send(fds[b], bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n > 0) {
                sent[b] += static_cast<std::size_t>(n);
            } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                closed[b] = true;  // Reset or closed by the server: cut off.
            }
        }
        if (!all_done) std::this_thread::yield();
    }
    std::size_t cut_off = 0;
    for (std::size_t b = 0; b < kBombs; ++b) {
        if (closed[b] || ClosedWithin(fds[b], std::chrono::milliseconds{1'000})) ++cut_off;
        close(fds[b]);
    }
    const double bomb_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - bomb_started).count();
    callbacks.join();

    std::sort(latencies_ms.begin(), latencies_ms.end());
    const double p99 = latencies_ms.empty() ? 0 : latencies_ms[latencies_ms.size() * 99 / 100];
    std::size_t most_sent = 0;
    for (const std::size_t s : sent) most_sent = std::max(most_sent, s);
    std::printf(
        "framing bomb: %zu of %zu connections cut off in %.1f s; at most %zu bytes "
        "accepted by the kernel on one; serve peak RSS %ld KiB; %zu callbacks "
        "meanwhile, p99 %.1f ms\n",
        cut_off, kBombs, bomb_seconds, most_sent, server.PeakRssKiB(), latencies_ms.size(), p99);
    EXPECT_EQ(cut_off, kBombs) << "a bomb connection was not closed by the server";
    EXPECT_LT(bomb_seconds, 10.0) << "bomb connections lasted until the request timeout";
    if (!kAddressSanitizer) {  // ASan keeps freed memory in its quarantine: RSS says little.
        EXPECT_LE(server.PeakRssKiB(), 256 * 1024) << "peak RSS over 256 MiB";
        EXPECT_LT(p99, 1000.0) << "callbacks slowed down during the bomb";
    }
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM ledger_events WHERE event_type = "
                        "'PAYMENT_SUCCEEDED'"),
              std::to_string(latencies_ms.size()));
}

// A chunked body's framing counts against the body limit: 60 KiB of data in one-byte chunks,
// each with an extension, is refused 413 (and nothing stored); the same callback sent in a
// few plain chunks is appended like any other.
TEST(HostilePeersPgTest, AChunkedBodysFramingCountsAgainstTheBodyLimit) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DB(db);
    ServeProcess server{db.url()};
    HttpClient merchant{server.port()};
    ASSERT_EQ(CreateOrder(merchant, "CHUNK-1").status, 201);

    const auto raw_status = [&](const std::string& bytes) {
        const int fd = OpenFrom("127.0.0.1", server.port());
        EXPECT_GE(fd, 0);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        std::size_t at = 0;
        while (at < bytes.size()) {
            const ssize_t n = send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
            if (n <= 0) break;  // Answered and closed before the end: fine.
            at += static_cast<std::size_t>(n);
        }
        timeval timeout{.tv_sec = 20, .tv_usec = 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
        std::string answer;
        char buffer[4096];
        ssize_t n = 0;
        while (answer.find("\r\n") == std::string::npos &&
               (n = recv(fd, buffer, sizeof buffer, 0)) > 0) {
            answer.append(buffer, static_cast<std::size_t>(n));
        }
        close(fd);
        return answer.size() > 12 ? std::stoi(answer.substr(9, 3)) : 0;
    };
    const std::string body = Payment("CHUNK-1", 100);
    const std::string head =
        "POST /v1/callbacks/generic HTTP/1.1\r\nHost: t\r\n"
        "Connection: close\r\nTransfer-Encoding: chunked\r\n"
        "Payledger-Signature: " +
        Signed(body) + "\r\n\r\n";
    std::string framed = head;
    for (int i = 0; i < 60 * 1024; ++i) framed += "1;e=x\r\n \r\n";
    framed += "0\r\n\r\n";
    EXPECT_EQ(raw_status(framed), 413);
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts WHERE source = 'generic'"), "0");

    std::string plain = head;
    for (std::size_t at = 0; at < body.size(); at += 16) {
        const std::string piece = body.substr(at, 16);
        char size[16];
        std::snprintf(size, sizeof size, "%zx", piece.size());
        plain += std::string(size) + "\r\n" + piece + "\r\n";
    }
    plain += "0\r\n\r\n";
    EXPECT_EQ(raw_status(plain), 200);
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM ledger_events WHERE out_trade_no = 'CHUNK-1'"), "2");
}

// limits.connections_max when no connection is idle: every slot holds a request in flight (a
// feed read waiting 8 s for an event), so nothing can give way and a new connection is closed at
// accept; once those requests are answered, their connections are idle, and a new one is served
// in the slot of one of them.
TEST(HostilePeersPgTest, ConnectionsBeyondConnectionsMaxAreClosedAtAcceptWhenNoneIsIdle) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DB(db);
    constexpr int kMax = 12;
    ServeProcess server{db.url(), {{"limits", {{"connections_max", kMax}}}}};
    // ServeProcess's readiness probe may still hold a slot for a moment after its answer: a
    // connection the server closed at accept is opened again until every slot is ours, each
    // proven busy by a request that waits (the server counts a connection once it accepted it).
    std::vector<int> held;
    const char* peers[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"};
    const std::string wait =
        "GET /v1/events?after=1000000&wait=8 HTTP/1.1\r\nHost: t\r\n"
        "Authorization: Bearer " +
        std::string(testing::kAuditorToken) + "\r\n\r\n";
    const auto fill_deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
    while (static_cast<int>(held.size()) < kMax) {
        ASSERT_LT(std::chrono::steady_clock::now(), fill_deadline) << "slots never freed";
        const int fd = OpenFrom(peers[held.size() % 4], server.port());
        ASSERT_GE(fd, 0);
        // Sent, and not closed within 100 ms: accepted, and its wait is in flight.
        if (send(fd, wait.data(), wait.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(wait.size()) &&
            !ClosedWithin(fd, std::chrono::milliseconds{100})) {
            held.push_back(fd);
            continue;
        }
        close(fd);  // Closed at accept: an earlier connection still held its slot.
    }
    const int extra = OpenFrom("127.0.0.6", server.port());
    ASSERT_GE(extra, 0);
    EXPECT_TRUE(ClosedWithin(extra, std::chrono::milliseconds{5'000}))
        << "a connection beyond connections_max was kept";
    close(extra);
    // The waits end within 8 s; then a new client gets served, in an idle one's slot.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{15};
    int status = 0;
    while (status != 200 && std::chrono::steady_clock::now() < deadline) {
        try {
            HttpClient client{server.port(), "127.0.0.7"};
            status = client.Get("/healthz").status;
        } catch (const std::exception&) {
            std::this_thread::sleep_for(std::chrono::milliseconds{50});  // Not yet freed.
        }
    }
    EXPECT_EQ(status, 200);
    for (const int fd : held) close(fd);
}

// Connection slots are fair (docs/security.md#connection-slots): 16 peers, each in a block of its
// own, hold every slot (256 connections each, connections_max 4096) and open a new connection
// whenever one of theirs is closed. Before, a 17th address was refused at accept for as long as
// they kept it up, and a platform behind it backs off for hours. Now its connection takes the
// slot of an idle connection of the biggest holder, and its signed callback is appended.
TEST(HostilePeersPgTest, SixteenPeersHoldingEverySlotDoNotKeepASeventeenthOut) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DB(db);
    constexpr int kPeers = 16;
    // 256 each as the default limits allow, when this process may open that many files.
    rlimit files{};
    getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    const int per_peer = files.rlim_cur >= 2 * kPeers * 256 + 512
                             ? 256
                             : static_cast<int>((files.rlim_cur - 512) / (2 * kPeers));
    ASSERT_GE(per_peer, 16) << "too few open files allowed: " << files.rlim_cur;
    // Nothing is closed for idling during the test (limits.read_seconds): what closes a holder's
    // connection is the limits alone, so the holders fill every slot and then hold still.
    ServeProcess server{db.url(),
                        {{"limits",
                          {{"connections_max", kPeers * per_peer},
                           {"connections_per_peer", per_peer},
                           {"read_seconds", 3600}}}}};
    {
        // Its connection closed before the holders start: kept open, it would hold the one slot
        // the holders lack, and they would evict each other for as long as it idled (15 s by
        // default; CI under a sanitizer once took longer than that to fill the slots, and the
        // holders never held still).
        HttpClient merchant{server.port()};
        ASSERT_EQ(CreateOrder(merchant, "FAIR-1").status, 201);
    }

    std::vector<std::string> sources;
    for (int i = 0; i < kPeers; ++i) sources.push_back("127.0." + std::to_string(i + 1) + ".1");
    std::vector<int> held(static_cast<std::size_t>(kPeers * per_peer), -1);
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> closed_by_server{0};
    std::atomic<int> quiet_passes{0};  // Passes in a row in which the server closed nothing.
    // The holders: open every slot, then reopen whatever the server closes, until told to stop.
    std::thread holders([&] {
        while (!stop.load()) {
            bool quiet = true;
            for (std::size_t i = 0; i < held.size() && !stop.load(); ++i) {
                if (held[i] >= 0) {
                    pollfd p{.fd = held[i], .events = POLLIN, .revents = 0};
                    if (poll(&p, 1, 0) == 0) continue;  // Still open, nothing said.
                    close(held[i]);
                    closed_by_server.fetch_add(1);
                    quiet = false;
                }
                held[i] = OpenFrom(sources[i % kPeers].c_str(), server.port());
                quiet = quiet && held[i] >= 0;
            }
            quiet_passes = quiet ? quiet_passes + 1 : 0;
            std::this_thread::sleep_for(std::chrono::milliseconds{10});
        }
    });
    // Stops and joins the holders however the test ends.
    struct Joiner {
        std::atomic<bool>& stop;
        std::thread& thread;
        ~Joiner() {
            stop = true;
            if (thread.joinable()) thread.join();
        }
    } joiner{stop, holders};
    // The holders have every slot once the server has stopped closing their connections (it
    // closes at accept those beyond the limits) for a while: every one of theirs is open.
    ASSERT_TRUE(
        testing::Eventually([&] { return quiet_passes.load() >= 30; }, std::chrono::seconds{60}))
        << "the server kept closing the holders' connections: " << closed_by_server.load();
    const std::uint64_t closed_before = closed_by_server.load();

    HttpClient platform{server.port(), "127.0.17.1"};
    const std::string body = Payment("FAIR-1", 100);
    const HttpResult paid =
        platform.Post("/v1/callbacks/generic", body, {{"Payledger-Signature", Signed(body)}});
    EXPECT_EQ(paid.status, 200) << paid.body;
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM ledger_events WHERE out_trade_no = 'FAIR-1' AND "
                        "event_type = 'PAYMENT_SUCCEEDED'"),
              "1");
    // Its slot was a holder's: one of theirs was closed for it.
    EXPECT_TRUE(testing::Eventually([&] { return closed_by_server.load() > closed_before; },
                                    std::chrono::seconds{10}));
    stop = true;
    if (holders.joinable()) holders.join();
    for (const int fd : held) {
        if (fd >= 0) close(fd);
    }
}

// limits.read_seconds bounds how long a connection may idle (docs/security.md#peers-and-limits):
// with 1 s, a connection that sends nothing is open after half a second and closed within 5 s;
// one that sends a request in time is answered.
TEST(HostilePeersPgTest, AConnectionIdleLongerThanReadSecondsIsClosed) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DB(db);
    ServeProcess server{db.url(), {{"limits", {{"read_seconds", 1}}}}};
    const int idle = OpenFrom("127.0.0.1", server.port());
    ASSERT_GE(idle, 0);
    EXPECT_FALSE(ClosedWithin(idle, std::chrono::milliseconds{500}));
    EXPECT_TRUE(ClosedWithin(idle, std::chrono::milliseconds{5'000}))
        << "an idle connection outlived limits.read_seconds";
    close(idle);
    HttpClient client{server.port()};
    EXPECT_EQ(client.Get("/healthz").status, 200);
}

// limits.unverified_bytes_per_minute: the bytes of unverified deliveries stored per minute from
// all peers together (each counting every byte its receipt stores). Four 64 KiB deliveries fit a
// budget of 4 x 65 KiB, from four peers; the
// fifth, from a fifth peer well under its own count, is rate_limited and not stored. A
// delivery whose signature verifies is never limited.
TEST(HostilePeersPgTest, UnverifiedBytesPerMinuteBoundAllPeersTogether) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DB(db);
    ServeProcess server{db.url(),
                        {{"limits",
                          {{"unverified_bytes_per_minute", 4 * 65 * 1024},
                           {"unverified_per_peer_per_minute", 100}}}}};
    const std::string garbage(64 * 1024, 'g');
    const char* peers[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"};
    for (int i = 0; i < 4; ++i) {
        HttpClient stranger{server.port(), peers[i]};
        EXPECT_EQ(stranger.Post("/v1/callbacks/generic", garbage).status, 401) << i;
    }
    HttpClient fifth{server.port(), peers[4]};
    const HttpResult limited = fifth.Post("/v1/callbacks/generic", garbage);
    EXPECT_EQ(limited.status, 429) << limited.body;
    EXPECT_EQ(limited.Json()["outcome"], "rate_limited");
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts"), "4");

    HttpClient merchant{server.port()};
    ASSERT_EQ(CreateOrder(merchant, "BYTES-1").status, 201);
    const std::string body = Payment("BYTES-1", 100);
    EXPECT_EQ(
        fifth.Post("/v1/callbacks/generic", body, {{"Payledger-Signature", Signed(body)}}).status,
        200);
}

// Every stored byte is bounded (docs/security.md#what-a-receipt-stores): one genuine notice
// replayed thousands of times with an 11 KB random User-Agent. Each receipt keeps its headers
// cut to 256 bytes (marked), and after the event's 100th duplicate none at all, like its body:
// the receipts grow by a few hundred bytes a replay, where each added ~15 KB for ever before.
TEST(HostilePeersPgTest, AReplayedNoticeWithLargeHeadersAddsBoundedBytes) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DB(db);
    ServeProcess server{db.url()};
    HttpClient merchant{server.port()};
    ASSERT_EQ(CreateOrder(merchant, "REPLAY-1").status, 201);
    const std::string body = Payment("REPLAY-1", 100);
    const std::string signature = Signed(body);
    const auto replay = [&](int count, int threads) {
        std::vector<std::thread> senders;
        std::atomic<int> not_ok{0};
        for (int t = 0; t < threads; ++t) {
            senders.emplace_back([&, t] {
                HttpClient client{server.port(), "127.0.0." + std::to_string(2 + t)};
                std::mt19937_64 random{static_cast<std::uint64_t>(t)};
                std::string agent(11 * 1024, 'a');
                for (int i = t; i < count; i += threads) {
                    for (char& c : agent) c = static_cast<char>('a' + random() % 26);
                    const int status =
                        client
                            .Post("/v1/callbacks/generic", body,
                                  {{"Payledger-Signature", signature}, {"User-Agent", agent}})
                            .status;
                    if (status != 200) not_ok.fetch_add(1);
                }
            });
        }
        for (std::thread& sender : senders) sender.join();
        return not_ok.load();
    };
    const std::string size_sql =
        "SELECT pg_total_relation_size('callback_receipts') + "
        "pg_total_relation_size('receipt_bodies')";
    ASSERT_EQ(replay(150, 4), 0);  // The payment, then past the 100th duplicate.
    const std::int64_t before = std::stoll(db.Scalar(size_sql));
    constexpr int kReplays = 2'000;
    ASSERT_EQ(replay(kReplays, 4), 0);
    const std::int64_t grown = std::stoll(db.Scalar(size_sql)) - before;
    EXPECT_LT(grown, kReplays * 1'024) << grown << " bytes for " << kReplays << " replays";
    // The first receipts kept the User-Agent cut and marked; beyond the 100th duplicate, none.
    const std::string kept = db.Scalar(
        "SELECT headers->>'User-Agent' FROM callback_receipts WHERE outcome = 'duplicate' "
        "ORDER BY id LIMIT 1");
    EXPECT_LT(kept.size(), 300U);
    EXPECT_NE(kept.find("[cut from 11264 bytes]"), std::string::npos) << kept;
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts WHERE outcome = 'duplicate' AND "
                        "NOT body_stored AND headers <> '{}'"),
              "0");
    EXPECT_EQ(db.Scalar("SELECT max(octet_length(headers::text)) <= 2048 FROM callback_receipts"),
              "t");
}

// limits.unverified_bytes_per_minute counts every byte an unverified receipt stores: empty bodies
// with large headers (each kept cut to 256 bytes, marked) and their messages. Before, each counted
// its body and 1 KiB, and stored up to 16 KiB of headers: ~20 times the budget.
TEST(HostilePeersPgTest, UnverifiedDeliveriesWithLargeHeadersStoreWithinTheByteBudget) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DB(db);
    constexpr std::int64_t kBudget = 256 * 1024;
    ServeProcess server{db.url(),
                        {{"limits",
                          {{"unverified_bytes_per_minute", kBudget},
                           {"unverified_per_peer_per_minute", 1'000'000}}}}};
    const std::string large(5 * 1024, 'h');
    int stored = 0;
    int limited = 0;
    HttpClient stranger{server.port(), "127.0.0.2"};
    for (int i = 0; i < 1'000; ++i) {
        const int status = stranger
                               .Post("/v1/callbacks/generic", "",
                                     {{"Payledger-Signature", large},
                                      {"User-Agent", large},
                                      {"Content-Type", large}})
                               .status;
        if (status == 401) ++stored;
        if (status == 429) ++limited;
    }
    EXPECT_GT(limited, 0);
    EXPECT_GT(stored, 50);  // The accounting is close, not a refusal of everything.
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts"), std::to_string(stored));
    const std::int64_t bytes = std::stoll(
        db.Scalar("SELECT coalesce(sum(pg_column_size(r.*)), 0) FROM callback_receipts AS r"));
    EXPECT_LE(bytes, kBudget) << stored << " receipts";
}

// No trailers: Beast merges the fields after a chunked body into the head's, and X-Forwarded-For
// is read once the whole request is in. Behind a trusted proxy that passes trailers on, a
// client could name its own peer (its limits, its receipts' `peer`) per request. Refused, 400,
// nothing stored; the same request without the trailer is a delivery as usual.
TEST(HostilePeersPgTest, TrailerFieldsAreRefusedSoNoClientNamesItsOwnPeer) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DB(db);
    ServeProcess server{db.url(), {{"trusted_proxies", {"127.0.0.3/32"}}}};
    const auto send_chunked = [&](const std::string& trailer) {
        const int fd = OpenFrom("127.0.0.3", server.port());
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        const std::string request =
            "POST /v1/callbacks/generic HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
            "X-Forwarded-For: 198.51.100.7\r\n\r\n4\r\njunk\r\n0\r\n" +
            trailer + "\r\n";
        send(fd, request.data(), request.size(), MSG_NOSIGNAL);
        std::string answer;
        char buffer[4096];
        ssize_t n = 0;
        while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0) {
            answer.append(buffer, static_cast<std::size_t>(n));
            if (answer.find("\r\n\r\n") != std::string::npos) break;
        }
        close(fd);
        return answer.substr(0, answer.find("\r\n"));
    };
    EXPECT_EQ(send_chunked("X-Forwarded-For: 203.0.113.66\r\n"), "HTTP/1.1 400 Bad Request");
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts"), "0");
    EXPECT_EQ(send_chunked(""), "HTTP/1.1 401 Unauthorized");
    EXPECT_EQ(db.Scalar("SELECT string_agg(split_part(peer, ' ', 1), ',') FROM callback_receipts"),
              "198.51.100.7");
}

// trusted_proxies: behind a proxy every client is the proxy's address unless the proxy says
// who it is. From a trusted proxy the peer is the address it appended last to
// X-Forwarded-For, so each client gets its own unverified count and its receipts name it;
// from anyone else the header is ignored, so a stranger cannot pick a fresh identity per
// request.
TEST(HostilePeersPgTest, XForwardedForIsBelievedFromTrustedProxiesOnly) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DB(db);
    ServeProcess server{db.url(),
                        {{"trusted_proxies", {"127.0.0.3/32"}},
                         {"limits", {{"unverified_per_peer_per_minute", 2}}}}};
    const auto post_as = [&](const char* source, const std::string& forwarded_for) {
        HttpClient client{server.port(), source};
        return client.Post("/v1/callbacks/generic", "junk", {{"X-Forwarded-For", forwarded_for}})
            .status;
    };
    // Through the proxy: two per client, whatever the client wrote to the left.
    EXPECT_EQ(post_as("127.0.0.3", "198.51.100.7"), 401);
    EXPECT_EQ(post_as("127.0.0.3", "203.0.113.1, 198.51.100.7"), 401);
    EXPECT_EQ(post_as("127.0.0.3", "203.0.113.2, 198.51.100.7"), 429);
    EXPECT_EQ(post_as("127.0.0.3", "198.51.100.8"), 401);  // Another client.
    // Not a proxy: its header is ignored, it is one peer however it names itself.
    EXPECT_EQ(post_as("127.0.0.4", "192.0.2.1"), 401);
    EXPECT_EQ(post_as("127.0.0.4", "192.0.2.2"), 401);
    EXPECT_EQ(post_as("127.0.0.4", "192.0.2.3"), 429);
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts WHERE peer LIKE "
                        "'198.51.100.7 via 127.0.0.3:%'"),
              "2");
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts WHERE peer LIKE "
                        "'198.51.100.8 via 127.0.0.3:%'"),
              "1");
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts WHERE peer LIKE '127.0.0.4:%'"),
              "2");
}

// A merchant token with out_trade_no_prefix registers only order numbers that start with it:
// another tenant's number is 403 and nothing is stored, so that tenant's payment can never
// credit this token's accounts.
TEST(HostilePeersPgTest, AScopedTokenRegistersOnlyOrderNumbersWithItsPrefix) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DB(db);
    const std::string tenant = "tenant-one-token-0123456789";
    ServeProcess server{
        db.url(),
        {{"tokens",
          {{"merchant",
            {testing::kMerchantToken,
             {{"token", tenant}, {"accounts", {"shop-1"}}, {"out_trade_no_prefix", "S1-"}}}},
           {"auditor", {testing::kAuditorToken}}}}}};
    HttpClient client{server.port()};
    const auto create = [&](const std::string& out_trade_no) {
        return client
            .Post("/v1/orders",
                  json{{"out_trade_no", out_trade_no},
                       {"account_id", "shop-1"},
                       {"amount", 100},
                       {"currency", "CNY"}}
                      .dump(),
                  {{"Authorization", "Bearer " + tenant}})
            .status;
    };
    EXPECT_EQ(create("S1-1001"), 201);
    EXPECT_EQ(create("S2-1001"), 403);
    EXPECT_EQ(create("S1"), 403);  // The prefix itself is not a number that starts with it.
    EXPECT_EQ(db.Scalar("SELECT string_agg(out_trade_no, ',') FROM ledger_events"), "S1-1001");
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts"), "1");
}

}  // namespace
}  // namespace payledger::api::hostile_peers_pgtest
