// GET /v1/events?wait= (the waiting feed) and the subscriptions' admin endpoints
// (docs/subscriptions.md#inside-serve). Database failures of the synchronous parts are not caught
// here: App::Handle classifies them once; the waits' own continuations catch theirs.
#include <boost/url/parse.hpp>
#include <nlohmann/json.hpp>

#include "api/routes/handlers.hpp"
#include "api/routes/route_helpers.hpp"
#include "api/routes/subscriptions.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
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

// A read of the feed waiting for an event after `after` until `deadline`.
struct FeedWait {
    FeedWaiting waiting;
    Incoming incoming;
    Respond respond;
    std::int64_t after = 0;
    ledger::FeedNotifier::Clock::time_point deadline{};
};

// Waits for an event after `beyond` (at most until wait->deadline; a short poll when `beyond`
// is past wait->after: a replica behind the primary), then reads the page again.
void AwaitEvents(std::shared_ptr<FeedWait> wait, std::int64_t beyond) {
    ledger::FeedNotifier& notifier = *wait->waiting.notifier;
    const auto now = ledger::FeedNotifier::Clock::now();
    auto deadline = wait->deadline;
    if (beyond > wait->after) deadline = std::min(deadline, now + kReplicaPollInterval);
    // No thread waits: the notifier holds the continuation, and posts it once an event is
    // committed after `beyond` or the deadline passes.
    const std::optional<ledger::FeedNotifier::WaiterId> id =
        notifier.AddWaiter(beyond, deadline, [wait](ledger::FeedNotifier::WaitEnd /*end*/) {
            try {
                Response page = HandleFeed(wait->waiting.reads, wait->incoming, true);
                if (!EmptyPage(page) || ledger::FeedNotifier::Clock::now() >= wait->deadline) {
                    return wait->respond(std::move(page));
                }
                // Woken, but the read found nothing yet (a replica behind the primary), or a
                // short poll ran out: wait again for what is left.
                AwaitEvents(wait, std::max(wait->after, wait->waiting.notifier->Head()));
            } catch (...) {
                wait->respond(FailureResponse(ledger::ClassifyFailure(std::current_exception()),
                                              wait->waiting.metrics));
            }
        });
    if (!id) {
        wait->respond(ErrorResponse(http::status::service_unavailable,
                                    projections::Outcome::kUnavailable,
                                    "too many reads are waiting for events; retry later"));
    }
}

}  // namespace

void HandleEvents(FeedWaiting waiting, Incoming incoming, Respond respond) {
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
    Response page = HandleFeed(waiting.reads, incoming, true);
    // Only a forward read waits (one from before= reads history), and only when the page
    // is empty.
    if (wait_seconds == 0 || page_query.before || waiting.notifier == nullptr || !EmptyPage(page)) {
        return respond(std::move(page));
    }
    auto wait = std::make_shared<FeedWait>(FeedWait{
        .waiting = waiting,
        .incoming = std::move(incoming),
        .respond = std::move(respond),
        .after = page_query.after,
        .deadline = ledger::FeedNotifier::Clock::now() + std::chrono::seconds{wait_seconds}});
    AwaitEvents(std::move(wait), page_query.after);
}

Response HandleSubscriptionList(const SubscriptionDeliverer* deliverer,
                                ledger::ConnectionPool& pool) {
    if (deliverer == nullptr) {
        return JsonResponse(http::status::ok, {{"subscriptions", json::array()}});
    }
    return SubscriptionsState(*deliverer, pool);
}

Response HandleSubscriptionChange(SubscriptionDeliverer* deliverer, ledger::ConnectionPool& pool,
                                  const Incoming& incoming, const std::string& name,
                                  const std::string& action) {
    if (deliverer == nullptr) {
        return ErrorResponse(http::status::not_found, projections::Outcome::kUnknownOrder,
                             "no subscription " + name + " in this process's config");
    }
    return ControlSubscription(*deliverer, pool, incoming, name, action);
}

}  // namespace payledger::api
