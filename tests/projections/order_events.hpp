#pragma once

// The events the projections tests decide, fold and plan (decide_test.cpp, order_fold_test.cpp,
// plan_check.hpp for plan_test.cpp and tests/fuzz/fuzz_plan.cpp), built one way: one builder per
// event type for an order given by its facts (OrderSpec; unset, ORD-1 of acct-1 for 1999 CNY).
// Each event is as its channel hands it over: seq 0, and no account_id but ORDER_CREATED's (the
// ledger copies the order's into the others: AsStored). Each type comes from a source and at a
// time of its own (api, wechat_v3, alipay, generic; occurred_at 1, 2, 3, 4 s), so a test that
// mixes two up fails.

#include <cstdint>
#include <optional>
#include <string>

#include "projections/event.hpp"

namespace payledger::testing {

inline constexpr std::int64_t kOrderAmount = 1999;
// A refund's amount unless a test names one.
inline constexpr std::int64_t kRefundAmount = 500;

struct OrderSpec {
    std::string key = "ORD-1";
    std::string account = "acct-1";
    std::string currency = "CNY";
    std::int64_t amount = kOrderAmount;
};

inline projections::Event Created(const OrderSpec& order = {}) {
    return {.out_trade_no = order.key,
            .event_type = projections::EventType::kOrderCreated,
            .source = projections::Source::kApi,
            .account_id = order.account,
            .amount = order.amount,
            .currency = order.currency,
            .occurred_at = 1'000'000};
}

// `amount` unset: the order's.
inline projections::Event Payment(const OrderSpec& order = {},
                                  const std::string& transaction_id = "4200000001",
                                  std::optional<std::int64_t> amount = std::nullopt) {
    return {.out_trade_no = order.key,
            .event_type = projections::EventType::kPaymentSucceeded,
            .source = projections::Source::kWechatV3,
            .amount = amount.value_or(order.amount),
            .currency = order.currency,
            .transaction_id = transaction_id,
            .occurred_at = 2'000'000};
}

inline projections::Event Close(const OrderSpec& order = {}) {
    return {.out_trade_no = order.key,
            .event_type = projections::EventType::kPaymentClosed,
            .source = projections::Source::kAlipay,
            .occurred_at = 3'000'000};
}

inline projections::Event Refund(const OrderSpec& order = {},
                                 const std::string& refund_id = "50300001",
                                 std::int64_t amount = kRefundAmount) {
    return {.out_trade_no = order.key,
            .event_type = projections::EventType::kRefundSucceeded,
            .source = projections::Source::kGeneric,
            .amount = amount,
            .currency = order.currency,
            .transaction_id = refund_id,
            .occurred_at = 4'000'000};
}

// `event` as the ledger holds it: at `seq`, with its order's account.
inline projections::Event AsStored(projections::Event event, std::int64_t seq,
                                   const OrderSpec& order = {}) {
    event.seq = seq;
    event.account_id = order.account;
    return event;
}

}  // namespace payledger::testing
