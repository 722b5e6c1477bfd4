// The auditor feeds never skip (docs/write-path.md#the-writer-lock): a delivery whose transaction
// holds an allocated seq while it waits is seen exactly once, after the others that queued behind
// it; concurrent writers in two service instances and a reader paging all the time give the reader
// every row exactly once, in order; a stuck writer-lock holder makes deliveries answer 503 after
// the lock timeout instead of hanging; NDJSON exports through HTTP and the CLI.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "ledger/pg/database.hpp"
#include "ledger/write/writer.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::kAuditorToken;
using testing::TestDatabase;
using testing::TestService;

using testing::AwaitLockWaiters;
using testing::kAdvisoryWaitersSql;
using testing::kRowWaitersSql;

// Pages a feed to its end from `after`, appending what it returns.
std::int64_t Drain(HttpClient& client, const std::string& feed, std::int64_t after,
                   std::vector<std::int64_t>& seen, int limit = 1000) {
    for (;;) {
        const HttpResult r = client.Get(
            "/v1/" + feed + "?after=" + std::to_string(after) + "&limit=" + std::to_string(limit),
            kAuditorToken);
        EXPECT_EQ(r.status, 200) << r.body;
        const json page = r.Json();
        const json& items = page[feed];
        for (const json& item : items) seen.push_back(item[feed == "events" ? "seq" : "id"]);
        const std::int64_t next = page["next_after"];
        if (items.empty()) {
            EXPECT_EQ(next, after);
            return after;
        }
        EXPECT_EQ(next, seen.back());
        after = next;
    }
}

std::vector<std::int64_t> AllIds(const TestDatabase& db, const std::string& sql) {
    std::vector<std::int64_t> ids;
    auto connection = db.Connect();
    pqxx::read_transaction tx{*connection};
    for (const pqxx::row& row : tx.exec(sql)) ids.push_back(row[0].as<std::int64_t>());
    return ids;
}

class FeedPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
    }
    TestDatabase db_;
};

TEST_F(FeedPgTest, AHeldAppendIsSeenExactlyOnceAfterItCommits) {
    TestService first{testing::TestConfig(db_.url()), testing::PatientSession(db_.name() + "_a")};
    TestService second{testing::TestConfig(db_.url()), testing::PatientSession(db_.name() + "_b")};
    HttpClient client{first.port()};
    ASSERT_EQ(first.CreateOrder(client, "HELD", "acct", 100).status, 201);
    std::vector<std::int64_t> events;
    std::vector<std::int64_t> receipts;
    const std::int64_t event_cursor = Drain(client, "events", 0, events);
    const std::int64_t receipt_cursor = Drain(client, "receipts", 0, receipts);

    // Another session locks the order's projection row: the payment's transaction takes the
    // writer lock and its seq, then waits on that row.
    auto holder = db_.Connect();
    pqxx::work hold{*holder};
    hold.exec("SELECT 1 FROM orders WHERE out_trade_no = 'HELD' FOR UPDATE");
    auto held = std::async(std::launch::async, [&] {
        HttpClient c{first.port()};
        return first.PostGeneric(c, testing::GenericPayment("HELD", "TX-H", 100));
    });
    AwaitLockWaiters(db_, kRowWaitersSql);
    // Meanwhile the other instance takes new orders and a rejected delivery; they wait for
    // the writer lock.
    auto others = std::async(std::launch::async, [&] {
        HttpClient c{second.port()};
        std::vector<int> statuses;
        for (int i = 0; i < 3; ++i) {
            statuses.push_back(
                second.CreateOrder(c, "LATE-" + std::to_string(i), "acct", 5).status);
        }
        statuses.push_back(second.PostGeneric(c, "not json").status);
        return statuses;
    });
    AwaitLockWaiters(db_, kAdvisoryWaitersSql);
    EXPECT_EQ(Drain(client, "events", event_cursor, events), event_cursor);
    EXPECT_EQ(Drain(client, "receipts", receipt_cursor, receipts), receipt_cursor);

    hold.commit();
    const HttpResult paid = held.get();
    EXPECT_EQ(paid.status, 200) << paid.body;
    EXPECT_EQ(others.get(), (std::vector<int>{201, 201, 201, 400}));

    Drain(client, "events", event_cursor, events);
    Drain(client, "receipts", receipt_cursor, receipts);
    EXPECT_EQ(events, AllIds(db_, "SELECT seq FROM ledger_events ORDER BY seq"));
    EXPECT_EQ(receipts, AllIds(db_, "SELECT id FROM callback_receipts ORDER BY id"));
    EXPECT_EQ(events.size(), 5u);
    EXPECT_EQ(events[1], paid.Json()["seq"].get<std::int64_t>());  // First after the cursor.
}

