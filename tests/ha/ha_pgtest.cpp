// High availability and read replicas (docs/availability.md#failover,
// docs/availability.md#read-replicas), against clusters of the tests' own (support/own_cluster.hpp:
// initdb, pg_basebackup -R, streaming replication) and a real `payledger serve`:
// - a callback storm while the primary is stopped with -m immediate and its synchronous standby
//   promoted: every acknowledged delivery is on the promoted node, none twice, verify exits 0,
//   and the same process answers again within 20 s;
// - database_url naming a standby first and no target_session_attrs: writes reach the primary,
//   never a 500; a session on a standby answers 503 (writes and /readyz), SQLSTATE 25006 is
//   "not now";
// - read_database_url: the reads are proven to come from the replica (its replay paused, a new
//   order on the primary is not seen), fall back to the primary within 10 s when the replica
//   stops or lags more than read_max_lag_seconds (a log line, the metrics), and return.
// Every wait polls an observable condition (an HTTP answer, a metric, a server's own report)
// with a deadline.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "api/channels/generic_channel.hpp"
#include "api/config.hpp"
#include "api/routes/app.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/pg/failures.hpp"
#include "ledger/pg/migrate.hpp"
#include "ledger/read/read_router.hpp"
#include "support/own_cluster.hpp"
#include "support/payment_storm.hpp"
#include "support/polling.hpp"
#include "support/serve_process.hpp"
#include "support/test_service.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using std::chrono::steady_clock;
using testing::Eventually;
using testing::HttpClient;
using testing::HttpResult;
using testing::OwnCluster;
using testing::ServeProcess;

constexpr std::int64_t kAmount = 70;

void Migrate(const std::string& url) {
    auto connection = ledger::Connect(url);
    (void)ledger::Migrate(*connection);
}

std::string Bearer(const char* token) { return std::string("Bearer ") + token; }

HttpResult CreateOrder(HttpClient& http, const std::string& out_trade_no) {
    const json order = {{"out_trade_no", out_trade_no},
                        {"account_id", "acct-" + out_trade_no},
                        {"amount", kAmount},
                        {"currency", "CNY"}};
    return http.Post(
        "/v1/orders", order.dump(),
        {{"Authorization", Bearer(testing::kMerchantToken)}, {"Content-Type", "application/json"}});
}

int OrderStatus(HttpClient& http, const std::string& out_trade_no) {
    return http.Get("/v1/orders/" + out_trade_no, testing::kAuditorToken).status;
}

// The value of the sample `name` (the full name with labels) in GET /metrics; NaN when absent.
double Metric(HttpClient& http, const std::string& name) {
    std::istringstream text{http.Get("/metrics").body};
    std::string line;
    while (std::getline(text, line)) {
        if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
    }
    return std::nan("");
}

std::string FileText(const std::string& path) {
    std::ifstream file{path};
    return {std::istreambuf_iterator<char>{file}, {}};
}

