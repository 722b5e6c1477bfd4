#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/http/http.hpp"
#include "api/http/metrics.hpp"
#include "ledger/failures.hpp"
#include "projections/event.hpp"

namespace payledger::api {

// What the route files (app, orders, reads, feeds, admin) share: answers, paging, and the
// request boundary's one mapping of failures to statuses.

[[nodiscard]] Response JsonResponse(http::status status, const nlohmann::json& body);
[[nodiscard]] Response MethodNotAllowed(const char* allowed);
[[nodiscard]] Response NotFound();  // No such endpoint (an unknown order is UnknownOrder).
[[nodiscard]] Response BadRequest(std::string message);    // 400 malformed.
[[nodiscard]] Response UnknownOrder(std::string message);  // 404 unknown_order (SPEC §5).

// A feed's cursor (after=): the non-negative decimal integer `text`, or nullopt.
[[nodiscard]] std::optional<std::int64_t> ParseCursor(std::string_view text);

// The paging parameters of a feed (SPEC §5): after [0] or before (not both), limit [100, at
// most 1000], and for receipts outcome (one that is stored). Unknown parameters are ignored.
inline constexpr std::int64_t kDefaultPageSize = 100;
struct PageQuery {
    std::int64_t after = 0;
    // Set: read the page just below this position instead, answered with prev_before.
    std::optional<std::int64_t> before{};
    std::int64_t limit = kDefaultPageSize;
    std::optional<projections::Outcome> outcome{};
};
// The query of `incoming`'s target, or the 400 that refuses it. `with_before`: the list can
// be read backwards (SPEC §5: the feeds); elsewhere a before= is refused, never ignored.
[[nodiscard]] std::variant<PageQuery, Response> ParsePageQuery(const Incoming& incoming,
                                                               bool with_outcome,
                                                               bool with_before = false);

// A page's body (SPEC §5): `items` under `key`, and the cursor of the next read. Read forwards,
// next_after: the last position, or `after` for an empty page. Read backwards (before=),
// prev_before: the first position, or `before` for an empty page. `positions` are the items'
// seq or id, in ascending order.
[[nodiscard]] nlohmann::json PageBody(const char* key, nlohmann::json items, const PageQuery& query,
                                      const std::vector<std::int64_t>& positions);

// STYLE §3 at the request boundary, the one place where a failure gets its status: a client
// error is a Refusal and answers its outcome's status (channels/channel.hpp StatusOf); here
// the rest. Retryable and in doubt: 503 unavailable (a platform retries; the unique key makes
// the retry exact); invariant broken: 500. The driver's text goes to the log, not the client.
[[nodiscard]] http::status StatusOf(ledger::FailureKind kind);
// Logs `failure`, counts an invariant broken in `metrics`, and builds its answer.
[[nodiscard]] Response FailureResponse(const ledger::Failure& failure, Metrics& metrics);

}  // namespace payledger::api
