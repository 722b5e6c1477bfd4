// A replica's lag is measured against the primary, on a cluster of the test's own
// (support/own_cluster.hpp: a primary and a streaming standby) and a real `payledger serve`
// with read_max_lag_seconds 2:
// - the auditor reads come from the replica and say so (Payledger-Read-From: replica;
//   lag=<seconds, three decimals>) on every read: orders, events, receipts, balances, feeds,
//   the NDJSON export, reconciliations;
// - the replica's upstream is cut while it keeps serving (primary_conninfo emptied: its WAL
//   receiver stops, so it has replayed all it received and would call itself caught up),
//   the primary keeps writing: the measured lag grows (the metric, and the header of a read
//   served meanwhile), and within read_max_lag_seconds + 10 s of the first write the reads
//   come from the primary (Payledger-Read-From: primary) and see the new writes;
//   `payledger events` leaves the replica too;
// - the upstream restored, the replica catches up and the reads return to it.
// Every wait polls an observable condition (an HTTP answer, a metric, the standby's own
// report) with a deadline.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "ledger/pg/database.hpp"
#include "ledger/pg/migrate.hpp"
#include "ledger/read/read_router.hpp"
#include "support/own_cluster.hpp"
#include "support/polling.hpp"
#include "support/serve_process.hpp"
#include "support/test_service.hpp"