TEST_F(FeedPgTest, ConcurrentWritersAndAPagingReaderSeeEveryRowOnceInOrder) {
    TestService first{testing::TestConfig(db_.url()), testing::PatientSession(db_.name() + "_a")};
    TestService second{testing::TestConfig(db_.url()), testing::PatientSession(db_.name() + "_b")};
    constexpr int kWriters = 8;
    constexpr int kOrdersPerWriter = 60;
    std::atomic<int> writers_done{0};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
        writers.emplace_back([&, w] {
            TestService& service = w % 2 == 0 ? first : second;
            HttpClient c{service.port()};
            for (int i = 0; i < kOrdersPerWriter; ++i) {
                const std::string key = "W" + std::to_string(w) + "-" + std::to_string(i);
                EXPECT_EQ(service.CreateOrder(c, key, "acct-" + std::to_string(w), 10).status, 201);
                EXPECT_EQ(
                    service.PostGeneric(c, testing::GenericPayment(key, "TX-" + key, 10)).status,
                    200);
                if (i % 5 == 0) {
                    EXPECT_EQ(service.PostGeneric(c, "junk").status, 400);
                }
            }
            ++writers_done;
        });
    }
    std::vector<std::int64_t> events;
    std::vector<std::int64_t> receipts;
    HttpClient reader{first.port()};
    std::int64_t event_cursor = 0;
    std::int64_t receipt_cursor = 0;
    int pages = 0;
    while (writers_done.load() < kWriters) {
        event_cursor = Drain(reader, "events", event_cursor, events, 37);
        receipt_cursor = Drain(reader, "receipts", receipt_cursor, receipts, 41);
        ++pages;
    }
    for (std::thread& writer : writers) writer.join();
    Drain(reader, "events", event_cursor, events, 37);
    Drain(reader, "receipts", receipt_cursor, receipts, 41);
    EXPECT_GT(pages, 1);
    EXPECT_EQ(events.size(), static_cast<std::size_t>(2 * kWriters * kOrdersPerWriter));
    EXPECT_EQ(events, AllIds(db_, "SELECT seq FROM ledger_events ORDER BY seq"));
    EXPECT_EQ(receipts, AllIds(db_, "SELECT id FROM callback_receipts ORDER BY id"));
}

TEST_F(FeedPgTest, AStuckWriterLockHolderGives503NotAHang) {
    ledger::SessionSettings session{.application_name = db_.name()};
    session.lock_timeout = std::chrono::milliseconds{300};
    TestService service{testing::TestConfig(db_.url()), session};
    HttpClient client{service.port()};
    auto holder = db_.Connect();
    {
        pqxx::work hold{*holder};
        hold.exec_params("SELECT pg_advisory_xact_lock($1)", ledger::kWriterLockKey);
        const HttpResult r = service.CreateOrder(client, "ORD-1", "acct", 10);
        EXPECT_EQ(r.status, 503) << r.body;
        EXPECT_EQ(r.Json()["outcome"], "unavailable");
        hold.commit();
    }
    EXPECT_EQ(service.CreateOrder(client, "ORD-1", "acct", 10).status, 201);
    service.Stop();

    // A wait that ends in time is measured in /metrics. A service of its own, whose lock
    // timeout no loaded machine can reach between the waiter's arrival and the release.
    TestService patient{testing::TestConfig(db_.url()), testing::PatientSession(db_.name())};
    HttpClient patient_client{patient.port()};
    pqxx::work hold{*holder};
    hold.exec_params("SELECT pg_advisory_xact_lock($1)", ledger::kWriterLockKey);
    auto waiting = std::async(std::launch::async, [&] {
        HttpClient c{patient.port()};
        return patient.CreateOrder(c, "ORD-2", "acct", 10).status;
    });
    AwaitLockWaiters(db_, kAdvisoryWaitersSql);
    hold.commit();
    EXPECT_EQ(waiting.get(), 201);
    const std::string metrics = patient_client.Get("/metrics").body;
    const std::string name = "\npayledger_writer_lock_wait_seconds_total ";
    const std::size_t at = metrics.find(name);
    ASSERT_NE(at, std::string::npos);
    EXPECT_GT(std::stod(metrics.substr(at + name.size())), 0.0);
}

