#include "api/routes/app.hpp"

#include <algorithm>
#include <boost/url/parse.hpp>
#include <charconv>
#include <nlohmann/json.hpp>
#include <variant>

#include "api/channels/alipay_channel.hpp"
#include "api/crypto.hpp"
#include "api/channels/generic_channel.hpp"
#include "api/channels/json_input.hpp"
#include "api/http/json_output.hpp"
#include "api/log.hpp"
#include "api/channels/wechat_v2_channel.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "ledger/reads.hpp"
#include "ledger/verify.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::Outcome;

constexpr std::int64_t kDefaultPageSize = 100;
// POST /v1/admin/verify gives up (503) on a statement that runs longer than this.
constexpr std::chrono::minutes kAdminVerifyStatementTimeout{5};
// Streamed exports each hold a database connection of their own: at most this many at once.
constexpr int kExportsMax = 2;

// The events after a cursor as NDJSON, a page per piece, up to the last seq committed when
// the export started. Owns its connection; one page in memory at a time.
class EventExport final : public BodyProducer {
public:
    EventExport(const std::string& url, std::int64_t after,
                std::shared_ptr<std::atomic<int>> active)
        : connection_(ledger::Connect(url)), after_(after), active_(std::move(active)) {
        pqxx::read_transaction tx{*connection_};
        last_ = tx.exec("SELECT coalesce(max(seq), 0) FROM ledger_events")[0][0].as<std::int64_t>();
    }
    ~EventExport() override { --*active_; }
    EventExport(const EventExport&) = delete;
    EventExport& operator=(const EventExport&) = delete;

    std::string Next() override {
        if (after_ >= last_) return {};
        pqxx::read_transaction tx{*connection_};
        std::string out;
        for (const projections::Event& event :
             ledger::ReadEventsAfter(tx, after_, ledger::kPageSizeMax)) {
            if (event.seq > last_) break;
            out += Dump(EventJson(event));
            out += '\n';
            after_ = event.seq;
        }
        if (out.empty()) after_ = last_;
        return out;
    }

private:
    std::unique_ptr<pqxx::connection> connection_;
    std::int64_t after_ = 0;
    std::int64_t last_ = 0;
    std::shared_ptr<std::atomic<int>> active_;
};

Response JsonResponse(http::status status, const json& body) {
    return MakeResponse(status, "application/json", Dump(body));
}

Response MethodNotAllowed(const char* allowed) {
    Response response = ErrorResponse(http::status::method_not_allowed, Outcome::kMalformed,
                                      std::string("method not allowed; use ") + allowed);
    response.set(http::field::allow, allowed);
    return response;
}

Response NotFound() {
    return ErrorResponse(http::status::not_found, Outcome::kMalformed, "no such endpoint");
}

// The non-negative decimal integer `text`, or nullopt.
std::optional<std::int64_t> ParseCursor(std::string_view text) {
    if (text.empty() || text.size() > 18) return std::nullopt;
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || value < 0) return std::nullopt;
    return value;
}

// The paging parameters of a feed (SPEC §5): after [0], limit [100, at most 1000], and for
// receipts outcome (one that is stored). Unknown parameters are ignored.
struct PageQuery {
    std::int64_t after = 0;
    std::int64_t limit = kDefaultPageSize;
    std::optional<Outcome> outcome{};
};

std::variant<PageQuery, Response> ParsePageQuery(const Incoming& incoming, bool with_outcome) {
    const boost::urls::url_view url =
        boost::urls::parse_origin_form(incoming.request.target()).value();
    PageQuery query;
    for (const auto& param : url.params()) {
        if (param.key == "after") {
            const std::optional<std::int64_t> value = ParseCursor(param.value);
            if (!value) {
                return ErrorResponse(http::status::bad_request, Outcome::kMalformed,
                                     "after must be a non-negative integer");
            }
            query.after = *value;
        } else if (param.key == "limit") {
            const std::optional<std::int64_t> value = ParseCursor(param.value);
            if (!value || *value < 1 || *value > ledger::kPageSizeMax) {
                return ErrorResponse(http::status::bad_request, Outcome::kMalformed,
                                     "limit must be an integer from 1 to 1000");
            }
            query.limit = *value;
        } else if (param.key == "outcome" && with_outcome) {
            query.outcome = projections::ParseOutcome(param.value);
            if (!query.outcome || *query.outcome == Outcome::kUnavailable ||
                *query.outcome == Outcome::kRateLimited) {
                return ErrorResponse(http::status::bad_request, Outcome::kMalformed,
                                     "unknown outcome " + std::string(param.value));
            }
        }
    }
    return query;
}

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

