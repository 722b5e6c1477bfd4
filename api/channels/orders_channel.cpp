#include "api/channels/orders_channel.hpp"

#include <nlohmann/json.hpp>

#include "api/channels/json_input.hpp"
#include "api/http/json_output.hpp"
#include "ledger/order_json.hpp"
#include "projections/assert.hpp"

namespace payledger::api {
namespace {

using projections::Outcome;

// The order a create-order body registers, or the first rule it breaks (in field order).
Checked<projections::Event> OrderEvent(const nlohmann::json& body,
                                       projections::TimeMicros received_at) {
    const Checked<std::string> out_trade_no =
        RequireKey(StringMember(body, "out_trade_no").value_or(""), "out_trade_no");
    if (!out_trade_no) return out_trade_no.refusal();
    const Checked<std::string> account_id =
        RequireKey(StringMember(body, "account_id").value_or(""), "account_id");
    if (!account_id) return account_id.refusal();
    const Checked<std::int64_t> amount = RequireJsonAmount(body, "amount");
    if (!amount) return amount.refusal();
    const Checked<std::string> currency =
        RequireCurrency(StringMember(body, "currency").value_or(""), "currency");
    if (!currency) return currency.refusal();
    return projections::Event{.out_trade_no = *out_trade_no,
                              .event_type = projections::EventType::kOrderCreated,
                              .source = projections::Source::kApi,
                              .account_id = *account_id,
                              .amount = *amount,
                              .currency = *currency,
                              .occurred_at = received_at};
}

}  // namespace

ledger::Delivery OrdersChannel::Verify(Incoming& incoming) const {
    // Information only: no header verifies this channel's deliveries.
    ledger::Receipt receipt =
        BaseReceipt(incoming, source(), {{"Content-Type"}, {"User-Agent"}}).receipt;
    // The route verified the bearer token before: an authenticated delivery, which the
    // per-peer limit of unverified deliveries never counts (docs/security.md#peers-and-limits).
    receipt.signature_verified = true;
    const std::optional<nlohmann::json> body = ParseJsonObject(receipt.body);
    if (!body) return Rejected(std::move(receipt), Malformed("body is not a JSON object"));
    ClaimOutTradeNo(receipt, StringMember(*body, "out_trade_no").value_or(""));
    Checked<projections::Event> event = OrderEvent(*body, incoming.received_at);
    if (!event) return Rejected(std::move(receipt), event.refusal());
    return Accepted(std::move(receipt), {.event = std::move(*event)});
}

Response OrdersChannel::Answer(const ledger::DeliveryResult& result) const {
    if (!IsSuccess(result)) return ErrorAnswer(result);
    PAYLEDGER_ASSERT(result.order.has_value());
    return MakeResponse(
        result.outcome == Outcome::kAppended ? http::status::created : http::status::ok,
        "application/json", Dump(ledger::OrderJson(*result.order)));
}

}  // namespace payledger::api
