// Reliability: what production does to a ledger. The server runs as a real process
// (`payledger serve`) that is killed with SIGKILL mid-storm, or whose PostgreSQL (a cluster of
// the test's own) is stopped under load; two processes share one database; every endpoint is
// fed hostile input; slow clients trickle their headers. After each: every acknowledged
// delivery is in the ledger, nothing is duplicated, and `verify` finds the projections equal
// to the fold of the events.
#include <arpa/inet.h>
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
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "api/channels/generic_channel.hpp"
#include "api/cli/simulate.hpp"
#include "api/config.hpp"
#include "api/http/peer_limits.hpp"
#include "ledger/integrity/verify.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/pg/migrate.hpp"
#include "ledger/write/writer.hpp"
#include "support/own_postgres.hpp"
#include "support/payment_storm.hpp"
#include "support/serve_process.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using testing::AwaitCount;
using testing::CreateOrders;
using testing::ExpectAcknowledgedArePersisted;
using testing::ExpectLedgerComplete;
using testing::HttpClient;
using testing::HttpResult;
using testing::PaymentStorm;
using testing::ServeProcess;
using testing::TestDatabase;

constexpr int kClients = 16;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

TEST(ReliabilityPgTest, SigkillMidStormLosesNoAcknowledgedDelivery) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    constexpr int kOrders = 600;
    CreateOrders(db.url(), kOrders, 250);
    ServeProcess server{db.url()};
    PaymentStorm storm{server.port(), kOrders, 250};
    AwaitCount(storm, kOrders / 4);
    server.Kill();
    // Everything answered before the kill must have been committed before its answer.
    ExpectAcknowledgedArePersisted(db.url(), storm.Snapshot());
    server.Start();
    storm.Join();
    ASSERT_TRUE(storm.AllAcknowledged());
    ExpectLedgerComplete(db.url(), kOrders, 250);
}

TEST(ReliabilityPgTest, DatabaseOutageUnderLoadRecoversWithoutARestart) {
    if (std::getenv("PAYLEDGER_TEST_DATABASE_URL") == nullptr && std::getenv("CI") == nullptr) {
        GTEST_SKIP() << "no test database";
    }
    testing::OwnPostgres pg;
    constexpr int kOrders = 400;
    {
        auto connection = ledger::Connect(pg.url());
        ledger::Migrate(*connection);
    }
    CreateOrders(pg.url(), kOrders, 90);
    ServeProcess server{pg.url()};
    HttpClient probe{server.port()};
    PaymentStorm storm{server.port(), kOrders, 90};
    AwaitCount(storm, kOrders / 4);
    pg.Stop();
    const std::vector<bool> before_outage = storm.Snapshot();
    EXPECT_EQ(probe.Get("/readyz").status, 503);
    EXPECT_EQ(probe.Get("/healthz").status, 200);
    pg.Start();
    // The service reconnects by itself: readiness comes back without a restart.
    bool ready = false;
    const auto ready_deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    while (!ready && std::chrono::steady_clock::now() < ready_deadline) {
        ready = probe.Get("/readyz").status == 200;
        if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds{20});  // Poll pace.
    }
    EXPECT_TRUE(ready);
    storm.Join();
    ASSERT_TRUE(storm.AllAcknowledged());
    ExpectAcknowledgedArePersisted(pg.url(), before_outage);
    ExpectLedgerComplete(pg.url(), kOrders, 90);
    EXPECT_EQ(server.Terminate(), 0);  // Still the same process, and it stops cleanly.
}

TEST(ReliabilityPgTest, TwoInstancesStormOfOneCallbackAppendOnce) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    CreateOrders(db.url(), 1, 4321);
    ServeProcess first{db.url()};
    ServeProcess second{db.url()};
    const std::string body = testing::GenericPayment("R-0", "TX-R-0", 4321);
    std::atomic<int> appended{0};
    std::atomic<int> successes{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < 2 * kClients; ++c) {
        threads.emplace_back([&, c] {
            try {  // A connection error fails the test; uncaught, it would abort the binary.
                HttpClient client{c % 2 == 0 ? first.port() : second.port()};
                for (int i = 0; i < 10; ++i) {
                    const HttpResult r = client.Post(
                        "/v1/callbacks/generic", body,
                        {{"Payledger-Signature", GenericChannel::Sign(testing::kGenericSecret,
                                                                      testing::UnixNow(), body)}});
                    if (r.status == 200) ++successes;
                    if (r.Json()["outcome"] == "appended") ++appended;
                }
            } catch (const std::exception& error) {
                ADD_FAILURE() << "client " << c << ": " << error.what();
            }
        });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(successes.load(), 2 * kClients * 10);
    EXPECT_EQ(appended.load(), 1);
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM ledger_events WHERE event_type = "
                        "'PAYMENT_SUCCEEDED'"),
              "1");
    EXPECT_EQ(db.Scalar("SELECT balance FROM balances"), "4321");
}

// Sends raw bytes on a fresh connection and returns the status of the answer (0: none).
int RawStatus(unsigned short port, const std::string& bytes) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        close(fd);
        return 0;
    }
    timeval timeout{.tv_sec = 20, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    std::size_t sent = 0;
    while (sent < bytes.size()) {
        const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;  // The server may answer and close before reading everything.
        sent += static_cast<std::size_t>(n);
    }
    shutdown(fd, SHUT_WR);
    std::string answer;
    char buffer[4096];
    ssize_t n = 0;
    while (answer.find("\r\n") == std::string::npos &&
           (n = recv(fd, buffer, sizeof buffer, 0)) > 0) {
        answer.append(buffer, static_cast<std::size_t>(n));
    }
    close(fd);
    if (answer.rfind("HTTP/1.1 ", 0) != 0 || answer.size() < 12) return 0;
    return std::stoi(answer.substr(9, 3));
}