// SPEC §9: a token scoped to accounts may register orders for those only.
bool MayRegisterFor(const MerchantToken& token, const std::string& account_id) {
    return !token.accounts || std::find(token.accounts->begin(), token.accounts->end(),
                                        account_id) != token.accounts->end();
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

Response InternalErrorResponse() {
    return ErrorResponse(http::status::internal_server_error, Outcome::kUnavailable,
                         "internal error");
}

// The request boundary of STYLE §3: count, log, answer 500 if nothing was answered yet.
void AnswerInternalError(Metrics& metrics, OnceRespond& once, const char* what) noexcept {
    metrics.CountInternalError();
    try {
        LogJson("error", Dump(json{{"msg", "request failed"}, {"error", what}}));
    } catch (...) {
        // Logging must not stop the answer.
    }
    try {
        once(InternalErrorResponse());
    } catch (...) {
        // The connection is lost with its response; the process goes on serving.
    }
}

void LogDelivery(projections::Source source, const ledger::Delivery& delivery,
                 const ledger::DeliveryResult& result, const Incoming& incoming) {
    const auto latency = std::chrono::steady_clock::now() - incoming.started;
    const json fields = {
        {"msg", "delivery"},
        {"channel", projections::ToString(source)},
        {"out_trade_no",
         delivery.receipt.out_trade_no ? json(*delivery.receipt.out_trade_no) : json(nullptr)},
        {"outcome", result.internal_error ? "internal_error"
                                          : std::string(projections::ToString(result.outcome))},
        {"seq", result.seq == 0 ? json(nullptr) : json(result.seq)},
        {"receipt_id", result.receipt_id == 0 ? json(nullptr) : json(result.receipt_id)},
        {"latency_ms", static_cast<double>(
                           std::chrono::duration_cast<std::chrono::microseconds>(latency).count()) /
                           1000.0},
        {"peer", incoming.peer},
        {"reason", result.message}};
    LogJson(result.internal_error ? "error" : "info", Dump(fields));
}

}  // namespace

App::App(const Config& config, ledger::ConnectionPool& pool, ledger::Committer& committer,
         Metrics& metrics)
    : config_(config),
      pool_(pool),
      committer_(committer),
      metrics_(metrics),
      unverified_(config_.limits.unverified_per_peer_per_minute) {
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
            allowed = auditor || admin;  // SPEC §5: an admin token may call auditor endpoints.
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
        if (!url) {
            return timed(ErrorResponse(http::status::bad_request, Outcome::kMalformed,
                                       "the request target is not a valid path"));
        }
        const std::vector<std::string> segments = Segments(*url);
        const http::verb method = incoming.request.method();
        const auto is = [&](std::initializer_list<const char*> expected) {
            if (segments.size() != expected.size()) return false;
            std::size_t i = 0;
            for (const char* part : expected) {
                if (part[0] != '*' && segments[i] != part) return false;
                ++i;
            }
            return true;
        };

        if (is({"healthz"}) || is({"readyz"}) || is({"metrics"})) {
            if (method != http::verb::get) return timed(MethodNotAllowed("GET"));
            if (segments[0] == "healthz") {
                return timed(JsonResponse(http::status::ok, {{"status", "ok"}}));
            }
            if (segments[0] == "readyz") return timed(Ready());
            return timed(MakeResponse(http::status::ok, "text/plain; version=0.0.4",
                                      metrics_.Render(pool_, committer_)));
        }
        if (segments.size() >= 3 && segments[0] == "v1" && segments[1] == "callbacks") {
            // Channels are keyed by the rest of the path: "generic", "wechat/v2", "alipay".
            std::string path = segments[2];
            for (std::size_t i = 3; i < segments.size(); ++i) path += "/" + segments[i];
            const auto channel = channels_.find(path);
            if (channel == channels_.end()) return timed(NotFound());
            if (method != http::verb::post) return timed(MethodNotAllowed("POST"));
            return HandleCallback(*channel->second, std::move(incoming), std::move(timed));
        }
        if (is({"v1", "orders"})) {
            if (method != http::verb::post) return timed(MethodNotAllowed("POST"));
            const MerchantToken* token = nullptr;
            if (auto denied = Authorize(incoming.request, Role::kMerchant, &token)) {
                return timed(std::move(*denied));
            }
            return HandleCreateOrder(*token, std::move(incoming), std::move(timed));
        }
        if (is({"v1", "admin", "verify"})) {
            if (method != http::verb::post) return timed(MethodNotAllowed("POST"));
            if (auto denied = Authorize(incoming.request, Role::kAdmin)) {
                return timed(std::move(*denied));
            }
            return timed(HandleAdminVerify());
        }
        const bool read = is({"v1", "orders", "*"}) || is({"v1", "orders", "*", "events"}) ||
                          is({"v1", "orders", "*", "receipts"}) ||
                          is({"v1", "accounts", "*", "balances"}) || is({"v1", "events"}) ||
                          is({"v1", "receipts"});
        if (!read) return timed(NotFound());
        if (method != http::verb::get) return timed(MethodNotAllowed("GET"));
        if (auto denied = Authorize(incoming.request, Role::kAuditor)) {
            return timed(std::move(*denied));
        }
        if (segments.size() == 2) {
            const auto accept = incoming.request.find(http::field::accept);
            if (segments[1] == "events" && accept != incoming.request.end() &&
                accept->value().find("application/x-ndjson") != std::string_view::npos) {
                return HandleEventExport(std::move(incoming), std::move(timed));
            }
            return timed(HandleFeed(incoming, segments[1] == "events"));
        }
        return timed(HandleRead(incoming, segments));
    } catch (const std::exception& error) {
        return AnswerInternalError(metrics_, *once, error.what());
    } catch (...) {
        return AnswerInternalError(metrics_, *once, "unknown exception");
    }
}

