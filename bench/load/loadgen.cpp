// payledger_loadgen: runs one phase of bench/load against a running payledger and
// prints what it measured. C keep-alive connections, opened before the clock starts, each
// send a request, wait for the answer, check it and send the next, asynchronously on one
// io_context (`--threads` I/O threads). A phase ends after `--requests` requests or
// `--seconds`, whichever comes first; request k is about order first + k % count. Every
// answer is checked (status and outcome); latencies are kept in full for the percentiles.
//
// `--copies 2 --expect either` is the mixed phase: every order's callback twice, shuffled;
// each answer must be appended or duplicate, and each order exactly once appended.
//
// Prints a readable summary and one machine-readable line:
//   RESULT label=... connections=... requests=... answered=... errors=... seconds=...
//          rps=... p50_ms=... p90_ms=... p99_ms=... max_ms=... appended=... duplicates=...
// Exits 0 when the phase ran (errors are counted, not fatal), 2 when it could not start.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/load/workload.hpp"

namespace payledger::bench {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kConnectionsMax = 1000;
constexpr std::int64_t kRequestsMax = 100'000'000;
constexpr double kSecondsMax = 3600;
constexpr std::chrono::seconds kRequestTimeout{30};
constexpr std::size_t kErrorSamplesMax = 5;

// What every connection of a phase shares. Thread-safe.
class Phase {
public:
    // `copies` > 1: each order is requested that many times, in an order shuffled with a
    // fixed seed (request k is about order first + order_[k]), as a platform's retries and an
    // at-least-once queue deliver them: the copies of one order may be in flight together.
    Phase(const Workload& workload, std::int64_t first_order, std::int64_t order_count,
          std::int64_t request_count, Clock::duration length, int copies)
        : workload_(workload),
          first_order_(first_order),
          order_count_(order_count),
          request_count_(request_count),
          deadline_(Clock::now() + length),
          appended_(static_cast<std::size_t>(order_count)),
          answered_(static_cast<std::size_t>(order_count)) {
        if (copies > 1) {
            for (std::int64_t i = 0; i < order_count * copies; ++i)
                order_.push_back(i % order_count);
            std::mt19937_64 random{20261201};
            std::shuffle(order_.begin(), order_.end(), random);
        }
    }

    // The next request's number; false when the phase is over (by count or by time).
    [[nodiscard]] bool Take(std::int64_t& request_index) {
        if (Clock::now() >= deadline_) return false;
        request_index = next_request_++;
        return request_index < request_count_;
    }
    [[nodiscard]] std::int64_t OrderIndex(std::int64_t request_index) const {
        if (!order_.empty()) {
            return first_order_ + order_[static_cast<std::size_t>(request_index) % order_.size()];
        }
        return first_order_ + request_index % order_count_;
    }
    void Fail(const std::string& why) {
        ++errors_;
        std::lock_guard lock{mutex_};
        if (error_samples_.size() < kErrorSamplesMax) error_samples_.push_back(why);
    }

    // Exactly once (the mixed phases): an order is appended at most once, and an order whose
    // every copy was answered was appended exactly once.
    void Tally(std::int64_t order_index, const std::string& outcome) {
        const auto i = static_cast<std::size_t>(order_index - first_order_) % appended_.size();
        ++answered_[i];
        if (outcome == "appended") {
            ++appended_count_;
            if (++appended_[i] > 1)
                Fail("order " + std::to_string(order_index) + " appended twice");
        } else if (outcome == "duplicate") {
            ++duplicate_count_;
        }
    }
    [[nodiscard]] std::int64_t OrdersNotAppendedOnce(int copies) const {
        std::int64_t wrong = 0;
        for (std::size_t i = 0; i < answered_.size(); ++i) {
            if (answered_[i].load() == copies && appended_[i].load() != 1) ++wrong;
        }
        return wrong;
    }
    [[nodiscard]] std::int64_t appended_count() const { return appended_count_.load(); }
    [[nodiscard]] std::int64_t duplicate_count() const { return duplicate_count_.load(); }

