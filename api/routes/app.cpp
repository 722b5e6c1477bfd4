#include "api/routes/app.hpp"

#include <boost/url/parse.hpp>
#include <nlohmann/json.hpp>

#include "api/channels/alipay_channel.hpp"
#include "api/channels/generic_channel.hpp"
#include "api/channels/wechat_v2_channel.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "api/crypto.hpp"
#include "api/http/json_output.hpp"
#include "api/http/prometheus.hpp"
#include "api/log.hpp"
#include "api/routes/console.hpp"
#include "api/routes/reconciliations.hpp"
#include "api/routes/route_helpers.hpp"
#include "api/routes/route_table.hpp"
#include "api/routes/subscriptions.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::Outcome;

std::string BearerToken(const Request& request) {
    const auto it = request.find(http::field::authorization);
    if (it == request.end()) return {};
    const std::string_view value = it->value();
    constexpr std::string_view kPrefix = "Bearer ";
    if (value.size() <= kPrefix.size() || value.substr(0, kPrefix.size()) != kPrefix) return {};
    return std::string(value.substr(kPrefix.size()));
}

bool AnyTokenMatches(const std::vector<std::string>& tokens, const std::string& token) {
    bool matched = false;
    for (const std::string& candidate : tokens) {
        matched |= ConstantTimeEquals(candidate, token);
    }
    return matched;
}

// The merchant token equal to `token`, or null; every candidate is compared in constant time.
const MerchantToken* MatchingMerchantToken(const std::vector<MerchantToken>& tokens,
                                           const std::string& token) {
    const MerchantToken* matched = nullptr;
    for (const MerchantToken& candidate : tokens) {
        if (ConstantTimeEquals(candidate.token, token)) matched = &candidate;
    }
    return matched;
}

std::vector<std::string> Segments(const boost::urls::url_view& url) {
    std::vector<std::string> segments;
    for (const std::string segment : url.segments()) segments.push_back(segment);
    return segments;
}

// Answers one request at most once. The handlers move their Respond on (into the committer's
// callback), so Handle's catch-all cannot call it: a moved-from std::function throws
// std::bad_function_call, and out of an Asio worker that is std::terminate. Both share this.
class OnceRespond {
public:
    explicit OnceRespond(Respond respond) : respond_(std::move(respond)) {}

    // True for the first caller only: it owns the answer (a response or a stream).
    [[nodiscard]] bool Claim() { return !answered_.exchange(true); }

    void operator()(Response response) {
        if (Claim()) respond_(std::move(response));
    }

private:
    std::atomic<bool> answered_{false};
    Respond respond_;
};

// The request boundary (docs/write-path.md#failures-and-retries): classify once, log, count, answer
// if nothing was yet.
void AnswerFailure(Metrics& metrics, OnceRespond& once, const std::exception_ptr& error) noexcept {
    try {
        once(FailureResponse(ledger::ClassifyFailure(error), metrics));
    } catch (...) {
        // The connection is lost with its response; the process goes on serving.
    }
}

void LogDelivery(projections::Source source, const std::optional<std::string>& out_trade_no,
                 const ledger::DeliveryResult& result, const Incoming& incoming) {
    const auto latency = std::chrono::steady_clock::now() - incoming.started;
    const json fields = {
        {"msg", "delivery"},
        {"channel", projections::ToString(source)},
        {"out_trade_no", out_trade_no ? json(*out_trade_no) : json(nullptr)},
        {"outcome", IsInternalError(result) ? "internal_error"
                                            : std::string(projections::ToString(result.outcome))},
        {"seq", result.seq == 0 ? json(nullptr) : json(result.seq)},
        {"receipt_id", result.receipt_id == 0 ? json(nullptr) : json(result.receipt_id)},
        {"latency_ms", static_cast<double>(
                           std::chrono::duration_cast<std::chrono::microseconds>(latency).count()) /
                           1000.0},
        {"peer", incoming.peer},
        {"reason", result.detail.empty() ? result.message : result.detail}};
    LogJson(IsInternalError(result) ? "error" : "info", Dump(fields));
}

// docs/availability.md#read-replicas: the auditor reads on the replica of read_database_url, with a
// log line whenever they change server.
std::unique_ptr<ledger::ReadRouter> MakeReadRouter(const Config& config,
                                                   ledger::ConnectionPool& pool) {
    std::optional<ledger::ReplicaOptions> replica;
    if (config.read_database_url) {
        replica = ledger::ReplicaOptions{.url = *config.read_database_url,
                                         .lag_max = config.read_max_lag};
    }
    return std::make_unique<ledger::ReadRouter>(
        pool, config.database_url, std::move(replica),
        [](bool to_replica, const std::string& reason) {
            LogJson(to_replica ? "info" : "warning",
                    Dump(json{{"msg", to_replica ? "reads go to the replica"
                                                 : "reads fall back to the primary"},
                              {"reason", reason}}));
        });
}

