#include "support/payment_storm.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <pqxx/pqxx>
#include <set>

#include "api/channels/generic_channel.hpp"
#include "ledger/integrity/verify.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/write/writer.hpp"
#include "support/http_client.hpp"
#include "support/test_service.hpp"

namespace payledger::testing {

void CreateOrders(const std::string& url, int count, std::int64_t amount) {
    auto connection = ledger::Connect(url);
    std::vector<ledger::Delivery> batch;
    for (int i = 0; i < count; ++i) {
        const std::string key = "R-" + std::to_string(i);
        // Field by field rather than one designated initializer: g++ 12 at -O3 reports the
        // temporary's std::optional members as maybe uninitialized (a false positive).
        ledger::Delivery& delivery = batch.emplace_back();
        delivery.receipt.source = projections::Source::kApi;
        delivery.receipt.peer = "t";
        delivery.receipt.out_trade_no = key;
        projections::Event& event = delivery.event.emplace();
        event.out_trade_no = key;
        event.event_type = projections::EventType::kOrderCreated;
        event.account_id = "acct-" + std::to_string(i % 7);
        event.amount = amount;
        event.currency = "CNY";
    }
    (void)ledger::WriteBatch(*connection, batch);
}

void PaymentStorm::Run(int client) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{90};
    std::optional<HttpClient> http;
    // Only this thread sends its share, so it stops once that share is acknowledged
    // instead of spinning while the others finish.
    bool pending = true;
    while (pending && std::chrono::steady_clock::now() < deadline) {
        pending = false;
        for (std::size_t i = static_cast<std::size_t>(client); i < acked_.size();
             i += kStormClients) {
            if (acked_[i].load()) continue;
            pending = true;
            const std::string key = "R-" + std::to_string(i);
            const std::string body = GenericPayment(key, "TX-" + key, amount_);
            try {
                if (!http) http.emplace(port_);
                const std::string signature =
                    api::GenericChannel::Sign(kGenericSecret, UnixNow(), body);
                const HttpResult r =
                    http->Post("/v1/callbacks/generic", body, {{"Payledger-Signature", signature}});
                if (r.status == 200) {
                    const std::string outcome = r.Json()["outcome"];
                    if (outcome == "appended") ++appended_;
                    acked_[i] = true;
                    ++acknowledged_;
                } else {
                    ASSERT_EQ(r.status, 503) << r.body;  // Only "not now" is allowed.
                    // The database is away: back off a little before retrying.
                    std::this_thread::sleep_for(std::chrono::milliseconds{20});
                }
            } catch (const std::exception&) {
                http.reset();  // The server is away: reconnect on the next try.
                std::this_thread::sleep_for(std::chrono::milliseconds{20});
            }
        }
    }
}

void AwaitCount(const PaymentStorm& storm, int count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (storm.acknowledged() < count && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds{5});  // Poll pace; cores are few.
    }
    ASSERT_GE(storm.acknowledged(), count);
}

void ExpectAcknowledgedArePersisted(const std::string& url, const std::vector<bool>& acked) {
    auto connection = ledger::Connect(url);
    pqxx::read_transaction tx{*connection};
    std::set<std::string> paid;
    for (const pqxx::row& row :
         tx.exec("SELECT out_trade_no FROM ledger_events WHERE event_type = 'PAYMENT_SUCCEEDED'")) {
        paid.insert(row[0].as<std::string>());
    }
    int checked = 0;
    for (std::size_t i = 0; i < acked.size(); ++i) {
        if (!acked[i]) continue;
        ++checked;
        EXPECT_EQ(paid.count("R-" + std::to_string(i)), 1u) << "acknowledged but lost: R-" << i;
    }
    EXPECT_GT(checked, 0);
}

void ExpectLedgerComplete(const std::string& url, int orders, std::int64_t amount) {
    auto connection = ledger::Connect(url);
    pqxx::read_transaction tx{*connection};
    EXPECT_EQ(tx.exec("SELECT count(*) FROM ledger_events")[0][0].as<int>(), 2 * orders);
    EXPECT_EQ(tx.exec("SELECT sum(balance) FROM balances")[0][0].as<std::int64_t>(),
              orders * amount);
    tx.commit();
    const ledger::VerifyReport report = ledger::Verify(url);
    EXPECT_TRUE(report.ok()) << ledger::FormatReport(report);
}

}  // namespace payledger::testing
