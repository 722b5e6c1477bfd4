#include "api/routes/reconciliations.hpp"

#include <nlohmann/json.hpp>
#include <variant>

#include "api/http/json_output.hpp"
#include "api/routes/route_helpers.hpp"
#include "ledger/reads.hpp"
#include "ledger/reconcile/store.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

json RunJson(const ledger::reconcile::ReconciliationRow& row) {
    return {{"id", row.id},
            {"platform", row.platform},
            {"date", row.date},
            {"bill_sha256", row.bill_sha256},
            {"ran_at", projections::FormatRfc3339(row.ran_at)},
            {"counts", json::parse(row.counts_json)},
            {"ok", row.ok}};
}

Response Page(pqxx::transaction_base& tx, const PageQuery& query) {
    json runs = json::array();
    std::int64_t next_after = query.after;
    for (const auto& row :
         ledger::reconcile::ReadReconciliationsAfter(tx, query.after, query.limit)) {
        runs.push_back(RunJson(row));
        next_after = row.id;
    }
    return JsonResponse(http::status::ok,
                        {{"reconciliations", std::move(runs)}, {"next_after", next_after}});
}

Response One(pqxx::transaction_base& tx, std::int64_t id) {
    const std::optional<ledger::reconcile::ReconciliationRow> row =
        ledger::reconcile::ReadReconciliation(tx, id);
    if (!row) {
        return ErrorResponse(http::status::not_found, projections::Outcome::kMalformed,
                             "no reconciliation " + std::to_string(id));
    }
    json body = RunJson(*row);
    body["differences"] = json::parse(row->differences_json);
    return JsonResponse(http::status::ok, body);
}

}  // namespace

Response HandleReconciliations(ledger::ReadRouter& reads, const Incoming& incoming,
                               const std::vector<std::string>& segments) {
    // The request is checked before a connection is taken; the database's failures go to
    // App::Handle's one catch, which classifies them (route_helpers.hpp FailureResponse).
    if (segments.size() == 2) {
        std::variant<PageQuery, Response> query = ParsePageQuery(incoming, false);
        if (Response* refused = std::get_if<Response>(&query)) return std::move(*refused);
        ledger::ConnectionPool::Lease connection = reads.Acquire();  // SPEC §13.
        pqxx::read_transaction tx{*connection};
        return Page(tx, std::get<PageQuery>(query));
    }
    const std::optional<std::int64_t> id = ParseCursor(segments[2]);
    if (!id) return BadRequest("a reconciliation id is a non-negative integer");
    ledger::ConnectionPool::Lease connection = reads.Acquire();  // SPEC §13.
    pqxx::read_transaction tx{*connection};
    return One(tx, *id);
}

}  // namespace payledger::api
