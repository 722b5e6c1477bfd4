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
                return timed(HandleReadiness({readiness_, metrics_, committer_}, ready, started));
            case Operation::kMetrics:
                return timed(HandleMetrics(
                    {metrics_, pool_, committer_, *reads_, notifier_, subscriptions_, queries_}));
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
                return HandleCallback(write_path_, *channel, std::move(incoming), std::move(timed));
            case Operation::kCreateOrder:
                if (!ready) return timed(orders_.Answer(NotReady()));
                return HandleCreateOrder(write_path_, orders_, *merchant, std::move(incoming),
                                         std::move(timed));
            case Operation::kVerify:
                return timed(HandleAdminVerify(config_.database_url, verify_running_));
            case Operation::kCheckpoint: {
                Response checkpoint = HandleAuditCheckpoint(config_.audit_signing_key_pem, pool_);
                // An auditor read too, always of the primary: the head it signs is the newest.
                if (checkpoint.result() == http::status::ok) SetReadFrom(checkpoint, {});
                return timed(std::move(checkpoint));
            }
            case Operation::kSubscriptions:
                return timed(HandleSubscriptionList(subscriptions_, pool_));
            case Operation::kRewindSubscription:  // .../subscriptions/{name}/rewind
                return timed(HandleSubscriptionChange(subscriptions_, pool_, incoming,
                                                      segments.at(3), "rewind"));
            case Operation::kEnableSubscription:
                return timed(HandleSubscriptionChange(subscriptions_, pool_, incoming,
                                                      segments.at(3), "enable"));
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
                    return HandleEventExport(*reads_, exports_active_, std::move(incoming),
                                             std::move(timed));
                }
                return HandleEvents({*reads_, notifier_, metrics_}, std::move(incoming),
                                    std::move(timed));
            }
            case Operation::kReceipts:
                return timed(HandleFeed(*reads_, incoming, false));
            case Operation::kOrder:
            case Operation::kOrderEvents:
            case Operation::kOrderReceipts:
            case Operation::kBalances:
                return timed(HandleRead(*reads_, orders_.queried(), incoming, segments));
        }
        // Unreachable: the switch has a case for every operation (-Wswitch).
        throw std::logic_error("no handler for " + std::string(route.path));
    } catch (...) {
        // The one catch of the read handlers too: they let the database's exceptions come
        // here, where they are classified once.
        return AnswerFailure(metrics_, *once, std::current_exception());
    }
}

}  // namespace payledger::api
