// PostgreSQL tests of `payledger rebuild` on a database with two roles, as scripts/run makes it:
// an owner role (LOGIN, not a superuser) that migrates and rebuilds, and a service role that
// holds only what `payledger migrate --grant ROLE` gives it and runs `payledger serve`.
// rebuild replaces `orders` and `balances` with new tables; the new ones must keep the old ones'
// owner and exact ACL, or serve, on its own role, answers every write and read 500 afterwards.
// And /readyz must say 503, with the reason, while serve's role lacks a privilege it needs.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "api/channels/generic_channel.hpp"
#include "support/http_client.hpp"
#include "support/payment_storm.hpp"
#include "support/serve_process.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::rebuild_grants_test {
namespace {

using testing::HttpClient;
using testing::HttpResult;
using testing::ServeProcess;
using testing::TestDatabase;

// Runs `payledger <arguments>` on `url` through a shell; returns its stdout and stderr.
std::string RunPayledger(const std::string& url, const std::string& arguments, int* exit_status) {
    const std::string command = "PAYLEDGER_DATABASE_URL='" + url + "' '" + PAYLEDGER_BINARY_PATH +
                                "' " + arguments + " 2>&1";
    std::string out;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
        *exit_status = -1;
        return "popen failed";
    }
    char buffer[4096];
    while (const std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    const int status = pclose(pipe);
    *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
}

std::string WithUser(const std::string& url, const std::string& role) {
    return url + (url.find('?') == std::string::npos ? "?" : "&") + "user=" + role;
}

class RebuildGrantsPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        const char* base = std::getenv("PAYLEDGER_TEST_DATABASE_URL");
        db_.emplace(/*migrate=*/false);
        if (!db_->available()) GTEST_SKIP() << "no test database";
        base_url_ = base;
        owner_ = "own_" + db_->name();
        service_ = "svc_" + db_->name();
        {
            pqxx::connection connection{base_url_};
            pqxx::nontransaction tx{connection};
            for (const std::string& role : {owner_, service_}) {
                tx.exec("DROP ROLE IF EXISTS " + tx.quote_name(role));
                tx.exec("CREATE ROLE " + tx.quote_name(role) + " LOGIN NOSUPERUSER");
            }
            // The owner role owns the database, hence its public schema (PostgreSQL 15:
            // pg_database_owner), where it creates the ledger's tables.
            tx.exec("ALTER DATABASE " + tx.quote_name(db_->name()) + " OWNER TO " +
                    tx.quote_name(owner_));
        }
        owner_url_ = WithUser(db_->url(), owner_);
        service_url_ = WithUser(db_->url(), service_);
        int status = -1;
        const std::string out = RunPayledger(owner_url_, "migrate --grant " + service_, &status);
        ASSERT_EQ(status, 0) << out;
        ASSERT_EQ(OwnerScalar("SELECT rolsuper::text FROM pg_roles WHERE rolname = current_user"),
                  "false");
    }

    void TearDown() override {
        if (base_url_.empty()) return;
        db_.reset();  // The roles own the database and its tables: it goes first.
        try {
            pqxx::connection connection{base_url_};
            pqxx::nontransaction tx{connection};
            for (const std::string& role : {owner_, service_}) {
                tx.exec("DROP ROLE IF EXISTS " + tx.quote_name(role));
            }
        } catch (const std::exception& error) {
            ADD_FAILURE() << "dropping the test's roles: " << error.what();
        }
    }

    // Runs `sql` as the owner role and returns the first column of the first row ("" if none).
    std::string OwnerScalar(const std::string& sql) const {
        pqxx::connection connection{owner_url_};
        pqxx::work tx{connection};
        const pqxx::result result = tx.exec(sql);
        tx.commit();
        return result.empty() || result[0][0].is_null() ? std::string()
                                                        : result[0][0].as<std::string>();
    }

    // The owner and the ACL (pg_class.relacl, exactly) of both projections.
    std::string ProjectionRights() const {
        return OwnerScalar(
            "SELECT string_agg(relname || ' owner=' || pg_get_userbyid(relowner) || ' acl=' || "
            "coalesce(relacl::text, 'null'), '; ' ORDER BY relname) FROM pg_class "
            "WHERE oid IN ('orders'::regclass, 'balances'::regclass)");
    }

    std::optional<TestDatabase> db_;
    std::string base_url_;
    std::string owner_;
    std::string service_;
    std::string owner_url_;
    std::string service_url_;
};

// What the service answered to one kind of request: status -> count, and the first bodies of
// answers that were not the expected one.
struct Tally {
    std::map<int, int> statuses;
    std::vector<std::string> unexpected;
    int after_rebuild = 0;
};

// Clients of serve that create orders, pay them through the generic callback and read them
// back, from `threads` connections, until stopped; every answer is tallied.
class OrderLoad {
public:
    OrderLoad(unsigned short port, int threads) : port_(port) {
        for (int t = 0; t < threads; ++t) threads_.emplace_back([this, t] { Run(t); });
    }
    ~OrderLoad() { Stop(); }

