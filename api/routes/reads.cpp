// GET /v1/orders/{out_trade_no}[/events|/receipts] and /v1/accounts/{account_id}/balances
// (docs/api.md#the-http-api). Database failures are not caught here: App::Handle classifies them
// once.
#include "ledger/read/reads.hpp"

#include <nlohmann/json.hpp>

#include "api/channels/refusal.hpp"
#include "api/http/json_output.hpp"
#include "api/routes/handlers.hpp"
#include "api/routes/route_helpers.hpp"
#include "ledger/read/order_json.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

Response Balances(pqxx::read_transaction& tx, const std::string& account_id) {
    const std::vector<projections::BalanceRow> balances = ledger::ReadBalances(tx, account_id);
    if (balances.empty()) return UnknownOrder("no order credits account " + account_id);
    json rows = json::array();
    for (const projections::BalanceRow& row : balances) {
        rows.push_back({{"currency", row.currency}, {"balance", row.balance}});
    }
    return JsonResponse(http::status::ok, {{"account_id", account_id}, {"balances", rows}});
}

// The read of `segments` for `key` in `tx`.
Response Read(pqxx::read_transaction& tx, const std::vector<std::string>& segments,
              const std::string& key, const PageQuery& page, const std::set<std::string>& queried) {
    if (segments[1] == "accounts") return Balances(tx, key);
    if (segments.size() == 3) {
        std::optional<ledger::OrderView> view = ledger::ReadOrderView(tx, key);
        if (!view) return UnknownOrder("no order " + key);
        const ledger::OrderRegistration registration =
            ledger::RegistrationOf(view->registered_data);
        // Not queried by this process's config: no schedule to show. Settled (paid, closed):
        // nothing more is due, whatever the row still says (docs/query.md#when).
        if (!registration.channel || !queried.contains(*registration.channel)) view->query.reset();
        if (view->query && view->order.status != "WAIT_PAY") view->query->next_at.reset();
        return JsonResponse(http::status::ok,
                            ledger::OrderObject(view->order, registration, view->query));
    }
    if (segments[3] == "events") {  // At most one per event type: never more than four.
        json items = json::array();
        for (const projections::Event& event : ledger::ReadOrderEvents(tx, key)) {
            items.push_back(EventJson(event));
        }
        if (items.empty() && !ledger::ReadOrder(tx, key)) return UnknownOrder("no order " + key);
        return JsonResponse(http::status::ok, {{"events", std::move(items)}});
    }
    // Paged like the feeds: unverified deliveries can name any order, so an order's
    // history is as long as strangers make it, and one page is the most that a response holds.
    const std::vector<ledger::Receipt> receipts =
        page.before ? ledger::ReadOrderReceiptsBefore(tx, key, *page.before, page.limit)
                    : ledger::ReadOrderReceipts(tx, key, page.after, page.limit);
    if (receipts.empty() && !ledger::ReadOrder(tx, key)) return UnknownOrder("no order " + key);
    return PageResponse("receipts", page, receipts, ReceiptJson,
                        [](const ledger::Receipt& receipt) { return receipt.id; });
}

}  // namespace

Response HandleRead(ledger::ReadRouter& reads, const std::set<std::string>& queried,
                    const Incoming& incoming, const std::vector<std::string>& segments) {
    // Of the reads, an order's receipts are paged like the feeds, forwards or backwards.
    const bool paged = segments.size() == 4 && segments[3] == "receipts";
    std::variant<PageQuery, Response> query = ParsePageQuery(incoming, false, paged);
    if (Response* refused = std::get_if<Response>(&query)) return std::move(*refused);
    const PageQuery page = std::get<PageQuery>(query);
    const Checked<std::string> checked = RequireKey(segments[2], "the key");
    if (!checked) return BadRequest(checked.refusal().message);

    ledger::ReadLease lease = reads.Acquire();  // The replica when it is fresh enough.
    Response response = [&] {
        pqxx::read_transaction tx{*lease.connection};
        return Read(tx, segments, *checked, page, queried);
    }();
    // A 404 says where it was served from too: a replica may not have the order yet.
    SetReadFrom(response, lease.source);
    return response;
}

}  // namespace payledger::api
