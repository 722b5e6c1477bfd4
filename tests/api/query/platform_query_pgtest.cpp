// Asking the platforms, end to end (docs/query.md): a merchant's `payledger serve` with the three
// channels' `query` sections, a `payledger simulate-platform` process answering from a second
// ledger that stands for the platform's record (fed the notifications the merchant never got),
// both on real PostgreSQL, over real HTTP. Per channel: a notification lost for good is found by
// the query, appended with the platform's amount and transaction id (source <channel>_query), and
// the late notification is a duplicate; an order notified in time is never asked about; an
// unpaid order is asked again on each step of the schedule, then no more; an order that expires
// unpaid is closed on the platform (PAYMENT_CLOSED, source <channel>_close) and a payment notified
// after that is appended and flagged paid_after_close; two serves make each due query once, and
// one killed with queries in flight leaves them to another. The metrics of docs/query.md are
// checked.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/channels/platform_crypto.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "api/cli/platform_audit.hpp"
#include "api/cli/simulate.hpp"
#include "api/config.hpp"
#include "ledger/base/bytes.hpp"
#include "ledger/integrity/audit.hpp"
#include "projections/validate.hpp"
#include "support/http_client.hpp"
#include "support/payment_storm.hpp"
#include "support/polling.hpp"
#include "support/queried_channels.hpp"
#include "support/serve_process.hpp"
#include "support/simulator_process.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"
#include "support/webhook_receiver.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::ServeProcess;
using testing::SimulatorProcess;
using testing::TestDatabase;

using testing::kQueriedV3MerchantSerial;
using testing::kQueriedV3PlatformSerial;
using testing::WriteTestFile;

#define PAYLEDGER_REQUIRE_DB(db) \
    if (!(db).available()) GTEST_SKIP() << "no test database"

class PlatformQueryPgTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (!merchant_db_.available() || !platform_db_.available()) GTEST_SKIP() << "no database";
        dir_ = testing::MakeTestTmpDir("query-");
        simulator_port_ = testing::FreePort();
        const std::string base = "http://127.0.0.1:" + std::to_string(simulator_port_);
        const PrivateKey v3_platform = GenerateRsaKey();
        const PrivateKey alipay_platform = GenerateRsaKey();
        const PrivateKey v3_merchant = GenerateRsaKey();
        const PrivateKey alipay_app = GenerateRsaKey();
        channels_ = testing::QueriedChannels(
            dir_, base, {v3_platform, alipay_platform, v3_merchant, alipay_app});
        channels_["query"] = {{"first_after_seconds", 1},
                              {"schedule_seconds", {1, 1, 1}},
                              {"concurrency", 4},
                              {"timeout_seconds", 2}};
        json simulator_config = channels_;
        simulator_config["database_url"] = platform_db_.url();
        simulator_config["listen"] = "127.0.0.1:1";
        simulator_config["tokens"] = {{"merchant", {testing::kMerchantToken}},
                                      {"auditor", {testing::kAuditorToken}},
                                      {"admin", {testing::kAdminToken}}};
        WriteTestFile(dir_ + "/simulator.json", simulator_config.dump(2), 0600);
        // The merchant's own config, as `payledger audit --config` reads it.
        json merchant_config = simulator_config;
        merchant_config["database_url"] = merchant_db_.url();
        WriteTestFile(dir_ + "/merchant.json", merchant_config.dump(2), 0600);
        notice_config_ = ParseConfig(simulator_config.dump(), std::nullopt, std::nullopt, dir_);
        simulator_ = std::make_unique<SimulatorProcess>(dir_ + "/simulator.json", simulator_port_);
        EXPECT_TRUE(simulator_->listening()) << "simulate-platform did not listen";
        // The platform's own ledger: it registers and is paid, asked about nothing.
        json platform_sections = channels_;
        platform_sections.erase("query");
        for (const char* name : {"wechat_v2", "wechat_v3", "alipay"}) {
            platform_sections[name].erase("query");
        }
        platform_ = std::make_unique<ServeProcess>(platform_db_.url(), platform_sections);
        merchant_ = std::make_unique<ServeProcess>(merchant_db_.url(), channels_);
    }

    void TearDown() override {
        merchant_.reset();
        platform_.reset();
        simulator_.reset();
        if (!dir_.empty()) std::filesystem::remove_all(dir_);
    }

public:
    // POST /v1/orders to `port`: with the channel (and expiry) on the merchant's side.
    static HttpResult Register(unsigned short port, const std::string& out_trade_no,
                               const std::optional<std::string>& channel,
                               std::optional<std::string> expires_at = std::nullopt) {
        json body = {{"out_trade_no", out_trade_no},
                     {"account_id", "shop-1"},
                     {"amount", 1999},
                     {"currency", "CNY"}};
        if (channel) body["channel"] = *channel;
        if (expires_at) body["expires_at"] = *expires_at;
        HttpClient client{port};
        return client.Post("/v1/orders", body.dump(),
                           {{"Authorization", std::string("Bearer ") + testing::kMerchantToken}});
    }

