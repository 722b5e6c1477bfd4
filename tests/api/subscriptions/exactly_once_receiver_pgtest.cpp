// The receiver's exactly-once recipe of docs/subscriptions.md, run against a real `payledger
// serve`: a merchant's receiver with a database of its own (the shop) records each event's
// `seq` in a table `applied` in the same transaction as its business update (`credits`), with
// INSERT ... ON CONFLICT DO NOTHING, and applies the event only when that inserted a row. The
// receiver is hostile to itself: it answers 500 after committing for some requests, so those
// batches are delivered again though they were applied, and an admin rewinds the subscription
// to 0 once everything is delivered, so every event arrives again. At the end the shop's
// credits equal the ledger's balances exactly, and `applied` holds each seq once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/channels/generic_channel.hpp"
#include "api/subscriptions/webhook_signature.hpp"
#include "projections/assert.hpp"
#include "support/http_client.hpp"
#include "support/serve_process.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"
#include "support/webhook_receiver.hpp"

namespace payledger::api::exactly_once_receiver_pgtest {
namespace {

using nlohmann::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::ReceivedRequest;
using testing::ReceiverAnswer;
using testing::ServeProcess;
using testing::TestDatabase;
using testing::WebhookReceiver;

// 32 bytes, standard base64.
constexpr const char* kShopSecret = "whsec_q2Vtk1Cx0Bz0f0Y5rS8wJf5Yl4nB7mQe2x9Tz3cUo1A=";
constexpr std::int64_t kShopTimestampToleranceSeconds = 300;

std::string Bearer(const char* token) { return std::string("Bearer ") + token; }

// A signed notice of the generic channel: a payment or a refund of an order.
void Notify(HttpClient& client, const json& notice) {
    const std::string body = notice.dump();
    const HttpResult answered =
        client.Post("/v1/callbacks/generic", body,
                    {{"Payledger-Signature",
                      GenericChannel::Sign(testing::kGenericSecret, testing::UnixNow(), body)}});
    ASSERT_EQ(answered.status, 200) << answered.body;
}

void CreateOrder(HttpClient& client, const std::string& out_trade_no, const std::string& account,
                 std::int64_t amount) {
    const HttpResult created = client.Post("/v1/orders",
                                           json{{"out_trade_no", out_trade_no},
                                                {"account_id", account},
                                                {"amount", amount},
                                                {"currency", "CNY"}}
                                               .dump(),
                                           {{"Authorization", Bearer(testing::kMerchantToken)}});
    ASSERT_EQ(created.status, 201) << created.body;
}

// The merchant's receiver: verifies each request's signature, then applies its events
// exactly once in the shop's database. Runs on the webhook receiver's thread.
class ShopReceiver {
public:
    explicit ShopReceiver(const TestDatabase& shop) : connection_(shop.Connect()) {
        pqxx::work tx{*connection_};
        tx.exec("CREATE TABLE applied (seq bigint PRIMARY KEY)");
        tx.exec(
            "CREATE TABLE credits (account_id text NOT NULL, currency text NOT NULL, "
            "amount bigint NOT NULL, PRIMARY KEY (account_id, currency))");
        tx.commit();
        Checked<WebhookSecret> secret = ParseWebhookSecret(kShopSecret);
        PAYLEDGER_ASSERT(secret.ok());
        secrets_.push_back(*secret);
    }

    ReceiverAnswer Answer(const ReceivedRequest& request) {
        const std::lock_guard lock{mutex_};
        const int n = requests_++;
        if (!SignedByTheLedger(request)) {
            ++bad_signatures_;
            return ReceiverAnswer{.status = 401};
        }
        const json body = json::parse(request.body);
        pqxx::work tx{*connection_};
        for (const json& event : body["data"]["events"]) {
            const std::int64_t seq = event["seq"].get<std::int64_t>();
            ++events_seen_;
            const pqxx::result inserted =
                tx.exec_params("INSERT INTO applied (seq) VALUES ($1) ON CONFLICT DO NOTHING", seq);
            if (inserted.affected_rows() == 0) {
                ++events_skipped_;  // Applied by an earlier delivery: nothing to do again.
                continue;
            }
            const std::string type = event["event_type"].get<std::string>();
            const std::int64_t amount = event["amount"].get<std::int64_t>();
            const std::int64_t delta = type == "PAYMENT_SUCCEEDED"  ? amount
                                       : type == "REFUND_SUCCEEDED" ? -amount
                                                                    : 0;
            ExpectFilteredType(type);
            tx.exec_params(
                "INSERT INTO credits (account_id, currency, amount) VALUES ($1, $2, $3) "
                "ON CONFLICT (account_id, currency) DO UPDATE SET amount = credits.amount + $3",
                event["account_id"].get<std::string>(), event["currency"].get<std::string>(),
                delta);
        }
        tx.commit();
        // Hostile: every third request is answered 500 although its events are committed, so
        // the deliverer sends the same batch again.
        if (n % 3 == 1) {
            ++failed_after_commit_;
            return ReceiverAnswer{.status = 500};
        }
        return ReceiverAnswer{.status = 200};
    }

