// verify and rebuild (docs/integrity.md#verify, docs/integrity.md#rebuild): digests equal to the
// SHA-256 of the canonical text that this test writes out by hand from its own inputs; tampering
// detected and named; rebuild repairs, catches up with events appended during its build phase, runs
// while deliveries keep flowing, and leaves the live projections untouched when it fails; the
// incremental live path equals the from-scratch fold over random histories delivered in random
// batches with duplicates.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <random>
#include <thread>

#include "ledger/base/bytes.hpp"
#include "ledger/integrity/rebuild.hpp"
#include "ledger/integrity/verify.hpp"
#include "ledger/write/committer.hpp"
#include "ledger/write/writer.hpp"
#include "projections/assert.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger::verify_pgtest {
namespace {

using projections::EventType;
using projections::Outcome;
using testing::TestDatabase;

// Every delivery of these histories, the order's creation included, comes from the generic
// channel.
Delivery Deliver(const std::string& out_trade_no, EventType type, std::int64_t amount,
                 std::string currency, std::optional<std::string> transaction_id,
                 std::string account_id = {}) {
    return testing::VerifiedCallback(out_trade_no, type,
                                     {.account_id = std::move(account_id),
                                      .amount = amount,
                                      .currency = std::move(currency),
                                      .transaction_id = std::move(transaction_id),
                                      .receipt = {.peer = "test", .body = "{}"}});
}

Delivery Create(const std::string& key, const std::string& account, std::int64_t amount,
                const std::string& currency = "CNY") {
    return Deliver(key, EventType::kOrderCreated, amount, currency, std::nullopt, account);
}
Delivery Pay(const std::string& key, std::int64_t amount, const std::string& currency = "CNY") {
    return Deliver(key, EventType::kPaymentSucceeded, amount, currency, "TX-" + key);
}
Delivery Refund(const std::string& key, std::int64_t amount) {
    return Deliver(key, EventType::kRefundSucceeded, amount, "", "RF-" + key);
}
Delivery Close(const std::string& key) {
    return Deliver(key, EventType::kPaymentClosed, 0, "", std::nullopt);
}

// The canonical text of the history Seed() writes, by hand (docs/events.md#canonical-digests).
const std::string kOrdersText =
    "ORD-1\tacct-1\tCNY\t1999\tPAID\tTX-ORD-1\t1999\t0\t\n"
    "ORD-2\tacct-1\tCNY\t500\tWAIT_PAY\t\t0\t0\t\n"
    "ORD-3\tacct-2\tUSD\t100\tREFUNDED\tTX-ORD-3\t100\t40\tpaid_after_close\n"
    "ORD-4\tacct-2\tCNY\t70\tCLOSED\t\t0\t0\t\n"
    "ORD-5\tacct-3\tCNY\t30\tWAIT_PAY\t\t0\t25\trefund_without_payment\n";
const std::string kBalancesText =
    "acct-1\tCNY\t1999\n"
    "acct-2\tCNY\t0\n"
    "acct-2\tUSD\t60\n"
    "acct-3\tCNY\t0\n";

class VerifyPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        connection_ = db_.Connect();
    }

    void Write(std::vector<Delivery> deliveries) {
        for (const DeliveryResult& result : WriteBatch(*connection_, deliveries)) {
            ASSERT_FALSE(result.failure) << result.message;
        }
    }

    void Seed() {
        Write({Create("ORD-3", "acct-2", 100, "USD"), Create("ORD-1", "acct-1", 1999),
               Create("ORD-2", "acct-1", 500), Create("ORD-4", "acct-2", 70),
               Create("ORD-5", "acct-3", 30)});
        Write({Pay("ORD-1", 1999), Pay("ORD-3", 100, "USD"), Close("ORD-3"), Close("ORD-4")});
        Write({Refund("ORD-3", 40), Refund("ORD-5", 25)});
    }

    void ExpectSeedDigests(const VerifyReport& report) {
        ASSERT_EQ(report.projections.size(), 2u);
        EXPECT_EQ(report.projections[0].name, "orders");
        EXPECT_EQ(report.projections[0].rows, 5);
        EXPECT_EQ(report.projections[0].digest, Sha256Hex(kOrdersText));
        EXPECT_EQ(report.projections[1].name, "balances");
        EXPECT_EQ(report.projections[1].rows, 4);
        EXPECT_EQ(report.projections[1].digest, Sha256Hex(kBalancesText));
    }

    TestDatabase db_;
    std::unique_ptr<pqxx::connection> connection_;
};

