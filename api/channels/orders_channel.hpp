#pragma once

#include "api/channels/channel.hpp"

namespace payledger::api {

// `POST /v1/orders` (docs/design.md#the-http-api) as a channel like the callbacks: body
// {"out_trade_no","account_id","amount","currency"} (unknown fields ignored) → ORDER_CREATED;
// answered 201 with the order when appended, 200 with it for a duplicate, else the error
// body. The merchant's bearer token authenticates the delivery: the route checks it before
// Verify, and the token's account scope after (403, no receipt; docs/security.md#tenants).
// Immutable and safe to call from any thread.
class OrdersChannel final : public Channel {
public:
    [[nodiscard]] projections::Source source() const override { return projections::Source::kApi; }
    [[nodiscard]] ledger::Delivery Verify(Incoming& incoming) const override;
    [[nodiscard]] Response Answer(const ledger::DeliveryResult& result) const override;
};

}  // namespace payledger::api
