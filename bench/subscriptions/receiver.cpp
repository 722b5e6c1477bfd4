// payledger_bench_receiver: the merchant's side of bench/subscriptions. An HTTP/1.1 server on
// 127.0.0.1 that answers 200 at once to every POST (a delivery of docs/subscriptions.md) and
// records, for every event, its subscription (data.subscription), its seq and its lag: the
// arrival time of the request minus the event's recorded_at. recorded_at is the time of the
// appending transaction's start, before its COMMIT, so the lag is an upper bound of the time
// from commit to delivery.
//
// It shares no code with payledger (it is what a merchant would run): Beast, nlohmann_json and
// CLI11 only. It does not verify the signatures (the project's tests check them with the Node
// library, tests/api/subscriptions/verify_signatures.mjs); it checks the order and completeness the
// benchmark needs:
//   - per subscription, seqs arrive strictly ascending; a seq seen before is a redelivery,
//     counted apart; a new seq at or below the highest seen is out of order;
//   - each body is {"type":"ledger.events","data":{"subscription","events":[{seq,recorded_at,
//     …}]}} with 1 or more events, and its webhook-id header is <subscription>:<first>-<last>;
//     anything else is counted as malformed (and answered 200 all the same).
//
// GET /stats[?from=<unix seconds>&to=<unix seconds>] answers, per subscription: events received
// (redeliveries included), distinct seqs, their sum and highest, redelivered, out of order,
// first and last arrival (unix seconds), the lag p50/p99/max in ms over each seq's first
// arrival; with a window, also the first arrivals inside it ("arrived") and the lag of the
// events recorded inside it ("recorded", and how many of them arrived after its end).
// GET /counts answers only the distinct seqs per subscription and the malformed count: cheap,
// for polling until a delivery is complete.
//
// One I/O thread: the handlers never run concurrently, so the tallies need no lock. Every lag
// is kept in memory (16 bytes an event); the bodies too, from their arrival until the next
// GET reads them (about 500 bytes an event).
//
//   payledger_bench_receiver [--port 0]
// prints "listening on 127.0.0.1:<port>" on stdout once it accepts connections; SIGTERM or
// SIGINT stops it.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace payledger::bench {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;

constexpr std::uint64_t kRequestBodyBytesMax = 64ULL << 20;  // 1000 events are about 1 MiB.
constexpr std::size_t kMalformedSamplesMax = 5;
constexpr std::int64_t kMicrosPerSecond = 1'000'000;

std::int64_t WallNowMicros() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Reads exactly `count` decimal digits at `at`; nullopt when they are not all digits.
std::optional<int> Digits(std::string_view text, std::size_t at, std::size_t count) {
    if (at + count > text.size()) return std::nullopt;
    int value = 0;
    for (std::size_t i = at; i < at + count; ++i) {
        if (text[i] < '0' || text[i] > '9') return std::nullopt;
        value = value * 10 + (text[i] - '0');
    }
    return value;
}