protected:
    // The channel's payment notification of `out_trade_no`, posted to `port`.
    HttpResult Notify(unsigned short port, const std::string& out_trade_no,
                      const std::string& kind = "payment") {
        const SimulatedNotice notice =
            BuildNotice(notice_config_, {.channel = GetParam(),
                                         .out_trade_no = out_trade_no,
                                         .kind = kind,
                                         .transaction_id = "TX" + out_trade_no});
        HttpClient client{port};
        std::map<std::string, std::string> headers(notice.headers.begin(), notice.headers.end());
        return client.Post(notice.target, notice.body, headers);
    }

    // `payledger audit --platform-signatures` on the merchant's ledger, with its config: the
    // report, what was checked, then the breaks.
    std::string AuditPlatformSignatures(std::int64_t* breaks) {
        std::string checked;
        const AuditSetup setup = LoadAuditSetup(dir_ + "/merchant.json");
        const ledger::AuditReport report =
            ledger::Audit(merchant_db_.url(), nullptr, nullptr, {},
                          PlatformSignaturesCheck(setup.keys, &checked));
        *breaks = report.break_count;
        return checked + ledger::FormatAuditReport(report);
    }

    json Order(const std::string& out_trade_no) {
        HttpClient client{merchant_->port()};
        return client.Get("/v1/orders/" + out_trade_no, testing::kAuditorToken).Json();
    }

    std::string Metrics() {
        HttpClient client{merchant_->port()};
        return client.Get("/metrics").body;
    }

    TestDatabase merchant_db_;
    TestDatabase platform_db_;
    std::string dir_;
    unsigned short simulator_port_ = 0;
    json channels_;
    Config notice_config_;
    std::unique_ptr<SimulatorProcess> simulator_;
    std::unique_ptr<ServeProcess> platform_;
    std::unique_ptr<ServeProcess> merchant_;
};

TEST_P(PlatformQueryPgTest, ALostNotificationIsFoundByTheQueryAndTheLateOneIsADuplicate) {
    const std::string channel = GetParam();
    ASSERT_EQ(Register(platform_->port(), "LOST-1", std::nullopt).status, 201);
    const HttpResult registered = Register(merchant_->port(), "LOST-1", channel);
    ASSERT_EQ(registered.status, 201) << registered.body;
    EXPECT_EQ(registered.Json()["channel"], channel);
    EXPECT_FALSE(registered.Json()["query"]["next_at"].is_null());
    // Paid on the platform; the notification never reaches the merchant.
    ASSERT_EQ(Notify(platform_->port(), "LOST-1").status / 100, 2);
    // Paid once the query's answer is committed; its attempt recorded just after.
    ASSERT_TRUE(testing::Eventually(
        [&] {
            const json order = Order("LOST-1");
            return order["status"] == "PAID" && order["query"]["attempts"] == 1;
        },
        std::chrono::seconds{30}))
        << Order("LOST-1").dump();
    const json order = Order("LOST-1");
    EXPECT_EQ(order["transaction_id"], "TX" + std::string("LOST-1"));
    EXPECT_EQ(order["paid_amount"], 1999);
    EXPECT_TRUE(order["query"]["next_at"].is_null());
    EXPECT_EQ(merchant_db_.Scalar("SELECT source FROM ledger_events WHERE out_trade_no = 'LOST-1' "
                                  "AND event_type = 'PAYMENT_SUCCEEDED'"),
              channel + "_query");
    EXPECT_EQ(merchant_db_.Scalar("SELECT r.source || ' ' || r.outcome FROM callback_receipts AS r "
                                  "JOIN ledger_events AS e ON e.receipt_id = r.id "
                                  "WHERE e.out_trade_no = 'LOST-1' AND e.event_type = "
                                  "'PAYMENT_SUCCEEDED'"),
              channel + "_query appended");
    // WeChat's (or Alipay's) own retry, a day later: the same fingerprint, a duplicate.
    const HttpResult late = Notify(merchant_->port(), "LOST-1");
    EXPECT_EQ(late.status / 100, 2) << late.body;
    EXPECT_EQ(merchant_db_.Scalar("SELECT outcome FROM callback_receipts ORDER BY id DESC LIMIT 1"),
              "duplicate");
    EXPECT_NE(
        Metrics().find("payledger_queries_total{channel=\"" + channel + "\",answer=\"final\"} 1"),
        std::string::npos)
        << Metrics();
}