    [[nodiscard]] const Workload& workload() const { return workload_; }
    [[nodiscard]] std::int64_t errors() const { return errors_.load(); }
    [[nodiscard]] std::vector<std::string> error_samples() {
        std::lock_guard lock{mutex_};
        return error_samples_;
    }

private:
    const Workload& workload_;
    const std::int64_t first_order_;
    const std::int64_t order_count_;
    const std::int64_t request_count_;
    const Clock::time_point deadline_;
    std::atomic<std::int64_t> next_request_{0};
    std::atomic<std::int64_t> errors_{0};
    std::vector<std::int64_t> order_{};  // Shuffled order offsets, when copies > 1.
    std::vector<std::atomic<int>> appended_;
    std::vector<std::atomic<int>> answered_;
    std::atomic<std::int64_t> appended_count_{0};
    std::atomic<std::int64_t> duplicate_count_{0};
    std::mutex mutex_;
    std::vector<std::string> error_samples_{};
};

// One keep-alive connection: one request in flight at a time. Its handlers form one chain,
// so they never run concurrently and need no strand. A transport error ends the connection
// (counted as an error) rather than hiding a server fault behind a reconnect.
class Connection : public std::enable_shared_from_this<Connection> {
public:
    Connection(tcp::socket socket, Phase& phase) : stream_(std::move(socket)), phase_(phase) {}

    void Start() { Next(); }

    [[nodiscard]] const std::vector<std::int64_t>& latencies_us() const { return latencies_us_; }
    [[nodiscard]] const std::vector<std::int64_t>& appended_us() const { return appended_us_; }
    [[nodiscard]] const std::vector<std::int64_t>& duplicate_us() const { return duplicate_us_; }
    [[nodiscard]] Clock::time_point last_answer() const { return last_answer_; }
    // When each answer came, in the order of latencies_us() (for --timeline).
    [[nodiscard]] const std::vector<Clock::time_point>& answered_at() const { return answered_at_; }

private:
    void Next() {
        if (!phase_.Take(request_index_)) return;  // Done; the last reference goes.
        BuildRequest(phase_.workload(), phase_.OrderIndex(request_index_), request_);
        response_ = {};
        sent_ = Clock::now();
        stream_.expires_after(kRequestTimeout);
        http::async_write(stream_, request_,
                          beast::bind_front_handler(&Connection::OnWrite, shared_from_this()));
    }

    void OnWrite(beast::error_code ec, std::size_t /*bytes*/) {
        if (ec) return phase_.Fail("write: " + ec.message());
        http::async_read(stream_, buffer_, response_,
                         beast::bind_front_handler(&Connection::OnRead, shared_from_this()));
    }

    void OnRead(beast::error_code ec, std::size_t /*bytes*/) {
        if (ec) return phase_.Fail("read: " + ec.message());
        last_answer_ = Clock::now();
        answered_at_.push_back(last_answer_);
        latencies_us_.push_back(
            std::chrono::duration_cast<std::chrono::microseconds>(last_answer_ - sent_).count());
        const std::int64_t order_index = phase_.OrderIndex(request_index_);
        std::string outcome;
        const std::string why = CheckAnswer(phase_.workload(), order_index, response_, &outcome);
        if (!why.empty()) phase_.Fail(why);
        if (!outcome.empty()) phase_.Tally(order_index, outcome);
        if (outcome == "appended") appended_us_.push_back(latencies_us_.back());
        if (outcome == "duplicate") duplicate_us_.push_back(latencies_us_.back());
        if (!response_.keep_alive()) return phase_.Fail("the server closed the connection");
        Next();
    }

    beast::tcp_stream stream_;
    Phase& phase_;
    beast::flat_buffer buffer_{};
    http::request<http::string_body> request_{};
    http::response<http::string_body> response_{};
    std::int64_t request_index_ = 0;
    Clock::time_point sent_{};
    Clock::time_point last_answer_{};
    std::vector<std::int64_t> latencies_us_{};
    std::vector<Clock::time_point> answered_at_{};
    std::vector<std::int64_t> appended_us_{};  // The same, by outcome.
    std::vector<std::int64_t> duplicate_us_{};
};

struct Options {
    std::string label = "phase";
    std::string mode = "healthz";
    std::string host = "127.0.0.1";
    unsigned short port = 0;
    std::size_t connections = 64;
    std::size_t threads = 1;
    double seconds = 20;
    std::int64_t first_order = 0;
    std::int64_t order_count = 1;
    std::int64_t request_count = 0;  // 0: order_count × copies.
    int copies = 1;
    double timeline_seconds = 0;  // 0: no timeline.
    Workload workload{};
};

double Percentile(const std::vector<std::int64_t>& sorted_us, double fraction) {
    if (sorted_us.empty()) return 0;
    // Nearest rank: the smallest value with at least `fraction` of the values at or below it.
    const double size = static_cast<double>(sorted_us.size());
    const auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(fraction * size)));
    return static_cast<double>(sorted_us[std::min(rank, sorted_us.size()) - 1]) / 1000.0;
}

