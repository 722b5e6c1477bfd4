#include "api/query/query_scheduler.hpp"

#include <algorithm>
#include <future>
#include <nlohmann/json.hpp>
#include <vector>

#include "api/channels/platform_crypto.hpp"
#include "api/http/json_output.hpp"
#include "api/http/prometheus.hpp"
#include "api/subscriptions/webhook_url.hpp"
#include "ledger/base/clock.hpp"
#include "projections/assert.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

// WeChat's nonce_str: 32 characters of A-Z and 0-9 (hex, upper case, is within it).
std::string Nonce() {
    std::string nonce = RandomHex(16);
    for (char& c : nonce) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return nonce;
}

const QueryEndpoint& EndpointOf(const Config& config, QueryChannel channel) {
    switch (channel) {
        case QueryChannel::kWechatV2:
            return *config.wechat_v2->query;
        case QueryChannel::kWechatV3:
            return config.wechat_v3->query->endpoint;
        case QueryChannel::kAlipay:
            return config.alipay->query->endpoint;
    }
    PAYLEDGER_ASSERT(false);
    return *config.wechat_v2->query;
}

// host:port of an api_base: the receipts' peer.
std::string PeerOf(const QueryEndpoint& endpoint) {
    const Checked<WebhookUrl> url = ParseWebhookUrl(endpoint.api_base);
    if (!url) return endpoint.api_base;
    return (url->host.find(':') != std::string::npos ? "[" + url->host + "]" : url->host) + ":" +
           std::to_string(url->port);
}

std::size_t AnswerIndex(AnswerKind kind) {
    switch (kind) {
        case AnswerKind::kFinal:
        case AnswerKind::kRefused:  // Verified and definite, refused by the checks.
        case AnswerKind::kClosed:
            return 0;
        case AnswerKind::kNotFinal:
        case AnswerKind::kClosePaid:
            return 1;
        case AnswerKind::kBadSignature:
            return 2;
        case AnswerKind::kFailed:
            return 3;
    }
    PAYLEDGER_ASSERT(false);
    return 3;
}

constexpr std::array<std::string_view, 4> kAnswerLabels{"final", "not_final", "bad_signature",
                                                        "failed"};

}  // namespace

