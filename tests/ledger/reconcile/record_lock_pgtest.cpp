// A reconciliation of a large bill does not hold up the callbacks. The run is recorded under
// the writer lock, but the bill's bytes (up to 256 MiB) are stored before, without it
// (schema/0009_reconciliation_bills.sql): a real `payledger serve` takes a stream of new
// orders and their generic payments from several clients the whole time `reconcile` runs on a
// bill of almost 256 MiB, and not one is answered 503 (serve's lock_timeout is 5 s); every one
// is appended, and the run is recorded with the bill's bytes. The longest answer while the run
// read, matched and recorded is printed (and kept as a test property): about the longest a
// batch waited for the writer lock.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/channels/generic_channel.hpp"
#include "ledger/reconcile/bill.hpp"
#include "ledger/reconcile/reconciliation.hpp"
#include "support/http_client.hpp"
#include "support/serve_process.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::ledger::reconcile {
namespace record_lock {
namespace {

using std::chrono::steady_clock;

// About the largest bill accepted: when its bytes were copied under the writer lock, batches
// waited more than serve's 5 s for it and were answered 503 (a 48 MiB bill held the lock for
// 0.85 s, a 250 MiB one for over 5 s).
constexpr std::size_t kBillBytes = kBillBytesMax - 64 * 1024;
constexpr int kClients = 4;
constexpr std::int64_t kAmount = 500;

// An Alipay detail bill of 2026-11-30 (UTF-8 after a BOM) of about `bytes` bytes: rows of a
// business type that is neither a payment nor a refund, which the reconciliation reads and
// counts but matches with nothing, so that its record is the bill's bytes and little else.
std::string PaddedAlipayBill(std::size_t bytes) {
    std::string text =
        "\xEF\xBB\xBF#支付宝业务明细查询\r\n#账号：[20881234567890120156]\r\n"
        "#起始日期：[2026年11月30日 00:00:00]   终止日期：[2026年12月01日 00:00:00]\r\n"
        "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,"
        "门店名称,操作员,终端号,对方账户,订单金额（元）,商家实收（元）,"
        "支付宝红包（元）,集分宝（元）,支付宝优惠（元）,商家优惠（元）,"
        "券核销金额（元）,券名称,商家红包消费金额（元）,卡消费金额（元）,"
        "退款批次号/请求号,服务费（元）,分润（元）,备注\r\n";
    const std::string padding(200, 'x');
    for (std::int64_t n = 0; text.size() < bytes; ++n) {
        text += "20261130220014588605" + std::to_string(1'000'000 + n) + "\t,PAD-" +
                std::to_string(n) + "\t,其它\t," + padding +
                ",2026-11-30 10:55:16,2026-11-30 10:55:23,\t,\t,\t,\t,\t,0.00,0.00,0.00,0.00,"
                "0.00,0.00,0.00,,0.00\t,0.00,\t,0.00,0.00,\r\n";
    }
    text += "#交易合计：0笔，退款合计：0笔\r\n";
    return text;
}

// From kClients connections until told to stop: a new order S-<n> (POST /v1/orders), then its
// generic payment, each answer's status, outcome and time kept.
class CallbackStream {
public:
    explicit CallbackStream(unsigned short port) : port_(port) {
        for (int c = 0; c < kClients; ++c) threads_.emplace_back([this] { Run(); });
    }
    ~CallbackStream() { Stop(); }

    void Stop() {
        stop_ = true;
        for (std::thread& thread : threads_) {
            if (thread.joinable()) thread.join();
        }
    }
    // Opens and closes the window whose longest answer is kept.
    void Watch(bool on) { watching_ = on; }

    int appended() const { return appended_.load(); }
    int in_window() const { return in_window_.load(); }
    std::chrono::milliseconds longest_in_window() const {
        return std::chrono::milliseconds{longest_ms_.load()};
    }
    std::vector<std::string> failures() const {
        std::lock_guard lock{mutex_};
        return failures_;
    }

private:
    void Run() {
        testing::HttpClient http{port_};
        while (!stop_) {
            const std::string key = "S-" + std::to_string(next_++);
            const nlohmann::json order = {{"out_trade_no", key},
                                          {"account_id", "acct-1"},
                                          {"amount", kAmount},
                                          {"currency", "CNY"}};
            const std::string payment = testing::GenericPayment(key, "TX-" + key, kAmount);
            try {
                if (!Appended(key, 201, Timed([&] {
                                  return http.Post("/v1/orders", order.dump(),
                                                   {{"Authorization", std::string("Bearer ") +
                                                                          testing::kMerchantToken},
                                                    {"Content-Type", "application/json"}});
                              }))) {
                    continue;
                }
                if (!Appended(key, 200, Timed([&] {
                                  return http.Post(
                                      "/v1/callbacks/generic", payment,
                                      {{"Payledger-Signature",
                                        api::GenericChannel::Sign(testing::kGenericSecret,
                                                                  testing::UnixNow(), payment)}});
                              }))) {
                    continue;
                }
            } catch (const std::exception& error) {
                Fail(key + ": " + error.what());
                return;
            }
            ++appended_;
        }
    }