// --timeline: the answers by the slice of the phase they came in, with the latency
// percentiles of each slice, to show where in a phase the slow answers are.
void PrintTimeline(const Options& options,
                   const std::vector<std::shared_ptr<Connection>>& connections,
                   Clock::time_point start) {
    const auto slice = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(options.timeline_seconds));
    std::vector<std::vector<std::int64_t>> slices;
    for (const auto& connection : connections) {
        for (std::size_t i = 0; i < connection->answered_at().size(); ++i) {
            const auto index =
                static_cast<std::size_t>((connection->answered_at()[i] - start) / slice);
            if (index >= slices.size()) slices.resize(index + 1);
            slices[index].push_back(connection->latencies_us()[i]);
        }
    }
    for (std::size_t i = 0; i < slices.size(); ++i) {
        std::vector<std::int64_t>& us = slices[i];
        std::sort(us.begin(), us.end());
        std::printf(
            "[loadgen] %s timeline %6.2f s: %6zu answers; latency ms p50 %6.2f p99 %6.2f "
            "max %6.2f\n",
            options.label.c_str(), static_cast<double>(i) * options.timeline_seconds, us.size(),
            Percentile(us, 0.50), Percentile(us, 0.99),
            us.empty() ? 0.0 : static_cast<double>(us.back()) / 1000.0);
    }
}

void Report(const Options& options, Phase& phase,
            const std::vector<std::shared_ptr<Connection>>& connections, Clock::time_point start) {
    std::vector<std::int64_t> all_us;
    std::vector<std::int64_t> appended_us;
    std::vector<std::int64_t> duplicate_us;
    Clock::time_point end = start;
    for (const auto& connection : connections) {
        all_us.insert(all_us.end(), connection->latencies_us().begin(),
                      connection->latencies_us().end());
        appended_us.insert(appended_us.end(), connection->appended_us().begin(),
                           connection->appended_us().end());
        duplicate_us.insert(duplicate_us.end(), connection->duplicate_us().begin(),
                            connection->duplicate_us().end());
        end = std::max(end, connection->last_answer());
    }
    std::sort(all_us.begin(), all_us.end());
    std::sort(appended_us.begin(), appended_us.end());
    std::sort(duplicate_us.begin(), duplicate_us.end());
    const double seconds = std::chrono::duration<double>(end - start).count();
    const auto answered = static_cast<std::int64_t>(all_us.size());
    const double rps = seconds > 0 ? static_cast<double>(answered) / seconds : 0;
    const double max_ms = all_us.empty() ? 0 : static_cast<double>(all_us.back()) / 1000.0;
    const std::int64_t not_once = options.workload.expected_outcome == "either"
                                      ? phase.OrdersNotAppendedOnce(options.copies)
                                      : 0;
    for (std::int64_t i = 0; i < not_once; ++i)
        phase.Fail("an order answered in full was not appended exactly once");
    if (options.timeline_seconds > 0) PrintTimeline(options, connections, start);
    for (const std::string& sample : phase.error_samples()) {
        std::printf("[loadgen] %s error: %s\n", options.label.c_str(), sample.c_str());
    }
    std::printf(
        "[loadgen] %s: %lld answers in %.3f s over %zu connections = %.1f/s; latency ms p50 "
        "%.2f p90 %.2f p99 %.2f max %.2f; errors %lld\n",
        options.label.c_str(), static_cast<long long>(answered), seconds, connections.size(), rps,
        Percentile(all_us, 0.50), Percentile(all_us, 0.90), Percentile(all_us, 0.99), max_ms,
        static_cast<long long>(phase.errors()));
    std::printf(
        "RESULT label=%s connections=%zu answered=%lld errors=%lld seconds=%.3f rps=%.1f "
        "p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f appended=%lld duplicates=%lld "
        "appended_p50_ms=%.2f appended_p99_ms=%.2f duplicate_p50_ms=%.2f "
        "duplicate_p99_ms=%.2f\n",
        options.label.c_str(), connections.size(), static_cast<long long>(answered),
        static_cast<long long>(phase.errors()), seconds, rps, Percentile(all_us, 0.50),
        Percentile(all_us, 0.90), Percentile(all_us, 0.99), max_ms,
        static_cast<long long>(phase.appended_count()),
        static_cast<long long>(phase.duplicate_count()), Percentile(appended_us, 0.50),
        Percentile(appended_us, 0.99), Percentile(duplicate_us, 0.50),
        Percentile(duplicate_us, 0.99));
    std::fflush(stdout);
}

