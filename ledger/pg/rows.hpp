#pragma once

#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "projections/event.hpp"
#include "projections/order_fold.hpp"

namespace payledger::ledger {

// One row of callback_receipts (docs/events.md#invariants, 3).
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
    std::string chain{};  // Lower-case hex of the stored chain; set when read.
    // Lower-case hex SHA-256 of the body as stored; set when read (empty: that of `body`).
    std::string body_sha256{};
    // False for a duplicate kept without its body (beyond its event's 100th duplicate,
    // schema/0008): `body` is then empty, and body_sha256 names the bytes received.
    bool body_stored = true;
    // In memory only, never stored: the sender's signature (WeChat v2 refunds: the req_info
    // decryption) verified. What the per-peer limit of unverified deliveries reads
    // (docs/security.md#peers-and-limits).
    bool signature_verified = false;
};

// The select lists that the readers below expect, in this order.
inline constexpr const char* kEventColumns =
    "seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id, "
    "(extract(epoch FROM occurred_at) * 1000000)::bigint, "
    "(extract(epoch FROM recorded_at) * 1000000)::bigint, receipt_id, data::text";
// kReceiptColumns reads callback_receipts as `r`. A receipt's body is inline (written before
// schema/0008) or stored once in receipt_bodies under its SHA-256, and none for a duplicate
// kept without it: a scalar subquery, so it is one probe of receipt_bodies' key per row
// returned (after the LIMIT), never a join over the table.
inline constexpr const char* kReceiptColumns =
    "r.id, r.source, (extract(epoch FROM r.received_at) * 1000000)::bigint, r.peer, "
    "r.headers::text, coalesce(r.body, (SELECT b.body FROM receipt_bodies AS b "
    "WHERE b.body_sha256 = r.body_sha256 AND r.body_stored)), r.outcome, r.seq, "
    "r.out_trade_no, r.message, encode(r.chain, 'hex'), "
    "encode(coalesce(r.body_sha256, sha256(r.body)), 'hex'), r.body_stored";
// The size of a receipt's body (as kReceiptColumns reads it; 0 when kept without it), without
// reading the bytes: octet_length takes it from the value's header, even when compressed or
// out of line.
inline constexpr const char* kReceiptBodyBytes =
    "coalesce(octet_length(r.body), (SELECT octet_length(b.body) FROM receipt_bodies AS b "
    "WHERE b.body_sha256 = r.body_sha256 AND r.body_stored), 0)";
inline constexpr const char* kOrderColumns =
    "out_trade_no, account_id, amount, currency, status, transaction_id, paid_amount, "
    "refunded_amount, array_to_string(anomalies, ','), seq";

// `first` is the index of the first of kEventColumns in `row`.
[[nodiscard]] projections::Event EventFromRow(const pqxx::row& row, pqxx::row::size_type first = 0);
[[nodiscard]] Receipt ReceiptFromRow(const pqxx::row& row);
[[nodiscard]] projections::OrderRow OrderFromRow(const pqxx::row& row);

}  // namespace payledger::ledger