void App::Submit(projections::Source source, ledger::Delivery delivery, Incoming incoming,
                 std::function<Response(const ledger::DeliveryResult&)> answer, Respond respond) {
    // The callback runs on the committer's thread after the commit; it only formats.
    ledger::Delivery logged{.receipt = {.out_trade_no = delivery.receipt.out_trade_no}};
    committer_.Submit(
        std::move(delivery),
        [this, source, logged = std::move(logged), incoming = std::move(incoming),
         answer = std::move(answer), respond = std::move(respond)](ledger::DeliveryResult result) {
            metrics_.CountDelivery(source, result.outcome);
            if (result.internal_error) metrics_.CountInternalError();
            LogDelivery(source, logged, result, incoming);
            Response response;
            try {
                response = answer(result);
            } catch (const std::exception& error) {
                // The delivery is stored as decided; only its answer failed (STYLE §3).
                metrics_.CountInternalError();
                LogJson("error", Dump(json{{"msg", "answer failed"}, {"error", error.what()}}));
                response = InternalErrorResponse();
            }
            respond(std::move(response));
        });
}

void App::HandleCallback(const Channel& channel, Incoming incoming, Respond respond) {
    ledger::Delivery delivery = channel.Verify(incoming);
    // SPEC §5: a delivery whose signature verifies is never limited, malformed or not.
    const bool unverified =
        !delivery.receipt.signature_verified &&
        (delivery.verdict == Outcome::kMalformed || delivery.verdict == Outcome::kBadSignature);
    if (unverified && !unverified_.Admit(incoming.peer_address)) {
        // SPEC §3 invariant 3: nobody without a key fills the append-only tables. Counted,
        // answered in the platform's failure form, never stored.
        metrics_.CountDelivery(channel.source(), Outcome::kRateLimited);
        return respond(channel.Answer(ledger::DeliveryResult{
            .outcome = Outcome::kRateLimited,
            .message = "too many unverified deliveries from this address; retry later"}));
    }
    Submit(
        channel.source(), std::move(delivery), std::move(incoming),
        [&channel](const ledger::DeliveryResult& result) { return channel.Answer(result); },
        std::move(respond));
}