// An auditor proves with the platforms' public keys alone that each event appended from an
// answer is what the platform signed: the answer read again as the scheduler read it.
TEST_P(PlatformQueryPgTest, TheAuditVerifiesEachAnswerAgainstItsEvent) {
    const std::string channel = GetParam();
    const std::string expires = projections::FormatRfc3339(
        projections::TimeMicros{std::chrono::duration_cast<std::chrono::microseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count()} +
        2'000'000);
    ASSERT_EQ(Register(platform_->port(), "AUDIT-PAID", std::nullopt).status, 201);
    ASSERT_EQ(Register(platform_->port(), "AUDIT-CLOSED", std::nullopt).status, 201);
    ASSERT_EQ(Register(merchant_->port(), "AUDIT-PAID", channel).status, 201);
    ASSERT_EQ(Register(merchant_->port(), "AUDIT-CLOSED", channel, expires).status, 201);
    ASSERT_EQ(Notify(platform_->port(), "AUDIT-PAID").status / 100, 2);
    ASSERT_TRUE(testing::Eventually(
        [&] {
            return Order("AUDIT-PAID")["status"] == "PAID" &&
                   Order("AUDIT-CLOSED")["status"] == "CLOSED";
        },
        std::chrono::seconds{30}));
    std::int64_t breaks = -1;
    std::string out = AuditPlatformSignatures(&breaks);
    EXPECT_EQ(breaks, 0) << out;
    // WeChat Pay v2 signs with the merchant's secret: its answers are not the auditor's to check.
    const std::string counted = channel == "alipay"      ? "alipay 2, wechat_v3 0"
                                : channel == "wechat_v3" ? "alipay 0, wechat_v3 2"
                                                         : "alipay 0, wechat_v3 0";
    EXPECT_NE(out.find("platform signatures: answers to queries and closes: " + counted +
                       " receipts: the signature, and the answer read again as when it was "
                       "asked (its order, merchant and state) against the event, its data "
                       "included\n"),
              std::string::npos)
        << out;
    // The owner of the tables changes the amount of the payment the answer recorded.
    const std::string seq = merchant_db_.Scalar(
        "SELECT seq FROM ledger_events WHERE out_trade_no = 'AUDIT-PAID' AND event_type = "
        "'PAYMENT_SUCCEEDED'");
    const std::string receipt =
        merchant_db_.Scalar("SELECT receipt_id FROM ledger_events WHERE seq = " + seq);
    {
        const std::unique_ptr<pqxx::connection> connection = merchant_db_.Connect();
        pqxx::work tx{*connection};
        tx.exec("ALTER TABLE ledger_events DISABLE TRIGGER USER");
        tx.exec("UPDATE ledger_events SET amount = 1 WHERE seq = " + seq);
        tx.exec("ALTER TABLE ledger_events ENABLE TRIGGER USER");
        tx.commit();
    }
    out = AuditPlatformSignatures(&breaks);
    const std::string named = "event " + seq + " not signed by the platform: receipt " + receipt +
                              " (" + channel + "_query): the signed answer says amount 1999, " +
                              "the event 1";
    if (channel == "wechat_v2") {
        EXPECT_EQ(out.find("not signed by the platform"), std::string::npos) << out;
    } else {
        EXPECT_NE(out.find(named), std::string::npos) << out;
    }
}

TEST_P(PlatformQueryPgTest, AnOrderNotifiedInTimeIsNeverAskedAbout) {
    ASSERT_EQ(Register(platform_->port(), "ONTIME-1", std::nullopt).status, 201);
    ASSERT_EQ(Register(merchant_->port(), "ONTIME-1", GetParam()).status, 201);
    ASSERT_EQ(Notify(merchant_->port(), "ONTIME-1").status / 100, 2);
    // Its first query fell due a second later: the schedule found it settled and ended.
    ASSERT_TRUE(testing::Eventually(
        [&] {
            return merchant_db_.Scalar(
                       "SELECT next_at IS NULL FROM order_queries WHERE "
                       "out_trade_no = 'ONTIME-1'") == "t";
        },
        std::chrono::seconds{30}));
    EXPECT_EQ(
        merchant_db_.Scalar("SELECT attempts FROM order_queries WHERE out_trade_no = 'ONTIME-1'"),
        "0");
    EXPECT_EQ(Order("ONTIME-1")["query"]["attempts"], 0);
}

TEST_P(PlatformQueryPgTest, AnUnpaidOrderIsAskedOnEveryStepThenNoMore) {
    ASSERT_EQ(Register(platform_->port(), "UNPAID-1", std::nullopt).status, 201);
    ASSERT_EQ(Register(merchant_->port(), "UNPAID-1", GetParam()).status, 201);
    // The first query, then one per step of [1, 1, 1]: four, all not final, then nothing.
    ASSERT_TRUE(testing::Eventually(
        [&] {
            return merchant_db_.Scalar(
                       "SELECT attempts = 4 AND next_at IS NULL FROM order_queries "
                       "WHERE out_trade_no = 'UNPAID-1'") == "t";
        },
        std::chrono::seconds{60}))
        << Order("UNPAID-1").dump();
    const json order = Order("UNPAID-1");
    EXPECT_EQ(order["status"], "WAIT_PAY");
    const std::string not_paid = GetParam() == "alipay" ? "WAIT_BUYER_PAY" : "NOTPAY";
    EXPECT_EQ(order["query"]["last_answer"], not_paid);
    // Not-final answers are counted, not stored.
    EXPECT_EQ(
        merchant_db_.Scalar("SELECT count(*) FROM callback_receipts WHERE source LIKE '%_query'"),
        "0");
    EXPECT_NE(Metrics().find("payledger_queries_total{channel=\"" + GetParam() +
                             "\",answer=\"not_final\"} 4"),
              std::string::npos)
        << Metrics();
}

