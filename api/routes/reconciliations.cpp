#include "api/routes/reconciliations.hpp"

#include <nlohmann/json.hpp>
#include <variant>

#include "api/http/json_output.hpp"
#include "api/routes/route_helpers.hpp"
#include "ledger/read/reads.hpp"
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

// A page of runs, forwards only, within kPageJsonBytesMax like the feeds' pages.
Response Page(pqxx::transaction_base& tx, const PageQuery& query) {
    return PageResponse("reconciliations", query,
                        ledger::reconcile::ReadReconciliationsAfter(tx, query.after, query.limit),
                        RunJson,
                        [](const ledger::reconcile::ReconciliationRow& row) { return row.id; });
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
        ledger::ReadLease lease = reads.Acquire();  // The replica when it is fresh enough.
        Response response = [&] {
            pqxx::read_transaction tx{*lease.connection};
            return Page(tx, std::get<PageQuery>(query));
        }();
        SetReadFrom(response, lease.source);
        return response;
    }
    const std::optional<std::int64_t> id = ParseCursor(segments[2]);
    if (!id) return BadRequest("a reconciliation id is a non-negative integer");
    ledger::ReadLease lease = reads.Acquire();  // The replica when it is fresh enough.
    Response response = [&] {
        pqxx::read_transaction tx{*lease.connection};
        return One(tx, *id);
    }();
    SetReadFrom(response, lease.source);
    return response;
}

}  // namespace payledger::api