void App::HandleCreateOrder(const MerchantToken& token, Incoming incoming, Respond respond) {
    ledger::Receipt receipt =
        BaseReceipt(incoming, projections::Source::kApi, {"Content-Type", "User-Agent"});
    const std::optional<json> body = ParseJsonObject(receipt.body);
    ledger::Delivery delivery;
    const auto reject = [&](const char* message) {
        delivery = Rejected(std::move(receipt), Outcome::kMalformed, message);
    };
    std::optional<std::string> out_trade_no;
    std::optional<std::string> account_id;
    std::optional<std::string> currency;
    std::optional<std::int64_t> amount;
    if (body) {
        out_trade_no = StringMember(*body, "out_trade_no");
        account_id = StringMember(*body, "account_id");
        currency = StringMember(*body, "currency");
        if (const auto it = body->find("amount"); it != body->end()) amount = AmountFromJson(*it);
        if (out_trade_no && projections::IsValidKey(*out_trade_no)) {
            receipt.out_trade_no = out_trade_no;
        }
    }
    if (!body) {
        reject("body is not a JSON object");
    } else if (!out_trade_no || !projections::IsValidKey(*out_trade_no)) {
        reject("out_trade_no must be 1-64 characters of A-Z a-z 0-9 _ - | * .");
    } else if (!account_id || !projections::IsValidKey(*account_id)) {
        reject("account_id must be 1-64 characters of A-Z a-z 0-9 _ - | * .");
    } else if (!amount) {
        reject("amount must be a JSON integer of minor units, 1 to 10^13");
    } else if (!currency || !projections::IsValidCurrency(*currency)) {
        reject("currency must be an upper-case ISO 4217 code");
    } else if (!MayRegisterFor(token, *account_id)) {
        // Authorization, not a delivery: refused like a token of another role, no receipt.
        return respond(
            ErrorResponse(http::status::forbidden, Outcome::kBadSignature,
                          "this token may not register orders for account " + *account_id));
    } else {
        delivery = ledger::Delivery{
            .receipt = std::move(receipt),
            .event = projections::Event{.out_trade_no = *out_trade_no,
                                        .event_type = projections::EventType::kOrderCreated,
                                        .source = projections::Source::kApi,
                                        .account_id = *account_id,
                                        .amount = *amount,
                                        .currency = *currency,
                                        .occurred_at = incoming.received_at}};
    }
    Submit(
        projections::Source::kApi, std::move(delivery), std::move(incoming),
        [](const ledger::DeliveryResult& result) {
            if (result.internal_error) return InternalErrorResponse();
            if (result.outcome == Outcome::kAppended || result.outcome == Outcome::kDuplicate) {
                PAYLEDGER_ASSERT(result.order.has_value());
                return JsonResponse(
                    result.outcome == Outcome::kAppended ? http::status::created : http::status::ok,
                    OrderJson(*result.order));
            }
            return ErrorResponse(StatusOf(result.outcome), result.outcome, result.message,
                                 result.seq);
        },
        std::move(respond));
}

Response App::HandleAdminVerify() {
    // One at a time: each run reads the whole ledger on two connections of its own.
    if (verify_running_.exchange(true)) {
        return ErrorResponse(http::status::too_many_requests, Outcome::kRateLimited,
                             "verify is already running; retry when it has finished");
    }
    struct Done {
        std::atomic<bool>& running;
        ~Done() { running = false; }
    } done{verify_running_};
    try {
        const ledger::VerifyReport report =
            ledger::Verify(config_.database_url, {}, kAdminVerifyStatementTimeout);
        json projections = json::array();
        for (const ledger::ProjectionCheck& check : report.projections) {
            json differences = json::array();
            for (const ledger::Difference& difference : check.differences) {
                differences.push_back({{"key", difference.key}, {"what", difference.what}});
            }
            projections.push_back({{"name", check.name},
                                   {"rows", check.rows},
                                   {"digest", check.digest},
                                   {"ok", check.ok()},
                                   {"live_rows", check.live_rows},
                                   {"live_digest", check.live_digest},
                                   {"difference_count", check.difference_count},
                                   {"differences", std::move(differences)}});
        }
        return JsonResponse(http::status::ok,
                            {{"ok", report.ok()}, {"projections", std::move(projections)}});
    } catch (const pqxx::failure& error) {
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             std::string("verify could not run: ") + error.what());
    }
}

Response App::Ready() {
    try {
        ledger::ConnectionPool::Lease connection = pool_.Acquire();
        pqxx::nontransaction tx{*connection};
        tx.exec("SELECT 1");
        return JsonResponse(http::status::ok, {{"status", "ready"}});
    } catch (const std::exception& error) {
        // SPEC §5: only that it is unreachable; the driver's text (host, port, user) is for
        // the operator's log, not for whoever asks.
        LogJson("warning", Dump(json{{"msg", "readiness check failed"}, {"error", error.what()}}));
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             "the database is unreachable");
    }
}