    // Counters, read by the test thread.
    [[nodiscard]] int bad_signatures() const { return Locked(bad_signatures_); }
    [[nodiscard]] int failed_after_commit() const { return Locked(failed_after_commit_); }
    [[nodiscard]] int events_seen() const { return Locked(events_seen_); }
    [[nodiscard]] int events_skipped() const { return Locked(events_skipped_); }

private:
    // Only event types the subscription's filter lets through arrive here.
    static void ExpectFilteredType(const std::string& type) {
        EXPECT_TRUE(type == "PAYMENT_SUCCEEDED" || type == "REFUND_SUCCEEDED") << type;
    }

    // Standard Webhooks verification over the raw body bytes, as received: the signature
    // the project's own signer computes for this id, timestamp and body must be the header's,
    // and the timestamp must be recent (a replayed old request is refused).
    [[nodiscard]] bool SignedByTheLedger(const ReceivedRequest& request) const {
        const auto id = request.headers.find("webhook-id");
        const auto timestamp = request.headers.find("webhook-timestamp");
        const auto signature = request.headers.find("webhook-signature");
        if (id == request.headers.end() || timestamp == request.headers.end() ||
            signature == request.headers.end()) {
            return false;
        }
        const std::int64_t seconds = std::stoll(timestamp->second);
        if (seconds < testing::UnixNow() - kShopTimestampToleranceSeconds ||
            seconds > testing::UnixNow() + kShopTimestampToleranceSeconds) {
            return false;
        }
        return SignWebhook(secrets_, id->second, seconds, request.body) == signature->second;
    }

    [[nodiscard]] int Locked(const int& counter) const {
        const std::lock_guard lock{mutex_};
        return counter;
    }