// RFC 3339 date-time ("2026-12-04T08:30:00.123456Z", "…+01:00"; fractional seconds of any
// length, beyond microseconds truncated) to microseconds since the epoch.
std::optional<std::int64_t> ParseRfc3339Micros(std::string_view text) {
    const auto year = Digits(text, 0, 4);
    const auto month = Digits(text, 5, 2);
    const auto day = Digits(text, 8, 2);
    const auto hour = Digits(text, 11, 2);
    const auto minute = Digits(text, 14, 2);
    const auto second = Digits(text, 17, 2);
    if (!year || !month || !day || !hour || !minute || !second || text[4] != '-' ||
        text[7] != '-' || (text[10] != 'T' && text[10] != 't') || text[13] != ':' ||
        text[16] != ':' || *hour > 23 || *minute > 59 || *second > 59) {
        return std::nullopt;
    }
    const std::chrono::year_month_day date{std::chrono::year{*year},
                                           std::chrono::month{static_cast<unsigned>(*month)},
                                           std::chrono::day{static_cast<unsigned>(*day)}};
    if (!date.ok()) return std::nullopt;
    std::size_t at = 19;
    std::int64_t micros = 0;
    if (at < text.size() && text[at] == '.') {
        ++at;
        const std::size_t digits_begin = at;
        std::int64_t scale = 100'000;
        while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
            micros += (text[at] - '0') * scale;
            scale /= 10;
            ++at;
        }
        if (at == digits_begin) return std::nullopt;
    }
    std::int64_t offset_seconds = 0;
    if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
        ++at;
    } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
        const auto offset_hour = Digits(text, at + 1, 2);
        const auto offset_minute = Digits(text, at + 4, 2);
        if (!offset_hour || !offset_minute || text[at + 3] != ':' || *offset_hour > 23 ||
            *offset_minute > 59) {
            return std::nullopt;
        }
        offset_seconds = (*offset_hour * 3600 + *offset_minute * 60) * (text[at] == '+' ? 1 : -1);
        at += 6;
    } else {
        return std::nullopt;
    }
    if (at != text.size()) return std::nullopt;
    const std::int64_t days = std::chrono::sys_days{date}.time_since_epoch().count();
    const std::int64_t seconds =
        days * 86400 + *hour * 3600 + *minute * 60 + *second - offset_seconds;
    return seconds * kMicrosPerSecond + micros;
}

// The first arrival of one seq.
struct Arrival {
    std::int64_t recorded_us = 0;
    std::int64_t arrival_us = 0;
};

// What one subscription delivered so far.
struct SubscriptionTally {
    std::int64_t event_count = 0;  // Every event received, redeliveries included.
    std::int64_t redelivered_count = 0;
    std::int64_t out_of_order_count = 0;
    std::int64_t request_count = 0;
    std::int64_t seq_max = 0;
    std::int64_t seq_sum = 0;  // Of the distinct seqs.
    std::int64_t first_arrival_us = 0;
    std::int64_t last_arrival_us = 0;
    std::unordered_set<std::int64_t> seen{};
    std::vector<Arrival> firsts{};  // Each distinct seq's first arrival, in arrival order.
};

// A window of /stats: [from_us, to_us].
struct Window {
    std::int64_t from_us = 0;
    std::int64_t to_us = 0;
};

// Nearest rank: the smallest value with at least `fraction` of the values at or below it.
double PercentileMs(const std::vector<std::int64_t>& sorted_us, double fraction) {
    if (sorted_us.empty()) return 0;
    const double size = static_cast<double>(sorted_us.size());
    const auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(fraction * size)));
    return static_cast<double>(sorted_us[std::min(rank, sorted_us.size()) - 1]) / 1000.0;
}

json LagJson(std::vector<std::int64_t> lags_us) {
    std::sort(lags_us.begin(), lags_us.end());
    return {{"p50", PercentileMs(lags_us, 0.50)},
            {"p99", PercentileMs(lags_us, 0.99)},
            {"max", lags_us.empty() ? 0.0 : static_cast<double>(lags_us.back()) / 1000.0}};
}

double Seconds(std::int64_t micros) {
    return static_cast<double>(micros) / static_cast<double>(kMicrosPerSecond);
}

// Every subscription's tally, and the deliveries that could not be read.
class Recorder {
public:
    // One delivery's body and webhook-id, arrived at `arrival_us`: kept as it came, and read
    // (parsed, checked, counted, in arrival order) by the next Counts or Stats. So that the
    // receiver, on the same cores as the server it measures, spends as little as it can
    // while the load runs: parsing every body on arrival took about a tenth of a core with
    // three subscriptions.
    void Record(std::string body, std::string_view webhook_id, std::int64_t arrival_us) {
        unread_.push_back({.body = std::move(body),
                           .webhook_id = std::string(webhook_id),
                           .arrival_us = arrival_us});
    }