// The schedule keeps to the database's clock: its due check is the database's now(), and a
// serve's own clock minutes off once put the first query and every next one into the
// database's past (asked again at every look) or minutes into its future. Here the serve's
// clock is 200 s behind (libfaketime preloaded into it; within the platforms' 300 s window
// for a request's timestamp): the first query is still due a second after the registration
// and each next one a step after the last, on the database's clock.
TEST_P(PlatformQueryPgTest, AServeWhoseClockIsMinutesOffKeepsToTheDatabasesSchedule) {
    std::string faketime;  // Debian's libfaketime, in the machine's multiarch folder.
    for (const char* arch : {"x86_64-linux-gnu", "aarch64-linux-gnu"}) {
        const std::string path = std::string("/usr/lib/") + arch + "/faketime/libfaketimeMT.so.1";
        if (std::filesystem::exists(path)) faketime = path;
    }
    if (faketime.empty()) {
        if (std::getenv("CI") != nullptr) FAIL() << "libfaketime is missing";
        GTEST_SKIP() << "libfaketime is missing";
    }
#if defined(__SANITIZE_ADDRESS__)
    // An instrumented serve refuses to start with another library preloaded before ASan's
    // runtime; the schedule's clock is proven in the normal build.
    GTEST_SKIP() << "libfaketime cannot be preloaded into a serve built with AddressSanitizer";
#endif
    merchant_.reset();
    ::setenv("LD_PRELOAD", faketime.c_str(), 1);
    ::setenv("FAKETIME", "-200", 1);
    ::setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
    merchant_ = std::make_unique<ServeProcess>(merchant_db_.url(), channels_);
    for (const char* name : {"LD_PRELOAD", "FAKETIME", "FAKETIME_DONT_FAKE_MONOTONIC"}) {
        ::unsetenv(name);
    }
    // Seconds from the database's now() to the order's next_at; NaN once nothing is due.
    const auto due_in = [&](const std::string& out_trade_no) {
        const std::string seconds = merchant_db_.Scalar(
            "SELECT extract(epoch FROM next_at - now()) FROM order_queries WHERE out_trade_no = '" +
            out_trade_no + "'");
        return seconds.empty() ? std::nan("") : std::stod(seconds);
    };
    ASSERT_EQ(Register(platform_->port(), "SKEW-1", std::nullopt).status, 201);
    ASSERT_EQ(Register(merchant_->port(), "SKEW-1", GetParam()).status, 201);
    const double first = due_in("SKEW-1");
    EXPECT_GT(first, -2.0) << "the first query was put in the database's past";
    EXPECT_LE(first, 1.0);
    ASSERT_TRUE(testing::Eventually(
        [&] {
            return merchant_db_.Scalar(
                       "SELECT attempts >= 1 FROM order_queries WHERE "
                       "out_trade_no = 'SKEW-1'") == "t";
        },
        std::chrono::seconds{30}));
    const double next = due_in("SKEW-1");  // A step of 1 s after an attempt, or none left.
    EXPECT_TRUE(std::isnan(next) || next > -2.0)
        << "the next query was put " << -next << " s in the database's past";
    ASSERT_TRUE(testing::Eventually(
        [&] {
            return merchant_db_.Scalar(
                       "SELECT next_at IS NULL FROM order_queries WHERE "
                       "out_trade_no = 'SKEW-1'") == "t";
        },
        std::chrono::seconds{60}));
    EXPECT_EQ(merchant_db_.Scalar("SELECT attempts FROM order_queries WHERE out_trade_no = "
                                  "'SKEW-1'"),
              "4");
}

