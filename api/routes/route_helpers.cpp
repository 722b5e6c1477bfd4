#include "api/routes/route_helpers.hpp"

#include <boost/url/parse.hpp>
#include <limits>

#include "api/http/json_output.hpp"
#include "api/log.hpp"
#include "ledger/reads.hpp"
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

json PageBody(const char* key, json items, const PageQuery& query,
              const std::vector<std::int64_t>& positions) {
    PAYLEDGER_ASSERT(items.size() == positions.size());
    if (query.before) {
        return {{key, std::move(items)},
                {"prev_before", positions.empty() ? *query.before : positions.front()}};
    }
    return {{key, std::move(items)},
            {"next_after", positions.empty() ? query.after : positions.back()}};
}

http::status StatusOf(ledger::FailureKind kind) {
    switch (kind) {
        case ledger::FailureKind::kRetryable:
        case ledger::FailureKind::kInDoubt:
            return http::status::service_unavailable;
        case ledger::FailureKind::kInvariantBroken:
            return http::status::internal_server_error;
    }
    PAYLEDGER_ASSERT(false);
    return http::status::internal_server_error;
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