    // Cheap enough to poll: the distinct seqs of each subscription, and the malformed count.
    [[nodiscard]] json Counts() {
        ReadRecorded();
        json subscriptions = json::object();
        for (const auto& [name, tally] : tallies_) {
            subscriptions[name] = static_cast<std::int64_t>(tally.seen.size());
        }
        return {{"subscriptions", std::move(subscriptions)}, {"malformed", malformed_count_}};
    }

    [[nodiscard]] json Stats(const std::optional<Window>& window) {
        ReadRecorded();
        json subscriptions = json::object();
        for (const auto& [name, tally] : tallies_) {
            subscriptions[name] = TallyJson(tally, window);
        }
        json out = {{"subscriptions", std::move(subscriptions)},
                    {"malformed", malformed_count_},
                    {"malformed_samples", malformed_samples_},
                    {"now", Seconds(WallNowMicros())},
                    {"lag_note",
                     "lag = arrival - recorded_at; recorded_at is the appending transaction's "
                     "start, before its COMMIT: an upper bound of commit-to-delivery"}};
        if (window)
            out["window"] = {{"from", Seconds(window->from_us)}, {"to", Seconds(window->to_us)}};
        return out;
    }

private:
    struct Unread {
        std::string body;
        std::string webhook_id;
        std::int64_t arrival_us = 0;
    };

    void ReadRecorded() {
        for (const Unread& delivery : unread_) {
            const std::string why =
                RecordOrExplain(delivery.body, delivery.webhook_id, delivery.arrival_us);
            if (why.empty()) continue;
            ++malformed_count_;
            if (malformed_samples_.size() < kMalformedSamplesMax) malformed_samples_.push_back(why);
        }
        unread_.clear();
    }

    // Empty when the delivery was recorded; else why it could not be.
    std::string RecordOrExplain(const std::string& body, std::string_view webhook_id,
                                std::int64_t arrival_us) {
        const json delivery = json::parse(body, nullptr, false);
        if (delivery.is_discarded()) return "the body is not JSON";
        if (!delivery.is_object() || delivery.value("type", json()) != "ledger.events") {
            return "type is not \"ledger.events\"";
        }
        const auto data = delivery.find("data");
        if (data == delivery.end() || !data->is_object()) return "no data object";
        const auto name = data->find("subscription");
        const auto events = data->find("events");
        if (name == data->end() || !name->is_string()) return "no data.subscription";
        if (events == data->end() || !events->is_array() || events->empty()) {
            return "data.events is not a non-empty array";
        }
        // Read every event before counting any, so that a malformed delivery counts nothing.
        std::vector<Arrival> arrivals;
        std::vector<std::int64_t> seqs;
        for (const json& event : *events) {
            const auto seq = event.find("seq");
            const auto recorded_at = event.find("recorded_at");
            if (seq == event.end() || !seq->is_number_integer() || *seq < 1) {
                return "an event without a positive integer seq";
            }
            if (recorded_at == event.end() || !recorded_at->is_string()) {
                return "an event without recorded_at";
            }
            const auto recorded_us = ParseRfc3339Micros(recorded_at->get<std::string>());
            if (!recorded_us) return "recorded_at is not RFC 3339: " + recorded_at->dump();
            seqs.push_back(seq->get<std::int64_t>());
            arrivals.push_back({.recorded_us = *recorded_us, .arrival_us = arrival_us});
        }
        const std::string expected_id = name->get<std::string>() + ":" +
                                        std::to_string(seqs.front()) + "-" +
                                        std::to_string(seqs.back());
        if (webhook_id != expected_id) {
            return "webhook-id \"" + std::string(webhook_id) + "\", expected \"" + expected_id +
                   "\"";
        }
        SubscriptionTally& tally = tallies_[name->get<std::string>()];
        ++tally.request_count;
        if (tally.first_arrival_us == 0) tally.first_arrival_us = arrival_us;
        tally.last_arrival_us = arrival_us;
        for (std::size_t i = 0; i < seqs.size(); ++i) Count(tally, seqs[i], arrivals[i]);
        return {};
    }