std::string Request(const std::string& method, const std::string& target, const std::string& body,
                    const std::string& extra_headers = {}) {
    return method + " " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + extra_headers +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The three platform sections with one RSA key of the test's (private half 0600, so that
// serve accepts it as simulate_private_key and the test signs with it through simulate).
json PlatformSections(const std::string& dir) {
    const std::string key = dir + "/hostile_rsa";
    EXPECT_EQ(
        std::system(("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out " + key +
                     ".pem 2>/dev/null && chmod 600 " + key + ".pem && openssl pkey -in " + key +
                     ".pem -pubout -out " + key + "_pub.pem")
                        .c_str()),
        0);
    return {{"wechat_v2",
             {{"appid", "wx0000000000000001"},
              {"mch_id", "1900000001"},
              {"api_key", "192006250b4c09247ec02edce69f6a2d"}}},
            {"wechat_v3",
             {{"appid", "wx0000000000000002"},
              {"mchid", "1900000002"},
              {"api_v3_key", "0123456789abcdef0123456789abcdef"},
              {"platform_public_keys", {{"ABCDEF0123", key + "_pub.pem"}}},
              {"simulate_private_key", key + ".pem"}}},
            {"alipay",
             {{"app_id", "2021000000000001"},
              {"alipay_public_key", key + "_pub.pem"},
              {"simulate_private_key", key + ".pem"}}}};
}

constexpr const char* kScopedToken = "scoped-merchant-token-0001";
constexpr const char* kSellerId = "2088000000000001";
constexpr int kConnectionsPerPeer = 8;

// The hostile test's server: the platform sections, alipay.seller_id, a merchant token
// scoped to shop-1, and a small per-peer connection limit.
json HostileConfig(const std::string& dir) {
    json config = PlatformSections(dir);
    config["alipay"]["seller_id"] = kSellerId;
    config["tokens"] = {
        {"merchant",
         {testing::kMerchantToken, {{"token", kScopedToken}, {"accounts", {"shop-1"}}}}},
        {"auditor", {testing::kAuditorToken}},
        {"admin", {testing::kAdminToken}}};
    config["limits"] = {{"connections_per_peer", kConnectionsPerPeer}};
    return config;
}

// Signs like the platforms do, with the server's own sections (simulate's keys): a config
// parsed from the same JSON; without seller_id, Alipay notices carry simulate's default
// seller_id (not kSellerId).
Config SigningConfig(const std::string& dir, const json& sections, bool with_seller_id) {
    json signing = sections;
    signing["database_url"] = "postgresql://unused/x";
    if (!with_seller_id) signing["alipay"].erase("seller_id");
    signing.erase("tokens");
    signing.erase("limits");
    return ParseConfig(signing.dump(), std::nullopt, std::nullopt, dir);
}

std::map<std::string, std::string> HeaderMap(const SimulatedNotice& notice) {
    return {notice.headers.begin(), notice.headers.end()};
}

// Defined below, beside the connection helpers it uses.
void BreakEveryIssue11Rule(const ServeProcess& server, TestDatabase& db, const std::string& dir,
                           const json& sections);

TEST(ReliabilityPgTest, HostileInputGetsOnly4xxAndAppendsNothing) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    CreateOrders(db.url(), 1, 100);
    const std::string dir = testing::MakeTestTmpDir("payledger-hostile.");
    const json sections = HostileConfig(dir);
    ServeProcess server{db.url(), sections};

    const std::string nested_json = std::string(20'000, '[') + std::string(20'000, ']');
    const std::string nested_xml = [] {
        std::string xml;
        for (int i = 0; i < 5000; ++i) xml += "<a>";
        return xml;
    }();
    const std::string laughs =
        "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 "
        "\"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\"><!ENTITY lol3 "
        "\"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;\">]><xml><a>&lol3;</a></"
        "xml>";
    const std::string xxe =
        "<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>"
        "<xml><out_trade_no>&e;</out_trade_no><sign>A</sign></xml>";
    const std::vector<std::string> bodies = {
        std::string("\xff\xfe\xfd\x00\x01", 5),
        "{\"out_trade_no\":\"R-0\",\"amount\":",
        nested_json,
        "<xml><return_code>SUCCESS</return_code><out_trade_no>R-0",
        nested_xml,
        laughs,
        xxe,
        "{\"out_trade_no\":\"R-0\",\"account_id\":\"a\",\"amount\":1e999999,\"currency\":\"CNY\"}",
        "{\"out_trade_no\":\"R-0\",\"account_id\":\"a\",\"amount\":99999999999999999999999999,"
        "\"currency\":\"CNY\"}",
        std::string("{\"out_trade_no\":\"R\x00-0\",\"account_id\":\"a\",\"amount\":1,"
                    "\"currency\":\"CNY\"}",
                    58),
        "{\"out_trade_no\":\"'; DROP TABLE ledger_events; --\",\"account_id\":\"a\",\"amount\":1,"
        "\"currency\":\"CNY\"}",
        "trade_status=TRADE_SUCCESS&out_trade_no=R-0&total_amount=1.00&sign=%zz%&sign_type=RSA2",
        "out_trade_no=R-0&total_amount=0.001&trade_status=TRADE_SUCCESS&app_id=2021000000000001",
    };
    const std::vector<std::string> posts = {"/v1/orders",
                                            "/v1/callbacks/generic",
                                            "/v1/callbacks/wechat/v2",
                                            "/v1/callbacks/wechat/v3",
                                            "/v1/callbacks/alipay",
                                            "/v1/admin/verify"};
    const std::string merchant =
        std::string("Authorization: Bearer ") + testing::kMerchantToken + "\r\n";
    const std::string v3_headers =
        "Wechatpay-Timestamp: 1700000000\r\nWechatpay-Nonce: n\r\nWechatpay-Serial: "
        "ABCDEF0123\r\nWechatpay-Signature: WECHATPAY/SIGNTEST/====\r\n";
    int requests = 0;
    const auto expect_4xx = [&](const std::string& what, const std::string& raw) {
        const int status = RawStatus(server.port(), raw);
        EXPECT_GE(status, 400) << what;
        EXPECT_LT(status, 500) << what;
        ++requests;
    };
    const auto round = [&] {
        for (const std::string& path : posts) {
            for (std::size_t b = 0; b < bodies.size(); ++b) {
                const std::string headers = path == "/v1/orders"                   ? merchant
                                            : path.find("v3") != std::string::npos ? v3_headers
                                            : path.find("generic") != std::string::npos
                                                ? "Payledger-Signature: t=1,v1=00\r\n"
                                                : "";
                expect_4xx(path + " body " + std::to_string(b),
                           Request("POST", path, bodies[b], headers));
            }
            for (const char* method : {"PUT", "DELETE", "PATCH", "GET"}) {
                if (std::string(method) == "GET" && path == "/v1/orders") continue;
                expect_4xx(path + " " + method, Request(method, path, ""));
            }
            expect_4xx(path + " oversize body", Request("POST", path, std::string(70'000, 'x')));
            expect_4xx(path + " oversize header",
                       Request("POST", path, "{}", "X-Big: " + std::string(20'000, 'h') + "\r\n"));
        }
        for (const std::string& target :
             {std::string("/nope"), std::string("/v1/orders/../../etc/passwd"),
              std::string("/v1/orders/R-0%00"), std::string("/v1/orders/") + std::string(5000, 'a'),
              std::string("/v1/events?after=99999999999999999999"), std::string("/%zz"),
              std::string("/v1/receipts?outcome=%27%3B--")}) {
            expect_4xx(
                "GET " + target.substr(0, 60),
                Request("GET", target, "",
                        std::string("Authorization: Bearer ") + testing::kAuditorToken + "\r\n"));
        }
        for (const std::string& garbage :
             {std::string("GARBAGE\r\n\r\n"), std::string("GET / HTTP/9.9\r\n\r\n"),
              std::string("POST /v1/orders HTTP/1.1\r\nContent-Length: -5\r\n\r\n"),
              std::string("POST /v1/orders HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
              std::string("GET /\x01\x02 HTTP/1.1\r\n\r\n", 21)}) {
            expect_4xx("garbage", garbage);
        }
    };
    // The first round warms up what a server allocates once (worker stacks, allocator caches,
    // prepared statements); the rounds after it must not make the process grow.
    round();
    const long rss_before = server.RssKiB();
    for (int i = 0; i < 3; ++i) round();
    EXPECT_GT(requests, 400);
    // Still up, nothing appended beyond the one order, memory bounded.
    HttpClient client{server.port()};
    EXPECT_EQ(client.Get("/healthz").status, 200);
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM ledger_events"), "1");
    std::printf("serve RSS %ld KiB after the warm-up round, %ld KiB after 3 more\n", rss_before,
                server.RssKiB());
    if (!kAddressSanitizer) {  // ASan keeps freed memory in its quarantine: RSS says nothing.
        EXPECT_LT(server.RssKiB() - rss_before, 32 * 1024) << "RSS grew by over 32 MiB";
    }
    BreakEveryIssue11Rule(server, db, dir, sections);
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM ledger_events"), "1");
    std::system(("rm -rf " + dir).c_str());
}

TEST(ReliabilityPgTest, SlowClientsDoNotStopNormalRequestsAndAreCutOff) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    api::Server::Options options = testing::TestService::DefaultServerOptions();
    options.read_timeout = std::chrono::seconds{10};
    testing::TestService service{testing::TestConfig(db.url()),
                                 ledger::SessionSettings{.application_name = db.name()}, options};
    HttpClient client{service.port()};
    // One normal request: a health check and a new order (a commit). Its latency is printed
    // with and without the slow clients, for the record; a timed assertion would measure the
    // machine, so what is asserted below is structural.
    int order = 0;
    const auto normal_request = [&] {
        const auto started = std::chrono::steady_clock::now();
        EXPECT_EQ(client.Get("/healthz").status, 200);
        EXPECT_EQ(service.CreateOrder(client, "S-" + std::to_string(order++), "acct", 5).status,
                  201);
        return std::chrono::steady_clock::now() - started;
    };
    const auto report = [](const char* what, std::vector<std::chrono::steady_clock::duration> v) {
        std::sort(v.begin(), v.end());
        const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
        std::printf("normal requests %s: p50 %.2f ms, max %.2f ms (%zu)\n", what,
                    ms(v[v.size() / 2]), ms(v.back()), v.size());
        return v.back();
    };
    std::vector<std::chrono::steady_clock::duration> alone;
    for (int i = 0; i < 50; ++i) alone.push_back(normal_request());
    (void)report("alone", alone);

    constexpr int kSlow = 100;
    std::vector<int> sockets;
    for (int i = 0; i < kSlow; ++i) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = htons(service.port());
        ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
        sockets.push_back(fd);
    }
    const auto connected_at = std::chrono::steady_clock::now();
    // One byte a second per connection: round-robin, one send every 10 ms.
    struct Trickler {
        std::atomic<bool> stop{false};
        std::thread thread;
        ~Trickler() {  // Also when an assertion returns early.
            stop = true;
            if (thread.joinable()) thread.join();
        }
    } trickler;
    trickler.thread = std::thread([&] {
        const std::string header = "GET /healthz HTTP/1.1\r\nHost: slow\r\nX-Slow: ";
        for (std::size_t step = 0; !trickler.stop.load() && step < 100'000; ++step) {
            const int fd = sockets[step % kSlow];
            const char byte = header[(step / kSlow) % header.size()];
            (void)send(fd, &byte, 1, MSG_NOSIGNAL);
            std::this_thread::sleep_for(std::chrono::milliseconds{10});  // The pace, not a sync.
        }
    });
    std::vector<std::chrono::steady_clock::duration> beside_slow;
    for (int i = 0; i < 50; ++i) beside_slow.push_back(normal_request());
    const auto slowest = report("beside 100 slow clients", beside_slow);
    // Served, not starved: a server that let a slow client hold it up would answer only when
    // that client is cut off, after the full read timeout. Half of it leaves room for a slow
    // fsync on a loaded machine and still tells the two apart.
    EXPECT_LT(slowest, options.read_timeout / 2);
    // And served while every slow client still held its connection: none is closed yet.
    if (std::chrono::steady_clock::now() - connected_at < options.read_timeout) {
        int open = 0;
        for (const int fd : sockets) {
            char byte = 0;
            open += recv(fd, &byte, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN ? 1 : 0;
        }
        EXPECT_EQ(open, kSlow);
    }
    // The server cuts every slow connection off after its read timeout: end of stream (or a
    // reset), never our own receive timeout, which is far longer.
    int closed = 0;
    for (const int fd : sockets) {
        timeval timeout{.tv_sec = 40, .tv_usec = 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
        char buffer[256];
        ssize_t n = 0;
        do {
            n = recv(fd, buffer, sizeof buffer, 0);
        } while (n > 0);
        closed += n == 0 || errno == ECONNRESET ? 1 : 0;
    }
    trickler.stop = true;  // Before the descriptors close and their numbers are reused.
    trickler.thread.join();
    for (const int fd : sockets) close(fd);
    EXPECT_EQ(closed, kSlow);
}

// A TCP connection to 127.0.0.1:`port` from `source` (another loopback address is another
// peer); -1 when it fails.
int ConnectFrom(const char* source, unsigned short port) {
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
    return fd;
}

// True when the server closes `fd` (EOF or reset) within `within`, without any request sent.
bool ClosedByServer(int fd, std::chrono::seconds within) {
    timeval timeout{.tv_sec = within.count(), .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    char byte = 0;
    const ssize_t n = recv(fd, &byte, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

// user + system CPU seconds the process has used so far (/proc/PID/stat).
double CpuSeconds(pid_t pid) {
    std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
    std::string text{std::istreambuf_iterator<char>{stat}, {}};
    std::istringstream fields{text.substr(text.rfind(')') + 2)};
    std::string field;
    long ticks = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
        if (i == 14 || i == 15) ticks += std::stol(field);
    }
    return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The hostile-sender rules (docs/security.md) against the running server, each rule broken from a
// peer address of its own (a fresh unverified budget), each refused with its status, nothing
// appended.
void BreakEveryIssue11Rule(const ServeProcess& server, TestDatabase& db, const std::string& dir,
                           const json& sections) {
    const Config signing = SigningConfig(dir, sections, true);
    const Config stranger_seller = SigningConfig(dir, sections, false);
    const std::int64_t now = testing::UnixNow();
    const auto notice = [&](const std::string& channel, const std::string& kind,
                            std::int64_t amount, std::int64_t order_amount,
                            const Config* config = nullptr) {
        return BuildNotice(config ? *config : signing, {.channel = channel,
                                                        .out_trade_no = "R-0",
                                                        .kind = kind,
                                                        .amount = amount,
                                                        .order_amount = order_amount,
                                                        .unix_seconds = now});
    };
    const auto post = [&](const char* source, const SimulatedNotice& n, const std::string& body) {
        HttpClient client{server.port(), source};
        return client.Post(n.target, body, HeaderMap(n));
    };
    const auto replace = [](std::string text, const std::string& from, const std::string& to) {
        const std::size_t at = text.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        if (at != std::string::npos) text.replace(at, from.size(), to);
        return text;
    };

    // Point 5, strict parsing: a repeated JSON key in a signed generic body and in an order.
    {
        const std::string body =
            "{\"event_type\":\"PAYMENT_SUCCEEDED\",\"out_trade_no\":\"R-0\",\"out_trade_no\":"
            "\"R-0\",\"transaction_id\":\"T-9\",\"amount\":100}";
        HttpClient client{server.port(), "127.0.0.11"};
        const HttpResult r = client.Post(
            "/v1/callbacks/generic", body,
            {{"Payledger-Signature", GenericChannel::Sign(testing::kGenericSecret, now, body)}});
        EXPECT_EQ(r.status, 400) << "generic repeated key: " << r.body;
        const HttpResult order = client.Post(
            "/v1/orders",
            R"({"out_trade_no":"R-9","account_id":"shop-1","amount":1,"amount":2,"currency":"CNY"})",
            {{"Authorization", std::string("Bearer ") + testing::kMerchantToken}});
        EXPECT_EQ(order.status, 400) << "order repeated key: " << order.body;
    }
    // A repeated XML element (v2), a repeated form field (Alipay), a v2 reference to a control
    // character: each malformed, from addresses that have sent nothing unverified yet.
    {
        const SimulatedNotice v2 = notice("wechat_v2", "payment", 100, 0);
        HttpResult r =
            post("127.0.0.12", v2, replace(v2.body, "</xml>", "<total_fee>1</total_fee></xml>"));
        EXPECT_EQ(r.status, 400) << "v2 repeated element: " << r.body;
        r = post("127.0.0.13", v2, replace(v2.body, "</xml>", "<attach>a&#1;b</attach></xml>"));
        EXPECT_EQ(r.status, 400) << "v2 control character reference: " << r.body;
        const SimulatedNotice alipay = notice("alipay", "payment", 100, 0);
        r = post("127.0.0.14", alipay, alipay.body + "&out_trade_no=R-0");
        EXPECT_EQ(r.status, 400) << "alipay repeated field: " << r.body;
    }
    // WeChat v3 verifies before it parses or decrypts: a bad signature over a well-formed
    // notice is 401 and its receipt names no order (the number is inside the resource).
    {
        SimulatedNotice v3 = notice("wechat_v3", "payment", 100, 0);
        for (auto& [name, value] : v3.headers) {
            if (name == "Wechatpay-Signature") value = std::string(344, 'A');
        }
        const HttpResult r = post("127.0.0.15", v3, v3.body);
        EXPECT_EQ(r.status, 401) << "v3 bad signature: " << r.body;
        EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts WHERE source = 'wechat_v3' "
                            "AND outcome = 'bad_signature' AND out_trade_no IS NOT NULL"),
                  "0");
    }
    // Point 6: a signed refund whose order total is not the order's (100) is a mismatch, in
    // every channel; Alipay's seller_id must be the configured one.
    const auto last_message = [&](const char* source) {
        return db.Scalar(std::string("SELECT outcome || ': ' || message FROM callback_receipts "
                                     "WHERE source = '") +
                         source + "' ORDER BY id DESC LIMIT 1");
    };
    for (const char* channel : {"wechat_v2", "wechat_v3", "alipay"}) {
        const SimulatedNotice refund = notice(channel, "refund", 50, 999);
        const HttpResult r = post("127.0.0.16", refund, refund.body);
        EXPECT_EQ(r.status, 422) << channel << " refund cross-check: " << last_message(channel);
        EXPECT_EQ(last_message(channel).find("seller_id"), std::string::npos);
    }
    {
        const SimulatedNotice payment = notice("alipay", "payment", 100, 0, &stranger_seller);
        const HttpResult r = post("127.0.0.17", payment, payment.body);
        EXPECT_EQ(r.status, 422) << "alipay seller_id: " << last_message("alipay");
        EXPECT_NE(last_message("alipay").find("seller_id"), std::string::npos);
    }
    // Point 7: a token scoped to shop-1 may not register shop-2's orders: 403, no receipt.
    {
        HttpClient client{server.port(), "127.0.0.18"};
        const HttpResult r = client.Post(
            "/v1/orders",
            R"({"out_trade_no":"R-SCOPED","account_id":"shop-2","amount":1,"currency":"CNY"})",
            {{"Authorization", std::string("Bearer ") + kScopedToken}});
        EXPECT_EQ(r.status, 403) << r.body;
        EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts WHERE out_trade_no = "
                            "'R-SCOPED'"),
                  "0");
    }
    // Point 1: the rounds stored far more than 120 unverified deliveries from 127.0.0.1 in
    // the last minute; the next is 429, never stored; a signed one is never limited.
    {
        const std::string before = db.Scalar("SELECT count(*) FROM callback_receipts");
        HttpClient client{server.port()};
        const HttpResult limited =
            client.Post("/v1/callbacks/generic", "{}", {{"Payledger-Signature", "t=1,v1=00"}});
        EXPECT_EQ(limited.status, 429) << limited.body;
        EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts"), before);
        const std::string body = "{\"event_type\":\"PAYMENT_CLOSED\"}";
        const HttpResult signed_malformed = client.Post(
            "/v1/callbacks/generic", body,
            {{"Payledger-Signature", GenericChannel::Sign(testing::kGenericSecret, now, body)}});
        EXPECT_EQ(signed_malformed.status, 400) << signed_malformed.body;
    }
    // Point 3: a peer's connections beyond limits.connections_per_peer are closed at accept.
    {
        std::vector<int> fds;
        for (int i = 0; i < kConnectionsPerPeer; ++i) {
            fds.push_back(ConnectFrom("127.0.0.19", server.port()));
            ASSERT_GE(fds.back(), 0);
        }
        const int extra = ConnectFrom("127.0.0.19", server.port());
        ASSERT_GE(extra, 0);
        EXPECT_TRUE(ClosedByServer(extra, std::chrono::seconds{10}));
        EXPECT_FALSE(ClosedByServer(fds[0], std::chrono::seconds{1}));
        close(extra);
        for (const int fd : fds) close(fd);
    }
    // Point 4: an order's receipts are paged: never more than a page, limit at most 1000,
    // however many deliveries name the order (here 150 signed, malformed, never limited).
    {
        HttpClient client{server.port(), "127.0.0.20"};
        const std::string body = "{\"event_type\":\"BOGUS\",\"out_trade_no\":\"R-0\"}";
        const std::string signature = GenericChannel::Sign(testing::kGenericSecret, now, body);
        for (int i = 0; i < 150; ++i) {
            ASSERT_EQ(
                client.Post("/v1/callbacks/generic", body, {{"Payledger-Signature", signature}})
                    .status,
                400);
        }
        EXPECT_EQ(client.Get("/v1/orders/R-0/receipts?limit=1001", testing::kAuditorToken).status,
                  400);
        const HttpResult page =
            client.Get("/v1/orders/R-0/receipts?limit=2", testing::kAuditorToken);
        ASSERT_EQ(page.status, 200) << page.body;
        EXPECT_EQ(page.Json()["receipts"].size(), 2u);
        const HttpResult first = client.Get("/v1/orders/R-0/receipts", testing::kAuditorToken);
        ASSERT_EQ(first.status, 200);
        const std::string stored =
            db.Scalar("SELECT count(*) FROM callback_receipts WHERE out_trade_no = 'R-0'");
        EXPECT_GT(std::stoi(stored), 100) << "the rounds should name R-0 in over a page";
        EXPECT_EQ(first.Json()["receipts"].size(), 100u);
    }
}

// A peer flooding 64 KiB deliveries without a valid signature is limited to
// limits.unverified_per_peer_per_minute stored receipts (then 429, counted, never stored),
// while valid callbacks from another address stay fast; a delivery that verifies is never
// limited, even from the limited address.
TEST(ReliabilityPgTest, AnUnverifiedFloodFromOnePeerIsLimitedAndValidCallbacksStayFast) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    constexpr int kLimit = 120;
    constexpr int kFlood = 400;
    constexpr int kOrders = 200;
    CreateOrders(db.url(), kOrders + 1, 100);
    ServeProcess server{db.url(), {{"limits", {{"unverified_per_peer_per_minute", kLimit}}}}};

    std::atomic<int> unauthorized{0};
    std::atomic<int> limited{0};
    std::atomic<int> other{0};
    std::thread flooder([&] {
        HttpClient client{server.port(), "127.0.0.2"};
        const std::string junk(65'000, 'x');  // Just under the 64 KiB request limit.
        for (int i = 0; i < kFlood; ++i) {
            const HttpResult r =
                client.Post("/v1/callbacks/generic", junk,
                            {{"Payledger-Signature", "t=" + std::to_string(testing::UnixNow()) +
                                                         ",v1=" + std::string(64, '0')}});
            (r.status == 401 ? unauthorized : r.status == 429 ? limited : other)++;
        }
    });
    std::vector<double> latencies_ms;
    HttpClient client{server.port()};
    for (int i = 0; i < kOrders; ++i) {
        const std::string key = "R-" + std::to_string(i);
        const std::string body = testing::GenericPayment(key, "TX-" + key, 100);
        const auto started = std::chrono::steady_clock::now();
        const HttpResult r = client.Post(
            "/v1/callbacks/generic", body,
            {{"Payledger-Signature",
              GenericChannel::Sign(testing::kGenericSecret, testing::UnixNow(), body)}});
        latencies_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                .count());
        ASSERT_EQ(r.status, 200) << r.body;
    }
    flooder.join();
    std::sort(latencies_ms.begin(), latencies_ms.end());
    const double p99 = latencies_ms[latencies_ms.size() * 99 / 100];
    std::printf("valid callbacks beside the flood: p50 %.2f ms, p99 %.2f ms (%d)\n",
                latencies_ms[latencies_ms.size() / 2], p99, kOrders);
    EXPECT_LT(p99, 1000.0);

    EXPECT_EQ(unauthorized.load(), kLimit);
    EXPECT_EQ(limited.load(), kFlood - kLimit);
    EXPECT_EQ(other.load(), 0);
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts WHERE peer LIKE '127.0.0.2:%'"),
              std::to_string(kLimit));
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM ledger_events WHERE event_type = "
                        "'PAYMENT_SUCCEEDED'"),
              std::to_string(kOrders));
    const HttpResult metrics = client.Get("/metrics");
    EXPECT_NE(metrics.body.find("payledger_deliveries_total{channel=\"generic\",outcome="
                                "\"rate_limited\"} " +
                                std::to_string(kFlood - kLimit)),
              std::string::npos)
        << metrics.body;

    // Signed, from the limited address: never limited.
    HttpClient limited_peer{server.port(), "127.0.0.2"};
    const std::string key = "R-" + std::to_string(kOrders);
    const std::string body = testing::GenericPayment(key, "TX-" + key, 100);
    const HttpResult signed_delivery = limited_peer.Post(
        "/v1/callbacks/generic", body,
        {{"Payledger-Signature",
          GenericChannel::Sign(testing::kGenericSecret, testing::UnixNow(), body)}});
    EXPECT_EQ(signed_delivery.status, 200) << signed_delivery.body;
    EXPECT_EQ(signed_delivery.Json()["outcome"], "appended");
    // Signed but malformed: the signature verified, so it is not limited either; stored.
    const std::string junk = "not a JSON object";
    const HttpResult signed_junk = limited_peer.Post(
        "/v1/callbacks/generic", junk,
        {{"Payledger-Signature",
          GenericChannel::Sign(testing::kGenericSecret, testing::UnixNow(), junk)}});
    EXPECT_EQ(signed_junk.status, 400) << signed_junk.body;
    EXPECT_EQ(signed_junk.Json()["outcome"], "malformed");
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts WHERE peer LIKE '127.0.0.2:%'"),
              std::to_string(kLimit + 2));
}

// The committer's queue is bounded in bytes. With the writer lock held by
// the test, ~1 000 signed 64 KiB deliveries fill a 48 MiB write queue; the ones beyond it are
// answered 503 at once (while the lock is still held) and stored nowhere, and the serve
// process's peak RSS (VmHWM) stays at most 256 MiB through the fill and the writes. (Not the
// default 64 MiB: 1 010 such deliveries are 65 MiB, and the ~4 MiB batch the committer has
// taken off the queue left the default just unreached under AddressSanitizer's timing.)
TEST(ReliabilityPgTest, AFullWriteQueueOf64KiBBodiesAnswers503AtOnceAndStaysUnder256MiB) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    constexpr std::size_t kDeliveries =
        1'010;  // Past 64 MiB of queue, within the 1 024 connections.
    constexpr long kRssMaxKiB = 256 * 1024;
    constexpr std::size_t kBudget = 48 << 20;
    ServeProcess server{
        db.url(),
        {{"limits", {{"connections_per_peer", 2'000}, {"write_queue_bytes_max", kBudget}}}}};
    const long rss_idle = server.RssKiB();

    // The test's own session: no idle-in-transaction timeout ends the hold early.
    auto holder = db.Connect();
    pqxx::work hold{*holder};
    hold.exec_params("SELECT pg_advisory_xact_lock($1)", ledger::kWriterLockKey);

    const auto body_for = [](std::size_t i) {
        std::string body = "{\"event_type\":\"PAYMENT_SUCCEEDED\",\"out_trade_no\":\"RSS-" +
                           std::to_string(i) +
                           "\",\"transaction_id\":\"T-1\",\"amount\":100,\"pad\":\"";
        body += std::string(65'000 - body.size(), 'x');
        return body + "\"}";
    };
    const auto fill_started = std::chrono::steady_clock::now();
    std::vector<int> fds;
    std::vector<std::string> answers(kDeliveries);
    for (std::size_t i = 0; i < kDeliveries; ++i) {
        const std::string body = body_for(i);
        const std::string signature =
            GenericChannel::Sign(testing::kGenericSecret, testing::UnixNow(), body);
        const std::string raw = Request("POST", "/v1/callbacks/generic", body,
                                        "Payledger-Signature: " + signature + "\r\n");
        const int fd = ConnectFrom("127.0.0.1", server.port());
        ASSERT_GE(fd, 0) << "connection " << i;
        std::size_t sent = 0;
        while (sent < raw.size()) {
            const ssize_t n = send(fd, raw.data() + sent, raw.size() - sent, MSG_NOSIGNAL);
            ASSERT_GT(n, 0) << "sending delivery " << i;
            sent += static_cast<std::size_t>(n);
        }
        fds.push_back(fd);
    }
    const auto fill_done = std::chrono::steady_clock::now();
    // Reads whatever has arrived, for up to `within`; true when every answer is complete.
    std::vector<bool> closed(kDeliveries, false);
    const auto read_answers = [&](std::chrono::seconds within,
                                  const std::function<bool()>& enough) {
        const auto deadline = std::chrono::steady_clock::now() + within;
        while (std::chrono::steady_clock::now() < deadline && !enough()) {
            std::vector<pollfd> open;
            std::vector<std::size_t> index;
            for (std::size_t i = 0; i < kDeliveries; ++i) {
                if (closed[i]) continue;
                open.push_back(pollfd{.fd = fds[i], .events = POLLIN, .revents = 0});
                index.push_back(i);
            }
            if (open.empty()) return;
            if (poll(open.data(), open.size(), 100) <= 0) continue;
            for (std::size_t k = 0; k < open.size(); ++k) {
                if (open[k].revents == 0) continue;
                char buffer[4096];
                const ssize_t n = recv(open[k].fd, buffer, sizeof buffer, 0);
                if (n <= 0) {
                    closed[index[k]] = true;
                } else {
                    answers[index[k]].append(buffer, static_cast<std::size_t>(n));
                }
            }
        }
    };
    const auto count = [&](const char* status_line, const char* text) {
        return std::count_if(answers.begin(), answers.end(), [&](const std::string& answer) {
            return answer.rfind(status_line, 0) == 0 && answer.find(text) != std::string::npos;
        });
    };
    const auto queue_full = [&] { return count("HTTP/1.1 503", "the write queue is full"); };
    // While the lock is held nothing can be written: every answer now is a refusal at once.
    // Waits until the server has read enough of the requests to pass the budget (seconds
    // under AddressSanitizer, which verifies each 64 KiB body slowly), then for the rest.
    read_answers(std::chrono::seconds{60}, [&] { return queue_full() > 0; });
    read_answers(std::chrono::seconds{2}, [] { return false; });
    const long full_answers = queue_full();
    const long rss_full = server.RssKiB();
    EXPECT_GT(full_answers, 0) << "no delivery was refused for the byte budget";
    // The queue held at least 80 % of its budget before it refused.
    EXPECT_LT(full_answers, static_cast<long>(kDeliveries - (kBudget * 8 / 10) / 65'536))
        << "the queue held far less than its budget";

    hold.commit();  // Let the committer write what is queued.
    read_answers(std::chrono::seconds{120}, [&] {
        return std::all_of(closed.begin(), closed.end(), [](bool c) { return c; });
    });
    for (const int fd : fds) close(fd);
    const long answered_404 = count("HTTP/1.1 404", "unknown_order");
    const long answered_503 = count("HTTP/1.1 503", "");
    EXPECT_EQ(answered_404 + answered_503, static_cast<long>(kDeliveries))
        << "a delivery got another answer";
    // 503s (the queue full, or a batch that waited past lock_timeout) are never stored.
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM callback_receipts"), std::to_string(answered_404));
    std::printf(
        "serve RSS %ld KiB idle, %ld KiB with the queue full; peak (VmHWM) %ld KiB; "
        "%ld refused at once for the byte budget, %ld stored; sent in %.1f s\n",
        rss_idle, rss_full, server.PeakRssKiB(), full_answers, answered_404,
        std::chrono::duration<double>(fill_done - fill_started).count());
    if (!kAddressSanitizer) {  // ASan keeps freed memory in its quarantine: RSS says nothing.
        EXPECT_LE(server.PeakRssKiB(), kRssMaxKiB) << "peak RSS over 256 MiB";
    }
}

TEST(PeerLimitsTest, UnverifiedLimiterIsASlidingWindowOfSixtySecondsPerAddress) {
    UnverifiedLimiter limiter{3};
    const auto t0 = UnverifiedLimiter::Clock::time_point{} + std::chrono::hours{1};
    using std::chrono::seconds;
    EXPECT_TRUE(limiter.Admit("a", t0));
    EXPECT_TRUE(limiter.Admit("a", t0 + seconds{10}));
    EXPECT_TRUE(limiter.Admit("a", t0 + seconds{20}));
    EXPECT_FALSE(limiter.Admit("a", t0 + seconds{30}));  // Three in the last 60 s.
    EXPECT_TRUE(limiter.Admit("b", t0 + seconds{30}));   // Another address is not limited.
    EXPECT_FALSE(limiter.Admit("a", t0 + seconds{59}));
    EXPECT_TRUE(limiter.Admit("a", t0 + seconds{60}));  // The first left the window.
    EXPECT_FALSE(limiter.Admit("a", t0 + seconds{61}));
    EXPECT_TRUE(limiter.Admit("a", t0 + seconds{70}));
}

// The limit counts receipts stored: a delivery the database did not commit is uncounted.
TEST(PeerLimitsTest, AnUnverifiedDeliveryThatWasNotStoredIsUncounted) {
    UnverifiedLimiter limiter{2};
    const auto t0 = UnverifiedLimiter::Clock::time_point{} + std::chrono::hours{1};
    using std::chrono::seconds;
    EXPECT_TRUE(limiter.Admit("a", t0));
    EXPECT_TRUE(limiter.Admit("a", t0 + seconds{1}));
    EXPECT_FALSE(limiter.Admit("a", t0 + seconds{2}));
    limiter.Forget("a", t0 + seconds{1});  // Answered unavailable: never stored.
    EXPECT_TRUE(limiter.Admit("a", t0 + seconds{3}));
    EXPECT_FALSE(limiter.Admit("a", t0 + seconds{4}));
    limiter.Forget("b", t0);                // Nothing to forget: no effect.
    limiter.Forget("a", t0 + seconds{30});  // Not an admission: no effect.
    EXPECT_FALSE(limiter.Admit("a", t0 + seconds{5}));
}

// limits.connections_per_peer closes a peer's extra connections at accept;
// other peers are served, and the peer gets a slot back when one of its connections ends.
TEST(ReliabilityPgTest, ConnectionsBeyondThePerPeerLimitAreClosedAtAccept) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    constexpr int kPerPeer = 4;
    ServeProcess server{db.url(), {{"limits", {{"connections_per_peer", kPerPeer}}}}};
    std::vector<int> held;
    for (int i = 0; i < kPerPeer; ++i) {
        held.push_back(ConnectFrom("127.0.0.2", server.port()));
        ASSERT_GE(held.back(), 0);
    }
    // The held ones are served: one request on the first proves it was accepted.
    const std::string healthz = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(send(held[0], healthz.data(), healthz.size(), 0),
              static_cast<ssize_t>(healthz.size()));
    char reply[12] = {};
    ASSERT_EQ(recv(held[0], reply, sizeof reply, MSG_WAITALL), static_cast<ssize_t>(sizeof reply));
    EXPECT_EQ(std::string(reply, sizeof reply), "HTTP/1.1 200");

    const int extra = ConnectFrom("127.0.0.2", server.port());
    ASSERT_GE(extra, 0);
    EXPECT_TRUE(ClosedByServer(extra, std::chrono::seconds{10}));
    close(extra);
    HttpClient other_peer{server.port()};
    EXPECT_EQ(other_peer.Get("/healthz").status, 200);

    // One connection ends: the peer may open another (the server notices the close
    // asynchronously, so retry until a deadline).
    close(held.back());
    held.pop_back();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    bool served = false;
    while (!served && std::chrono::steady_clock::now() < deadline) {
        HttpClient again{server.port(), "127.0.0.2"};
        try {
            served = again.Get("/healthz").status == 200;
        } catch (const std::exception&) {
            std::this_thread::sleep_for(std::chrono::milliseconds{20});
        }
    }
    EXPECT_TRUE(served);
    for (const int fd : held) close(fd);
}

// Out of file descriptors, accept backs off instead of spinning. serve runs
// with a limit of 64 open files, soft and hard (it raises the soft limit to the hard one, so
// both are set), and gets more connections than it can hold; its CPU time while they wait
// stays near zero, and it serves again once they are gone.
TEST(ReliabilityPgTest, AcceptOutOfFileDescriptorsBacksOffInsteadOfSpinning) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    ServeProcess server{db.url(), {{"limits", {{"connections_per_peer", 1000}}}}, 0, 64};
    HttpClient client{server.port()};
    ASSERT_EQ(client.Get("/readyz").status, 200);  // Pool and committer connections opened.
    std::vector<int> held;
    for (int i = 0; i < 100; ++i) {
        const int fd = ConnectFrom("127.0.0.1", server.port());
        if (fd >= 0) held.push_back(fd);
    }
    ASSERT_GE(held.size(), 80u);  // The listen backlog holds what serve cannot accept.
    const double before = CpuSeconds(server.pid());
    const auto started = std::chrono::steady_clock::now();
    // No request is sent: serve has nothing to do but accept. Two seconds of wall time is
    // what this test measures; a spinning accept loop burns a core for all of it.
    std::this_thread::sleep_for(std::chrono::seconds{2});
    const double cpu = CpuSeconds(server.pid()) - before;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("serve CPU while out of descriptors: %.3f s in %.2f s\n", cpu, wall);
    EXPECT_LT(cpu, 0.25 * wall);
    for (const int fd : held) close(fd);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    int status = 0;
    while (status != 200 && std::chrono::steady_clock::now() < deadline) {
        HttpClient again{server.port()};
        try {
            status = again.Get("/healthz").status;
        } catch (const std::exception&) {
            std::this_thread::sleep_for(std::chrono::milliseconds{20});
        }
    }
    EXPECT_EQ(status, 200);
}

// serve started while its database is down waits for it, then serves, instead of exiting
// (docs/api.md#the-command-line). It listens at once and, while it waits: /healthz 200, /readyz
// and every write 503 (in each channel's own form), every read 503 whatever the token, then
// ready.
TEST(ReliabilityPgTest, ServeStartedWhileTheDatabaseIsDownWaitsForIt) {
    testing::OwnPostgres pg;
    {
        auto connection = ledger::Connect(pg.url());
        (void)ledger::Migrate(*connection);
    }
    pg.Stop();
    ServeProcess server{pg.url(), json::object(), 0, 0, ServeProcess::Await::kListening};
    // Wait (bounded) until serve says that it waits.
    const auto said_waiting = [&] {
        std::ifstream log{server.log_path()};
        const std::string text{std::istreambuf_iterator<char>{log}, {}};
        return text.find("waiting for the database") != std::string::npos;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (!said_waiting() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds{20});  // Polling its log file.
    }
    ASSERT_TRUE(said_waiting()) << "serve never said it waits for the database";
    HttpClient client{server.port()};
    EXPECT_EQ(client.Get("/healthz").status, 200);
    EXPECT_EQ(client.Get("/readyz").status, 503);
    const std::string order =
        R"({"out_trade_no":"W-1","account_id":"a","amount":5,"currency":"CNY"})";
    const std::map<std::string, std::string> merchant = {
        {"Authorization", std::string("Bearer ") + testing::kMerchantToken}};
    const testing::HttpResult early = client.Post("/v1/orders", order, merchant);
    EXPECT_EQ(early.status, 503) << early.body;
    EXPECT_EQ(early.Json()["outcome"], "unavailable");
    EXPECT_EQ(client.Get("/v1/orders/W-1", testing::kAuditorToken).status, 503);
    // Before any token is looked at, on the auditor and admin endpoints; the probe of verify
    // answers the token's role all the same.
    EXPECT_EQ(client.Get("/v1/orders/W-1").status, 503);
    EXPECT_EQ(client.Get("/v1/admin/subscriptions", testing::kMerchantToken).status, 503);
    EXPECT_EQ(client.Get("/v1/admin/verify", testing::kAuditorToken).status, 403);

    pg.Start();
    const auto ready_by = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    int ready = 0;
    while ((ready = client.Get("/readyz").status) != 200 &&
           std::chrono::steady_clock::now() < ready_by) {
        std::this_thread::sleep_for(std::chrono::milliseconds{20});  // Its backoff is 2 s at most.
    }
    ASSERT_EQ(ready, 200);
    EXPECT_EQ(client.Post("/v1/orders", order, merchant).status, 201);
    EXPECT_EQ(server.Terminate(), 0);
}

TEST(PeerLimitsTest, RaiseOpenFileLimitRaisesTheSoftLimitToTheHardOne) {
    rlimit limit{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
    if (limit.rlim_max < 256 || limit.rlim_max == RLIM_INFINITY) GTEST_SKIP();
    rlimit lowered = limit;
    lowered.rlim_cur = 128;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
    EXPECT_EQ(RaiseOpenFileLimit(), static_cast<std::size_t>(limit.rlim_max));
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lowered), 0);
    EXPECT_EQ(lowered.rlim_cur, limit.rlim_max);
}

}  // namespace
}  // namespace payledger::api