Response App::HandleRead(const Incoming& incoming, const std::vector<std::string>& segments) {
    const std::string& key = segments[2];
    std::variant<PageQuery, Response> query = ParsePageQuery(incoming, false);
    if (Response* refused = std::get_if<Response>(&query)) return std::move(*refused);
    const PageQuery page = std::get<PageQuery>(query);
    if (!projections::IsValidKey(key)) {
        return ErrorResponse(http::status::bad_request, Outcome::kMalformed,
                             "the key must be 1-64 characters of A-Z a-z 0-9 _ - | * .");
    }
    try {
        ledger::ConnectionPool::Lease connection = pool_.Acquire();
        pqxx::read_transaction tx{*connection};
        if (segments[1] == "accounts") {
            const std::vector<projections::BalanceRow> balances = ledger::ReadBalances(tx, key);
            if (balances.empty()) {
                return ErrorResponse(http::status::not_found, Outcome::kUnknownOrder,
                                     "no order credits account " + key);
            }
            json rows = json::array();
            for (const projections::BalanceRow& row : balances) {
                rows.push_back({{"currency", row.currency}, {"balance", row.balance}});
            }
            return JsonResponse(http::status::ok, {{"account_id", key}, {"balances", rows}});
        }
        if (segments.size() == 3) {
            const std::optional<projections::OrderRow> order = ledger::ReadOrder(tx, key);
            if (!order) {
                return ErrorResponse(http::status::not_found, Outcome::kUnknownOrder,
                                     "no order " + key);
            }
            return JsonResponse(http::status::ok, OrderJson(*order));
        }
        json items = json::array();
        json body = json::object();
        if (segments[3] == "events") {  // At most one per event type: never more than four.
            for (const projections::Event& event : ledger::ReadOrderEvents(tx, key)) {
                items.push_back(EventJson(event));
            }
        } else {
            // Paged like the feeds (SPEC §5): unverified deliveries can name any order, so
            // an order's history is as long as strangers make it, and one page is the most
            // that a response holds.
            std::int64_t next_after = page.after;
            for (const ledger::Receipt& receipt :
                 ledger::ReadOrderReceipts(tx, key, page.after, page.limit)) {
                items.push_back(ReceiptJson(receipt));
                next_after = receipt.id;
            }
            body["next_after"] = next_after;
        }
        if (items.empty() && !ledger::ReadOrder(tx, key)) {
            return ErrorResponse(http::status::not_found, Outcome::kUnknownOrder,
                                 "no order " + key);
        }
        body[segments[3]] = std::move(items);
        return JsonResponse(http::status::ok, body);
    } catch (const ledger::PoolExhausted& error) {
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             error.what());
    } catch (const pqxx::failure& error) {
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             std::string("the database could not answer: ") + error.what());
    }
}

void App::HandleEventExport(Incoming incoming, Respond respond) {
    const boost::urls::url_view url =
        boost::urls::parse_origin_form(incoming.request.target()).value();
    std::int64_t after = 0;
    for (const auto& param : url.params()) {
        if (param.key != "after") continue;
        const std::optional<std::int64_t> value = ParseCursor(param.value);
        if (!value) {
            return respond(ErrorResponse(http::status::bad_request, Outcome::kMalformed,
                                         "after must be a non-negative integer"));
        }
        after = *value;
    }
    if (++*exports_active_ > kExportsMax) {
        --*exports_active_;
        return respond(ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                                     "too many exports at once; retry later"));
    }
    std::unique_ptr<BodyProducer> producer;
    try {
        producer = std::make_unique<EventExport>(config_.database_url, after, exports_active_);
    } catch (const pqxx::failure& error) {
        --*exports_active_;
        return respond(
            ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                          std::string("the database could not answer: ") + error.what()));
    }
    Response header{http::status::ok, 11};
    header.set(http::field::content_type, "application/x-ndjson");
    incoming.respond_stream(std::move(header), std::move(producer));
}

Response App::HandleFeed(const Incoming& incoming, bool events) {
    std::variant<PageQuery, Response> query = ParsePageQuery(incoming, !events);
    if (Response* refused = std::get_if<Response>(&query)) return std::move(*refused);
    const auto [after, limit, outcome] = std::get<PageQuery>(query);
    try {
        ledger::ConnectionPool::Lease connection = pool_.Acquire();
        pqxx::read_transaction tx{*connection};
        json items = json::array();
        std::int64_t next_after = after;
        if (events) {
            for (const projections::Event& event : ledger::ReadEventsAfter(tx, after, limit)) {
                items.push_back(EventJson(event));
                next_after = event.seq;
            }
        } else {
            for (const ledger::Receipt& receipt :
                 ledger::ReadReceiptsAfter(tx, after, limit, outcome)) {
                items.push_back(ReceiptJson(receipt));
                next_after = receipt.id;
            }
        }
        return JsonResponse(http::status::ok, {{events ? "events" : "receipts", std::move(items)},
                                               {"next_after", next_after}});
    } catch (const ledger::PoolExhausted& error) {
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             error.what());
    } catch (const pqxx::failure& error) {
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             std::string("the database could not answer: ") + error.what());
    }
}

}  // namespace payledger::api