TEST_F(FeedPgTest, NdjsonExportStreamsEveryEventWithoutAPageLimit) {
    auto connection = db_.Connect();
    std::vector<ledger::Delivery> batch;
    for (int i = 0; i < 2500; ++i) {
        const std::string key = "N-" + std::to_string(i);
        batch.push_back(testing::OrderRegistration(
            key, {.account_id = "a",
                  .amount = 1,
                  .receipt = {.received_at = 0, .peer = "t", .body = ""}}));
    }
    (void)ledger::WriteBatch(*connection, batch);
    TestService service{testing::TestConfig(db_.url()), db_.name()};
    HttpClient client{service.port()};
    const HttpResult r = client.Send(boost::beast::http::verb::get, "/v1/events?after=10", {},
                                     {{"Authorization", std::string("Bearer ") + kAuditorToken},
                                      {"Accept", "application/x-ndjson"}});
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.headers.at("Content-Type"), "application/x-ndjson");
    EXPECT_EQ(r.headers.at("Transfer-Encoding"), "chunked");
    std::istringstream lines{r.body};
    std::string line;
    std::int64_t expected = 11;
    while (std::getline(lines, line)) {
        const json event = json::parse(line);
        ASSERT_EQ(event["seq"], expected++);
        ASSERT_EQ(event["event_type"], "ORDER_CREATED");
    }
    EXPECT_EQ(expected, 2501);
    // The connection stays usable after a streamed answer.
    EXPECT_EQ(client.Get("/healthz").status, 200);
    EXPECT_EQ(client
                  .Send(boost::beast::http::verb::get, "/v1/events?after=x", {},
                        {{"Authorization", std::string("Bearer ") + kAuditorToken},
                         {"Accept", "application/x-ndjson"}})
                  .status,
              400);
}

TEST_F(FeedPgTest, EventsCommandPrintsNdjson) {
    auto connection = db_.Connect();
    std::vector<ledger::Delivery> batch;
    for (const char* key : {"C-1", "C-2", "C-3"}) {
        batch.push_back(testing::OrderRegistration(
            key, {.account_id = "a",
                  .amount = 7,
                  .receipt = {.received_at = 0, .peer = "t", .body = ""}}));
    }
    (void)ledger::WriteBatch(*connection, batch);
    const auto run = [&](const std::string& args) {
        const std::string command = "PAYLEDGER_DATABASE_URL='" + db_.url() + "' '" +
                                    PAYLEDGER_BINARY_PATH + "' events " + args;
        std::string out;
        FILE* pipe = popen(command.c_str(), "r");
        char buffer[4096];
        while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
        EXPECT_EQ(pclose(pipe), 0) << command;
        return out;
    };
    std::istringstream all{run("")};
    std::string line;
    int count = 0;
    while (std::getline(all, line)) {
        EXPECT_EQ(json::parse(line)["seq"], ++count);
    }
    EXPECT_EQ(count, 3);
    EXPECT_EQ(json::parse(run("--after 1 --out-trade-no C-3"))["out_trade_no"], "C-3");
    EXPECT_EQ(run("--after 3"), "");
}

}  // namespace
}  // namespace payledger::api
