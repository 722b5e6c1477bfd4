#pragma once

// Builders of ledger::Delivery for the tests that write through WriteBatch or the Committer:
// an order registration, a verified callback of any event type, and a refused delivery. Each
// takes its out_trade_no and a struct of the fields a test may change, every one defaulted,
// so a call names only what its test depends on:
//
//   OrderRegistration("ORD-1", {.amount = 1999})
//   VerifiedCallback("ORD-1", EventType::kPaymentSucceeded,
//                    {.amount = 1999, .transaction_id = "TX-1"})
//   Refusal("ORD-1", {.receipt = {.body = std::string("\x00\xff", 2)}})
//
// The receipt and the event of a delivery share one time (kDeliveryTime unless changed): the
// event occurs when its receipt is received, unless a test sets occurred_at apart.

#include <cstdint>
#include <optional>
#include <string>

#include "ledger/write/writer.hpp"
#include "projections/event.hpp"

namespace payledger::testing {

inline constexpr projections::TimeMicros kDeliveryTime = 1'700'000'000'000'000;

// The receipt's fields besides its source and out_trade_no.
struct ReceiptFields {
    projections::TimeMicros received_at = kDeliveryTime;
    std::string peer = "127.0.0.1:9";
    std::string headers = "{}";
    std::optional<std::string> body{};  // Unset: "body of <out_trade_no>".
};

// The receipt of `out_trade_no` from `source` (the delivery's bytes as the writer stores them).
[[nodiscard]] ledger::Receipt ReceiptOf(const std::string& out_trade_no, projections::Source source,
                                        ReceiptFields fields = {});

struct OrderFields {
    std::string account_id = "acct-1";
    std::int64_t amount = 100;
    std::string currency = "CNY";
    ReceiptFields receipt{};
};

// An order registered through the API: ORDER_CREATED, source api (receipt and event), occurring
// at the receipt's received_at.
[[nodiscard]] ledger::Delivery OrderRegistration(const std::string& out_trade_no,
                                                 OrderFields fields = {});

struct CallbackFields {
    projections::Source source = projections::Source::kGeneric;  // The receipt's and the event's.
    std::string account_id{};  // Empty: the writer copies the order's.
    std::int64_t amount = 0;
    // Unset: "" for PAYMENT_CLOSED (which carries no money), "CNY" for every other type.
    std::optional<std::string> currency{};
    std::optional<std::string> transaction_id{};
    std::optional<projections::TimeMicros> occurred_at{};  // Unset: the receipt's received_at.
    ReceiptFields receipt{};
};

// A callback whose signature verified (outcome appended: the writer decides the final one),
// carrying an event of `type`.
[[nodiscard]] ledger::Delivery VerifiedCallback(const std::string& out_trade_no,
                                                projections::EventType type,
                                                CallbackFields fields = {});

struct RefusalFields {
    projections::Source source = projections::Source::kGeneric;
    projections::Outcome outcome = projections::Outcome::kBadSignature;
    std::string message = "signature does not match";
    ReceiptFields receipt{};
};

// A delivery refused before the ledger (a bad signature unless changed): a receipt and no event.
[[nodiscard]] ledger::Delivery Refusal(const std::string& out_trade_no, RefusalFields fields = {});

}  // namespace payledger::testing