TEST_P(PlatformQueryPgTest, AnExpiredOrderIsClosedOnThePlatformAndAPaymentAfterIsFlagged) {
    const std::string channel = GetParam();
    const std::string expires = projections::FormatRfc3339(
        projections::TimeMicros{std::chrono::duration_cast<std::chrono::microseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count()} +
        2'000'000);
    ASSERT_EQ(Register(platform_->port(), "EXPIRE-1", std::nullopt).status, 201);
    ASSERT_EQ(Register(merchant_->port(), "EXPIRE-1", channel, expires).status, 201);
    // The close's event commits first, the schedule's record of it just after (the claimer's
    // next round, docs/query.md#the-orders-query-state): wait for both.
    ASSERT_TRUE(testing::Eventually(
        [&] {
            const json order = Order("EXPIRE-1");
            return order["status"] == "CLOSED" && !order["query"]["closed_at"].is_null();
        },
        std::chrono::seconds{30}))
        << Order("EXPIRE-1").dump();
    EXPECT_TRUE(Order("EXPIRE-1")["query"]["next_at"].is_null());
    EXPECT_EQ(
        merchant_db_.Scalar("SELECT source FROM ledger_events WHERE out_trade_no = 'EXPIRE-1' "
                            "AND event_type = 'PAYMENT_CLOSED'"),
        channel + "_close");
    // The platform's record holds the close too: it can no longer be paid there.
    EXPECT_EQ(platform_db_.Scalar("SELECT status FROM orders WHERE out_trade_no = 'EXPIRE-1'"),
              "CLOSED");
    EXPECT_NE(Metrics().find("payledger_query_closes_total{channel=\"" + channel + "\"} 1"),
              std::string::npos)
        << Metrics();
    // A payment notified after the close is never hidden.
    ASSERT_EQ(Notify(merchant_->port(), "EXPIRE-1").status / 100, 2);
    const json order = Order("EXPIRE-1");
    EXPECT_EQ(order["status"], "PAID");
    EXPECT_EQ(order["anomalies"], json::array({"paid_after_close"}));
}

TEST_P(PlatformQueryPgTest, TwoServesMakeEachDueQueryOnce) {
    // A second serve on the same ledger, with the same schedule.
    ServeProcess second{merchant_db_.url(), channels_};
    constexpr int kOrders = 12;
    for (int i = 0; i < kOrders; ++i) {
        const std::string key = "TWICE-" + std::to_string(i);
        ASSERT_EQ(Register(platform_->port(), key, std::nullopt).status, 201);
        const unsigned short serve = i % 2 == 0 ? merchant_->port() : second.port();
        ASSERT_EQ(Register(serve, key, GetParam()).status, 201);
        ASSERT_EQ(Notify(platform_->port(), key).status / 100, 2);
    }
    // Every lost payment found, each by one query: an order is asked again only after an
    // answer that did not settle it, and every answer here settles it.
    ASSERT_TRUE(testing::Eventually(
        [&] {
            return merchant_db_.Scalar("SELECT count(*) FROM orders WHERE status = 'PAID'") ==
                   std::to_string(kOrders);
        },
        std::chrono::seconds{60}));
    EXPECT_EQ(merchant_db_.Scalar("SELECT max(attempts) FROM order_queries"), "1");
    EXPECT_EQ(merchant_db_.Scalar("SELECT count(*) FROM callback_receipts WHERE source = '" +
                                  GetParam() + "_query'"),
              std::to_string(kOrders));
    second.Kill();
}

// A serve killed while it asks (its orders leased to it, the platform silent): another serve
// makes those queries once their lease has run out, and every lost payment is found.
TEST_P(PlatformQueryPgTest, AServeKilledWithQueriesInFlightLeavesThemToAnother) {
    constexpr int kOrders = 4;
    simulator_->Pause();
    for (int i = 0; i < kOrders; ++i) {
        const std::string key = "KILLED-" + std::to_string(i);
        ASSERT_EQ(Register(platform_->port(), key, std::nullopt).status, 201);
        ASSERT_EQ(Register(merchant_->port(), key, GetParam()).status, 201);
    }
    ASSERT_TRUE(testing::Eventually(
        [&] {
            return merchant_db_.Scalar(
                       "SELECT count(*) FROM order_queries WHERE "
                       "leased_until > now()") == std::to_string(kOrders);
        },
        std::chrono::seconds{30}));
    merchant_->Kill();  // Its askers wait on the silent platform, every order leased to it.
    simulator_->Resume();
    for (int i = 0; i < kOrders; ++i) {
        ASSERT_EQ(Notify(platform_->port(), "KILLED-" + std::to_string(i)).status / 100, 2);
    }
    ServeProcess second{merchant_db_.url(), channels_};
    ASSERT_TRUE(testing::Eventually(
        [&] {
            return merchant_db_.Scalar("SELECT count(*) FROM orders WHERE status = 'PAID'") ==
                   std::to_string(kOrders);
        },
        std::chrono::seconds{60}));
    EXPECT_EQ(merchant_db_.Scalar("SELECT count(*) FROM order_queries WHERE attempts = 1"),
              std::to_string(kOrders));
}

// WeChat Pay v3 answered by a script instead of the simulator: the answers docs/query.md says a
// platform may give, in turn, each signed by the platform key (or not).
class ScriptedPlatformPgTest : public ::testing::Test {
protected:
    using Script = std::vector<testing::ReceiverAnswer>;

