#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/http/http.hpp"
#include "api/http/metrics.hpp"
#include "ledger/pg/failures.hpp"
#include "ledger/read/read_router.hpp"
#include "projections/event.hpp"

namespace payledger::api {

// What the route files (app, orders, reads, feeds, admin) share: answers, paging, and the
// request boundary's one mapping of failures to statuses.

[[nodiscard]] Response JsonResponse(http::status status, const nlohmann::json& body);
[[nodiscard]] Response MethodNotAllowed(const char* allowed);
[[nodiscard]] Response NotFound();  // No such endpoint (an unknown order is UnknownOrder).
[[nodiscard]] Response BadRequest(std::string message);    // 400 malformed.
[[nodiscard]] Response UnknownOrder(std::string message);  // 404 unknown_order.

// A feed's cursor (after=): the non-negative decimal integer `text`, or nullopt.
[[nodiscard]] std::optional<std::int64_t> ParseCursor(std::string_view text);

// The paging parameters of a feed (docs/api.md#feeds-and-paging): after [0] or before (not
// both), limit [100, at most 1000], and for receipts outcome (one that is stored). Unknown
// parameters are ignored.
inline constexpr std::int64_t kDefaultPageSize = 100;
struct PageQuery {
    std::int64_t after = 0;
    // Set: read the page just below this position instead, answered with prev_before.
    std::optional<std::int64_t> before{};
    std::int64_t limit = kDefaultPageSize;
    std::optional<projections::Outcome> outcome{};
};
// The query of `incoming`'s target, or the 400 that refuses it. `with_before`: the list can
// be read backwards (the feeds); elsewhere a before= is refused, never ignored.
[[nodiscard]] std::variant<PageQuery, Response> ParsePageQuery(const Incoming& incoming,
                                                               bool with_outcome,
                                                               bool with_before = false);

// A page's JSON is at most this many bytes, unless its one item alone is more: a page ends
// early, before the item that would take it past, and its cursor says where to go on: no
// answer grows with what strangers store (receipts of unverified deliveries included).
inline constexpr std::size_t kPageJsonBytesMax = 8 * 1024 * 1024;

// Builds a page's answer: the items under `key`, and the cursor of the next read. Read
// forwards, next_after: the last position, or `after` for an empty page. Read backwards
// (before=), prev_before: the first position, or `before` for an empty page. The items are
// offered in reading order (ascending positions forwards, descending backwards, nearest
// `before` first) and answered in ascending order; the page ends before the first that does
// not fit, so the cursor goes on from the last item returned and nothing is skipped.
// Not thread-safe; one per request.
class PageBuilder {
public:
    PageBuilder(const char* key, const PageQuery& query, std::size_t bytes_max = kPageJsonBytesMax);

    // Adds the item at `position`, or refuses it (false, nothing added) when the page holds
    // an item already and this one's JSON would take the page past bytes_max: the page ends.
    [[nodiscard]] bool Add(const nlohmann::json& item, std::int64_t position);
    [[nodiscard]] std::size_t size() const { return items_.size(); }
    // The 200 answer. Call once.
    [[nodiscard]] Response Finish();

private:
    const char* key_ = "";
    PageQuery query_{};
    std::size_t bytes_max_ = kPageJsonBytesMax;
    std::size_t bytes_ = 0;             // The page's JSON with the items so far.
    std::vector<std::string> items_{};  // Dumped, in reading order.
    std::vector<std::int64_t> positions_{};
};

// The page of `items` (in ascending position order, as the readers return them) by
// PageBuilder's rule: `to_json(item)` is an item's object, `position_of(item)` its position.
template <typename Item, typename ToJson, typename PositionOf>
[[nodiscard]] Response PageResponse(const char* key, const PageQuery& query,
                                    const std::vector<Item>& items, const ToJson& to_json,
                                    const PositionOf& position_of) {
    PageBuilder page{key, query};
    for (std::size_t i = 0; i < items.size(); ++i) {
        const Item& item = items[query.before ? items.size() - 1 - i : i];
        if (!page.Add(to_json(item), position_of(item))) break;
    }
    return page.Finish();
}

// The header that says where an auditor read was served from, so that a reader knows how
// fresh what it sees is: "primary", or "replica; lag=<seconds, three decimals>".
inline constexpr const char* kReadFromHeader = "Payledger-Read-From";
[[nodiscard]] std::string ReadFromValue(const ledger::ReadSource& source);
void SetReadFrom(Response& response, const ledger::ReadSource& source);

// The request boundary (docs/write-path.md#failures-and-retries) of a request that is no delivery:
// a client error is a Refusal and answers its outcome's status, a failure its kind's (both
// api/channels/channel.hpp StatusOf). The driver's text goes to the log, not the client.
// Logs `failure`, counts an invariant broken in `metrics`, and builds its answer.
[[nodiscard]] Response FailureResponse(const ledger::Failure& failure, Metrics& metrics);

}  // namespace payledger::api