// What every read and write answers until serve's database is ready.
ledger::DeliveryResult NotReady() {
    return ledger::Unavailable("the service is starting: its database is not ready yet");
}

}  // namespace

namespace {

// The channels whose sections have `query`: the platforms this process asks.
std::set<std::string> QueriedChannels(const Config& config) {
    std::set<std::string> channels;
    if (config.wechat_v2 && config.wechat_v2->query) channels.insert("wechat_v2");
    if (config.wechat_v3 && config.wechat_v3->query) channels.insert("wechat_v3");
    if (config.alipay && config.alipay->query) channels.insert("alipay");
    return channels;
}

}  // namespace

App::App(const Config& config, ledger::ConnectionPool& pool, ledger::Committer& committer,
         Metrics& metrics)
    : config_(config),
      pool_(pool),
      reads_(MakeReadRouter(config_, pool)),
      committer_(committer),
      metrics_(metrics),
      readiness_(config_.database_url, 1, kReadinessWaitMax),
      orders_(QueriedChannels(config_), config_.query.first_after),
      unverified_(config_.limits.unverified_per_peer_per_minute),
      unverified_bytes_(config_.limits.unverified_bytes_per_minute) {
    if (config_.generic) {
        channels_["generic"] = std::make_unique<GenericChannel>(*config_.generic);
    }
    if (config_.wechat_v2) {
        channels_["wechat/v2"] = std::make_unique<WechatV2Channel>(*config_.wechat_v2);
    }
    if (config_.wechat_v3) {
        channels_["wechat/v3"] = std::make_unique<WechatV3Channel>(*config_.wechat_v3);
    }
    if (config_.alipay) channels_["alipay"] = std::make_unique<AlipayChannel>(*config_.alipay);
}

std::optional<Response> App::Authorize(const Request& request, Role role,
                                       const MerchantToken** merchant_token) const {
    const std::string token = BearerToken(request);
    const MerchantToken* matched_merchant = MatchingMerchantToken(config_.merchant_tokens, token);
    if (merchant_token != nullptr) *merchant_token = matched_merchant;
    const bool merchant = matched_merchant != nullptr;
    const bool auditor = AnyTokenMatches(config_.auditor_tokens, token);
    const bool admin = AnyTokenMatches(config_.admin_tokens, token);
    if (token.empty() || !(merchant || auditor || admin)) {
        Response response = ErrorResponse(http::status::unauthorized, Outcome::kBadSignature,
                                          "a valid bearer token is required");
        response.set(http::field::www_authenticate, "Bearer");
        return response;
    }
    bool allowed = false;
    switch (role) {
        case Role::kMerchant:
            allowed = merchant;
            break;
        case Role::kAuditor:
            allowed = auditor || admin;  // An admin token may call auditor endpoints.
            break;
        case Role::kAdmin:
            allowed = admin;
            break;
    }
    if (allowed) return std::nullopt;
    return ErrorResponse(http::status::forbidden, Outcome::kBadSignature,
                         "this token's role may not call this endpoint");
}