    void Start(Script script, const json& schedule) {
        script_ = std::move(script);
        receiver_ = std::make_unique<testing::WebhookReceiver>(
            [this](const testing::ReceivedRequest& request) {
                std::lock_guard lock{mutex_};
                requests_.push_back(request.method + " " + request.target);
                if (next_ >= script_.size()) return testing::ReceiverAnswer{.never_answer = true};
                return script_[next_++];
            });
        dir_ = testing::MakeTestTmpDir("scripted-");
        WriteTestFile(dir_ + "/v3_platform.pub", PublicKeyPem(platform_.Public()), 0644);
        WriteTestFile(dir_ + "/v3_merchant.pem", PrivateKeyPem(GenerateRsaKey()), 0600);
        channels_ = {
            {"wechat_v3",
             {{"appid", "wx0000000000000002"},
              {"mchid", "1900000002"},
              {"api_v3_key", "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb"},
              {"platform_public_keys", {{kQueriedV3PlatformSerial, dir_ + "/v3_platform.pub"}}},
              {"query",
               {{"api_base", "http://127.0.0.1:" + std::to_string(receiver_->port())},
                {"merchant_private_key", dir_ + "/v3_merchant.pem"},
                {"merchant_serial", kQueriedV3MerchantSerial}}}}},
            {"query", schedule}};
        serve_ = std::make_unique<ServeProcess>(db_.url(), channels_);
    }
    void TearDown() override {
        serve_.reset();
        receiver_.reset();
        if (!dir_.empty()) std::filesystem::remove_all(dir_);
    }

    // Registers <prefix>0 … <prefix><count - 1> with the queried channel.
    void RegisterQueried(const std::string& prefix, int count) {
        for (int i = 0; i < count; ++i) {
            ASSERT_EQ(PlatformQueryPgTest::Register(serve_->port(), prefix + std::to_string(i),
                                                    "wechat_v3")
                          .status,
                      201);
        }
    }

    // An answer as WeChat Pay signs it (`probe`: with a signature probe instead).
    testing::ReceiverAnswer Signed(int status, const std::string& body, bool probe = false) const {
        const std::string timestamp =
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count());
        const std::string nonce = "SCRIPTEDNONCE";
        std::string signature = ledger::Base64Encode(
            RsaSha256Sign(platform_, WechatV3SignatureMessage(timestamp, nonce, body)));
        if (probe) signature = "WECHATPAY/SIGNTEST/" + signature;
        return testing::ReceiverAnswer{.status = status,
                                       .headers = {{"Content-Type", "application/json"},
                                                   {"Wechatpay-Timestamp", timestamp},
                                                   {"Wechatpay-Nonce", nonce},
                                                   {"Wechatpay-Serial", kQueriedV3PlatformSerial},
                                                   {"Wechatpay-Signature", signature}},
                                       .body = body};
    }
    static std::string Transaction(const std::string& state,
                                   const std::string& out_trade_no = "RACE-1") {
        return json{{"appid", "wx0000000000000002"},
                    {"mchid", "1900000002"},
                    {"out_trade_no", out_trade_no},
                    {"transaction_id", "4200000000000000000000000001"},
                    {"trade_state", state},
                    {"success_time", "2026-12-06T10:00:00+08:00"},
                    {"amount", {{"total", 1999}, {"currency", "CNY"}}}}
            .dump();
    }
    json Order(const std::string& out_trade_no) {
        HttpClient client{serve_->port()};
        return client.Get("/v1/orders/" + out_trade_no, testing::kAuditorToken).Json();
    }
    std::vector<std::string> Requests() {
        std::lock_guard lock{mutex_};
        return requests_;
    }

    TestDatabase db_;
    PrivateKey platform_ = GenerateRsaKey();
    std::string dir_;
    json channels_;
    std::mutex mutex_;
    Script script_;
    std::size_t next_ = 0;
    std::vector<std::string> requests_;
    std::unique_ptr<testing::WebhookReceiver> receiver_;
    std::unique_ptr<ServeProcess> serve_;
};

// Paid between the last query and the close: the close is refused (ORDER_PAID), a query follows
// at once and appends the payment; the order is never closed.
TEST_F(ScriptedPlatformPgTest, AnOrderPaidBetweenTheLastQueryAndTheCloseGetsItsPayment) {
    PAYLEDGER_REQUIRE_DB(db_);
    Start({Signed(200, Transaction("NOTPAY")),
           Signed(400, R"({"code":"ORDER_PAID","message":"订单已支付"})"),
           Signed(200, Transaction("SUCCESS"))},
          {{"first_after_seconds", 60}, {"schedule_seconds", {60}}, {"timeout_seconds", 2}});
    const std::string expires =
        projections::FormatRfc3339(std::chrono::duration_cast<std::chrono::microseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count() +
                                   1'000'000);
    ASSERT_EQ(PlatformQueryPgTest::Register(serve_->port(), "RACE-1", "wechat_v3", expires).status,
              201);
    ASSERT_TRUE(testing::Eventually(
        [&] {
            const json order = Order("RACE-1");
            return order["status"] == "PAID" && order["query"]["attempts"] == 3;
        },
        std::chrono::seconds{30}))
        << Order("RACE-1").dump();
    const std::vector<std::string> requests = Requests();
    ASSERT_EQ(requests.size(), 3U);
    EXPECT_TRUE(requests[0].starts_with("GET /v3/pay/transactions/out-trade-no/RACE-1?mchid="));
    EXPECT_EQ(requests[1], "POST /v3/pay/transactions/out-trade-no/RACE-1/close");
    EXPECT_TRUE(requests[2].starts_with("GET "));
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events WHERE event_type = 'PAYMENT_CLOSED'"),
              "0");
    EXPECT_TRUE(Order("RACE-1")["query"]["closed_at"].is_null());
    EXPECT_TRUE(Order("RACE-1")["query"]["next_at"].is_null());
}