TEST_F(VerifyPgTest, EmptyLedgerVerifies) {
    const VerifyReport report = Verify(db_.url());
    EXPECT_TRUE(report.ok());
    EXPECT_EQ(FormatReport(report), "orders rows=0 digest=" + Sha256Hex("") +
                                        " OK\nbalances rows=0 digest=" + Sha256Hex("") + " OK\n");
}

TEST_F(VerifyPgTest, DigestsAreTheSha256OfTheCanonicalText) {
    Seed();
    const VerifyReport report = Verify(db_.url());
    EXPECT_TRUE(report.ok()) << FormatReport(report);
    ExpectSeedDigests(report);
    EXPECT_EQ(report.events, 11);
    EXPECT_EQ(report.projections[0].live_digest, report.projections[0].digest);
}

TEST_F(VerifyPgTest, TamperingIsNamedAndRebuildRepairsIt) {
    Seed();
    db_.Scalar("UPDATE balances SET balance = balance + 1 WHERE account_id = 'acct-1' RETURNING 1");
    db_.Scalar("DELETE FROM orders WHERE out_trade_no = 'ORD-2' RETURNING 1");
    db_.Scalar("UPDATE orders SET status = 'PAID' WHERE out_trade_no = 'ORD-4' RETURNING 1");

    const VerifyReport broken = Verify(db_.url());
    EXPECT_FALSE(broken.ok());
    ExpectSeedDigests(broken);  // The fold's digests do not depend on the live tables.
    const std::string text = FormatReport(broken);
    EXPECT_NE(text.find("orders rows=5 digest=" + Sha256Hex(kOrdersText) +
                        " DIFFERS live_rows=4 live_digest="),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("\n  ORD-2 missing from the live projection\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\n  ORD-4 status CLOSED, live PAID\n"), std::string::npos) << text;
    EXPECT_NE(text.find("balances rows=4 digest=" + Sha256Hex(kBalancesText) +
                        " DIFFERS live_rows=4 live_digest="),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("\n  acct-1:CNY balance 1999, live 2000\n"), std::string::npos) << text;
    EXPECT_EQ(broken.projections[0].difference_count, 2);
    EXPECT_EQ(broken.projections[1].difference_count, 1);

    const VerifyReport rebuilt = Rebuild(db_.url());
    EXPECT_TRUE(rebuilt.ok()) << FormatReport(rebuilt);
    ExpectSeedDigests(rebuilt);
    EXPECT_TRUE(Verify(db_.url()).ok());
    EXPECT_EQ(db_.Scalar("SELECT status FROM orders WHERE out_trade_no = 'ORD-4'"), "CLOSED");
    // The live path keeps working on the swapped-in tables.
    Write({Pay("ORD-2", 500)});
    EXPECT_EQ(db_.Scalar("SELECT balance FROM balances WHERE account_id = 'acct-1'"), "2499");
    EXPECT_TRUE(Verify(db_.url()).ok());
}

TEST_F(VerifyPgTest, OnlyTwentyDifferencesAreListed) {
    std::vector<Delivery> orders;
    for (int i = 0; i < 30; ++i) orders.push_back(Create("K-" + std::to_string(i), "a", 5));
    Write(orders);
    db_.Scalar("UPDATE orders SET amount = 6 RETURNING 1");
    const VerifyReport report = Verify(db_.url());
    EXPECT_EQ(report.projections[0].difference_count, 30);
    EXPECT_EQ(report.projections[0].differences.size(), kDifferencesListedMax);
}

TEST_F(VerifyPgTest, RebuildCatchesUpWithEventsAppendedDuringItsBuild) {
    Seed();
    db_.Scalar("UPDATE balances SET balance = 0 RETURNING 1");  // Something to repair.
    const std::int64_t snapshot_seq = BuildRebuildTables(db_.url());
    EXPECT_EQ(snapshot_seq, 11);
    // Appended after the build's snapshot: an existing order paid, a new order and its
    // payment, a refund of an order paid before.
    Write(
        {Pay("ORD-2", 500), Create("ORD-6", "acct-4", 10), Pay("ORD-6", 10), Refund("ORD-1", 999)});
    SwapRebuildTables(db_.url(), snapshot_seq);
    const VerifyReport report = Verify(db_.url());
    EXPECT_TRUE(report.ok()) << FormatReport(report);
    EXPECT_EQ(db_.Scalar("SELECT string_agg(account_id || ':' || balance, ',' ORDER BY "
                         "account_id, currency) FROM balances"),
              "acct-1:1500,acct-2:0,acct-2:60,acct-3:0,acct-4:10");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM orders"), "6");
    EXPECT_EQ(db_.Scalar("SELECT to_regclass('orders_rebuild') IS NULL"), "t");
}

