#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/pg/binary_params.hpp"  // BinaryArray, PgType.

namespace payledger::ledger {

// The writer's statements (WriteBatch, writer.cpp), prepared once per connection by Connect
// (WriterStatements, statements.hpp): the read under the writer lock, the cached path's
// opening, and the write, whose parameters are declared here once per column.

inline constexpr std::string_view kReadStateName = "writer_read_state";
inline constexpr std::string_view kWriteName = "writer_write";
// The cached path's opening (WriterCache, schema 0007): how the block's statements are
// planned, as the first round trip's SET LOCALs, the writer lock, and the check that nobody
// wrote since the cache's batch; answers the lock wait in microseconds. Parameters: the lock's
// key, the next seq, the next receipt id (bigint each) and the chain's head (bytea).
inline constexpr std::string_view kBeginName = "writer_begin";

// The prefetch (WriterCache::Learn, Committer): outside the writer lock, in one statement's
// snapshot, the chain's head and the stored events of the orders $1 (a text array). Its rows:
// the head (null on an empty ledger), then from kFirstPrefetchEventColumn an event's columns as
// EventFromRow reads them (null when the orders have none).
inline constexpr std::string_view kPrefetchName = "writer_prefetch";
inline constexpr int kFirstPrefetchEventColumn = 1;
// How a prefetch session plans, set once per connection (outside a transaction, so SET and not
// the block's SET LOCAL): as the writer's block does, a generic plan made once that never scans
// sequentially, without JIT. The session's own default (force_custom_plan, ledger/pg/database.cpp)
// planned the read again at every call: about 0.3 ms of PostgreSQL's time per read, thousands of
// reads a minute once the open orders outnumber the cache.
inline constexpr std::string_view kPrefetchSessionSql =
    "SET enable_seqscan = off; SET jit = off; SET plan_cache_mode = force_generic_plan";

// SQLSTATE of payledger_writer_begin's refusal: the ledger was written since the cache's batch.
inline constexpr std::string_view kLedgerMoved = "PLD01";
// SQLSTATE assert_failure: payledger_expect_counts found a row count other than the plan's.
inline constexpr std::string_view kAssertFailure = "P0004";
// SQLSTATE unique_violation: a row the plan believed new exists (the write inserts events,
// receipts and new orders without ON CONFLICT).
inline constexpr std::string_view kUniqueViolation = "23505";

// The batch's first round trip, one simple query string: BEGIN, how the block's statements are
// planned, the writer lock, and the read of the state for the orders `quoted_keys` (a quoted
// text array literal). Its rows: the next seq, the next receipt id, the chain's head (null on
// an empty ledger), the lock wait in microseconds, then from kFirstEventColumn an event's
// columns as EventFromRow reads them (null when the orders have none).
[[nodiscard]] std::string ReadStateQuery(std::string_view quoted_keys);
inline constexpr int kFirstEventColumn = 4;

// Which part of the write a parameter belongs to: each part but the statement's own is one
// `unnest(...) AS alias(column, ...)` of arrays, a row per element.
enum class WritePart : std::uint8_t {
    kReceipts,
    kBodies,  // The batch's distinct receipt bodies, by key.
    kEvents,
    kNewOrders,
    kUpdatedOrders,
    kBalances,
    kStatement,  // The sequences' values after the batch, and the counts the write checks.
};

// The write's parameters, in kWriteColumns' order.
enum class WriteColumn : std::uint8_t {
    kReceiptId,
    kReceiptSource,
    kReceiptReceivedAt,
    kReceiptPeer,
    kReceiptHeaders,
    kReceiptBodySha256,
    kReceiptOutcome,
    kReceiptSeq,
    kReceiptOutTradeNo,
    kReceiptMessage,
    kReceiptChain,
    kEventSeq,
    kEventOutTradeNo,
    kEventType,
    kEventSource,
    kEventAccountId,
    kEventAmount,
    kEventCurrency,
    kEventTransactionId,
    kEventOccurredAt,
    kEventReceiptId,
    kEventData,
    kNewOrderOutTradeNo,
    kNewOrderAccountId,
    kNewOrderAmount,
    kNewOrderCurrency,
    kNewOrderStatus,
    kNewOrderTransactionId,
    kNewOrderPaidAmount,
    kNewOrderRefundedAmount,
    kNewOrderAnomalies,
    kNewOrderSeq,
    kUpdatedOrderOutTradeNo,
    kUpdatedOrderStatus,
    kUpdatedOrderTransactionId,
    kUpdatedOrderPaidAmount,
    kUpdatedOrderRefundedAmount,
    kUpdatedOrderAnomalies,
    kUpdatedOrderSeq,
    kUpdatedOrderPrevSeq,
    kUpdatedOrderCreditsPayment,
    kBalanceAccountId,
    kBalanceCurrency,
    kBalanceDelta,
    kLastReceiptId,
    kLastSeq,
    kExpectedCounts,
    kBodySha256,
    kBody,
    kReceiptRank,
};

// One parameter of the write: its part, its name there (the unnest's alias column), and the
// type of its values; an array of them unless `array` is false (a scalar of the statement).
struct WriteColumnSpec {
    WriteColumn column = WriteColumn::kReceiptId;
    WritePart part = WritePart::kReceipts;
    std::string_view name{};
    PgType type = PgType::kInt8;
    bool array = true;
};

// Every parameter of the write, once: the statement's $1..$N in this order, and each part's
// unnest lists its columns in this order. The rank of a duplicate came last, after the bodies,
// and stays $50 so that the statement's text is unchanged.
inline constexpr std::array kWriteColumns = std::to_array<WriteColumnSpec>({
    {WriteColumn::kReceiptId, WritePart::kReceipts, "id", PgType::kInt8},
    {WriteColumn::kReceiptSource, WritePart::kReceipts, "source", PgType::kText},
    {WriteColumn::kReceiptReceivedAt, WritePart::kReceipts, "received_at", PgType::kTimestamptz},
    {WriteColumn::kReceiptPeer, WritePart::kReceipts, "peer", PgType::kText},
    {WriteColumn::kReceiptHeaders, WritePart::kReceipts, "headers", PgType::kText},
    {WriteColumn::kReceiptBodySha256, WritePart::kReceipts, "body_sha256", PgType::kBytea},
    {WriteColumn::kReceiptOutcome, WritePart::kReceipts, "outcome", PgType::kText},
    {WriteColumn::kReceiptSeq, WritePart::kReceipts, "seq", PgType::kInt8},
    {WriteColumn::kReceiptOutTradeNo, WritePart::kReceipts, "out_trade_no", PgType::kText},
    {WriteColumn::kReceiptMessage, WritePart::kReceipts, "message", PgType::kText},
    {WriteColumn::kReceiptChain, WritePart::kReceipts, "chain", PgType::kBytea},
    {WriteColumn::kEventSeq, WritePart::kEvents, "seq", PgType::kInt8},
    {WriteColumn::kEventOutTradeNo, WritePart::kEvents, "out_trade_no", PgType::kText},
    {WriteColumn::kEventType, WritePart::kEvents, "event_type", PgType::kText},
    {WriteColumn::kEventSource, WritePart::kEvents, "source", PgType::kText},
    {WriteColumn::kEventAccountId, WritePart::kEvents, "account_id", PgType::kText},
    {WriteColumn::kEventAmount, WritePart::kEvents, "amount", PgType::kInt8},
    {WriteColumn::kEventCurrency, WritePart::kEvents, "currency", PgType::kText},
    {WriteColumn::kEventTransactionId, WritePart::kEvents, "transaction_id", PgType::kText},
    {WriteColumn::kEventOccurredAt, WritePart::kEvents, "occurred_at", PgType::kTimestamptz},
    {WriteColumn::kEventReceiptId, WritePart::kEvents, "receipt_id", PgType::kInt8},
    {WriteColumn::kEventData, WritePart::kEvents, "data", PgType::kText},
    {WriteColumn::kNewOrderOutTradeNo, WritePart::kNewOrders, "out_trade_no", PgType::kText},
    {WriteColumn::kNewOrderAccountId, WritePart::kNewOrders, "account_id", PgType::kText},
    {WriteColumn::kNewOrderAmount, WritePart::kNewOrders, "amount", PgType::kInt8},
    {WriteColumn::kNewOrderCurrency, WritePart::kNewOrders, "currency", PgType::kText},
    {WriteColumn::kNewOrderStatus, WritePart::kNewOrders, "status", PgType::kText},
    {WriteColumn::kNewOrderTransactionId, WritePart::kNewOrders, "transaction_id", PgType::kText},
    {WriteColumn::kNewOrderPaidAmount, WritePart::kNewOrders, "paid_amount", PgType::kInt8},
    {WriteColumn::kNewOrderRefundedAmount, WritePart::kNewOrders, "refunded_amount", PgType::kInt8},
    // An order's anomalies: a text array literal each, cast to text[] by the statement.
    {WriteColumn::kNewOrderAnomalies, WritePart::kNewOrders, "anomalies", PgType::kText},
    {WriteColumn::kNewOrderSeq, WritePart::kNewOrders, "seq", PgType::kInt8},
    {WriteColumn::kUpdatedOrderOutTradeNo, WritePart::kUpdatedOrders, "out_trade_no",
     PgType::kText},
    {WriteColumn::kUpdatedOrderStatus, WritePart::kUpdatedOrders, "status", PgType::kText},
    {WriteColumn::kUpdatedOrderTransactionId, WritePart::kUpdatedOrders, "transaction_id",
     PgType::kText},
    {WriteColumn::kUpdatedOrderPaidAmount, WritePart::kUpdatedOrders, "paid_amount", PgType::kInt8},
    {WriteColumn::kUpdatedOrderRefundedAmount, WritePart::kUpdatedOrders, "refunded_amount",
     PgType::kInt8},
    {WriteColumn::kUpdatedOrderAnomalies, WritePart::kUpdatedOrders, "anomalies", PgType::kText},
    {WriteColumn::kUpdatedOrderSeq, WritePart::kUpdatedOrders, "seq", PgType::kInt8},
    {WriteColumn::kUpdatedOrderPrevSeq, WritePart::kUpdatedOrders, "prev_seq", PgType::kInt8},
    {WriteColumn::kUpdatedOrderCreditsPayment, WritePart::kUpdatedOrders, "credits_payment",
     PgType::kBool},
    {WriteColumn::kBalanceAccountId, WritePart::kBalances, "account_id", PgType::kText},
    {WriteColumn::kBalanceCurrency, WritePart::kBalances, "currency", PgType::kText},
    {WriteColumn::kBalanceDelta, WritePart::kBalances, "delta", PgType::kInt8},
    {WriteColumn::kLastReceiptId, WritePart::kStatement, "last_receipt_id", PgType::kInt8, false},
    {WriteColumn::kLastSeq, WritePart::kStatement, "last_seq", PgType::kInt8, false},
    // Rows of receipts, events, new orders, updated orders and balances, in that order.
    {WriteColumn::kExpectedCounts, WritePart::kStatement, "expected_counts", PgType::kInt8},
    {WriteColumn::kBodySha256, WritePart::kBodies, "body_sha256", PgType::kBytea},
    {WriteColumn::kBody, WritePart::kBodies, "body", PgType::kBytea},
    // Each duplicate's rank among the batch's duplicates of its event, 0 for other receipts.
    {WriteColumn::kReceiptRank, WritePart::kReceipts, "rank", PgType::kInt8},
});
inline constexpr std::size_t kWriteColumnCount = kWriteColumns.size();

[[nodiscard]] constexpr std::size_t IndexOf(WriteColumn column) {
    return static_cast<std::size_t>(column);
}

// Each row is its enumerator's: WriteParams indexes its builders by the enumerator, and sends
// them in the table's order.
[[nodiscard]] constexpr bool WriteColumnsInEnumOrder() {
    for (std::size_t i = 0; i < kWriteColumnCount; ++i) {
        if (IndexOf(kWriteColumns[i].column) != i) return false;
    }
    return IndexOf(WriteColumn::kReceiptRank) + 1 == kWriteColumnCount;  // The last enumerator.
}
static_assert(WriteColumnsInEnumOrder());

// The write's parameters as the plan fills them: a binary array per array column and a value
// per scalar one, taken once. Not thread-safe; one per batch.
class WriteParams {
public:
    WriteParams();

    // REQUIRES: an array column.
    [[nodiscard]] BinaryArray& operator[](WriteColumn column) { return columns_[IndexOf(column)]; }
    // REQUIRES: a scalar bigint column.
    void SetInt8(WriteColumn column, std::int64_t value);
    // The parameters, $1..$N, for the prepared write (kWriteName). Once: the builder is spent.
    // REQUIRES: every scalar set, and nothing appended to a scalar column's array.
    [[nodiscard]] std::vector<std::string> Take();

private:
    std::array<BinaryArray, kWriteColumnCount> columns_;
    std::vector<std::string> params_;  // The scalars' until Take().
};

// The write statement's text, rendered from its template and kWriteColumns (for tests: it is
// the statement WriterStatements() names kWriteName).
[[nodiscard]] const std::string& WriteSql();

}  // namespace payledger::ledger