// What a platform may answer instead of a verdict: a signature probe (a bad_signature receipt),
// a 503, an answer over 64 KiB, silence past the timeout, and an answer about another order (a
// mismatch receipt). None of them settles the order or stops the schedule; the next answer does.
TEST_F(ScriptedPlatformPgTest, ProbesFailuresAndOtherOrdersNeverStopTheSchedule) {
    PAYLEDGER_REQUIRE_DB(db_);
    Start({Signed(200, Transaction("SUCCESS"), /*probe=*/true),
           Signed(503, R"({"code":"SYSTEM_ERROR","message":"系统错误"})"),
           Signed(200, std::string(70 * 1024, ' ') + Transaction("SUCCESS")),
           testing::ReceiverAnswer{.never_answer = true},
           Signed(200, Transaction("SUCCESS", "OTHER-1")), Signed(200, Transaction("SUCCESS"))},
          {{"first_after_seconds", 0},
           {"schedule_seconds", {1, 1, 1, 1, 1, 1}},
           {"timeout_seconds", 1}});
    ASSERT_EQ(PlatformQueryPgTest::Register(serve_->port(), "RACE-1", "wechat_v3").status, 201);
    ASSERT_TRUE(testing::Eventually(
        [&] {
            const json order = Order("RACE-1");
            return order["status"] == "PAID" && order["query"]["attempts"] == 6;
        },
        std::chrono::seconds{60}))
        << Order("RACE-1").dump();
    EXPECT_EQ(db_.Scalar("SELECT string_agg(outcome, ',' ORDER BY id) FROM callback_receipts "
                         "WHERE source = 'wechat_v3_query'"),
              "bad_signature,mismatch,appended");
    HttpClient client{serve_->port()};
    const std::string metrics = client.Get("/metrics").body;
    for (const char* line :
         {"payledger_queries_total{channel=\"wechat_v3\",answer=\"final\"} 2",
          "payledger_queries_total{channel=\"wechat_v3\",answer=\"bad_signature\"} 1",
          "payledger_queries_total{channel=\"wechat_v3\",answer=\"failed\"} 3"}) {
        EXPECT_NE(metrics.find(line), std::string::npos) << line << "\n" << metrics;
    }
}

// One asker (concurrency 1) goes from one due order to the next without waiting for the
// claimer's poll (1 s): 40 orders due together are asked within seconds. The claimer used to miss
// the asker's second notification (its result, then its being idle) and sleep the whole poll
// after each query: 7 queries/s, every session idle (bench/README.md).
TEST_F(ScriptedPlatformPgTest, ALoneAskerGoesFromOneDueOrderToTheNextWithoutWaitingForThePoll) {
    PAYLEDGER_REQUIRE_DB(db_);
    constexpr int kOrders = 40;
    Script script;
    for (int i = 0; i < kOrders; ++i) {
        script.push_back(Signed(404, R"({"code":"ORDER_NOT_EXIST","message":"订单不存在"})"));
    }
    Start(std::move(script), {{"first_after_seconds", 3},
                              {"schedule_seconds", {3600}},
                              {"timeout_seconds", 5},
                              {"concurrency", 1}});
    ASSERT_NO_FATAL_FAILURE(RegisterQueried("LONE-", kOrders));
    ASSERT_TRUE(receiver_->WaitForRequests(1, std::chrono::seconds{60}));
    const auto first = std::chrono::steady_clock::now();
    ASSERT_TRUE(receiver_->WaitForRequests(kOrders, std::chrono::seconds{60}));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - first).count();
    std::printf("%d queries by one asker in %.2f s\n", kOrders, seconds);
    // At the poll's pace the 40 took 5 s or more; each is milliseconds on loopback.
    EXPECT_LT(seconds, 3.0);
    ASSERT_TRUE(testing::Eventually(
        [&] {
            return db_.Scalar("SELECT count(*) FROM order_queries WHERE attempts = 1") ==
                   std::to_string(kOrders);
        },
        std::chrono::seconds{30}));
}

