// GET /v1/events?wait= (the waiting feed) and the subscriptions' admin endpoints
// (docs/subscriptions.md#inside-serve). Database failures of the synchronous parts are not caught
// here: App::Handle classifies them once; the waits' own continuations catch theirs.
#include <boost/url/parse.hpp>
#include <nlohmann/json.hpp>

#include "api/routes/app.hpp"
#include "api/routes/route_helpers.hpp"
#include "api/routes/subscriptions.hpp"
#include "projections/validate.hpp"

namespace payledger::api {

// A read of the feed waiting for an event after `after` until `deadline`.
struct App::FeedWait {
    Incoming incoming;
    Respond respond;
    std::int64_t after = 0;
    ledger::FeedNotifier::Clock::time_point deadline{};
};

namespace {

using nlohmann::json;

// The longest wait= (seconds).
constexpr std::int64_t kWaitSecondsMax = 30;
// A wake-up whose read found nothing new (the reads' replica has not replayed the commit yet)
// reads again after this, until the wait runs out: a wait served from a replica polls it.
constexpr std::chrono::milliseconds kReplicaPollInterval{250};

// True when `page` (a 200 of the feed) holds no event.
bool EmptyPage(const Response& page) {
    if (page.result() != http::status::ok || page.body().size() > 256) return false;
    const json body = json::parse(page.body(), nullptr, false);
    return body.is_object() && body.contains("events") && body["events"].empty();
}

}  // namespace

void App::HandleEvents(Incoming incoming, Respond respond) {
    const boost::urls::url_view url =
        boost::urls::parse_origin_form(incoming.request.target()).value();
    std::int64_t wait_seconds = 0;
    for (const auto& param : url.params()) {
        if (param.key != "wait") continue;
        const std::optional<std::int64_t> value =
            projections::ParseDigits(param.value, kWaitSecondsMax);
        if (!value) return respond(BadRequest("wait must be an integer from 0 to 30"));
        wait_seconds = *value;
    }
    std::variant<PageQuery, Response> query = ParsePageQuery(incoming, false, true);
    if (Response* refused = std::get_if<Response>(&query)) return respond(std::move(*refused));
    const PageQuery& page_query = std::get<PageQuery>(query);
    Response page = HandleFeed(incoming, true);
    // Only a forward read waits (one from before= reads history), and only when the page
    // is empty.
    if (wait_seconds == 0 || page_query.before || notifier_ == nullptr || !EmptyPage(page)) {
        return respond(std::move(page));
    }
    auto wait = std::make_shared<FeedWait>(FeedWait{
        .incoming = std::move(incoming),
        .respond = std::move(respond),
        .after = page_query.after,
        .deadline = ledger::FeedNotifier::Clock::now() + std::chrono::seconds{wait_seconds}});
    AwaitEvents(std::move(wait), page_query.after);
}

void App::AwaitEvents(std::shared_ptr<FeedWait> wait, std::int64_t beyond) {
    const auto now = ledger::FeedNotifier::Clock::now();
    auto deadline = wait->deadline;
    if (beyond > wait->after) deadline = std::min(deadline, now + kReplicaPollInterval);
    // No thread waits: the notifier holds the continuation, and posts it once an event is
    // committed after `beyond` or the deadline passes.
    const std::optional<ledger::FeedNotifier::WaiterId> id =
        notifier_->AddWaiter(beyond, deadline, [this, wait](ledger::FeedNotifier::WaitEnd /*end*/) {
            try {
                Response page = HandleFeed(wait->incoming, true);
                if (!EmptyPage(page) || ledger::FeedNotifier::Clock::now() >= wait->deadline) {
                    return wait->respond(std::move(page));
                }
                // Woken, but the read found nothing yet (a replica behind the primary), or a
                // short poll ran out: wait again for what is left.
                AwaitEvents(wait, std::max(wait->after, notifier_->Head()));
            } catch (...) {
                wait->respond(
                    FailureResponse(ledger::ClassifyFailure(std::current_exception()), metrics_));
            }
        });
    if (!id) {
        wait->respond(ErrorResponse(http::status::service_unavailable,
                                    projections::Outcome::kUnavailable,
                                    "too many reads are waiting for events; retry later"));
    }
}

Response App::HandleSubscriptionControl(const Incoming& incoming,
                                        const std::vector<std::string>& segments) {
    // The token before the method, as for verify.
    if (auto denied = Authorize(incoming.request, Role::kAdmin)) return std::move(*denied);
    const http::verb method = incoming.request.method();
    if (segments.size() == 3) {
        if (method != http::verb::get) return MethodNotAllowed("GET");
        if (subscriptions_ == nullptr) {
            return JsonResponse(http::status::ok, {{"subscriptions", json::array()}});
        }
        return SubscriptionsState(*subscriptions_, pool_);
    }
    const std::string& action = segments[4];
    if (action != "rewind" && action != "enable") return NotFound();
    if (method != http::verb::post) return MethodNotAllowed("POST");
    if (subscriptions_ == nullptr) {
        return ErrorResponse(http::status::not_found, projections::Outcome::kUnknownOrder,
                             "no subscription " + segments[3] + " in this process's config");
    }
    return ControlSubscription(*subscriptions_, pool_, incoming, segments[3], action);
}

}  // namespace payledger::api