PlatformAnswer AskPlatform(const Config& config, QueryChannel channel, QueryAction action,
                           const std::string& out_trade_no, WebhookClient& client,
                           std::chrono::milliseconds timeout) {
    const RequestMoment moment{.now = ledger::NowMicros(), .nonce = Nonce()};
    AskedExchange exchange{.channel = channel,
                           .action = action,
                           .out_trade_no = out_trade_no,
                           .peer = PeerOf(EndpointOf(config, channel))};
    switch (channel) {
        case QueryChannel::kWechatV2:
            exchange.request = WechatV2Request(*config.wechat_v2, action, out_trade_no, moment);
            break;
        case QueryChannel::kWechatV3:
            exchange.request = WechatV3Request(*config.wechat_v3, action, out_trade_no, moment);
            break;
        case QueryChannel::kAlipay:
            exchange.request = AlipayRequest(*config.alipay, action, out_trade_no, moment);
            break;
    }
    exchange.result = client.Send(exchange.request.method, exchange.request.url,
                                  exchange.request.headers, exchange.request.body, timeout,
                                  /*keep_answer=*/true);
    exchange.received_at = ledger::NowMicros();
    switch (channel) {
        case QueryChannel::kWechatV2:
            return ReadWechatV2Answer(*config.wechat_v2, exchange);
        case QueryChannel::kWechatV3:
            return ReadWechatV3Answer(*config.wechat_v3, exchange);
        case QueryChannel::kAlipay:
            return ReadAlipayAnswer(*config.alipay, exchange);
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

std::optional<ledger::DeliveryResult> StoreAnswer(ledger::Committer& committer,
                                                  PlatformAnswer& answer) {
    if (!answer.delivery) return std::nullopt;
    std::promise<ledger::DeliveryResult> decided;
    std::future<ledger::DeliveryResult> result = decided.get_future();
    committer.Submit(std::move(*answer.delivery), [&decided](ledger::DeliveryResult done) {
        decided.set_value(std::move(done));
    });
    answer.delivery.reset();
    return result.get();  // The committer answers every delivery exactly once.
}

QueryScheduler::QueryScheduler(const Config& config, ledger::Committer& committer, Options options,
                               Log log)
    : config_(config), committer_(committer), options_(std::move(options)), log_(std::move(log)) {
    if (config_.wechat_v2 && config_.wechat_v2->query) channels_.emplace_back("wechat_v2");
    if (config_.wechat_v3 && config_.wechat_v3->query) channels_.emplace_back("wechat_v3");
    if (config_.alipay && config_.alipay->query) channels_.emplace_back("alipay");
}

QueryScheduler::~QueryScheduler() { Stop(); }

void QueryScheduler::Start() {
    if (channels_.empty() || claimer_.joinable()) return;
    for (std::size_t i = 0; i < config_.query.concurrency; ++i) {
        askers_.emplace_back([this] { AskLoop(); });
    }
    claimer_ = std::thread([this] { ClaimLoop(); });
}

void QueryScheduler::Stop() {
    {
        std::lock_guard lock{mutex_};
        stopping_ = true;
        for (WebhookClient* client : clients_) client->Cancel();
    }
    work_ready_.notify_all();
    done_ready_.notify_all();
    for (std::thread& asker : askers_) {
        if (asker.joinable()) asker.join();
    }
    if (claimer_.joinable()) claimer_.join();
}

void QueryScheduler::Count(QueryChannel channel, QueryAction action, AnswerKind kind) {
    const auto index = static_cast<std::size_t>(channel);
    if (action == QueryAction::kClose) {
        if (kind == AnswerKind::kClosed) closes_[index].fetch_add(1);
        return;
    }
    answers_[index][AnswerIndex(kind)].fetch_add(1);
}

QueryScheduler::Done QueryScheduler::Attempt(const Job& job, WebhookClient& client) {
    const ledger::DueQuery& due = job.due;
    Done done{.due = due};
    const ScheduleView view{
        .step = due.step,
        .next_action = due.next_action == "close" ? QueryAction::kClose : QueryAction::kQuery,
        .expires_at = due.expires_at,
        .close_refused = due.close_refused};
    if (due.status != "WAIT_PAY") {
        // Settled first (a notification, a statement): what is left of the schedule is cancelled.
        done.record = {.asked = false,
                       .step = view.step,
                       .next_action = due.next_action,
                       .close_refused = view.close_refused};
        return done;
    }
    const std::optional<QueryChannel> channel = ParseQueryChannel(due.channel);
    PAYLEDGER_ASSERT(channel.has_value());  // The claim asked for configured channels only.
    const auto timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(config_.query.timeout);
    PlatformAnswer answer =
        AskPlatform(config_, *channel, view.next_action, due.out_trade_no, client, timeout);
    Count(*channel, view.next_action, answer.kind);
    const AnswerKind kind = answer.kind;
    std::string words = answer.answer;
    if (answer.delivery) answers_submitted_.fetch_add(1);
    const std::optional<ledger::DeliveryResult> stored = StoreAnswer(committer_, answer);
    if (stored && stored->outcome == projections::Outcome::kUnavailable) {
        log_("warning", Dump(json{{"msg", "a platform's answer was not stored"},
                                  {"out_trade_no", due.out_trade_no},
                                  {"error", stored->detail}}));
    }
    // The database's clock, as the claim read it, moved on by this process's monotonic clock:
    // next_at is compared with the database's now(), and a serve's own clock minutes off once
    // put the next query in the database's past (asked again at once, over and over) or minutes
    // into its future.
    const auto since_claim = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - job.claimed);
    const ScheduleStep next = NextStep(
        view, {.kind = kind, .stored = stored ? std::optional(stored->outcome) : std::nullopt},
        due.database_now + since_claim.count(), config_.query);
    done.record = {.asked = true,
                   .answer = std::move(words),
                   .step = next.step,
                   .next_action = next.next_action == QueryAction::kClose ? "close" : "query",
                   .next_at = next.next_at,
                   .close_refused = next.close_refused,
                   .closed = next.closed};
    return done;
}

void QueryScheduler::AskLoop() {
    WebhookClient client{options_.ca_file_for_tests};
    {
        std::lock_guard lock{mutex_};
        if (stopping_) return;
        clients_.push_back(&client);
    }
    // Whichever way the loop ends, Stop no longer reaches this client once it is gone.
    const struct Unregister {
        QueryScheduler& scheduler;
        WebhookClient* client;
        ~Unregister() {
            std::lock_guard lock{scheduler.mutex_};
            std::erase(scheduler.clients_, client);
        }
    } unregister{*this, &client};
    for (;;) {
        Job job;
        {
            std::unique_lock lock{mutex_};
            ++idle_;
            done_ready_.notify_all();  // The claimer may take one more due order.
            work_ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
            --idle_;
            if (stopping_) return;
            job = std::move(jobs_.front());
            jobs_.pop_front();
        }
        Done done;
        const auto started = std::chrono::steady_clock::now();
        try {
            done = Attempt(job, client);
            done.ended = std::chrono::steady_clock::now();
            done.took = done.ended - started;
        } catch (const std::exception& error) {
            // Ours (an invariant), not the platform's: the lease runs out and the order is
            // asked about again, by this process or another.
            log_("error", Dump(json{{"msg", "asking the platform failed"},
                                    {"out_trade_no", job.due.out_trade_no},
                                    {"error", error.what()}}));
            continue;
        }
        {
            std::lock_guard lock{mutex_};
            done_.push_back(std::move(done));
        }
        done_ready_.notify_all();
    }
}

void QueryScheduler::ClaimLoop() {
    using Clock = std::chrono::steady_clock;
    // An attempt's lease: the exchange's timeout, and room for the ledger's commit (which
    // waits behind the batches in the write queue: milliseconds). Only a process that died
    // mid-attempt lets it run out; the order is then asked about again by another.
    const auto lease = std::chrono::duration_cast<std::chrono::milliseconds>(
        3 * config_.query.timeout + std::chrono::seconds{5});
    // The write path's load is read over windows of this length: long enough to hold many
    // batches, short enough that the askers yield within a second of a burst of callbacks and
    // take their full pace again as soon as it ends.
    constexpr auto kLoadWindow = std::chrono::milliseconds{500};
    std::unique_ptr<pqxx::connection> connection;
    Clock::time_point counted{};
    WriteLoadSample load = SampleWriteLoad();
    AskerPace pace = PaceAskers(0.0, 0, config_.query.concurrency);
    Clock::time_point resume_at{};  // A paced asker's rest: no claim before it.
    for (;;) {
        std::vector<Done> finished;
        std::size_t idle = 0;
        {
            std::unique_lock lock{mutex_};
            // A timed wait: due orders are found by looking (the next one may be due in a
            // second), and a paced claim waits for the end of the rest; an attempt that ends,
            // or Stop, wakes it early.
            Clock::time_point until = Clock::now() + options_.poll;
            if (pace.Paced() && resume_at > Clock::now()) until = std::min(until, resume_at);
            done_ready_.wait_until(lock, until, [&] {
                return stopping_ || !done_.empty() ||
                       (more_due_ && ClaimableLocked(pace, resume_at, Clock::now()) > 0);
            });
            if (stopping_) return;
            finished.assign(std::make_move_iterator(done_.begin()),
                            std::make_move_iterator(done_.end()));
            done_.clear();
            const Clock::time_point now = Clock::now();
            const std::size_t queued = committer_.stats().queue_depth.load();
            if (now - load.at >= kLoadWindow) {
                const WriteLoadSample sample = SampleWriteLoad();
                pace = PaceAskers(CallbackShare(load, sample), queued, config_.query.concurrency);
                load = sample;
            } else if (!pace.Paced()) {
                // A burst that began within the window: yield now, not at its end.
                pace = PaceAskers(0.0, queued, config_.query.concurrency);
            }
            paced_ = pace.Paced();
            for (const Done& done : finished) {
                if (done.record.asked && pace.Paced()) {
                    resume_at = std::max(resume_at, done.ended + pace.rest_factor * done.took);
                }
            }
            idle = ClaimableLocked(pace, resume_at, now);
        }
        try {
            if (connection == nullptr || ledger::IdleSessionEnded(*connection)) {
                connection = ledger::Connect(options_.database_url, options_.session);
            }
            std::vector<std::pair<std::string, ledger::AttemptRecord>> records;
            records.reserve(finished.size());
            for (Done& done : finished) {
                records.emplace_back(std::move(done.due.out_trade_no), std::move(done.record));
            }
            ledger::RecordAttempts(*connection, records);
            std::vector<ledger::DueQuery> due;
            if (idle > 0) due = ledger::ClaimDueQueries(*connection, channels_, idle, lease);
            // The gauge's count reads every due row (26 ms at 100 000 due): while the askers
            // yield to the callbacks it is made every ten seconds, not every second.
            if (Clock::now() - counted >= std::chrono::seconds{pace.Paced() ? 10 : 1}) {
                due_ = ledger::CountDueQueries(*connection, channels_);
                counted = Clock::now();
            }
            {
                std::lock_guard lock{mutex_};
                // As many as asked for: more may be due, taken as soon as an asker is idle.
                // With no asker idle nothing was claimed and nothing learnt: the flag stays, so
                // that the asker that reports its result and then counts itself idle (two steps,
                // AskLoop) wakes this loop the second time too. Cleared here, it left a lone
                // asker waiting the whole poll after each query (7 queries/s, every session idle).
                if (idle > 0) more_due_ = due.size() == idle;
                const auto claimed = std::chrono::steady_clock::now();
                for (ledger::DueQuery& query : due) jobs_.push_back({std::move(query), claimed});
            }
            if (!due.empty()) work_ready_.notify_all();
        } catch (const std::exception& error) {
            // The database is away: what was not recorded is asked again once its lease ends.
            // The next look waits its poll: a claim that had filled every idle asker left
            // more_due_ set, and the loop spun on the lost database hundreds of times a second.
            connection.reset();
            {
                std::lock_guard lock{mutex_};
                more_due_ = false;
            }
            log_("warning", Dump(json{{"msg", "the query schedule could not reach the database"},
                                      {"error", error.what()}}));
        }
    }
}

WriteLoadSample QueryScheduler::SampleWriteLoad() const {
    const ledger::Committer::Stats& stats = committer_.stats();
    return {.at = std::chrono::steady_clock::now(),
            .step_micros =
                stats.read_micros.load() + stats.plan_micros.load() + stats.write_micros.load(),
            .deliveries = stats.deliveries.load(),
            .answers = answers_submitted_.load()};
}

std::size_t QueryScheduler::ClaimableLocked(const AskerPace& pace,
                                            std::chrono::steady_clock::time_point resume_at,
                                            std::chrono::steady_clock::time_point now) const {
    if (now < resume_at && pace.Paced()) return 0;
    const std::size_t asking = askers_.size() - std::min(idle_, askers_.size());
    const std::size_t taken = asking + jobs_.size();
    const std::size_t idle = idle_ > jobs_.size() ? idle_ - jobs_.size() : 0;
    return pace.askers > taken ? std::min(pace.askers - taken, idle) : 0;
}

std::string QueryScheduler::MetricsText() const {
    if (channels_.empty()) return {};
    using Type = PrometheusText::Type;
    PrometheusText out;
    PrometheusText::Family& queries =
        out.Add("payledger_queries_total", Type::kCounter,
                "Answers to order queries by channel: final, not_final, bad_signature, failed.");
    PrometheusText::Family& closes = out.Add("payledger_query_closes_total", Type::kCounter,
                                             "Closes of expired orders the platform confirmed.");
    for (const std::string& name : channels_) {
        const auto index = static_cast<std::size_t>(*ParseQueryChannel(name));
        for (std::size_t answer = 0; answer < kAnswerLabels.size(); ++answer) {
            queries.Sample({{"channel", name}, {"answer", kAnswerLabels[answer]}},
                           answers_[index][answer].load());
        }
        closes.Sample({{"channel", name}}, closes_[index].load());
    }
    out.Add("payledger_query_due", Type::kGauge,
            "Orders whose query or close is due now (counted at most once a second; every ten "
            "while the askers yield).")
        .Sample({}, due_.load());
    out.Add(
           "payledger_query_paced", Type::kGauge,
           "Whether the askers yield to the callbacks (1: one at a time, resting nineteen times as "
           "long as each ask took; docs/query.md#pacing).")
        .Sample({}, paced_.load() ? 1 : 0);
    return out.Text();
}

}  // namespace payledger::api