    void Stop() {
        stop_ = true;
        for (std::thread& thread : threads_) {
            if (thread.joinable()) thread.join();
        }
    }
    void MarkRebuilt() { rebuilt_ = true; }
    int rounds() const { return rounds_.load(); }
    int rounds_after_rebuild() const { return rounds_after_rebuild_.load(); }
    // Copies, under the lock.
    std::map<std::string, Tally> tallies() const {
        std::lock_guard<std::mutex> lock{mutex_};
        return tallies_;
    }
    std::vector<std::string> keys() const {
        std::lock_guard<std::mutex> lock{mutex_};
        return keys_;
    }

private:
    void Record(const std::string& what, const HttpResult& result, int expected, bool rebuilt) {
        std::lock_guard<std::mutex> lock{mutex_};
        Tally& tally = tallies_[what];
        ++tally.statuses[result.status];
        if (rebuilt) ++tally.after_rebuild;
        if (result.status != expected && tally.unexpected.size() < 5) {
            tally.unexpected.push_back(std::to_string(result.status) + " " + result.body);
        }
    }

    void Run(int thread) {
        HttpClient http{port_};
        for (int i = 0; !stop_; ++i) {
            const bool rebuilt = rebuilt_.load();
            const std::string key = "RG-" + std::to_string(thread) + "-" + std::to_string(i);
            const nlohmann::json order = {{"out_trade_no", key},
                                          {"account_id", "acct-" + std::to_string(i % 5)},
                                          {"amount", 100 + i},
                                          {"currency", "CNY"}};
            Record("create",
                   http.Post("/v1/orders", order.dump(),
                             {{"Authorization", std::string("Bearer ") + testing::kMerchantToken},
                              {"Content-Type", "application/json"}}),
                   201, rebuilt);
            const std::string payment = testing::GenericPayment(key, "TX-" + key, 100 + i);
            const std::string signature =
                api::GenericChannel::Sign(testing::kGenericSecret, testing::UnixNow(), payment);
            Record("pay",
                   http.Post(
                       "/v1/callbacks/generic", payment,
                       {{"Payledger-Signature", signature}, {"Content-Type", "application/json"}}),
                   200, rebuilt);
            Record("read", http.Get("/v1/orders/" + key, testing::kAuditorToken), 200, rebuilt);
            {
                std::lock_guard<std::mutex> lock{mutex_};
                keys_.push_back(key);
            }
            ++rounds_;
            if (rebuilt) ++rounds_after_rebuild_;
        }
    }

    unsigned short port_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> rebuilt_{false};
    std::atomic<int> rounds_{0};
    std::atomic<int> rounds_after_rebuild_{0};
    mutable std::mutex mutex_;
    std::map<std::string, Tally> tallies_;
    std::vector<std::string> keys_;
    std::vector<std::thread> threads_;
};

// Polls `condition` until it holds or 60 s have passed.
template <typename Condition>
bool Eventually(Condition condition) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (!condition()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds{10});  // Poll pace.
    }
    return true;
}

TEST_F(RebuildGrantsPgTest, RebuildAsTheOwnerKeepsEveryRolesRightsWhileServeWritesOnItsOwnRole) {
    // Beyond what migrate --grant gives: a grant to PUBLIC and one with grant option, so that
    // the comparison covers them too.
    OwnerScalar("GRANT SELECT ON balances TO PUBLIC");
    OwnerScalar("GRANT REFERENCES ON orders TO " + service_ + " WITH GRANT OPTION");
    const std::string rights_before = ProjectionRights();
    ASSERT_NE(rights_before.find(service_ + "=arw"), std::string::npos) << rights_before;
    // A history long enough that the rebuild takes a while, while serve keeps writing.
    constexpr int kHistory = 20'000;
    testing::CreateOrders(owner_url_, kHistory, 250);

    ServeProcess serve{service_url_};
    OrderLoad load{serve.port(), 3};
    ASSERT_TRUE(Eventually([&] { return load.rounds() >= 30; })) << load.rounds();

    int status = -1;
    const int rounds_before = load.rounds();
    const std::string out = RunPayledger(owner_url_, "rebuild", &status);
    const int rounds_during = load.rounds() - rounds_before;
    load.MarkRebuilt();
    EXPECT_GT(rounds_during, 0) << "the load went on while rebuild ran";
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("orders rows="), std::string::npos) << out;
    // Serve goes on, without a restart, on the new tables.
    ASSERT_TRUE(Eventually([&] { return load.rounds_after_rebuild() >= 30; }))
        << load.rounds_after_rebuild();
    load.Stop();

    for (const auto& [what, tally] : load.tallies()) {
        const int expected = what == "create" ? 201 : 200;
        int total = 0;
        for (const auto& [code, count] : tally.statuses) total += count;
        EXPECT_EQ(tally.statuses.count(500), 0u) << what;
        EXPECT_EQ(tally.statuses.count(expected) != 0 ? tally.statuses.at(expected) : 0, total)
            << what << ": every answer, before, during and after the rebuild, is a success; "
            << "first others: " << (tally.unexpected.empty() ? "" : tally.unexpected[0]);
        EXPECT_GE(tally.after_rebuild, 30) << what;
    }
    EXPECT_EQ(ProjectionRights(), rights_before);

    // Reads of orders made before and after the rebuild.
    HttpClient http{serve.port()};
    const std::vector<std::string> keys = load.keys();
    ASSERT_FALSE(keys.empty());
    for (const std::string& key : {keys.front(), keys.back()}) {
        const HttpResult order = http.Get("/v1/orders/" + key, testing::kAuditorToken);
        ASSERT_EQ(order.status, 200) << order.body;
        EXPECT_EQ(order.Json()["status"], "PAID") << order.body;
    }
    const HttpResult balances = http.Get("/v1/accounts/acct-0/balances", testing::kAuditorToken);
    EXPECT_EQ(balances.status, 200) << balances.body;
    EXPECT_EQ(http.Get("/readyz").status, 200);

    const std::string verify = RunPayledger(owner_url_, "verify", &status);
    EXPECT_EQ(status, 0) << verify;
    EXPECT_EQ(OwnerScalar("SELECT count(*) FROM orders"), std::to_string(kHistory + keys.size()));
    std::printf("[rebuild_grants] %d rounds of create, pay and read during the rebuild, %d after\n",
                rounds_during, load.rounds_after_rebuild());
}

