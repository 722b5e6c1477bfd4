#include "api/routes/reconciliations.hpp"

#include <boost/url/parse.hpp>
#include <charconv>
#include <nlohmann/json.hpp>

#include "api/http/json_output.hpp"
#include "ledger/reads.hpp"
#include "ledger/reconcile/store.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::Outcome;

constexpr std::int64_t kDefaultPageSize = 100;

std::optional<std::int64_t> ParseNonNegative(std::string_view text) {
    if (text.empty() || text.size() > 18) return std::nullopt;
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || value < 0) return std::nullopt;
    return value;
}

Response Json(http::status status, const json& body) {
    return MakeResponse(status, "application/json", Dump(body));
}

Response BadRequest(const std::string& message) {
    return ErrorResponse(http::status::bad_request, Outcome::kMalformed, message);
}

json RunJson(const ledger::reconcile::ReconciliationRow& row) {
    return {{"id", row.id},
            {"platform", row.platform},
            {"date", row.date},
            {"bill_sha256", row.bill_sha256},
            {"ran_at", projections::FormatRfc3339(row.ran_at)},
            {"counts", json::parse(row.counts_json)},
            {"ok", row.ok}};
}

Response Page(pqxx::transaction_base& tx, const Incoming& incoming) {
    const boost::urls::url_view url =
        boost::urls::parse_origin_form(incoming.request.target()).value();
    std::int64_t after = 0;
    std::int64_t limit = kDefaultPageSize;
    for (const auto& param : url.params()) {
        if (param.key == "after") {
            const std::optional<std::int64_t> value = ParseNonNegative(param.value);
            if (!value) return BadRequest("after must be a non-negative integer");
            after = *value;
        } else if (param.key == "limit") {
            const std::optional<std::int64_t> value = ParseNonNegative(param.value);
            if (!value || *value < 1 || *value > ledger::kPageSizeMax) {
                return BadRequest("limit must be an integer from 1 to 1000");
            }
            limit = *value;
        }
    }
    json runs = json::array();
    std::int64_t next_after = after;
    for (const auto& row : ledger::reconcile::ReadReconciliationsAfter(tx, after, limit)) {
        runs.push_back(RunJson(row));
        next_after = row.id;
    }
    return Json(http::status::ok,
                {{"reconciliations", std::move(runs)}, {"next_after", next_after}});
}

Response One(pqxx::transaction_base& tx, const std::string& id_text) {
    const std::optional<std::int64_t> id = ParseNonNegative(id_text);
    if (!id) return BadRequest("a reconciliation id is a non-negative integer");
    const std::optional<ledger::reconcile::ReconciliationRow> row =
        ledger::reconcile::ReadReconciliation(tx, *id);
    if (!row) {
        return ErrorResponse(http::status::not_found, Outcome::kMalformed,
                             "no reconciliation " + id_text);
    }
    json body = RunJson(*row);
    body["differences"] = json::parse(row->differences_json);
    return Json(http::status::ok, body);
}

}  // namespace

Response HandleReconciliations(ledger::ReadRouter& reads, const Incoming& incoming,
                               const std::vector<std::string>& segments) {
    try {
        ledger::ConnectionPool::Lease connection = reads.Acquire();  // SPEC §13.
        pqxx::read_transaction tx{*connection};
        return segments.size() == 2 ? Page(tx, incoming) : One(tx, segments[2]);
    } catch (const ledger::PoolExhausted& error) {
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             error.what());
    } catch (const pqxx::failure& error) {
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             std::string("the database could not answer: ") + error.what());
    }
}

}  // namespace payledger::api