namespace payledger::api::replica_freshness_test {
namespace {

using nlohmann::json;
using std::chrono::steady_clock;
using testing::Eventually;
using testing::EventuallyBy;
using testing::HttpClient;
using testing::HttpResult;
using testing::OwnCluster;
using testing::ServeProcess;

constexpr int kLagMaxSeconds = 2;

HttpResult CreateOrder(HttpClient& http, const std::string& out_trade_no) {
    const json order = {{"out_trade_no", out_trade_no},
                        {"account_id", "acct-" + out_trade_no},
                        {"amount", 70},
                        {"currency", "CNY"}};
    return http.Post("/v1/orders", order.dump(),
                     {{"Authorization", std::string("Bearer ") + testing::kMerchantToken},
                      {"Content-Type", "application/json"}});
}

// The value of the sample `name` in GET /metrics; NaN when absent.
double Metric(HttpClient& http, const std::string& name) {
    std::istringstream text{http.Get("/metrics").body};
    std::string line;
    while (std::getline(text, line)) {
        if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
    }
    return std::nan("");
}

double Lag(HttpClient& http) { return Metric(http, "payledger_replica_lag_seconds"); }

std::string ReadFrom(const HttpResult& result) {
    const auto it = result.headers.find("Payledger-Read-From");
    return it == result.headers.end() ? "(none)" : it->second;
}

// The lag a "replica; lag=S.SSS" header gives, or NaN for any other value.
double HeaderLag(const std::string& read_from) {
    static const std::regex kReplica{R"(replica; lag=([0-9]+\.[0-9]{3}))"};
    std::smatch match;
    if (!std::regex_match(read_from, match, kReplica)) return std::nan("");
    return std::stod(match[1].str());
}

HttpResult Read(HttpClient& http, const std::string& target) {
    return http.Get(target, testing::kAuditorToken);
}

HttpResult Export(HttpClient& http) {
    return http.Send(boost::beast::http::verb::get, "/v1/events", {},
                     {{"Authorization", std::string("Bearer ") + testing::kAuditorToken},
                      {"Accept", "application/x-ndjson"}});
}

// Every auditor read of the API; each answers 200.
const std::vector<std::string>& AuditorReads() {
    static const std::vector<std::string> reads = {"/v1/orders/F-1",
                                                   "/v1/orders/F-1/events",
                                                   "/v1/orders/F-1/receipts",
                                                   "/v1/accounts/acct-F-1/balances",
                                                   "/v1/events",
                                                   "/v1/events?before=9223372036854775807",
                                                   "/v1/receipts",
                                                   "/v1/reconciliations"};
    return reads;
}

std::string FileText(const std::string& path) {
    std::ifstream file{path};
    return {std::istreambuf_iterator<char>{file}, {}};
}

// `payledger events` with `config_path`; its exit status, its stdout in `out`.
int RunEvents(const std::string& config_path, std::string* out) {
    const std::string command =
        PAYLEDGER_BINARY_PATH " --config '" + config_path + "' events 2>/dev/null";
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return -1;
    std::string text;
    char buffer[4096];
    while (const std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) text.append(buffer, n);
    const int status = pclose(pipe);
    *out = std::move(text);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A config file for the command line (mode 0600), in a folder of its own that goes with it.
class ConfigFile {
public:
    explicit ConfigFile(const json& config)
        : dir_(testing::MakeTestTmpDir("payledger-freshness-config.")),
          path_(dir_ + "/config.json") {
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

// A superuser session on the standby that cuts its upstream and restores it.
class Upstream {
public:
    explicit Upstream(const std::string& standby_url)
        : connection_(ledger::Connect(standby_url, ledger::ReplicaSession())) {
        pqxx::nontransaction tx{*connection_};
        conninfo_ = tx.exec("SHOW primary_conninfo")[0][0].as<std::string>();
    }

    // Empties primary_conninfo; returns once the standby reports no WAL receiver. It goes on
    // serving reads of what it has replayed.
    void Cut() { Set("''", false); }
    // Puts primary_conninfo back; returns once the standby streams again.
    void Restore() { Set(connection_->quote(conninfo_), true); }

private:
    void Set(const std::string& quoted, bool streaming) {
        pqxx::nontransaction tx{*connection_};
        tx.exec("ALTER SYSTEM SET primary_conninfo = " + quoted);
        tx.exec("SELECT pg_reload_conf()");
        // Stopped: no WAL receiver at all. Restored: one that streams.
        const std::string receivers =
            streaming ? "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'"
                      : "SELECT count(*) FROM pg_stat_wal_receiver";
        const int wanted = streaming ? 1 : 0;
        ASSERT_TRUE(Eventually([&] { return tx.exec(receivers)[0][0].as<int>() == wanted; },
                               std::chrono::seconds{30}))
            << "the standby's WAL receiver did not " << (streaming ? "stream" : "stop");
    }

    std::unique_ptr<pqxx::connection> connection_;
    std::string conninfo_;
};

TEST(ReplicaFreshnessPgTest, AReplicaCutFromItsPrimaryLagsMoreAndMoreAndIsLeftWithinTheLimit) {
    OwnCluster cluster{/*synchronous=*/false};  // The primary commits while the replica is cut.
    {
        auto primary = ledger::Connect(cluster.PrimaryUrl());
        (void)ledger::Migrate(*primary);
    }
    ServeProcess server{
        cluster.PrimaryUrl(),
        {{"read_database_url", cluster.StandbyUrl()}, {"read_max_lag_seconds", kLagMaxSeconds}}};
    HttpClient http{server.port()};
    ASSERT_EQ(CreateOrder(http, "F-1").status, 201);

    // The reads come from the replica, and every one says so, with its lag.
    ASSERT_TRUE(Eventually(
        [&] {
            const HttpResult order = Read(http, "/v1/orders/F-1");
            return order.status == 200 && !std::isnan(HeaderLag(ReadFrom(order)));
        },
        std::chrono::seconds{30}))
        << "the reads never came from the replica";
    EXPECT_EQ(Metric(http, "payledger_reads_on_replica"), 1);
    for (const std::string& target : AuditorReads()) {
        const HttpResult read = Read(http, target);
        EXPECT_EQ(read.status, 200) << target << ": " << read.body;
        const double lag = HeaderLag(ReadFrom(read));
        EXPECT_TRUE(lag >= 0 && lag <= kLagMaxSeconds) << target << ": " << ReadFrom(read);
    }
    const HttpResult exported = Export(http);
    EXPECT_EQ(exported.status, 200);
    EXPECT_FALSE(std::isnan(HeaderLag(ReadFrom(exported)))) << ReadFrom(exported);

    // Its upstream cut, the replica has replayed all it received: compared with itself it is
    // caught up for ever. The primary goes on writing.
    Upstream upstream{cluster.StandbyUrl()};
    upstream.Cut();
    ASSERT_EQ(CreateOrder(http, "F-2").status, 201);
    const auto written_at = steady_clock::now();
    auto last_write = written_at;
    int written = 2;
    const auto keep_writing = [&] {
        if (steady_clock::now() - last_write < std::chrono::milliseconds{500}) return;
        EXPECT_EQ(CreateOrder(http, "F-" + std::to_string(++written)).status, 201);
        last_write = steady_clock::now();
    };

    // The lag measured against the primary grows, in the metric and in the header of a read
    // the replica serves meanwhile (it is not yet over the limit).
    double served_lag = std::nan("");
    EXPECT_TRUE(Eventually(
        [&] {
            keep_writing();
            const HttpResult order = Read(http, "/v1/orders/F-1");
            served_lag = HeaderLag(ReadFrom(order));
            return served_lag >= 0.5;
        },
        std::chrono::seconds{kLagMaxSeconds + 10}))
        << "no read said the replica lags; last: " << served_lag;
    const double lag_before = Lag(http);
    EXPECT_TRUE(Eventually(
        [&] {
            keep_writing();
            return Lag(http) >= lag_before + 1;
        },
        std::chrono::seconds{10}))
        << "the replica's lag did not grow from " << lag_before << "; now " << Lag(http);

    // Within read_max_lag_seconds + 10 s of the first write it missed, the reads leave it.
    HttpResult seen;
    EXPECT_TRUE(EventuallyBy(
        [&] {
            keep_writing();
            seen = Read(http, "/v1/orders/F-2");
            return seen.status == 200 && ReadFrom(seen) == "primary";
        },
        written_at + std::chrono::seconds{kLagMaxSeconds + 10}))
        << "the reads did not leave the replica within read_max_lag_seconds + 10 s: " << seen.status
        << ", " << ReadFrom(seen) << ", lag " << Lag(http);
    std::printf(
        "[freshness] reads on the primary %.2f s after the first write the replica "
        "missed\n",
        std::chrono::duration<double>(steady_clock::now() - written_at).count());
    EXPECT_EQ(Metric(http, "payledger_reads_on_replica"), 0);
    EXPECT_GE(Metric(http, "payledger_read_fallbacks_total"), 1);
    EXPECT_GT(Lag(http), kLagMaxSeconds);
    EXPECT_NE(FileText(server.log_path()).find("more than read_max_lag_seconds"),
              std::string::npos);
    for (const std::string& target : AuditorReads()) {
        const HttpResult read = Read(http, target);
        EXPECT_EQ(read.status, 200) << target;
        EXPECT_EQ(ReadFrom(read), "primary") << target;
    }
    const HttpResult from_primary = Export(http);
    EXPECT_EQ(ReadFrom(from_primary), "primary");
    EXPECT_NE(from_primary.body.find("\"F-2\""), std::string::npos);
    EXPECT_EQ(Read(http, "/v1/orders/F-" + std::to_string(written)).status, 200);

    // `payledger events` looks once: the replica has not replayed the primary's position and
    // its last replayed commit is older than the limit, so it reads the primary.
    const ConfigFile cli_config(json{{"database_url", cluster.PrimaryUrl()},
                                     {"read_database_url", cluster.StandbyUrl()},
                                     {"read_max_lag_seconds", kLagMaxSeconds}});
    std::string events;
    EXPECT_EQ(RunEvents(cli_config.path(), &events), 0);
    EXPECT_NE(events.find("\"F-2\""), std::string::npos) << events;

    // The upstream restored, the replica catches up and the reads return to it.
    upstream.Restore();
    EXPECT_TRUE(Eventually(
        [&] {
            const HttpResult order = Read(http, "/v1/orders/F-2");
            return order.status == 200 && !std::isnan(HeaderLag(ReadFrom(order)));
        },
        std::chrono::seconds{30}))
        << "the reads did not return to the replica";
    EXPECT_LE(Lag(http), kLagMaxSeconds);
}

}  // namespace
}  // namespace payledger::api::replica_freshness_test