void App::Handle(Incoming incoming, Respond respond) {
    const auto started = incoming.started;
    const auto once = std::make_shared<OnceRespond>(
        [this, started, respond = std::move(respond)](Response response) {
            metrics_.ObserveRequest(std::chrono::steady_clock::now() - started);
            respond(std::move(response));
        });
    Respond timed = [once](Response response) { (*once)(std::move(response)); };
    incoming.respond_stream = [once, stream = std::move(incoming.respond_stream)](
                                  Response header, std::unique_ptr<BodyProducer> producer) {
        if (once->Claim()) stream(std::move(header), std::move(producer));
    };
    try {
        const boost::system::result<boost::urls::url_view> url =
            boost::urls::parse_origin_form(incoming.request.target());
        if (!url) return timed(BadRequest("the request target is not a valid path"));
        const std::vector<std::string> segments = Segments(*url);
        const RouteMatch match = MatchRoute(segments, incoming.request.method());
        // A platform this config does not set up has no endpoint, for any method.
        const Channel* channel = nullptr;
        if (match.path_known && match.path_row->operation == Operation::kCallback) {
            const auto found = channels_.find(match.path_row->channel);
            if (found == channels_.end()) return timed(NotFound());
            channel = found->second.get();
        }
        if (match.route == nullptr) {
            // What the table does not serve below /console answers as the console does: its
            // own 404 (it has no folders) or 405, with its security headers.
            if (!segments.empty() && segments[0] == "console") {
                return timed(ConsoleResponse(incoming.request, segments));
            }
            if (!match.path_known) return timed(NotFound());
            // The admin paths check the token before the method: a GET of verify answers 405
            // to an admin token and 403 to an auditor's, which is how the console learns
            // whether to offer verify without running it (docs/api.md#the-auditor-console).
            if (match.path_row->access == Access::kAdmin) {
                if (auto denied = Authorize(incoming.request, Role::kAdmin)) {
                    return timed(std::move(*denied));
                }
            }
            return timed(MethodNotAllowed(match.allow.c_str()));
        }
        const Route& route = *match.route;
        // Until serve is ready, what needs the database answers 503, before any token is
        // looked at for the auditor and admin rows; a platform and a merchant are answered in
        // their own format (below), so that they retry.
        const bool ready = ready_.load(std::memory_order_acquire);
        const MerchantToken* merchant = nullptr;
        switch (route.access) {
            case Access::kOpen:
            case Access::kPlatform:
                break;
            case Access::kMerchant:
                if (auto denied = Authorize(incoming.request, Role::kMerchant, &merchant)) {
                    return timed(std::move(*denied));
                }
                break;
            case Access::kAuditor:
            case Access::kAdmin:
                // The probe of verify answers the token's role only, ready or not.
                if (!ready && route.operation != Operation::kProbeVerify) {
                    return timed(ErrorResponse(http::status::service_unavailable,
                                               Outcome::kUnavailable, NotReady().message));
                }
                if (auto denied =
                        Authorize(incoming.request,
                                  route.access == Access::kAdmin ? Role::kAdmin : Role::kAuditor)) {
                    return timed(std::move(*denied));
                }
                break;
        }
        switch (route.operation) {
            case Operation::kHealthz:
                return timed(JsonResponse(http::status::ok, {{"status", "ok"}}));
            case Operation::kReadyz:
                return timed(Ready(started));
            case Operation::kMetrics:
                return timed(MetricsResponse());
            case Operation::kOpenApi:
                return timed(OpenApiResponse(incoming.request));
            case Operation::kConsoleRedirect:
            case Operation::kConsoleIndex:
            case Operation::kConsoleFile:
                return timed(ConsoleResponse(incoming.request, segments));
            case Operation::kProbeVerify:  // Answers the token's role only (above).
                return timed(MethodNotAllowed(match.allow.c_str()));
            case Operation::kCallback:
                if (!ready) return timed(channel->Answer(NotReady()));
                return HandleCallback(*channel, std::move(incoming), std::move(timed));
            case Operation::kCreateOrder:
                if (!ready) return timed(orders_.Answer(NotReady()));
                return HandleCreateOrder(*merchant, std::move(incoming), std::move(timed));
            case Operation::kVerify:
                return timed(HandleAdminVerify());
            case Operation::kCheckpoint: {
                Response checkpoint = HandleAuditCheckpoint();
                // An auditor read too, always of the primary: the head it signs is the newest.
                if (checkpoint.result() == http::status::ok) SetReadFrom(checkpoint, {});
                return timed(std::move(checkpoint));
            }
            case Operation::kSubscriptions:
            case Operation::kRewindSubscription:
            case Operation::kEnableSubscription:
                return timed(HandleSubscriptionControl(incoming, segments));
            case Operation::kSubscriptionChanges: {  // An auditor read of the primary.
                Response changes = SubscriptionChanges(pool_, incoming);
                if (changes.result() == http::status::ok) SetReadFrom(changes, {});
                return timed(std::move(changes));
            }
            case Operation::kReconciliations:
            case Operation::kReconciliation:  // api/routes/reconciliations.cpp.
                return timed(HandleReconciliations(*reads_, incoming, segments));
            case Operation::kEvents: {
                const auto accept = incoming.request.find(http::field::accept);
                if (accept != incoming.request.end() &&
                    accept->value().find("application/x-ndjson") != std::string_view::npos) {
                    return HandleEventExport(std::move(incoming), std::move(timed));
                }
                return HandleEvents(std::move(incoming), std::move(timed));
            }
            case Operation::kReceipts:
                return timed(HandleFeed(incoming, false));
            case Operation::kOrder:
            case Operation::kOrderEvents:
            case Operation::kOrderReceipts:
            case Operation::kBalances:
                return timed(HandleRead(incoming, segments));
        }
        // Unreachable: the switch has a case for every operation (-Wswitch).
        throw std::logic_error("no handler for " + std::string(route.path));
    } catch (...) {
        // The one catch of the read handlers too: they let the database's exceptions come
        // here, where they are classified once.
        return AnswerFailure(metrics_, *once, std::current_exception());
    }
}