// While callbacks keep the write path busy the askers yield to them (docs/query.md#pacing): one
// asks at a time and rests between asks, so a backlog of due orders takes little from the
// callbacks; once the callbacks end, all `concurrency` ask again. The platform answers each
// request 20 ms after it arrived (a network's round trip), so that askers asking together are
// seen together. Without the pacing the eight askers had eight requests in flight during the
// storm and asked about hundreds of orders in it.
TEST_F(ScriptedPlatformPgTest, AskersYieldToCallbacksAndTakeTheirPaceBackAfterThem) {
    PAYLEDGER_REQUIRE_DB(db_);
    constexpr int kQueried = 300;
    constexpr int kStormOrders = 30'000;
    constexpr std::int64_t kAmount = 100;
    testing::ReceiverAnswer not_there =
        Signed(404, R"({"code":"ORDER_NOT_EXIST","message":"订单不存在"})");
    not_there.delay = std::chrono::milliseconds{20};
    Start(Script(kQueried, not_there), {{"first_after_seconds", 3600},
                                        {"schedule_seconds", {3600}},
                                        {"timeout_seconds", 5},
                                        {"concurrency", 8}});
    ASSERT_NO_FATAL_FAILURE(RegisterQueried("PACE-", kQueried));
    testing::CreateOrders(db_.url(), kStormOrders, kAmount);
    const auto paced = [&] {
        HttpClient client{serve_->port()};
        return client.Get("/metrics").body.find("\npayledger_query_paced 1\n") != std::string::npos;
    };
    // The registrations were writes too (each its own batch): the askers yielded to them, and
    // take their pace back half a second after them.
    ASSERT_TRUE(testing::Eventually([&] { return !paced(); }, std::chrono::seconds{10}));
    std::size_t asked_in_storm = 0;
    {
        testing::PaymentStorm storm{serve_->port(), kStormOrders, kAmount};
        ASSERT_TRUE(testing::Eventually(paced, std::chrono::seconds{30}))
            << "the askers did not yield to " << storm.acknowledged() << " callbacks";
        // Every order due now, while the callbacks go on; measured until nine tenths of them
        // are acknowledged (the storm's tail is thin, and the askers may speed up in it).
        ASSERT_EQ(db_.Scalar("WITH due AS (UPDATE order_queries SET next_at = now() RETURNING 1) "
                             "SELECT count(*) FROM due"),
                  std::to_string(kQueried));
        receiver_->ResetInFlightMax();
        const std::size_t before = receiver_->Requests().size();
        testing::AwaitCount(storm, kStormOrders * 9 / 10);
        asked_in_storm = receiver_->Requests().size() - before;
        EXPECT_EQ(receiver_->InFlightMax(), 1U) << "askers asked together beside the callbacks";
        EXPECT_LT(asked_in_storm, static_cast<std::size_t>(kQueried / 2));
        storm.Join();
        EXPECT_TRUE(storm.AllAcknowledged());
    }
    std::printf("%zu of %d orders asked beside the callbacks\n", asked_in_storm, kQueried);
    // After the storm: the whole pace again. Paced, the rest would take a fifth of a second each
    // (20 ms, and nineteen times as long at rest): two minutes; at eight at once, about a second.
    receiver_->ResetInFlightMax();
    const auto after = std::chrono::steady_clock::now();
    ASSERT_TRUE(receiver_->WaitForRequests(kQueried, std::chrono::seconds{60}));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - after).count();
    std::printf("the other %zu in %.2f s after the callbacks\n", kQueried - asked_in_storm,
                seconds);
    EXPECT_GT(receiver_->InFlightMax(), 1U);
    EXPECT_LT(seconds, 20.0);
    EXPECT_TRUE(testing::Eventually([&] { return !paced(); }, std::chrono::seconds{10}));
}

// A serve stopped (SIGTERM) while it waits on a silent platform exits at once: the ask is
// cancelled, not waited out, and nothing of it is recorded; its lease runs out, and the order is
// asked about again by whoever runs the schedule then.
TEST_F(ScriptedPlatformPgTest, AStoppingServeDoesNotWaitForASilentPlatform) {
    PAYLEDGER_REQUIRE_DB(db_);
    constexpr int kTimeoutSeconds = 30;
    Start({}, {{"first_after_seconds", 0},
               {"schedule_seconds", {1}},
               {"timeout_seconds", kTimeoutSeconds}});
    ASSERT_EQ(PlatformQueryPgTest::Register(serve_->port(), "SILENT-1", "wechat_v3").status, 201);
    ASSERT_TRUE(receiver_->WaitForRequests(1, std::chrono::seconds{60}));
    const auto before = std::chrono::steady_clock::now();
    EXPECT_EQ(serve_->Terminate(), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds{kTimeoutSeconds / 2});
    EXPECT_EQ(db_.Scalar("SELECT attempts || ',' || (leased_until > now()) FROM order_queries "
                         "WHERE out_trade_no = 'SILENT-1'"),
              "0,true");
}

INSTANTIATE_TEST_SUITE_P(Channels, PlatformQueryPgTest,
                         ::testing::Values("wechat_v2", "wechat_v3", "alipay"));

}  // namespace
}  // namespace payledger::api
