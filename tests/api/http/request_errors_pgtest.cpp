// The request boundary (docs/write-path.md#failures-and-retries) against the real PostgreSQL: an
// exception on a request's path is answered at most once and never ends the process. App::Handle
// runs on an Asio thread pool, as the server runs it, where an exception that escapes is
// std::terminate. The throw is injected where a test reaches without a seam, in the Respond the
// server hands in: on the committer's thread after the commit, and on the worker itself (a stopped
// committer answers at once, inside Handle). The same App and workers then go on answering.
// Last, the server's probe lane: a probe answered while every worker is held.
#include <gtest/gtest.h>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "api/http/metrics.hpp"
#include "api/http/server.hpp"
#include "api/routes/app.hpp"
#include "api/routes/route_table.hpp"
#include "ledger/pg/connection_pool.hpp"
#include "ledger/write/committer.hpp"
#include "projections/assert.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::api {
namespace {

using testing::TestDatabase;

Incoming MakeIncoming(http::verb method, const std::string& target, const std::string& body) {
    Request request{method, target, 11};
    request.set(http::field::authorization, std::string("Bearer ") + testing::kMerchantToken);
    request.set(http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    return Incoming{.request = std::move(request),
                    .peer = "127.0.0.1:9",
                    .received_at = testing::UnixNow() * 1'000'000,
                    .started = std::chrono::steady_clock::now()};
}

Incoming CreateOrder(const std::string& out_trade_no) {
    const nlohmann::json body = {{"out_trade_no", out_trade_no},
                                 {"account_id", "acct-1"},
                                 {"amount", 100},
                                 {"currency", "CNY"}};
    return MakeIncoming(http::verb::post, "/v1/orders", body.dump());
}

// Every response a request was given, so that a second answer is seen, not just the first.
class Responses {
public:
    // A Respond that records; when `throwing`, it then throws, as a lost connection might.
    Respond Make(bool throwing) {
        return [this, throwing](Response response) {
            {
                // Notified under the lock: the waiter may destroy this object once it wakes.
                std::lock_guard lock{mutex_};
                responses_.push_back(std::move(response));
                given_.notify_all();
            }
            if (throwing) throw std::runtime_error("the connection is gone");
        };
    }

    // Waits (up to a deadline, then fails the test) for at least `count` responses.
    void Await(std::size_t count) {
        std::unique_lock lock{mutex_};
        ASSERT_TRUE(given_.wait_for(lock, std::chrono::seconds{60}, [&] {
            return responses_.size() >= count;
        })) << "the request was never answered";
    }

    // REQUIRES: the workers are joined and the committer is stopped.
    const std::vector<Response>& all() const { return responses_; }

private:
    std::mutex mutex_;
    std::condition_variable given_;
    std::vector<Response> responses_;
};

class RequestErrorsPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        PAYLEDGER_REQUIRE_DATABASE(db_);
        pool_ = std::make_unique<ledger::ConnectionPool>(db_.url(), 2, std::chrono::seconds{10});
        committer_ = std::make_unique<ledger::Committer>(ledger::Committer::Options{
            .url = db_.url(), .session = testing::PatientSession(db_.name())});
        app_ = std::make_unique<App>(config_, *pool_, *committer_, metrics_);
        app_->SetReady();  // The test's database is created and migrated already.
    }

    void TearDown() override {
        workers_.join();
        if (committer_) committer_->Stop();
    }

    // Handles `incoming` on a worker, as the server does.
    void Post(Incoming incoming, Respond respond) {
        boost::asio::post(workers_, [this, incoming = std::move(incoming),
                                     respond = std::move(respond)]() mutable {
            app_->Handle(std::move(incoming), std::move(respond));
        });
    }

    // Handles `incoming` with a recording Respond and returns its one response.
    Response Answer(Incoming incoming) {
        Responses responses;
        Post(std::move(incoming), responses.Make(false));
        responses.Await(1);
        PAYLEDGER_ASSERT(!responses.all().empty());
        return responses.all().front();
    }

    TestDatabase db_;
    Config config_ = testing::TestConfig(db_.url());
    Metrics metrics_;
    std::unique_ptr<ledger::ConnectionPool> pool_;
    std::unique_ptr<ledger::Committer> committer_;
    std::unique_ptr<App> app_;
    boost::asio::thread_pool workers_{1};
};

TEST_F(RequestErrorsPgTest, ARespondThatThrowsAfterTheCommitIsCalledOnceAndServingGoesOn) {
    Responses throwing;
    Post(CreateOrder("ORD-1"), throwing.Make(true));
    throwing.Await(1);
    // The order was stored once: a new one appends, a copy of the first is a duplicate.
    EXPECT_EQ(Answer(CreateOrder("ORD-2")).result(), http::status::created);
    EXPECT_EQ(Answer(CreateOrder("ORD-1")).result(), http::status::ok);
    workers_.join();
    committer_->Stop();
    ASSERT_EQ(throwing.all().size(), 1u);
    EXPECT_EQ(throwing.all()[0].result(), http::status::created);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts WHERE out_trade_no = 'ORD-1'"),
              "2");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM orders"), "2");
    EXPECT_EQ(committer_->stats().answer_failures.load(), 1u);
}