// Runs the payledger binary with `arguments`; its exit status, its stdout in `out`.
int RunPayledger(const std::string& arguments, const std::string& database_url,
                 std::string* out = nullptr) {
    const std::string command = "PAYLEDGER_DATABASE_URL='" + database_url +
                                "' " PAYLEDGER_BINARY_PATH " " + arguments + " 2>/dev/null";
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return -1;
    std::string text;
    char buffer[4096];
    while (const std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) text.append(buffer, n);
    const int status = pclose(pipe);
    if (out != nullptr) *out = std::move(text);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A session on the standby that pauses and resumes its replay (superuser functions).
class Replay {
public:
    explicit Replay(const std::string& standby_url)
        : connection_(ledger::Connect(standby_url, ledger::ReplicaSession())) {}

    // Returns once the standby reports its replay paused.
    void Pause() {
        pqxx::nontransaction tx{*connection_};
        tx.exec("SELECT pg_wal_replay_pause()");
        ASSERT_TRUE(Eventually(
            [&] {
                return tx.exec("SELECT pg_get_wal_replay_pause_state()")[0][0].as<std::string>() ==
                       "paused";
            },
            std::chrono::seconds{30}));
    }

private:
    std::unique_ptr<pqxx::connection> connection_;
};

TEST(FailoverPgTest, AStormAcrossAPromotionLosesNoAcknowledgedDeliveryAndTheSameProcessAnswers) {
    OwnCluster cluster{/*synchronous=*/true};
    constexpr int kOrders = 1000;
    Migrate(cluster.PrimaryUrl());
    testing::CreateOrders(cluster.PrimaryUrl(), kOrders, kAmount);
    // Both hosts, no target_session_attrs: payledger asks for read-write itself.
    ServeProcess server{cluster.BothUrl(/*standby_first=*/false)};
    HttpClient probe{server.port()};
    ASSERT_EQ(probe.Get("/readyz").status, 200);
    testing::PaymentStorm storm{server.port(), kOrders, kAmount};
    testing::AwaitCount(storm, kOrders / 10);
    cluster.KillPrimary();
    // Acknowledged before the primary died: committed there and, synchronously, on the standby.
    const std::vector<bool> before_failover = storm.Snapshot();
    const auto acknowledged_before =
        std::count(before_failover.begin(), before_failover.end(), true);
    std::printf("[ha] %ld of %d payments acknowledged when the primary died\n",
                static_cast<long>(acknowledged_before), kOrders);
    ASSERT_LT(acknowledged_before, kOrders) << "the storm ended before the failover";
    // No primary answers now: the standby is read-only, so not ready.
    EXPECT_EQ(probe.Get("/readyz").status, 503);
    cluster.PromoteStandby();
    const auto promoted_at = steady_clock::now();
    EXPECT_TRUE(
        Eventually([&] { return probe.Get("/readyz").status == 200; }, std::chrono::seconds{20}))
        << "the same process did not find the promoted primary within 20 s";
    std::printf("[ha] /readyz 200 %.2f s after the promotion\n",
                std::chrono::duration<double>(steady_clock::now() - promoted_at).count());
    storm.Join();  // Every client re-sends what was answered 503 until it is acknowledged.
    ASSERT_TRUE(storm.AllAcknowledged());
    testing::ExpectAcknowledgedArePersisted(cluster.StandbyUrl(), before_failover);
    // Every order and payment once, balances exact, projections equal to the fold.
    testing::ExpectLedgerComplete(cluster.StandbyUrl(), kOrders, kAmount);
    auto promoted = ledger::Connect(cluster.StandbyUrl());
    pqxx::read_transaction tx{*promoted};
    EXPECT_EQ(tx.exec("SELECT count(*) FROM callback_receipts WHERE outcome = 'appended'")[0][0]
                  .as<int>(),
              2 * kOrders);  // No delivery appended twice: each order and payment once.
    tx.commit();
    EXPECT_EQ(RunPayledger("verify", cluster.StandbyUrl()), 0);
    EXPECT_EQ(Metric(probe, "payledger_internal_errors_total"), 0.0);
    // Deliveries met the failover: answered 503 (in doubt, or no primary), then re-sent.
    const double unavailable =
        Metric(probe, "payledger_deliveries_total{channel=\"generic\",outcome=\"unavailable\"}");
    std::printf("[ha] %.0f deliveries answered 503 during the failover\n", unavailable);
    EXPECT_GT(unavailable, 0);
    EXPECT_EQ(server.Terminate(), 0);  // Still the process started before the failover.
}

TEST(FailoverPgTest, SeveralHostsWithTheStandbyFirstWriteToThePrimaryAndNeverAnswer500) {
    OwnCluster cluster{/*synchronous=*/false};
    Migrate(cluster.PrimaryUrl());
    ServeProcess server{cluster.BothUrl(/*standby_first=*/true)};
    HttpClient http{server.port()};
    EXPECT_EQ(http.Get("/readyz").status, 200);
    for (int i = 0; i < 20; ++i) {
        const std::string key = "S-" + std::to_string(i);
        ASSERT_EQ(CreateOrder(http, key).status, 201);
        const std::string body = testing::GenericPayment(key, "TX-" + key, kAmount);
        const HttpResult paid =
            http.Post("/v1/callbacks/generic", body,
                      {{"Payledger-Signature",
                        GenericChannel::Sign(testing::kGenericSecret, testing::UnixNow(), body)}});
        ASSERT_EQ(paid.status, 200) << paid.body;
    }
    auto primary = ledger::Connect(cluster.PrimaryUrl());
    pqxx::read_transaction tx{*primary};
    EXPECT_EQ(tx.exec("SELECT count(*) FROM ledger_events")[0][0].as<int>(), 40);
    tx.commit();
    EXPECT_EQ(Metric(http, "payledger_internal_errors_total"), 0.0);
}

TEST(FailoverPgTest, ASessionOnAStandbyAnswers503ForWritesAndReadiness) {
    OwnCluster cluster{/*synchronous=*/false};
    Migrate(cluster.PrimaryUrl());
    // One host, the standby (a URL or proxy that points at the wrong server): every write and
    // /readyz answer 503 "not now", never 500, and nothing is written.
    testing::TestService service{testing::TestConfig(cluster.StandbyUrl())};
    HttpClient http{service.port()};
    EXPECT_EQ(http.Get("/readyz").status, 503);
    const HttpResult order = CreateOrder(http, "RO-1");
    EXPECT_EQ(order.status, 503) << order.body;
    EXPECT_EQ(order.Json()["outcome"], "unavailable");
    const std::string body = testing::GenericPayment("RO-1", "TX-RO-1", kAmount);
    EXPECT_EQ(service.PostGeneric(http, body).status, 503);
    EXPECT_THROW((void)ledger::Connect(cluster.StandbyUrl()), ledger::ReadOnlyServer);
    // A write that reaches a standby anyway (its session not checked): SQLSTATE 25006, which
    // is retryable on a new connection, never an invariant broken.
    auto session = ledger::Connect(cluster.StandbyUrl(), ledger::ReplicaSession());
    try {
        pqxx::work tx{*session};
        tx.exec("CREATE TABLE written_on_a_standby (x int)");
        tx.commit();
        FAIL() << "the standby accepted a write";
    } catch (...) {
        const ledger::Failure failure = ledger::ClassifyFailure(std::current_exception());
        EXPECT_EQ(failure.kind, ledger::FailureKind::kRetryable) << failure.message;
        EXPECT_TRUE(failure.reconnect);
        EXPECT_TRUE(failure.retry_now);
    }
}

// A config file for the command line, as serve would read it (mode 0600), in a
// folder of its own that goes with it.
class ConfigFile {
public:
    explicit ConfigFile(const json& config)
        : dir_(testing::MakeTestTmpDir("payledger-ha-config.")), path_(dir_ + "/config.json") {
        std::ofstream{path_} << config.dump();
        chmod(path_.c_str(), 0600);
    }
    ~ConfigFile() { std::filesystem::remove_all(dir_); }
    ConfigFile(const ConfigFile&) = delete;
    ConfigFile& operator=(const ConfigFile&) = delete;

    [[nodiscard]] const std::string& path() const { return path_; }

private:
    std::string dir_;
    std::string path_;
};

std::string ExportText(HttpClient& http) {
    return http
        .Send(
            boost::beast::http::verb::get, "/v1/events", {},
            {{"Authorization", Bearer(testing::kAuditorToken)}, {"Accept", "application/x-ndjson"}})
        .body;
}

bool OnReplica(HttpClient& http) { return Metric(http, "payledger_reads_on_replica") == 1; }

TEST(ReplicaPgTest, ReadsComeFromTheReplicaFallBackWhenItStopsAndReturnWhenItIsBack) {
    OwnCluster cluster{/*synchronous=*/false};  // The primary commits while the replica is away.
    Migrate(cluster.PrimaryUrl());
    const json replica = {{"read_database_url", cluster.StandbyUrl()},
                          {"read_max_lag_seconds", 3600}};
    ServeProcess server{cluster.PrimaryUrl(), replica};
    HttpClient http{server.port()};
    ASSERT_EQ(CreateOrder(http, "H-1").status, 201);
    ASSERT_TRUE(Eventually([&] { return OnReplica(http) && OrderStatus(http, "H-1") == 200; },
                           std::chrono::seconds{30}));

    // The replica's replay paused, an order appended on the primary is not seen by any read.
    Replay replay{cluster.StandbyUrl()};
    replay.Pause();
    ASSERT_EQ(CreateOrder(http, "H-2").status, 201);  // Written on the primary.
    ASSERT_TRUE(Eventually([&] { return Metric(http, "payledger_replica_lag_seconds") > 0; },
                           std::chrono::seconds{10}))
        << "the replica never reported receiving what it has not replayed";
    EXPECT_TRUE(OnReplica(http));
    EXPECT_EQ(OrderStatus(http, "H-2"), 404);
    EXPECT_EQ(http.Get("/v1/orders/H-2/events", testing::kAuditorToken).status, 404);
    EXPECT_EQ(http.Get("/v1/accounts/acct-H-2/balances", testing::kAuditorToken).status, 404);
    const HttpResult feed = http.Get("/v1/events", testing::kAuditorToken);
    ASSERT_EQ(feed.status, 200);
    EXPECT_EQ(feed.Json()["events"].size(), 1u) << feed.body;
    const HttpResult receipts = http.Get("/v1/receipts", testing::kAuditorToken);
    ASSERT_EQ(receipts.status, 200);
    EXPECT_EQ(receipts.Json()["receipts"].size(), 1u) << receipts.body;
    EXPECT_EQ(http.Get("/v1/reconciliations", testing::kAuditorToken).status, 200);
    const std::string exported = ExportText(http);
    EXPECT_NE(exported.find("\"H-1\""), std::string::npos) << exported;
    EXPECT_EQ(exported.find("\"H-2\""), std::string::npos) << exported;
    // `payledger events` reads the replica too; without read_database_url, the primary.
    const ConfigFile cli_config(json{{"database_url", cluster.PrimaryUrl()},
                                     {"read_database_url", cluster.StandbyUrl()},
                                     {"read_max_lag_seconds", 3600}});
    std::string from_replica;
    EXPECT_EQ(
        RunPayledger("events --config " + cli_config.path(), cluster.PrimaryUrl(), &from_replica),
        0);
    EXPECT_EQ(from_replica.find("\"H-2\""), std::string::npos) << from_replica;
    EXPECT_NE(from_replica.find("\"H-1\""), std::string::npos) << from_replica;
    std::string from_primary;
    EXPECT_EQ(RunPayledger("events", cluster.PrimaryUrl(), &from_primary), 0);
    EXPECT_NE(from_primary.find("\"H-2\""), std::string::npos) << from_primary;

    // The replica stops: within 10 s the reads come from the primary, said in the log and the
    // metrics, and the service stays ready.
    cluster.StopStandby();
    const auto stopped_at = steady_clock::now();
    EXPECT_TRUE(
        Eventually([&] { return OrderStatus(http, "H-2") == 200; }, std::chrono::seconds{10}))
        << "the reads did not fall back to the primary within 10 s";
    std::printf("[ha] reads on the primary %.2f s after the replica stopped\n",
                std::chrono::duration<double>(steady_clock::now() - stopped_at).count());
    EXPECT_EQ(Metric(http, "payledger_reads_on_replica"), 0);
    EXPECT_GE(Metric(http, "payledger_read_fallbacks_total"), 1);
    // The monitor's next check (each second) finds it unreachable: the lag is unknown.
    EXPECT_TRUE(
        Eventually([&] { return std::isnan(Metric(http, "payledger_replica_lag_seconds")); },
                   std::chrono::seconds{5}));
    EXPECT_NE(FileText(server.log_path()).find("reads fall back to the primary"),
              std::string::npos);
    EXPECT_EQ(http.Get("/readyz").status, 200);
    EXPECT_NE(ExportText(http).find("\"H-2\""), std::string::npos);

    // It comes back (replaying again): the reads return to it, proven as before.
    cluster.StartStandby();
    ASSERT_TRUE(Eventually([&] { return OnReplica(http) && OrderStatus(http, "H-2") == 200; },
                           std::chrono::seconds{30}));
    Replay again{cluster.StandbyUrl()};
    again.Pause();
    ASSERT_EQ(CreateOrder(http, "H-3").status, 201);
    EXPECT_EQ(OrderStatus(http, "H-3"), 404);
    EXPECT_NE(FileText(server.log_path()).find("reads go to the replica"), std::string::npos);
}

// The URL `url` with the role `role` (the clusters trust local connections).
std::string AsRole(const std::string& url, const std::string& role) {
    return url + (url.find('?') == std::string::npos ? "?" : "&") + "user=" + role;
}

// A role with exactly what `migrate --grant` gives serve (no superuser, no monitoring role),
// created on `primary_url` (and so on its standby).
std::string CreateServiceRole(const std::string& primary_url) {
    const std::string role = "payledger_service";
    auto owner = ledger::Connect(primary_url);
    {
        pqxx::nontransaction tx{*owner};
        tx.exec("CREATE ROLE " + role + " LOGIN");
    }
    ledger::GrantServiceRole(*owner, role);
    return role;
}

std::string ReadFrom(const HttpResult& result) {
    const auto it = result.headers.find("Payledger-Read-From");
    return it == result.headers.end() ? "(none)" : it->second;
}

double SentToPrimary(HttpClient& http, const std::string& reason) {
    return Metric(http, "payledger_reads_sent_to_primary_total{reason=\"" + reason + "\"}");
}

// Synchronous replication as it is, not as it was configured: an engine that drops to
// asynchronous (Patroni's synchronous_mode without strict empties synchronous_standby_names)
// must be alertable. /readyz says it, and /metrics serves its last reading; the count of
// synchronous standbys needs pg_read_all_stats, so the service role sees it as unknown.
TEST(FailoverPgTest, ReadinessAndMetricsSayWhetherCommitsWaitForAStandby) {
    OwnCluster cluster{/*synchronous=*/true};
    Migrate(cluster.PrimaryUrl());
    const std::string role = CreateServiceRole(cluster.PrimaryUrl());
    ServeProcess server{cluster.PrimaryUrl()};
    ServeProcess service{AsRole(cluster.PrimaryUrl(), role)};
    HttpClient http{server.port()};
    HttpClient as_service{service.port()};
    const auto synchronous = [](HttpClient& client) {
        const HttpResult ready = client.Get("/readyz");
        EXPECT_EQ(ready.status, 200) << ready.body;
        return ready.Json()["synchronous_replication"];
    };
    ASSERT_TRUE(Eventually([&] { return synchronous(http)["synchronous_standbys"] == 1; },
                           std::chrono::seconds{30}));
    EXPECT_EQ(synchronous(http)["standby_names"], "*");
    EXPECT_EQ(Metric(http, "payledger_synchronous_replication_configured"), 1.0);
    EXPECT_EQ(Metric(http, "payledger_synchronous_standby_names_any"), 1.0);
    EXPECT_EQ(Metric(http, "payledger_synchronous_standbys"), 1.0);
    const json seen_by_service = synchronous(as_service);
    EXPECT_EQ(seen_by_service["standby_names"], "*");
    EXPECT_TRUE(seen_by_service["synchronous_standbys"].is_null()) << seen_by_service;
    EXPECT_TRUE(std::isnan(Metric(as_service, "payledger_synchronous_standbys")));

    {  // What a failover manager that gives up on the standby does.
        auto admin = ledger::Connect(cluster.PrimaryUrl());
        pqxx::nontransaction tx{*admin};
        tx.exec("ALTER SYSTEM SET synchronous_standby_names = ''");
        tx.exec("SELECT pg_reload_conf()");
    }
    ASSERT_TRUE(Eventually([&] { return synchronous(http)["standby_names"] == ""; },
                           std::chrono::seconds{30}));
    EXPECT_EQ(synchronous(http)["synchronous_standbys"], 0);
    EXPECT_EQ(Metric(http, "payledger_synchronous_replication_configured"), 0.0);
    EXPECT_EQ(Metric(http, "payledger_synchronous_standby_names_any"), 0.0);
    EXPECT_EQ(Metric(http, "payledger_synchronous_standbys"), 0.0);
}

// In strict synchronous replication with its standby gone, a commit waits for as long as the
// standby is away, and every callback behind it; the database still answers a query. /readyz
// says so once a write has waited kWriteStalledAfter (5 s), and /metrics shows for how long; the
// waiting callback is acknowledged once the standby is back, and readiness returns.
TEST(FailoverPgTest, ReadinessIs503WhileACommitWaitsForAStandbyThatIsGone) {
    OwnCluster cluster{/*synchronous=*/true};
    Migrate(cluster.PrimaryUrl());
    ServeProcess server{cluster.PrimaryUrl()};
    HttpClient http{server.port()};
    ASSERT_EQ(CreateOrder(http, "W-1").status, 201);
    EXPECT_EQ(http.Get("/readyz").status, 200);
    EXPECT_EQ(Metric(http, "payledger_write_in_progress_seconds"), 0.0);

    cluster.StopStandby();
    const std::string body = testing::GenericPayment("W-1", "TX-W-1", kAmount);
    auto paid = std::async(std::launch::async, [&] {
        HttpClient platform{server.port()};
        return platform.Post(
            "/v1/callbacks/generic", body,
            {{"Payledger-Signature",
              GenericChannel::Sign(testing::kGenericSecret, testing::UnixNow(), body)}});
    });
    // However the test ends, the standby is back before `paid` is destroyed (a future of
    // std::async waits for its callback, whose commit waits for the standby).
    struct StandbyBack {
        OwnCluster& cluster;
        bool started = false;
        void Start() {
            if (!started) cluster.StartStandby();
            started = true;
        }
        ~StandbyBack() { Start(); }
    } standby_back{cluster};
    HttpResult ready;
    ASSERT_TRUE(Eventually(
        [&] {
            ready = http.Get("/readyz");
            return ready.status == 503;
        },
        std::chrono::seconds{30}))
        << "readiness stayed " << ready.status << " while the commit waited: " << ready.body;
    EXPECT_NE(ready.body.find("a write has waited"), std::string::npos) << ready.body;
    EXPECT_GE(Metric(http, "payledger_write_in_progress_seconds"), 5.0);
    EXPECT_EQ(paid.wait_for(std::chrono::seconds{0}), std::future_status::timeout)
        << "the callback was answered while its commit waited for the standby";

    standby_back.Start();
    const HttpResult answer = paid.get();
    EXPECT_EQ(answer.status, 200) << answer.body;
    EXPECT_TRUE(
        Eventually([&] { return http.Get("/readyz").status == 200; }, std::chrono::seconds{30}));
    EXPECT_EQ(Metric(http, "payledger_write_in_progress_seconds"), 0.0);
    auto primary = ledger::Connect(cluster.PrimaryUrl());
    pqxx::read_transaction tx{*primary};
    EXPECT_EQ(tx.exec("SELECT count(*) FROM ledger_events WHERE out_trade_no = 'W-1' AND "
                      "event_type = 'PAYMENT_SUCCEEDED'")[0][0]
                  .as<int>(),
              1);
}

// The feeds used to check that the replica streams the primary's timeline in
// pg_stat_wal_receiver, whose columns are NULL without pg_read_all_stats: with the role that
// `migrate --grant` prepares, every page, export and wait was re-read from the primary,
// silently. They now check the ledger itself: the replica's newest receipt and its chain are
// on the primary, looked up with the durability barrier.
TEST(ReplicaPgTest, WithTheServiceRoleAloneTheFeedsComeFromTheReplicaAndShowOnlyWhatItHas) {
    OwnCluster cluster{/*synchronous=*/false};
    Migrate(cluster.PrimaryUrl());
    const std::string role = CreateServiceRole(cluster.PrimaryUrl());
    const json replica = {{"read_database_url", AsRole(cluster.StandbyUrl(), role)},
                          {"read_max_lag_seconds", 3600}};
    ServeProcess server{AsRole(cluster.PrimaryUrl(), role), replica};
    HttpClient http{server.port()};
    ASSERT_EQ(CreateOrder(http, "R-1").status, 201);
    ASSERT_TRUE(Eventually([&] { return OnReplica(http) && OrderStatus(http, "R-1") == 200; },
                           std::chrono::seconds{30}));

    for (const std::string target : {"/v1/events", "/v1/receipts", "/v1/events?before=100"}) {
        const HttpResult page = http.Get(target, testing::kAuditorToken);
        ASSERT_EQ(page.status, 200) << target << ": " << page.body;
        EXPECT_EQ(ReadFrom(page).rfind("replica; lag=", 0), 0u) << target << ": " << ReadFrom(page);
    }
    const HttpResult exported = http.Send(
        boost::beast::http::verb::get, "/v1/events", {},
        {{"Authorization", Bearer(testing::kAuditorToken)}, {"Accept", "application/x-ndjson"}});
    EXPECT_EQ(ReadFrom(exported).rfind("replica; lag=", 0), 0u) << ReadFrom(exported);
    EXPECT_NE(exported.body.find("\"R-1\""), std::string::npos) << exported.body;

    // Its replay paused, the replica's page shows only what it has, and still from it.
    Replay replay{cluster.StandbyUrl()};
    replay.Pause();
    ASSERT_EQ(CreateOrder(http, "R-2").status, 201);
    const HttpResult feed = http.Get("/v1/events", testing::kAuditorToken);
    ASSERT_EQ(feed.status, 200);
    EXPECT_EQ(ReadFrom(feed).rfind("replica; lag=", 0), 0u) << ReadFrom(feed);
    EXPECT_EQ(feed.Json()["events"].size(), 1u) << feed.body;
    EXPECT_EQ(SentToPrimary(http, "unconfirmed"), 0.0);
    EXPECT_EQ(SentToPrimary(http, "lagging"), 0.0);
}

// A replica whose history the primary does not have: the node that was the primary, left
// running after its standby was promoted, with a commit the new primary never received. Its
// newest receipt is not on the new primary, which has appended another of its own: the page is
// read again from the primary, says so, and is counted.
TEST(ReplicaPgTest, AFeedPageFromAReplicaWithHistoryThePrimaryLacksIsReadFromThePrimary) {
    OwnCluster cluster{/*synchronous=*/false};
    Migrate(cluster.PrimaryUrl());
    const std::string role = CreateServiceRole(cluster.PrimaryUrl());
    {
        ServeProcess old_primary{cluster.PrimaryUrl()};
        HttpClient http{old_primary.port()};
        ASSERT_EQ(CreateOrder(http, "D-1").status, 201);
        auto standby = ledger::Connect(cluster.StandbyUrl(), ledger::ReplicaSession());
        ASSERT_TRUE(Eventually(
            [&] {
                pqxx::nontransaction tx{*standby};
                return tx.exec("SELECT count(*) FROM ledger_events")[0][0].as<int>() == 1;
            },
            std::chrono::seconds{30}));
        cluster.PromoteStandby();
        ASSERT_EQ(CreateOrder(http, "D-2-LOST").status, 201);  // Only on the old primary.
    }
    const json replica = {{"read_database_url", AsRole(cluster.PrimaryUrl(), role)},
                          {"read_max_lag_seconds", 3600}};
    ServeProcess server{AsRole(cluster.StandbyUrl(), role), replica};
    HttpClient http{server.port()};
    ASSERT_EQ(CreateOrder(http, "D-2").status, 201);
    ASSERT_TRUE(Eventually([&] { return OnReplica(http); }, std::chrono::seconds{30}));

    const HttpResult feed = http.Get("/v1/events", testing::kAuditorToken);
    ASSERT_EQ(feed.status, 200) << feed.body;
    EXPECT_EQ(ReadFrom(feed), "primary");
    EXPECT_NE(feed.body.find("\"D-2\""), std::string::npos) << feed.body;
    EXPECT_EQ(feed.body.find("D-2-LOST"), std::string::npos) << feed.body;
    EXPECT_EQ(SentToPrimary(http, "unconfirmed"), 1.0);
    // The other auditor reads are views of a moment and stay on the replica.
    EXPECT_EQ(OrderStatus(http, "D-2-LOST"), 200);
    // `payledger events` with the same replica prints the primary's history.
    const ConfigFile cli_config(json{{"database_url", AsRole(cluster.StandbyUrl(), role)},
                                     {"read_database_url", AsRole(cluster.PrimaryUrl(), role)},
                                     {"read_max_lag_seconds", 3600}});
    std::string printed;
    EXPECT_EQ(RunPayledger("events --config " + cli_config.path(), cluster.StandbyUrl(), &printed),
              0);
    EXPECT_NE(printed.find("\"D-2\""), std::string::npos) << printed;
    EXPECT_EQ(printed.find("D-2-LOST"), std::string::npos) << printed;
}

TEST(ReplicaPgTest, AReplicaThatLagsMoreThanTheLimitIsLeftForThePrimaryUntilItCatchesUp) {
    OwnCluster cluster{/*synchronous=*/false};
    Migrate(cluster.PrimaryUrl());
    ServeProcess server{cluster.PrimaryUrl(),
                        {{"read_database_url", cluster.StandbyUrl()}, {"read_max_lag_seconds", 1}}};
    HttpClient http{server.port()};
    ASSERT_EQ(CreateOrder(http, "L-1").status, 201);
    ASSERT_TRUE(Eventually([&] { return OnReplica(http) && OrderStatus(http, "L-1") == 200; },
                           std::chrono::seconds{30}));
    Replay replay{cluster.StandbyUrl()};
    replay.Pause();
    ASSERT_EQ(CreateOrder(http, "L-2").status, 201);
    // Its last replayed commit ages past 1 s: within 10 s the reads see L-2 on the primary.
    EXPECT_TRUE(
        Eventually([&] { return OrderStatus(http, "L-2") == 200; }, std::chrono::seconds{10}));
    EXPECT_EQ(Metric(http, "payledger_reads_on_replica"), 0);
    EXPECT_GT(Metric(http, "payledger_replica_lag_seconds"), 1);
    EXPECT_NE(FileText(server.log_path()).find("more than read_max_lag_seconds"),
              std::string::npos);
    // Replaying again, it catches up and the reads return.
    {
        auto standby = ledger::Connect(cluster.StandbyUrl(), ledger::ReplicaSession());
        pqxx::nontransaction tx{*standby};
        tx.exec("SELECT pg_wal_replay_resume()");
    }
    EXPECT_TRUE(Eventually([&] { return OnReplica(http); }, std::chrono::seconds{10}));
}

}  // namespace
}  // namespace payledger::api
