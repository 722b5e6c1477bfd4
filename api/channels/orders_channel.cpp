#include "api/channels/orders_channel.hpp"

#include <nlohmann/json.hpp>

#include "api/channels/json_input.hpp"
#include "api/http/json_output.hpp"
#include "api/query/platform_protocol.hpp"
#include "ledger/read/order_json.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

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
    nlohmann::json data = nlohmann::json::object();
    if (body.contains("channel")) {
        // The channels the platforms can be asked about (api/query/platform_protocol.hpp).
        const std::optional<QueryChannel> channel =
            ParseQueryChannel(StringMember(body, "channel").value_or(""));
        if (!channel) return Malformed("channel must be wechat_v2, wechat_v3 or alipay");
        const std::string name(ToString(*channel));
        if (*channel != QueryChannel::kAlipay && !IsWechatQueryableKey(*out_trade_no)) {
            return Malformed("out_trade_no must be at most 32 characters without '.' for " + name +
                             ": WeChat Pay cannot be asked about it");
        }
        data["channel"] = name;
    }
    if (body.contains("expires_at")) {
        const std::optional<std::string> text = StringMember(body, "expires_at");
        const std::optional<projections::TimeMicros> expires_at =
            text ? projections::ParseRfc3339(*text) : std::nullopt;
        if (!expires_at) return Malformed("expires_at must be an RFC 3339 date-time");
        data["expires_at"] = projections::FormatRfc3339(*expires_at);
    }
    return projections::Event{.out_trade_no = *out_trade_no,
                              .event_type = projections::EventType::kOrderCreated,
                              .source = projections::Source::kApi,
                              .account_id = *account_id,
                              .amount = *amount,
                              .currency = *currency,
                              .occurred_at = received_at,
                              .data = Dump(data)};
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
    const ledger::OrderRegistration registration = ledger::RegistrationOf(result.registered_data);
    // An appended order's schedule starts as the ledger's trigger starts it (schema/0011): no
    // query yet, the first due `first_after` after the registration, or at its expiry. A
    // duplicate's has moved on since, unknown here: GET /v1/orders/{out_trade_no} says.
    std::optional<ledger::QueryState> query;
    if (result.outcome == Outcome::kAppended && registration.channel &&
        queried_.contains(*registration.channel)) {
        projections::TimeMicros next =
            result.registered_at + std::chrono::microseconds(first_after_).count();
        if (registration.expires_at) next = std::min(next, *registration.expires_at);
        query = ledger::QueryState{.next_at = next};
    }
    return MakeResponse(
        result.outcome == Outcome::kAppended ? http::status::created : http::status::ok,
        "application/json", Dump(ledger::OrderObject(*result.order, registration, query)));
}

bool IsWechatQueryableKey(std::string_view out_trade_no) {
    return out_trade_no.size() <= 32 && out_trade_no.find('.') == std::string_view::npos;
}

}  // namespace payledger::api