TEST_F(RebuildGrantsPgTest, RebuildAsASuperuserGivesTheNewTablesToTheirOwner) {
    const std::string rights_before = ProjectionRights();
    ServeProcess serve{service_url_};
    HttpClient http{serve.port()};
    const auto create = [&](const std::string& key) {
        return http.Post("/v1/orders",
                         nlohmann::json{{"out_trade_no", key},
                                        {"account_id", "acct-1"},
                                        {"amount", 500},
                                        {"currency", "CNY"}}
                             .dump(),
                         {{"Authorization", std::string("Bearer ") + testing::kMerchantToken},
                          {"Content-Type", "application/json"}});
    };
    ASSERT_EQ(create("SU-1").status, 201);
    int status = -1;
    const std::string out = RunPayledger(db_->url(), "rebuild", &status);  // As postgres.
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(ProjectionRights(), rights_before);
    const HttpResult after = create("SU-2");
    EXPECT_EQ(after.status, 201) << after.body;
    EXPECT_EQ(http.Get("/v1/orders/SU-1", testing::kAuditorToken).status, 200);
}

TEST_F(RebuildGrantsPgTest, RebuildByARoleThatCannotKeepTheRightsChangesNothing) {
    const std::string rights_before = ProjectionRights();
    int status = -1;
    // The service's role may neither drop the tables nor give new ones to their owner.
    const std::string out = RunPayledger(service_url_, "rebuild", &status);
    EXPECT_EQ(status, 2) << out;
    EXPECT_NE(out.find("rebuild refused, nothing was changed"), std::string::npos) << out;
    EXPECT_NE(out.find("the owner of orders"), std::string::npos) << out;
    EXPECT_EQ(ProjectionRights(), rights_before);
    EXPECT_EQ(OwnerScalar("SELECT count(*) FROM pg_class WHERE relname LIKE '%_rebuild'"), "0");
}

TEST_F(RebuildGrantsPgTest, ReadyzAnswers503NamingTheMissingPrivilegeUntilItIsGrantedBack) {
    ServeProcess serve{service_url_};
    HttpClient http{serve.port()};
    ASSERT_EQ(http.Get("/readyz").status, 200);

    OwnerScalar("REVOKE INSERT ON orders FROM " + service_);
    HttpResult ready = http.Get("/readyz");
    EXPECT_EQ(ready.status, 503) << ready.body;
    ASSERT_EQ(ready.Json().value("outcome", ""), "unavailable") << ready.body;
    const std::string message = ready.Json().value("message", "");
    EXPECT_NE(message.find("lacks INSERT on orders"), std::string::npos) << message;
    EXPECT_EQ(message.find(service_), std::string::npos) << "no role name: " << message;

    OwnerScalar("REVOKE USAGE ON SEQUENCE reconciliations_id_seq FROM " + service_);
    OwnerScalar("REVOKE SELECT, INSERT ON receipt_bodies FROM " + service_);
    ready = http.Get("/readyz");
    EXPECT_EQ(ready.status, 503) << ready.body;
    EXPECT_NE(ready.body.find("SELECT, INSERT on receipt_bodies; INSERT on orders; USAGE on "
                              "reconciliations_id_seq"),
              std::string::npos)
        << ready.body;

    OwnerScalar("GRANT INSERT ON orders TO " + service_);
    OwnerScalar("GRANT USAGE ON SEQUENCE reconciliations_id_seq TO " + service_);
    OwnerScalar("GRANT SELECT, INSERT ON receipt_bodies TO " + service_);
    ready = http.Get("/readyz");
    EXPECT_EQ(ready.status, 200) << ready.body;
}

}  // namespace
}  // namespace payledger::rebuild_grants_test