    static void Count(SubscriptionTally& tally, std::int64_t seq, const Arrival& arrival) {
        ++tally.event_count;
        if (!tally.seen.insert(seq).second) {
            ++tally.redelivered_count;
            return;
        }
        if (seq <= tally.seq_max) ++tally.out_of_order_count;
        tally.seq_max = std::max(tally.seq_max, seq);
        tally.seq_sum += seq;
        tally.firsts.push_back(arrival);
    }

    static json TallyJson(const SubscriptionTally& tally, const std::optional<Window>& window) {
        std::vector<std::int64_t> lags_us;
        lags_us.reserve(tally.firsts.size());
        for (const Arrival& arrival : tally.firsts) {
            lags_us.push_back(arrival.arrival_us - arrival.recorded_us);
        }
        json out = {{"events", tally.event_count},
                    {"distinct", static_cast<std::int64_t>(tally.seen.size())},
                    {"seq_sum", tally.seq_sum},
                    {"seq_max", tally.seq_max},
                    {"redelivered", tally.redelivered_count},
                    {"out_of_order", tally.out_of_order_count},
                    {"requests", tally.request_count},
                    {"first_arrival", Seconds(tally.first_arrival_us)},
                    {"last_arrival", Seconds(tally.last_arrival_us)},
                    {"lag_ms", LagJson(std::move(lags_us))}};
        if (!window) return out;
        std::int64_t arrived = 0;
        std::int64_t recorded_arrived_after = 0;
        std::vector<std::int64_t> recorded_lags_us;
        for (const Arrival& arrival : tally.firsts) {
            if (arrival.arrival_us >= window->from_us && arrival.arrival_us <= window->to_us) {
                ++arrived;
            }
            if (arrival.recorded_us >= window->from_us && arrival.recorded_us <= window->to_us) {
                recorded_lags_us.push_back(arrival.arrival_us - arrival.recorded_us);
                if (arrival.arrival_us > window->to_us) ++recorded_arrived_after;
            }
        }
        const auto recorded = static_cast<std::int64_t>(recorded_lags_us.size());
        out["window"] = {{"arrived", arrived},
                         {"recorded", recorded},
                         {"recorded_arrived_after", recorded_arrived_after},
                         {"lag_ms", LagJson(std::move(recorded_lags_us))}};
        return out;
    }

    std::vector<Unread> unread_{};  // Arrival order.
    std::map<std::string, SubscriptionTally> tallies_{};
    std::int64_t malformed_count_ = 0;
    std::vector<std::string> malformed_samples_{};
};

// A query parameter of `target` ("/stats?from=1.5&to=2"), as a number of seconds.
std::optional<double> QuerySeconds(std::string_view target, std::string_view key) {
    const std::size_t question = target.find('?');
    if (question == std::string_view::npos) return std::nullopt;
    std::string_view query = target.substr(question + 1);
    while (!query.empty()) {
        const std::size_t amp = query.find('&');
        const std::string_view pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        const std::size_t equals = pair.find('=');
        if (equals == std::string_view::npos || pair.substr(0, equals) != key) continue;
        const std::string_view text = pair.substr(equals + 1);
        double value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
        return value;
    }
    return std::nullopt;
}

// One connection: reads a request, answers it, and reads the next while the client keeps the
// connection alive.
class Session : public std::enable_shared_from_this<Session> {
public:
    Session(tcp::socket socket, Recorder& recorder)
        : stream_(std::move(socket)), recorder_(recorder) {}

    void Start() { Read(); }

private:
    void Read() {
        parser_.emplace();
        parser_->body_limit(kRequestBodyBytesMax);
        http::async_read(stream_, buffer_, *parser_,
                         beast::bind_front_handler(&Session::OnRead, shared_from_this()));
    }