TEST_F(RequestErrorsPgTest, ARespondThatThrowsOnTheWorkerIsCalledOnceAndServingGoesOn) {
    committer_->Stop();  // Now Submit answers 503 at once, inside Handle, on the worker.
    Responses throwing;
    Post(CreateOrder("ORD-1"), throwing.Make(true));
    throwing.Await(1);
    // The same worker goes on serving.
    EXPECT_EQ(Answer(MakeIncoming(http::verb::get, "/healthz", "")).result(), http::status::ok);
    EXPECT_EQ(Answer(CreateOrder("ORD-2")).result(), http::status::service_unavailable);
    workers_.join();
    ASSERT_EQ(throwing.all().size(), 1u);  // No 500 after the 503 that was being sent.
    EXPECT_EQ(throwing.all()[0].result(), http::status::service_unavailable);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM callback_receipts"), "0");
}

// A readiness check that waited behind slow ones longer than its connection's own wait (2 s)
// answers 503 at once, without the database, so that checks piling up behind a database that
// hangs drain as fast as they come; one that did not wait is answered from the database.
TEST_F(RequestErrorsPgTest, AReadinessCheckThatWaitedTooLongAnswers503AtOnce) {
    Incoming late = MakeIncoming(http::verb::get, "/readyz", "");
    late.started -= std::chrono::seconds{3};
    const Response stale = Answer(std::move(late));
    EXPECT_EQ(stale.result(), http::status::service_unavailable);
    EXPECT_NE(stale.body().find("answering too slowly"), std::string::npos) << stale.body();
    const Response fresh = Answer(MakeIncoming(http::verb::get, "/readyz", ""));
    EXPECT_EQ(fresh.result(), http::status::ok) << fresh.body();
}

// GET `target` from a server that is not serve (a handler of the test's own), on a connection
// of its own: not through testing::HttpClient, which records every exchange to be checked
// against api/openapi.yaml. Returns the status.
int GetFromTestServer(unsigned short port, const std::string& target) {
    boost::asio::io_context io;
    boost::beast::tcp_stream stream{io};
    stream.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    http::request<http::empty_body> request{http::verb::get, target, 11};
    request.set(http::field::host, "127.0.0.1");
    http::write(stream, request);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    return static_cast<int>(response.result_int());
}

// The server's probe lane: with every worker held by a request that has not finished (and one
// more waiting behind them), a request for a probe path is still answered, by the probe lane's
// own thread (Server::Options::probe_paths, which serve and TestService set to /readyz). On
// the worker pool it would wait behind all of them.
TEST(ServerProbeLaneTest, AProbeIsAnsweredWhileEveryWorkerIsBusy) {
    std::mutex mutex;
    std::condition_variable changed;
    int busy = 0;
    bool released = false;
    Server server{[&](Incoming incoming, Respond respond) {
                      if (incoming.request.target() == "/slow") {
                          std::unique_lock lock{mutex};
                          ++busy;
                          changed.notify_all();
                          changed.wait(lock, [&] { return released; });
                      }
                      respond(MakeResponse(http::status::ok, "text/plain", "answered"));
                  },
                  {.host = "127.0.0.1",
                   .port = 0,
                   .io_threads = 1,
                   .worker_threads = 2,
                   .probe_paths = ProbePaths()}};
    server.Start();
    const auto release = [&] {
        std::lock_guard lock{mutex};
        released = true;
        changed.notify_all();
    };
    std::vector<std::future<int>> slow;
    for (int i = 0; i < 3; ++i) {
        slow.push_back(std::async(std::launch::async, [port = server.port()] {
            return GetFromTestServer(port, "/slow");
        }));
    }
    bool workers_busy = false;
    {
        std::unique_lock lock{mutex};
        workers_busy = changed.wait_for(lock, std::chrono::seconds{30}, [&] { return busy == 2; });
    }
    if (!workers_busy) release();
    ASSERT_TRUE(workers_busy);
    std::future<int> probe = std::async(std::launch::async, [port = server.port()] {
        return GetFromTestServer(port, "/readyz?verbose=1");
    });
    const bool answered = probe.wait_for(std::chrono::seconds{30}) == std::future_status::ready;
    release();  // Whatever happened: the workers finish, so that the futures and server can end.
    ASSERT_TRUE(answered) << "the probe waited behind the busy workers";
    EXPECT_EQ(probe.get(), 200);
    for (std::future<int>& request : slow) EXPECT_EQ(request.get(), 200);
    server.Shutdown(std::chrono::seconds{10});
}

}  // namespace
}  // namespace payledger::api