    mutable std::mutex mutex_{};
    std::unique_ptr<pqxx::connection> connection_;
    std::vector<WebhookSecret> secrets_{};
    int requests_ = 0;
    int bad_signatures_ = 0;
    int failed_after_commit_ = 0;
    int events_seen_ = 0;
    int events_skipped_ = 0;
};

// Waits until `done()` holds, polling every 50 ms, for at most `within`.
template <typename Done>
bool PollUntil(Done done, std::chrono::seconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
    }
    return true;
}

// The ledger's balances of `account`, currency -> balance.
std::map<std::string, std::int64_t> LedgerBalances(HttpClient& client, const std::string& account) {
    std::map<std::string, std::int64_t> balances;
    const HttpResult answer =
        client.Get("/v1/accounts/" + account + "/balances", testing::kAuditorToken);
    EXPECT_EQ(answer.status, 200) << answer.body;
    const json body = answer.Json();  // Kept: a loop over a temporary's member would dangle.
    for (const json& row : body["balances"]) {
        balances[row["currency"].get<std::string>()] = row["balance"].get<std::int64_t>();
    }
    return balances;
}

std::map<std::string, std::int64_t> ShopCredits(const TestDatabase& shop,
                                                const std::string& account) {
    std::map<std::string, std::int64_t> credits;
    const auto connection = shop.Connect();
    pqxx::read_transaction tx{*connection};
    for (const pqxx::row& row :
         tx.exec_params("SELECT currency, amount FROM credits WHERE account_id = $1", account)) {
        credits[row[0].as<std::string>()] = row[1].as<std::int64_t>();
    }
    return credits;
}

TEST(ExactlyOnceReceiverPgTest, CreditsEqualTheLedgersBalancesAcrossRedeliveriesAndARewind) {
    TestDatabase ledger;
    PAYLEDGER_REQUIRE_DATABASE(ledger);
    TestDatabase shop{false};
    ShopReceiver shop_receiver{shop};
    WebhookReceiver receiver{
        [&](const ReceivedRequest& request) { return shop_receiver.Answer(request); }};
    const json subscription = {
        {"name", "shop-credits"},
        {"url", "http://127.0.0.1:" + std::to_string(receiver.port()) + "/hooks/payledger"},
        {"secret", kShopSecret},
        {"event_types", {"PAYMENT_SUCCEEDED", "REFUND_SUCCEEDED"}},
        {"batch_max", 4},
        {"timeout_seconds", 5}};
    ServeProcess server{ledger.url(), {{"subscriptions", {subscription}}}};
    HttpClient client{server.port()};

    // Two accounts; every order paid, some refunded in part or in whole.
    const std::vector<std::string> accounts = {"shop-a", "shop-b"};
    for (int i = 0; i < 12; ++i) {
        const std::string order = "EXO-" + std::to_string(i);
        const std::int64_t amount = 100 + 37 * i;
        CreateOrder(client, order, accounts[static_cast<std::size_t>(i % 2)], amount);
        Notify(client, {{"event_type", "PAYMENT_SUCCEEDED"},
                        {"out_trade_no", order},
                        {"transaction_id", "T-" + order},
                        {"amount", amount}});
        if (i % 3 == 0) {
            Notify(client, {{"event_type", "REFUND_SUCCEEDED"},
                            {"out_trade_no", order},
                            {"transaction_id", "R-" + order},
                            {"amount", i == 0 ? amount : 50}});
        }
    }
    const std::string matching_sql =
        "FROM ledger_events WHERE event_type IN ('PAYMENT_SUCCEEDED', 'REFUND_SUCCEEDED')";
    const std::int64_t matching = std::stoll(ledger.Scalar("SELECT count(*) " + matching_sql));
    const std::string head = ledger.Scalar("SELECT max(seq) " + matching_sql);
    ASSERT_EQ(matching, 16);
    const auto cursor = [&] {
        return ledger.Scalar("SELECT after FROM subscriptions WHERE name = 'shop-credits'");
    };
    ASSERT_TRUE(PollUntil([&] { return cursor() == head; }, std::chrono::seconds{60}))
        << "not every event was acknowledged";
    EXPECT_GT(shop_receiver.failed_after_commit(), 0);
    EXPECT_GT(shop_receiver.events_skipped(), 0) << "no batch was delivered again";
    for (const std::string& account : accounts) {
        EXPECT_EQ(ShopCredits(shop, account), LedgerBalances(client, account)) << account;
    }

    // Everything again: an admin rewinds the subscription to the beginning.
    const int seen_before_rewind = shop_receiver.events_seen();
    const HttpResult rewound =
        client.Post("/v1/admin/subscriptions/shop-credits/rewind", R"({"after": 0})",
                    {{"Authorization", Bearer(testing::kAdminToken)}});
    ASSERT_EQ(rewound.status, 200) << rewound.body;
    ASSERT_TRUE(PollUntil(
        [&] {
            return shop_receiver.events_seen() - seen_before_rewind >= matching && cursor() == head;
        },
        std::chrono::seconds{60}))
        << "the rewind did not deliver everything again";

    EXPECT_EQ(shop_receiver.bad_signatures(), 0);
    // Every event reached the shop at least twice, yet each was applied once.
    EXPECT_GE(shop_receiver.events_seen(), 2 * matching);
    EXPECT_EQ(shop_receiver.events_seen() - shop_receiver.events_skipped(), matching);
    EXPECT_EQ(shop.Scalar("SELECT count(*) FROM applied"), std::to_string(matching));
    EXPECT_EQ(shop.Scalar("SELECT string_agg(seq::text, ',' ORDER BY seq) FROM applied"),
              ledger.Scalar("SELECT string_agg(seq::text, ',' ORDER BY seq) " + matching_sql));
    for (const std::string& account : accounts) {
        const std::map<std::string, std::int64_t> balances = LedgerBalances(client, account);
        ASSERT_EQ(balances.size(), 1u) << account;
        EXPECT_EQ(ShopCredits(shop, account), balances) << account;
    }
}

}  // namespace
}  // namespace payledger::api::exactly_once_receiver_pgtest