    void OnRead(beast::error_code ec, std::size_t /*bytes*/) {
        if (ec) return Close();  // The client closed (each delivery does), or a broken request.
        const std::int64_t arrival_us = WallNowMicros();
        http::request<http::string_body> request = parser_->release();
        response_ = {};
        response_.version(request.version());
        response_.keep_alive(request.keep_alive());
        if (request.method() == http::verb::post) {
            // Answered first, read after: the acknowledgement waits for nothing.
            response_.result(http::status::ok);
            response_.prepare_payload();
            Write();
            const auto id = request.find("webhook-id");
            const std::string_view webhook_id =
                id == request.end() ? std::string_view{} : std::string_view{id->value()};
            recorder_.Record(std::move(request.body()), webhook_id, arrival_us);
            return;
        }
        const std::string_view target{request.target()};
        const std::string_view path = target.substr(0, target.find('?'));
        if (request.method() == http::verb::get && path == "/counts") {
            response_.result(http::status::ok);
            response_.set(http::field::content_type, "application/json");
            response_.body() = recorder_.Counts().dump() + "\n";
        } else if (request.method() == http::verb::get && path == "/stats") {
            const std::optional<double> from = QuerySeconds(target, "from");
            const std::optional<double> to = QuerySeconds(target, "to");
            std::optional<Window> window;
            if (from && to) {
                const auto per_second = static_cast<double>(kMicrosPerSecond);
                window = Window{.from_us = std::llround(*from * per_second),
                                .to_us = std::llround(*to * per_second)};
            }
            response_.result(http::status::ok);
            response_.set(http::field::content_type, "application/json");
            response_.body() = recorder_.Stats(window).dump() + "\n";
        } else {
            response_.result(http::status::not_found);
        }
        response_.prepare_payload();
        Write();
    }

    void Write() {
        http::async_write(stream_, response_,
                          beast::bind_front_handler(&Session::OnWrite, shared_from_this()));
    }

    void OnWrite(beast::error_code ec, std::size_t /*bytes*/) {
        if (ec || !response_.keep_alive()) return Close();
        Read();
    }

    void Close() {
        beast::error_code ignored;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    }

    beast::tcp_stream stream_;
    Recorder& recorder_;
    beast::flat_buffer buffer_{};
    std::optional<http::request_parser<http::string_body>> parser_{};
    http::response<http::string_body> response_{};
};

void Accept(tcp::acceptor& acceptor, Recorder& recorder) {
    acceptor.async_accept([&acceptor, &recorder](beast::error_code ec, tcp::socket socket) {
        if (ec) {
            if (ec == net::error::operation_aborted) return;  // Stopping.
            std::cerr << "payledger_bench_receiver: accept: " << ec.message() << "\n";
        } else {
            socket.set_option(tcp::no_delay(true));
            std::make_shared<Session>(std::move(socket), recorder)->Start();
        }
        Accept(acceptor, recorder);
    });
}

int Serve(unsigned short port) {
    net::io_context io{1};
    tcp::acceptor acceptor{io, tcp::endpoint{net::ip::make_address("127.0.0.1"), port}};
    Recorder recorder;
    Accept(acceptor, recorder);
    net::signal_set signals{io, SIGTERM, SIGINT};
    signals.async_wait([&io](beast::error_code, int) { io.stop(); });
    std::printf("listening on 127.0.0.1:%u\n",
                static_cast<unsigned>(acceptor.local_endpoint().port()));
    std::fflush(stdout);
    io.run();
    return 0;
}

}  // namespace
}  // namespace payledger::bench

int main(int argc, char** argv) {
    unsigned short port = 0;
    CLI::App cli{"payledger_bench_receiver: the receiving end of bench/subscriptions"};
    cli.add_option("--port", port, "port on 127.0.0.1 (default 0: one the system chooses)");
    CLI11_PARSE(cli, argc, argv);
    try {
        return payledger::bench::Serve(port);
    } catch (const std::exception& error) {
        std::cerr << "payledger_bench_receiver: " << error.what() << "\n";
        return 2;
    }
}