TEST_F(VerifyPgTest, FailedRebuildLeavesTheLiveProjectionsUntouched) {
    Seed();
    db_.Scalar("UPDATE balances SET balance = 7 WHERE account_id = 'acct-3' RETURNING 1");
    // An event whose order has no ORDER_CREATED cannot be folded: the build must fail.
    db_.Scalar(
        "WITH r AS (INSERT INTO callback_receipts (source, received_at, peer, body, outcome, "
        "chain) VALUES ('generic', now(), 'test', '', 'malformed', sha256('')) RETURNING id) "
        "INSERT INTO ledger_events (out_trade_no, event_type, source, account_id, "
        "occurred_at, receipt_id) SELECT 'ORPHAN', 'PAYMENT_CLOSED', 'generic', 'x', now(), id "
        "FROM r RETURNING 1");
    const std::string before =
        db_.Scalar("SELECT string_agg(o::text, ';' ORDER BY out_trade_no) FROM orders o");
    EXPECT_THROW((void)Rebuild(db_.url()), InvariantError);
    EXPECT_EQ(db_.Scalar("SELECT string_agg(o::text, ';' ORDER BY out_trade_no) FROM orders o"),
              before);
    EXPECT_EQ(db_.Scalar("SELECT balance FROM balances WHERE account_id = 'acct-3'"), "7");
}

TEST_F(VerifyPgTest, RebuildWhileDeliveriesKeepFlowing) {
    Seed();
    db_.Scalar("UPDATE balances SET balance = -1 RETURNING 1");
    Committer committer{{.url = db_.url()}};
    std::atomic<bool> stop{false};
    std::atomic<int> appended{0};
    std::atomic<int> failed{0};
    std::thread writer([&] {
        for (int i = 0; !stop.load() || i < 200; ++i) {
            const std::string key = "LIVE-" + std::to_string(i);
            for (Delivery delivery :
                 {Create(key, "acct-live", 100 + i), Pay(key, 100 + i), Pay(key, 100 + i)}) {
                std::promise<DeliveryResult> done;
                committer.Submit(std::move(delivery),
                                 [&](DeliveryResult r) { done.set_value(std::move(r)); });
                const DeliveryResult r = done.get_future().get();
                if (r.outcome == Outcome::kAppended) ++appended;
                if (r.outcome == Outcome::kUnavailable) ++failed;
            }
        }
    });
    // Wait until deliveries are flowing (bounded: a stalled writer must fail, not hang).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (appended.load() < 20 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds{2});  // Poll pace.
    }
    if (appended.load() < 20) {
        stop = true;
        writer.join();
        FAIL() << "deliveries did not flow: " << appended.load() << " appended, " << failed.load()
               << " unavailable";
    }
    const VerifyReport report = Rebuild(db_.url());
    stop = true;
    writer.join();
    EXPECT_TRUE(report.ok()) << FormatReport(report);
    EXPECT_EQ(failed.load(), 0);
    const VerifyReport after = Verify(db_.url());
    EXPECT_TRUE(after.ok()) << FormatReport(after);
    EXPECT_EQ(after.projections[0].rows, 5 + appended.load() / 2);
}

// Runs `payledger <arguments>` through a shell and returns its stdout and stderr.
std::string RunCommand(const std::string& command_line, int* exit_status) {
    std::string out;
    FILE* pipe = popen((command_line + " 2>&1").c_str(), "r");
    char buffer[4096];
    while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    const int status = pclose(pipe);
    *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
}

