#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>

#include "api/channels/channel.hpp"

namespace payledger::api {

// `POST /v1/orders` (docs/api.md#the-http-api) as a channel like the callbacks: body
// {"out_trade_no","account_id","amount","currency"} and optionally "channel" (wechat_v2,
// wechat_v3 or alipay: where the order will be paid, so that payledger can ask that platform
// about it) and "expires_at" (RFC 3339: when it is closed if still unpaid), kept in the event's
// data and not part of its fingerprint (docs/query.md); unknown fields ignored → ORDER_CREATED.
// A WeChat channel takes only order numbers WeChat can be asked about: at most 32 characters,
// no `.`. Answered 201 with the order when appended, 200 with it for a duplicate (its channel
// and expiry as first registered), else the error body. The merchant's bearer token
// authenticates the delivery: the route checks it before Verify, and the token's account scope
// after (403, no receipt; docs/security.md#tenants). Immutable and safe to call from any thread.
class OrdersChannel final : public Channel {
public:
    // `queried`: the channels this process asks (their sections have `query`), and the first
    // query's delay: an appended order's answer shows its schedule's start.
    OrdersChannel(std::set<std::string> queried = {},
                  std::chrono::seconds first_after = std::chrono::seconds{60})
        : queried_(std::move(queried)), first_after_(first_after) {}

    [[nodiscard]] projections::Source source() const override { return projections::Source::kApi; }
    [[nodiscard]] ledger::Delivery Verify(Incoming& incoming) const override;
    [[nodiscard]] Response Answer(const ledger::DeliveryResult& result) const override;
    [[nodiscard]] const std::set<std::string>& queried() const { return queried_; }

private:
    std::set<std::string> queried_;
    std::chrono::seconds first_after_;
};

// WeChat's rule for the order numbers it can be asked about (docs/query.md): at most 32
// characters, none of them `.`.
[[nodiscard]] bool IsWechatQueryableKey(std::string_view out_trade_no);

}  // namespace payledger::api