Response App::MetricsResponse() {
    std::string text = metrics_.Render(pool_, committer_, *reads_);
    if (notifier_ != nullptr) {
        PrometheusText feed;
        feed.Add("payledger_feed_waiters", PrometheusText::Type::kGauge,
                 "Reads of the feed waiting for an event (wait=).")
            .Sample({}, notifier_->WaiterCount());
        text += feed.Text();
    }
    if (subscriptions_ != nullptr) text += SubscriptionMetrics(*subscriptions_);
    if (queries_ != nullptr) text += queries_->MetricsText();
    return MakeResponse(http::status::ok, "text/plain; version=0.0.4", std::move(text));
}

void App::HandleCallback(const Channel& channel, Incoming incoming, Respond respond) {
    ledger::Delivery delivery = channel.Verify(incoming);
    Deliver(channel, std::move(delivery), std::move(incoming), std::move(respond));
}

void App::Deliver(const Channel& channel, ledger::Delivery delivery, Incoming incoming,
                  Respond respond) {
    // A delivery whose signature verifies is never limited, malformed or not
    // (docs/security.md#peers-and-limits).
    const bool unverified =
        !delivery.receipt.signature_verified &&
        (delivery.outcome == Outcome::kMalformed || delivery.outcome == Outcome::kBadSignature);
    const projections::Source source = channel.source();
    const UnverifiedLimiter::Clock::time_point admitted_at = UnverifiedLimiter::Clock::now();
    const ledger::Receipt& receipt = delivery.receipt;
    const std::size_t stored_bytes = UnverifiedStoredBytes(
        receipt.body.size(), receipt.headers.size(), delivery.message.size(), receipt.peer.size(),
        receipt.out_trade_no ? receipt.out_trade_no->size() : 0);
    // Nobody without a key fills the append-only tables: an unverified delivery is stored
    // only within its peer's count and within the bytes all peers may store per minute.
    // Over either: counted, answered in the platform's failure form, never stored.
    const char* limited = nullptr;
    if (unverified) {
        if (!unverified_.Admit(incoming.peer_address, admitted_at)) {
            limited = "too many unverified deliveries from this address; retry later";
        } else if (!unverified_bytes_.Admit(stored_bytes, admitted_at)) {
            unverified_.Forget(incoming.peer_address, admitted_at);
            limited = "too many bytes of unverified deliveries from all addresses; retry later";
        }
    }
    if (limited != nullptr) {
        metrics_.CountDelivery(source, Outcome::kRateLimited);
        return respond(channel.Answer(
            ledger::DeliveryResult{.outcome = Outcome::kRateLimited, .message = limited}));
    }
    // After the commit: counted, logged and answered in the channel's format, on the
    // committer's answer thread (one hand-off per batch), so that its writing thread goes back
    // to writing. What it throws is counted there (Committer::Stats::answer_failures).
    std::optional<std::string> out_trade_no = delivery.receipt.out_trade_no;
    auto effects = [this, &channel, source, unverified, admitted_at, stored_bytes,
                    out_trade_no = std::move(out_trade_no), incoming = std::move(incoming),
                    respond = std::move(respond)](const ledger::DeliveryResult& result) {
        // The limit counts the unverified receipts stored: one that was not is uncounted.
        if (unverified && result.outcome == Outcome::kUnavailable) {
            unverified_.Forget(incoming.peer_address, admitted_at);
            unverified_bytes_.Forget(stored_bytes, admitted_at);
        }
        metrics_.CountDelivery(source, result.outcome);
        if (IsInternalError(result)) metrics_.CountInternalError();
        LogDelivery(source, out_trade_no, result, incoming);
        Response response;
        try {
            response = channel.Answer(result);
        } catch (...) {
            // The delivery is stored as decided; only its answer failed.
            response = FailureResponse(ledger::ClassifyFailure(std::current_exception()), metrics_);
        }
        respond(std::move(response));
    };
    committer_.Submit(std::move(delivery), std::move(effects));  // Called exactly once.
}

}  // namespace payledger::api