TEST_F(VerifyPgTest, CommandsPrintSpecLinesExitCodesAndProgressOnlyOnATerminal) {
    Seed();
    const std::string env = "PAYLEDGER_DATABASE_URL='" + db_.url() + "' ";
    const std::string binary = std::string("'") + PAYLEDGER_BINARY_PATH + "'";
    int status = -1;
    std::string out = RunCommand(env + binary + " verify", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(out, "orders rows=5 digest=" + Sha256Hex(kOrdersText) +
                       " OK\nbalances rows=4 digest=" + Sha256Hex(kBalancesText) +
                       " OK\n");  // Not a terminal: no progress.
    db_.Scalar("UPDATE orders SET refunded_amount = 1 WHERE out_trade_no = 'ORD-1' RETURNING 1");
    out = RunCommand(env + binary + " verify", &status);
    EXPECT_EQ(status, 1) << out;
    EXPECT_NE(out.find("\n  ORD-1 refunded_amount 0, live 1\n"), std::string::npos) << out;
    // On a terminal (script(1) gives it one), progress is drawn; rebuild repairs.
    out = RunCommand("script -qec \"" + env + binary + " rebuild\" /dev/null", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("rebuild: 11/11 events"), std::string::npos) << out;
    EXPECT_NE(out.find("orders rows=5 digest=" + Sha256Hex(kOrdersText) + " OK"),
              std::string::npos);
    out = RunCommand(env + binary + " verify --config /nonexistent.json", &status);
    EXPECT_EQ(status, 2) << out;
}

// Progress for `audit`: quiet off a terminal; on one, the progress line ends before
// the result lines start.
TEST_F(VerifyPgTest, AuditShowsProgressOnlyOnATerminal) {
    Seed();
    const std::string env = "PAYLEDGER_DATABASE_URL='" + db_.url() + "' ";
    const std::string binary = std::string("'") + PAYLEDGER_BINARY_PATH + "'";
    int status = -1;
    std::string out = RunCommand(env + binary + " audit", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(out.rfind("audit receipts=11 events=11 head=", 0), 0u) << out;
    EXPECT_EQ(out.find("receipts, "), std::string::npos) << out;
    out = RunCommand("script -qec \"" + env + binary + " audit\" /dev/null", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("audit: 11/11 receipts"), std::string::npos) << out;
    EXPECT_NE(out.find("\naudit receipts=11 events=11 head="), std::string::npos) << out;
}

// "2 on error" (docs/api.md#the-command-line): a wrong command line too, whatever CLI11's own
// codes; --help is 0.
TEST_F(VerifyPgTest, AWrongCommandLineExitsTwoAndHelpZero) {
    const std::string binary = std::string("'") + PAYLEDGER_BINARY_PATH + "'";
    int status = -1;
    for (const char* arguments : {" verify --no-such-option", " reconcile wechat --date 2026-11-30",
                                  " reconcile paypal --bill x --date 2026-11-30",
                                  " no-such-command", " audit --public-key k.pem --checkpoint"}) {
        const std::string out = RunCommand(binary + arguments, &status);
        EXPECT_EQ(status, 2) << arguments << ": " << out;
    }
    const std::string out = RunCommand(binary + " --help", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("reconcile"), std::string::npos) << out;
}

TEST_F(VerifyPgTest, LivePathEqualsTheFoldOverRandomHistories) {
    std::mt19937_64 random{7};
    std::vector<Delivery> deliveries;
    for (int i = 0; i < 400; ++i) {
        const std::string key = "R-" + std::to_string(i);
        const std::int64_t amount = 1 + static_cast<std::int64_t>(random() % 10'000);
        const std::string account = "acct-" + std::to_string(random() % 17);
        const std::string currency = random() % 5 == 0 ? "USD" : "CNY";
        std::vector<Delivery> order{Create(key, account, amount, currency)};
        if (random() % 3 != 0) order.push_back(Pay(key, amount, currency));
        if (random() % 4 == 0) order.push_back(Close(key));
        if (random() % 4 == 0) {
            order.push_back(Refund(
                key, 1 + static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(amount))));
        }
        if (random() % 8 == 0) order.push_back(Pay(key, amount + 1, currency));  // Mismatch.
        for (const Delivery& delivery : order) {
            for (std::uint64_t copy = 0; copy < 1 + random() % 3; ++copy) {
                deliveries.push_back(delivery);
            }
        }
    }
    // Callbacks may arrive before their order: shuffle everything, then deliver in random
    // batch sizes; a callback that found no order yet is delivered again at the end, as a
    // platform would retry it.
    std::shuffle(deliveries.begin(), deliveries.end(), random);
    std::vector<Delivery> retries;
    for (std::size_t i = 0; i < deliveries.size();) {
        const std::size_t size = std::min<std::size_t>(1 + random() % 40, deliveries.size() - i);
        std::vector<Delivery> batch(deliveries.begin() + static_cast<std::ptrdiff_t>(i),
                                    deliveries.begin() + static_cast<std::ptrdiff_t>(i + size));
        const std::vector<DeliveryResult> results = WriteBatch(*connection_, batch);
        for (std::size_t k = 0; k < size; ++k) {
            if (results[k].outcome == Outcome::kUnknownOrder) retries.push_back(batch[k]);
        }
        i += size;
    }
    Write(retries);
    const VerifyReport report = Verify(db_.url());
    EXPECT_TRUE(report.ok()) << FormatReport(report);
    EXPECT_EQ(report.projections[0].rows, 400);
    const VerifyReport rebuilt = Rebuild(db_.url());
    EXPECT_EQ(rebuilt.projections[0].digest, report.projections[0].digest);
    EXPECT_EQ(rebuilt.projections[1].digest, report.projections[1].digest);
}

}  // namespace
}  // namespace payledger::ledger::verify_pgtest
