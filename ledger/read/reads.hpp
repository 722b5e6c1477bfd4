#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "ledger/pg/rows.hpp"
#include "ledger/read/order_json.hpp"
#include "projections/event.hpp"
#include "projections/order_fold.hpp"

namespace payledger::ledger {

// Readers for auditors. None takes the writer lock (docs/write-path.md#the-writer-lock); each runs
// in the caller's transaction. Because every writer holds that lock until it commits, ids are
// visible in order, and a reader that pages by `seq > after` (or `id > after`) never skips a row.

inline constexpr std::int64_t kPageSizeMax = 1000;
// The receipt pages below hold at most this many bytes of bodies (at least one receipt, whose
// body is at most 64 KiB): a page ends early, before the receipt that would take it past, and
// the caller's cursor goes on from the last receipt returned. A page of 1000 receipts of
// 64 KiB each would otherwise be 64 MiB in memory, twice (the driver's result and the copies).
inline constexpr std::int64_t kPageBodyBytesMax = 8 * 1024 * 1024;

// An order as the API shows it (docs/query.md): its row, what its registration said (its
// ORDER_CREATED's data) and where asking its platform stands (order_queries; none when it was
// registered without a channel). One read, one snapshot.
struct OrderView {
    projections::OrderRow order{};
    std::string registered_data = "{}";
    std::optional<QueryState> query{};
};
[[nodiscard]] std::optional<OrderView> ReadOrderView(pqxx::transaction_base& tx,
                                                     const std::string& out_trade_no);
[[nodiscard]] std::optional<projections::OrderRow> ReadOrder(pqxx::transaction_base& tx,
                                                             const std::string& out_trade_no);
[[nodiscard]] std::vector<projections::Event> ReadOrderEvents(pqxx::transaction_base& tx,
                                                              const std::string& out_trade_no);
[[nodiscard]] std::vector<Receipt> ReadOrderReceipts(
    pqxx::transaction_base& tx, const std::string& out_trade_no, std::int64_t after,
    std::int64_t limit, std::int64_t body_bytes_max = kPageBodyBytesMax);
// Every balance row of the account, by currency; empty when the account has no order.
[[nodiscard]] std::vector<projections::BalanceRow> ReadBalances(pqxx::transaction_base& tx,
                                                                const std::string& account_id);

// The newest seq committed (0 for an empty ledger): the feed's head.
[[nodiscard]] std::int64_t ReadFeedHead(pqxx::transaction_base& tx);
// At most `limit` events with seq > after, in seq order. REQUIRES: 0 < limit <= kPageSizeMax.
[[nodiscard]] std::vector<projections::Event> ReadEventsAfter(pqxx::transaction_base& tx,
                                                              std::int64_t after,
                                                              std::int64_t limit);
// At most `limit` receipts with id > after, in id order, optionally of one outcome; fewer
// when their bodies reach `body_bytes_max` (kPageBodyBytesMax).
[[nodiscard]] std::vector<Receipt> ReadReceiptsAfter(
    pqxx::transaction_base& tx, std::int64_t after, std::int64_t limit,
    std::optional<projections::Outcome> outcome, std::int64_t body_bytes_max = kPageBodyBytesMax);

// before= (docs/api.md#feeds-and-paging): the at most `limit` positions just below `before` (of
// one order; of all; of all, optionally of one outcome), in ascending order. An event or receipt
// that commits later has a larger position (the writer lock), so a page read backwards is complete
// once read.
// REQUIRES: 0 < limit <= kPageSizeMax.
[[nodiscard]] std::vector<Receipt> ReadOrderReceiptsBefore(
    pqxx::transaction_base& tx, const std::string& out_trade_no, std::int64_t before,
    std::int64_t limit, std::int64_t body_bytes_max = kPageBodyBytesMax);
[[nodiscard]] std::vector<projections::Event> ReadEventsBefore(pqxx::transaction_base& tx,
                                                               std::int64_t before,
                                                               std::int64_t limit);
[[nodiscard]] std::vector<Receipt> ReadReceiptsBefore(
    pqxx::transaction_base& tx, std::int64_t before, std::int64_t limit,
    std::optional<projections::Outcome> outcome, std::int64_t body_bytes_max = kPageBodyBytesMax);

// Calls `each` for every event with seq > after (of one order when `out_trade_no` is set),
// in seq order, reading a page at a time so memory stays constant. Stops early when `each`
// returns false.
void ForEachEvent(pqxx::transaction_base& tx, std::int64_t after,
                  const std::optional<std::string>& out_trade_no,
                  const std::function<bool(const projections::Event&)>& each);

}  // namespace payledger::ledger
