#include "api/routes/route_helpers.hpp"

#include <algorithm>
#include <boost/url/parse.hpp>
#include <cstdio>
#include <limits>
#include <string_view>
#include <utility>

#include "api/channels/channel.hpp"  // StatusOf.
#include "api/http/json_output.hpp"
#include "api/log.hpp"
#include "ledger/read/reads.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::api {

using nlohmann::json;
using projections::Outcome;

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

Response BadRequest(std::string message) {
    return ErrorResponse(http::status::bad_request, Outcome::kMalformed, message);
}

Response UnknownOrder(std::string message) {
    return ErrorResponse(http::status::not_found, Outcome::kUnknownOrder, message);
}

std::optional<std::int64_t> ParseCursor(std::string_view text) {
    return projections::ParseDigits(text, std::numeric_limits<std::int64_t>::max());
}

std::variant<PageQuery, Response> ParsePageQuery(const Incoming& incoming, bool with_outcome,
                                                 bool with_before) {
    const boost::urls::url_view url =
        boost::urls::parse_origin_form(incoming.request.target()).value();
    PageQuery query;
    bool after_given = false;
    for (const auto& param : url.params()) {
        if (param.key == "after") {
            const std::optional<std::int64_t> value = ParseCursor(param.value);
            if (!value) return BadRequest("after must be a non-negative integer");
            query.after = *value;
            after_given = true;
        } else if (param.key == "before") {
            if (!with_before) return BadRequest("this list is read forwards only (after=)");
            const std::optional<std::int64_t> value = ParseCursor(param.value);
            if (!value) return BadRequest("before must be a non-negative integer");
            query.before = *value;
        } else if (param.key == "limit") {
            const std::optional<std::int64_t> value = ParseCursor(param.value);
            if (!value || *value < 1 || *value > ledger::kPageSizeMax) {
                return BadRequest("limit must be an integer from 1 to 1000");
            }
            query.limit = *value;
        } else if (param.key == "outcome" && with_outcome) {
            query.outcome = projections::ParseOutcome(param.value);
            if (!query.outcome || *query.outcome == Outcome::kUnavailable ||
                *query.outcome == Outcome::kRateLimited) {
                return BadRequest("unknown outcome " + std::string(param.value));
            }
        }
    }
    if (after_given && query.before) {
        return BadRequest("give after or before, not both: one reads forwards, one backwards");
    }
    return query;
}

namespace {

// The cursor's name and value of a page read by `query` whose items are at `positions` (in
// reading order).
std::pair<const char*, std::int64_t> Cursor(const PageQuery& query,
                                            const std::vector<std::int64_t>& positions) {
    if (query.before) {  // Read backwards: the smallest position is the last one read.
        return {"prev_before", positions.empty() ? *query.before : positions.back()};
    }
    return {"next_after", positions.empty() ? query.after : positions.back()};
}

}  // namespace

PageBuilder::PageBuilder(const char* key, const PageQuery& query, std::size_t bytes_max)
    : key_(key), query_(query), bytes_max_(bytes_max) {
    // {"key":[],"prev_before":<at most 19 digits>}: the page without its items and commas.
    bytes_ = std::string_view(R"({"":[],"prev_before":})").size() + std::string_view(key).size() +
             std::numeric_limits<std::int64_t>::digits10 + 1;
}

bool PageBuilder::Add(const json& item, std::int64_t position) {
    PAYLEDGER_ASSERT(positions_.empty() ||
                     (query_.before ? position < positions_.back() : position > positions_.back()));
    std::string dumped = Dump(item);
    const std::size_t added = dumped.size() + (items_.empty() ? 0 : 1);  // And its comma.
    if (!items_.empty() && bytes_ + added > bytes_max_) return false;
    bytes_ += added;
    items_.push_back(std::move(dumped));
    positions_.push_back(position);
    return true;
}

Response PageBuilder::Finish() {
    const auto [cursor_name, cursor] = Cursor(query_, positions_);
    if (query_.before) std::reverse(items_.begin(), items_.end());
    std::string body;
    body.reserve(bytes_);
    body += "{\"";
    body += key_;
    body += "\":[";
    for (std::size_t i = 0; i < items_.size(); ++i) {
        if (i > 0) body += ',';
        body += items_[i];
    }
    body += "],\"";
    body += cursor_name;
    body += "\":";
    body += std::to_string(cursor);
    body += '}';
    PAYLEDGER_ASSERT(items_.size() <= 1 || body.size() <= bytes_max_);
    items_.clear();
    return MakeResponse(http::status::ok, "application/json", std::move(body));
}

std::string ReadFromValue(const ledger::ReadSource& source) {
    if (!source.replica) return "primary";
    char lag[32];
    std::snprintf(lag, sizeof lag, "%.3f", std::max(0.0, source.lag_seconds));
    return std::string("replica; lag=") + lag;
}

void SetReadFrom(Response& response, const ledger::ReadSource& source) {
    response.set(kReadFromHeader, ReadFromValue(source));
}

Response FailureResponse(const ledger::Failure& failure, Metrics& metrics) {
    const bool broken = failure.kind == ledger::FailureKind::kInvariantBroken;
    if (broken) metrics.CountInternalError();
    try {
        LogJson(broken ? "error" : "warning",
                Dump(json{{"msg", "request failed"}, {"error", failure.message}}));
    } catch (...) {
        // Logging must not stop the answer.
    }
    return ErrorResponse(StatusOf(failure.kind), Outcome::kUnavailable,
                         broken ? "internal error" : "the database could not answer; retry later");
}

}  // namespace payledger::api