int RunPhase(const Options& options) {
    net::io_context io{static_cast<int>(options.threads)};
    const tcp::endpoint endpoint{net::ip::make_address(options.host), options.port};
    std::vector<tcp::socket> sockets;
    for (std::size_t i = 0; i < options.connections; ++i) {
        tcp::socket socket{io};
        socket.connect(endpoint);  // Throws: a phase that cannot connect does not start.
        socket.set_option(tcp::no_delay(true));
        sockets.push_back(std::move(socket));
    }
    const std::int64_t request_count =
        options.request_count > 0 ? options.request_count : options.order_count * options.copies;
    Phase phase{
        options.workload,
        options.first_order,
        options.order_count,
        request_count,
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.seconds)),
        options.copies};
    std::vector<std::shared_ptr<Connection>> connections;
    for (tcp::socket& socket : sockets) {
        connections.push_back(std::make_shared<Connection>(std::move(socket), phase));
    }
    const Clock::time_point start = Clock::now();
    for (const auto& connection : connections) connection->Start();
    std::vector<std::thread> threads;
    for (std::size_t i = 1; i < options.threads; ++i) threads.emplace_back([&io] { io.run(); });
    io.run();
    for (std::thread& thread : threads) thread.join();
    Report(options, phase, connections, start);
    return 0;
}

}  // namespace
}  // namespace payledger::bench

int main(int argc, char** argv) {
    using payledger::bench::Mode;
    payledger::bench::Options options;
    CLI::App cli{"payledger_loadgen: one phase of bench/load"};
    cli.add_option("--label", options.label, "name of the phase in the output");
    cli.add_option("--mode", options.mode, "healthz, create or pay")
        ->check(CLI::IsMember({"healthz", "create", "pay"}));
    cli.add_option("--host", options.host, "server address (default 127.0.0.1)");
    cli.add_option("--port", options.port, "server port")->required();
    cli.add_option("--connections", options.connections, "keep-alive connections")
        ->check(CLI::Range(std::size_t{1}, payledger::bench::kConnectionsMax));
    cli.add_option("--threads", options.threads, "I/O threads (default 1)")
        ->check(CLI::Range(std::size_t{1}, std::size_t{64}));
    cli.add_option("--seconds", options.seconds, "time limit of the phase")
        ->check(CLI::Range(0.1, payledger::bench::kSecondsMax));
    cli.add_option("--first-order", options.first_order, "index of the first order")
        ->check(CLI::NonNegativeNumber);
    cli.add_option("--orders", options.order_count, "orders the phase cycles through")
        ->check(CLI::Range(std::int64_t{1}, payledger::bench::kRequestsMax));
    cli.add_option("--requests", options.request_count, "request limit (default --orders)")
        ->check(CLI::Range(std::int64_t{0}, payledger::bench::kRequestsMax));
    cli.add_option("--prefix", options.workload.prefix, "out_trade_no prefix");
    cli.add_option("--accounts", options.workload.account_count, "accounts orders spread over")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}));
    cli.add_option("--merchant-token", options.workload.merchant_token, "for --mode create");
    cli.add_option("--generic-secret", options.workload.generic_secret, "for --mode pay");
    cli.add_option("--expect", options.workload.expected_outcome, "for --mode pay")
        ->check(CLI::IsMember({"appended", "duplicate", "either"}));
    cli.add_option("--timeline", options.timeline_seconds,
                   "print the answers' latency by slices of this many seconds")
        ->check(CLI::PositiveNumber);
    cli.add_option("--copies", options.copies,
                   "requests per order, shuffled (default 1; with --expect either)")
        ->check(CLI::Range(1, 16));
    CLI11_PARSE(cli, argc, argv);
    options.workload.host = options.host;
    options.workload.mode = options.mode == "create" ? Mode::kCreate
                            : options.mode == "pay"  ? Mode::kPay
                                                     : Mode::kHealthz;
    try {
        return payledger::bench::RunPhase(options);
    } catch (const std::exception& error) {
        std::cerr << "payledger_loadgen: " << error.what() << "\n";
        return 2;
    }
}