    // Sends a request by `send`; keeps how long its answer took when the window is open.
    template <typename Send>
    testing::HttpResult Timed(Send send) {
        const bool watched = watching_;
        const auto started = steady_clock::now();
        testing::HttpResult result = send();
        const std::int64_t took =
            std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - started)
                .count();
        if (watched && watching_) {
            ++in_window_;
            std::int64_t longest = longest_ms_.load();
            while (took > longest && !longest_ms_.compare_exchange_weak(longest, took)) {
            }
        }
        return result;
    }

    // True when `result` says appended: 201 for an order, 200 with outcome appended for a
    // callback; a failure otherwise.
    bool Appended(const std::string& key, int status, const testing::HttpResult& result) {
        if (result.status == status &&
            (status == 201 || result.Json().value("outcome", "") == "appended")) {
            return true;
        }
        Fail(key + ": " + std::to_string(result.status) + " " + result.body);
        return false;
    }

    void Fail(const std::string& what) {
        std::lock_guard lock{mutex_};
        failures_.push_back(what);
    }

    const unsigned short port_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> watching_{false};
    std::atomic<int> next_{0};  // The next order's number.
    std::atomic<int> appended_{0};
    std::atomic<int> in_window_{0};
    std::atomic<std::int64_t> longest_ms_{0};
    mutable std::mutex mutex_;
    std::vector<std::string> failures_;
    std::vector<std::thread> threads_;
};

TEST(ReconcileRecordLockPgTest, ALargeBillIsReconciledWhileCallbacksAreAppendedWithout503) {
    testing::TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    const std::string bill_path =
        (std::filesystem::path(testing::TestTmpDir()) / (db.name() + "-large-bill.csv")).string();
    const std::string bill = PaddedAlipayBill(kBillBytes);
    {
        std::ofstream out{bill_path, std::ios::binary};
        out << bill;
    }
    testing::ServeProcess serve{db.url()};
    CallbackStream stream{serve.port()};
    // The stream runs before, during and after the run.
    const auto warm = steady_clock::now() + std::chrono::seconds{60};
    while (stream.appended() < 50 && stream.failures().empty() && steady_clock::now() < warm) {
        std::this_thread::sleep_for(std::chrono::milliseconds{10});  // Poll pace.
    }
    ASSERT_GE(stream.appended(), 50)
        << "the stream never got going: "
        << (stream.failures().empty() ? std::string() : stream.failures().front());

    stream.Watch(true);
    const auto started = steady_clock::now();
    std::ostringstream out;
    const ReconcileReport report = Reconcile(
        db.url(), {.platform = Platform::kAlipay, .bill_path = bill_path, .date = "2026-11-30"},
        out);
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - started);
    stream.Watch(false);
    const int appended_at_end = stream.appended();
    const auto after = steady_clock::now() + std::chrono::seconds{60};
    while (stream.appended() < appended_at_end + 50 && steady_clock::now() < after) {
        std::this_thread::sleep_for(std::chrono::milliseconds{10});  // Poll pace.
    }
    stream.Stop();
    std::filesystem::remove(bill_path);

    EXPECT_TRUE(report.ok) << out.str();
    EXPECT_TRUE(report.failure.empty()) << report.failure;
    EXPECT_GT(report.rows, 100'000);
    const std::vector<std::string> failures = stream.failures();
    EXPECT_TRUE(failures.empty()) << failures.size() << " callbacks failed, the first: "
                                  << (failures.empty() ? "" : failures.front());
    EXPECT_GT(stream.in_window(), 0);
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM ledger_events WHERE event_type = "
                        "'PAYMENT_SUCCEEDED'"),
              std::to_string(stream.appended()));
    EXPECT_EQ(db.Scalar("SELECT octet_length(payledger_reconciliation_bill(r)) FROM "
                        "reconciliations r WHERE id = " +
                        std::to_string(report.id)),
              std::to_string(bill.size()));
    ::testing::Test::RecordProperty("reconcile_ms", static_cast<int>(took.count()));
    ::testing::Test::RecordProperty("longest_callback_ms",
                                    static_cast<int>(stream.longest_in_window().count()));
    std::cout << "reconcile of " << bill.size() << " bytes took " << took.count() << " ms; "
              << stream.in_window() << " callbacks answered meanwhile, the longest in "
              << stream.longest_in_window().count() << " ms; " << stream.appended()
              << " appended in all\n";
}

}  // namespace
}  // namespace record_lock
}  // namespace payledger::ledger::reconcile
