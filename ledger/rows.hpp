#pragma once

#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "projections/event.hpp"
#include "projections/order_fold.hpp"

namespace payledger::ledger {

// One row of callback_receipts (SPEC §3).
struct Receipt {
    std::int64_t id = 0;
    projections::Source source = projections::Source::kApi;
    projections::TimeMicros received_at = 0;
    std::string peer{};
    std::string headers = "{}";  // JSON object text of the headers that matter.
    std::string body{};          // The raw bytes, as received.
    projections::Outcome outcome = projections::Outcome::kMalformed;
    std::optional<std::int64_t> seq{};
    std::optional<std::string> out_trade_no{};
    std::string message{};
    std::string chain{};  // Lower-case hex of the stored chain (SPEC §11); set when read.
    // In memory only, never stored: the sender's signature (WeChat v2 refunds: the req_info
    // decryption) verified. What the per-peer limit of unverified deliveries reads (SPEC §5).
    bool signature_verified = false;
};

// The select lists that the readers below expect, in this order.
inline constexpr const char* kEventColumns =
    "seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id, "
    "(extract(epoch FROM occurred_at) * 1000000)::bigint, "
    "(extract(epoch FROM recorded_at) * 1000000)::bigint, receipt_id, data::text";
inline constexpr const char* kReceiptColumns =
    "id, source, (extract(epoch FROM received_at) * 1000000)::bigint, peer, headers::text, "
    "body, outcome, seq, out_trade_no, message, encode(chain, 'hex')";
inline constexpr const char* kOrderColumns =
    "out_trade_no, account_id, amount, currency, status, transaction_id, paid_amount, "
    "refunded_amount, array_to_string(anomalies, ','), seq";

// `first` is the index of the first of kEventColumns in `row`.
[[nodiscard]] projections::Event EventFromRow(const pqxx::row& row, pqxx::row::size_type first = 0);
[[nodiscard]] Receipt ReceiptFromRow(const pqxx::row& row);
[[nodiscard]] projections::OrderRow OrderFromRow(const pqxx::row& row);

}  // namespace payledger::ledger
