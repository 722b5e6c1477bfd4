// Callback storms through HTTP: many copies of one callback at once over
// many keep-alive connections take effect exactly once, and a thousand orders paid and
// refunded with every callback delivered three times, interleaved, leave every balance equal
// to the sum this test computes itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::TestDatabase;
using testing::TestService;

constexpr int kConnections = 32;

// Runs `work(connection_index, client)` on kConnections threads, each with its own
// keep-alive connection, all released at once.
template <typename Work>
void OnEveryConnection(unsigned short port, Work work) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int c = 0; c < kConnections; ++c) {
        threads.emplace_back([&, c] {
            try {  // A connection error fails the test; uncaught, it would abort the binary.
                HttpClient client{port};
                ++ready;
                while (!go.load()) std::this_thread::yield();
                work(c, client);
            } catch (const std::exception& error) {
                ++ready;
                ADD_FAILURE() << "connection " << c << ": " << error.what();
            }
        });
    }
    while (ready.load() < kConnections) std::this_thread::yield();
    go = true;
    for (std::thread& thread : threads) thread.join();
}

class HttpStormPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        service_ = std::make_unique<TestService>(testing::TestConfig(db_.url()), db_.name());
    }

    TestDatabase db_;
    std::unique_ptr<TestService> service_;
};

TEST_F(HttpStormPgTest, TwoHundredCopiesOfOneCallbackTakeEffectOnce) {
    HttpClient setup{service_->port()};
    ASSERT_EQ(service_->CreateOrder(setup, "STORM-1", "acct-storm", 8880).status, 201);
    const std::string body = testing::GenericPayment("STORM-1", "4200000001", 8880);

    constexpr int kCopies = 200;
    std::atomic<int> next{0};
    std::mutex mutex;
    std::vector<HttpResult> answers;
    OnEveryConnection(service_->port(), [&](int, HttpClient& client) {
        for (int i = next++; i < kCopies; i = next++) {
            HttpResult result = service_->PostGeneric(client, body);
            std::lock_guard lock{mutex};
            answers.push_back(std::move(result));
        }
    });

    ASSERT_EQ(answers.size(), static_cast<std::size_t>(kCopies));
    int appended = 0;
    for (const HttpResult& answer : answers) {
        ASSERT_EQ(answer.status, 200) << answer.body;
        const json reply = answer.Json();
        EXPECT_EQ(reply["code"], "SUCCESS");
        EXPECT_EQ(reply["seq"], 2);
        appended += reply["outcome"] == "appended";
    }
    EXPECT_EQ(appended, 1);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events WHERE out_trade_no = 'STORM-1'"), "2");
    EXPECT_EQ(db_.Scalar("SELECT balance FROM balances WHERE account_id = 'acct-storm'"), "8880");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts WHERE source = 'generic' AND "
                         "out_trade_no = 'STORM-1'"),
              std::to_string(kCopies));
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts WHERE outcome = 'duplicate'"),
              std::to_string(kCopies - 1));
}

TEST_F(HttpStormPgTest, ThousandOrdersThreeDeliveriesEachGiveExactBalances) {
    constexpr int kOrders = 1000;
    constexpr int kAccounts = 37;
    std::mt19937_64 random{20261129};
    struct Order {
        std::string out_trade_no;
        std::string account_id;
        std::int64_t amount = 0;
        std::int64_t refund = 0;  // 0: no refund.
    };
    std::vector<Order> orders;
    std::map<std::string, std::int64_t> expected;
    for (int i = 0; i < kOrders; ++i) {
        Order order{.out_trade_no = "BULK-" + std::to_string(i),
                    .account_id = "acct-" + std::to_string(i % kAccounts),
                    .amount = static_cast<std::int64_t>(1 + random() % 1'000'000)};
        if (i % 4 == 0) {
            order.refund =
                1 + static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(order.amount));
        }
        expected[order.account_id] += order.amount - order.refund;
        orders.push_back(order);
    }

    std::atomic<int> next{0};
    std::atomic<int> failures{0};
    OnEveryConnection(service_->port(), [&](int, HttpClient& client) {
        for (int i = next++; i < kOrders; i = next++) {
            const Order& order = orders[static_cast<std::size_t>(i)];
            if (service_->CreateOrder(client, order.out_trade_no, order.account_id, order.amount)
                    .status != 201) {
                ++failures;
            }
        }
    });
    ASSERT_EQ(failures.load(), 0);

    // Every callback three times, shuffled, so copies race each other across connections.
    std::vector<std::string> deliveries;
    for (const Order& order : orders) {
        for (int copy = 0; copy < 3; ++copy) {
            deliveries.push_back(testing::GenericPayment(order.out_trade_no,
                                                         "TX-" + order.out_trade_no, order.amount));
            if (order.refund != 0) {
                deliveries.push_back(json{
                    {"event_type", "REFUND_SUCCEEDED"},
                    {"out_trade_no", order.out_trade_no},
                    {"transaction_id", "RF-" + order.out_trade_no},
                    {"amount",
                     order.refund}}.dump());
            }
        }
    }
    std::shuffle(deliveries.begin(), deliveries.end(), random);
    next = 0;
    std::atomic<int> appended{0};
    std::atomic<int> duplicate{0};
    OnEveryConnection(service_->port(), [&](int, HttpClient& client) {
        for (int i = next++; i < static_cast<int>(deliveries.size()); i = next++) {
            const HttpResult r =
                service_->PostGeneric(client, deliveries[static_cast<std::size_t>(i)]);
            if (r.status != 200) {
                ++failures;
                continue;
            }
            const std::string outcome = r.Json()["outcome"];
            appended += outcome == "appended";
            duplicate += outcome == "duplicate";
        }
    });
    EXPECT_EQ(failures.load(), 0);
    const int refunds = kOrders / 4;
    EXPECT_EQ(appended.load(), kOrders + refunds);
    EXPECT_EQ(duplicate.load(), 2 * (kOrders + refunds));

    HttpClient auditor{service_->port()};
    for (const auto& [account_id, balance] : expected) {
        const HttpResult r =
            auditor.Get("/v1/accounts/" + account_id + "/balances", testing::kAuditorToken);
        ASSERT_EQ(r.status, 200);
        EXPECT_EQ(r.Json()["balances"][0]["balance"], balance) << account_id;
    }
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events"),
              std::to_string(2 * kOrders + refunds));
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM orders WHERE status = 'REFUNDED'"),
              std::to_string(refunds));
}

}  // namespace
}  // namespace payledger::api
