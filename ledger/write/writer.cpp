#include "ledger/write/writer.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "ledger/base/bytes.hpp"
#include "ledger/integrity/chain.hpp"
#include "ledger/pg/binary_params.hpp"
#include "ledger/pg/database.hpp"  // kWriterLockKey.
#include "ledger/pg/statements.hpp"
#include "ledger/pg/storable_text.hpp"
#include "ledger/pg/transaction_block.hpp"
#include "ledger/write/writer_statements.hpp"
#include "projections/assert.hpp"
#include "projections/plan.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger {
namespace {

using projections::Event;
using projections::EventType;
using projections::OrderRow;
using projections::Outcome;

// A PostgreSQL array literal of keys. Keys are validated (projections::IsValidKey): no quote,
// backslash, comma, brace or space can occur, and the quotes make that certain twice.
std::string TextArray(const std::set<std::string>& keys) {
    std::string out = "{";
    for (const std::string& key : keys) {
        PAYLEDGER_ASSERT(projections::IsValidKey(key));
        if (out.size() > 1) out += ',';
        out += '"' + key + '"';
    }
    out += '}';
    return out;
}

std::optional<std::string> StorableOrNull(const std::optional<std::string>& text) {
    if (!text) return std::nullopt;
    return StorableText(*text);
}

// A PostgreSQL array literal of texts, an order's anomalies (their codes, but quoted and
// escaped whatever they hold).
std::string ArrayLiteral(const std::vector<std::string>& texts) {
    std::string out = "{";
    for (const std::string& text : texts) {
        if (out.size() > 1) out += ',';
        out += '"';
        for (const char c : text) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        out += '"';
    }
    out += '}';
    return out;
}

RenderedDelivery Render(const Delivery& delivery) {
    const Receipt& received = delivery.receipt;
    RenderedDelivery rendered;
    rendered.peer = StorableText(received.peer);
    rendered.headers = StorableText(JsonWithoutNul(received.headers));
    if (delivery.event) rendered.event_data = StorableText(JsonWithoutNul(delivery.event->data));
    rendered.body_digest = Sha256(received.body);
    rendered.body_sha256 = HexDigits(rendered.body_digest);
    return rendered;
}

}  // namespace

void RenderForWrite(Delivery& delivery) {
    if (!delivery.rendered) delivery.rendered = Render(delivery);
}

namespace {

// What PlanWrite decided: the plan, the write's parameters (WriteParams), the chain's head
// after the batch, and the bodies its receipts certainly stored (WriterCache::Remember).
struct PlannedWrite {
    projections::BatchPlan plan{};
    std::vector<std::string> params{};
    ChainValue head{};
    std::vector<Sha256Digest> stored_bodies{};
};

// What the plan reads of each delivery; it points into `deliveries`.
std::vector<projections::PlanInput> PlanInputs(std::span<const Delivery> deliveries) {
    std::vector<projections::PlanInput> inputs;
    inputs.reserve(deliveries.size());
    for (const Delivery& delivery : deliveries) {
        inputs.push_back({.outcome = delivery.outcome,
                          .event = delivery.event ? &*delivery.event : nullptr,
                          .claims = &delivery.claims,
                          .message = delivery.message});
    }
    return inputs;
}

// What the receipts of one batch share (AddReceipt).
struct ReceiptScratch {
    // The batch's distinct bodies, each sent once, by key (the write's rb: one statement must
    // not insert one key twice), and those receipt_bodies is known to hold, not sent at all.
    std::set<Sha256Digest> bodies_sent{};
    const WriterCache::Digests* bodies_stored = nullptr;
    // Each duplicate's rank among the batch's duplicates of its event (the write's rx).
    std::map<std::int64_t, std::int64_t> duplicates_of{};  // seq -> this batch's so far.
    std::string line{};                                    // NextChain's scratch.
};

// Adds the receipt of `delivery`, as `planned` (with its appended `event`, if any), to the
// write's receipts and bodies; returns the chain after it. Each receipt's chain is computed in
// id order, under the writer lock.
ChainValue AddReceipt(WriteParams& params, ReceiptScratch& scratch, const Delivery& delivery,
                      const RenderedDelivery& rendered, const projections::PlannedDelivery& planned,
                      const Event* event, const ChainValue& chain) {
    using enum WriteColumn;
    const Receipt& received = delivery.receipt;
    const std::optional<std::int64_t> seq = planned.ReceiptSeq();
    const ChainValue next = NextChain(
        chain,
        {.id = planned.receipt_id,
         .source = received.source,
         .received_at = received.received_at,
         .outcome = planned.outcome,
         .seq = seq,
         .out_trade_no = received.out_trade_no ? *received.out_trade_no : std::string_view{},
         .body_sha256_hex =
             std::string_view(rendered.body_sha256.data(), rendered.body_sha256.size())},
        event, scratch.line);
    params[kReceiptId].Int8(planned.receipt_id);
    params[kReceiptSource].Bytes(projections::ToString(received.source));
    params[kReceiptReceivedAt].TimeMicros(received.received_at);
    params[kReceiptPeer].Bytes(rendered.peer);
    params[kReceiptHeaders].Bytes(rendered.headers);
    const std::string_view digest = DigestBytes(rendered.body_digest);
    params[kReceiptBodySha256].Bytes(digest);
    if (scratch.bodies_stored->count(rendered.body_digest) == 0 &&
        scratch.bodies_sent.insert(rendered.body_digest).second) {
        params[kBodySha256].Bytes(digest);
        params[kBody].Bytes(received.body);
    }
    params[kReceiptOutcome].Bytes(projections::ToString(planned.outcome));
    params[kReceiptSeq].NullableInt8(seq);
    params[kReceiptRank].Int8(
        planned.outcome == Outcome::kDuplicate && seq ? ++scratch.duplicates_of[*seq] : 0);
    params[kReceiptOutTradeNo].NullableBytes(StorableOrNull(received.out_trade_no));
    params[kReceiptMessage].Bytes(StorableText(planned.message));
    params[kReceiptChain].Bytes(
        std::string_view(reinterpret_cast<const char*>(next.data()), next.size()));
    return next;
}

// Adds `event`, appended by `delivery`, to the write's events.
void AddEvent(WriteParams& params, const Event& event, const Delivery& delivery,
              const RenderedDelivery& rendered) {
    using enum WriteColumn;
    // The plan's event is the delivered one as decided: its data is the delivery's.
    PAYLEDGER_ASSERT(delivery.event && event.data == delivery.event->data);
    params[kEventSeq].Int8(event.seq);
    params[kEventOutTradeNo].Bytes(event.out_trade_no);  // Keys: validated (IsValidKey).
    params[kEventType].Bytes(projections::ToString(event.event_type));
    params[kEventSource].Bytes(projections::ToString(event.source));
    params[kEventAccountId].Bytes(event.account_id);
    if (event.event_type != EventType::kPaymentClosed) {
        params[kEventAmount].Int8(event.amount);
        params[kEventCurrency].Bytes(StorableText(event.currency));
    } else {
        params[kEventAmount].Null();
        params[kEventCurrency].Null();
    }
    params[kEventTransactionId].NullableBytes(StorableOrNull(event.transaction_id));
    params[kEventOccurredAt].TimeMicros(event.occurred_at);
    params[kEventReceiptId].Int8(event.receipt_id);
    params[kEventData].Bytes(rendered.event_data);
}

// How many rows of `orders` the write inserts and updates (the counts it checks).
struct OrderCounts {
    std::size_t inserted = 0;
    std::size_t updated = 0;
};

// Adds the plan's order rows to the write's new and updated orders.
OrderCounts AddOrders(WriteParams& params, const std::vector<projections::OrderWrite>& orders) {
    using enum WriteColumn;
    std::size_t inserted = 0;
    std::set<std::string> updated_keys;
    for (const projections::OrderWrite& write : orders) {
        const OrderRow& after = write.after;
        const std::optional<std::string> transaction_id = StorableOrNull(after.transaction_id);
        if (write.prev_seq) {
            params[kUpdatedOrderOutTradeNo].Bytes(after.out_trade_no);
            params[kUpdatedOrderStatus].Bytes(after.status);
            params[kUpdatedOrderTransactionId].NullableBytes(transaction_id);
            params[kUpdatedOrderPaidAmount].Int8(after.paid_amount);
            params[kUpdatedOrderRefundedAmount].Int8(after.refunded_amount);
            params[kUpdatedOrderAnomalies].Bytes(StorableText(ArrayLiteral(after.anomalies)));
            params[kUpdatedOrderSeq].Int8(after.seq);
            params[kUpdatedOrderPrevSeq].Int8(*write.prev_seq);
            params[kUpdatedOrderCreditsPayment].Bool(write.credits_payment);
            updated_keys.insert(after.out_trade_no);
        } else {
            params[kNewOrderOutTradeNo].Bytes(after.out_trade_no);
            params[kNewOrderAccountId].Bytes(after.account_id);
            params[kNewOrderAmount].Int8(after.amount);
            params[kNewOrderCurrency].Bytes(StorableText(after.currency));
            params[kNewOrderStatus].Bytes(after.status);
            params[kNewOrderTransactionId].NullableBytes(transaction_id);
            params[kNewOrderPaidAmount].Int8(after.paid_amount);
            params[kNewOrderRefundedAmount].Int8(after.refunded_amount);
            params[kNewOrderAnomalies].Bytes(StorableText(ArrayLiteral(after.anomalies)));
            params[kNewOrderSeq].Int8(after.seq);
            ++inserted;
        }
    }
    return {.inserted = inserted, .updated = updated_keys.size()};
}

// Plans `deliveries` against `state` (the stored events of every order they name, the next
// ids) and `chain` (the head before the batch), and renders the write's parameters, without the
// bodies in `bodies_stored` (receipt_bodies holds them). Pure.
PlannedWrite PlanWrite(std::span<const Delivery> deliveries, projections::LedgerState state,
                       ChainValue chain, const WriterCache::Digests& bodies_stored) {
    using enum WriteColumn;
    PlannedWrite planned_write{
        .plan = projections::PlanBatch(std::move(state), PlanInputs(deliveries))};
    const projections::BatchPlan& plan = planned_write.plan;
    WriteParams params;
    ReceiptScratch scratch{.bodies_stored = &bodies_stored};
    std::size_t appended = 0;
    for (std::size_t i = 0; i < deliveries.size(); ++i) {
        const Delivery& delivery = deliveries[i];
        std::optional<RenderedDelivery> rendered_here;
        const RenderedDelivery& rendered =
            delivery.rendered ? *delivery.rendered : rendered_here.emplace(Render(delivery));
        const projections::PlannedDelivery& planned = plan.deliveries[i];
        const Event* event = nullptr;
        if (planned.outcome == Outcome::kAppended) event = &plan.events.at(appended++);
        chain = AddReceipt(params, scratch, delivery, rendered, planned, event, chain);
        if (event != nullptr) AddEvent(params, *event, delivery, rendered);
        // Every receipt but a duplicate keeps its body (the write's rx).
        if (planned.outcome != Outcome::kDuplicate) {
            planned_write.stored_bodies.push_back(rendered.body_digest);
        }
    }
    PAYLEDGER_ASSERT(appended == plan.events.size());
    const OrderCounts orders = AddOrders(params, plan.orders);
    for (const auto& [key, delta] : plan.balance_deltas) {
        params[kBalanceAccountId].Bytes(key.first);
        params[kBalanceCurrency].Bytes(StorableText(key.second));
        params[kBalanceDelta].Int8(delta);
    }
    params.SetInt8(kLastReceiptId, plan.last_receipt_id);
    params.SetInt8(kLastSeq, plan.last_seq);
    // The statement checks its own row counts (payledger_expect_counts, schema/0005) and
    // fails before COMMIT when they differ.
    for (const std::size_t count : {deliveries.size(), plan.events.size(), orders.inserted,
                                    orders.updated, plan.balance_deltas.size()}) {
        params[kExpectedCounts].Int8(static_cast<std::int64_t>(count));
    }
    planned_write.params = params.Take();
    planned_write.head = chain;
    return planned_write;
}

std::vector<DeliveryResult> ResultsOf(projections::BatchPlan& plan) {
    std::vector<DeliveryResult> results;
    results.reserve(plan.deliveries.size());
    for (projections::PlannedDelivery& planned : plan.deliveries) {
        results.push_back({.outcome = planned.outcome,
                           .seq = planned.seq,
                           .message = std::move(planned.message),
                           .order = std::move(planned.order),
                           .registered_data = std::move(planned.registered_data),
                           .registered_at = planned.registered_at,
                           .receipt_id = planned.receipt_id});
    }
    return results;
}

// The keys of the batch's bodies, in order.
std::vector<Sha256Digest> BodyDigests(std::span<const Delivery> deliveries) {
    std::vector<Sha256Digest> digests;
    digests.reserve(deliveries.size());
    for (const Delivery& delivery : deliveries) {
        digests.push_back(delivery.rendered ? delivery.rendered->body_digest
                                            : Sha256(delivery.receipt.body));
    }
    return digests;
}

using Clock = std::chrono::steady_clock;

// What the batch is planned on, as read under the writer lock (LockAndRead).
struct StoredState {
    projections::LedgerState state{};
    ChainValue head = kChainStart;  // An empty ledger's.
    std::chrono::microseconds lock_wait{};
};

// The batch's first round trip: opens `block` with BEGIN, takes the writer lock and reads the
// next ids, the chain's head and the stored events of the orders `keys`.
StoredState LockAndRead(TransactionBlock& block, const std::set<std::string>& keys) {
    const pqxx::result rows = block.Open(ReadStateQuery(block.session().quote(TextArray(keys))));
    PAYLEDGER_ASSERT(!rows.empty());
    StoredState stored{.state = {.next_seq = rows[0][0].as<std::int64_t>(),
                                 .next_receipt_id = rows[0][1].as<std::int64_t>()},
                       .lock_wait = std::chrono::microseconds(rows[0][3].as<std::int64_t>())};
    if (!rows[0][2].is_null()) {
        const pqxx::binarystring head{rows[0][2]};
        PAYLEDGER_ASSERT(head.size() == stored.head.size());
        std::copy(head.begin(), head.end(), stored.head.begin());
    }
    for (const pqxx::row& row : rows) {
        if (row[kFirstEventColumn].is_null()) continue;  // The LEFT JOIN's row: no event.
        Event event = EventFromRow(row, kFirstEventColumn);
        stored.state.events[event.out_trade_no].push_back(std::move(event));
    }
    return stored;
}

// The batch's last round trip: the write, which checks its row counts, and COMMIT.
// Throws InvariantError when the write found the plan wrong (rolled back, as WriteBatch's
// contract says), and what TransactionBlock::CommitAfter throws otherwise.
void WriteAndCommit(TransactionBlock& block, std::vector<std::string> params) {
    try {
        block.CommitAfter(std::string(kWriteName), std::move(params));
    } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != kAssertFailure && e.sqlstate() != kUniqueViolation) throw;
        throw InvariantError(e.what());
    }
}

// The batch in one round trip, planned from `cache` (WriteBatch). Empty when the cache does not
// know every order named, or was found wrong (then the block was rolled back and the cache
// cleared): the caller reads the state instead.
std::optional<std::vector<DeliveryResult>> WriteFromCache(pqxx::connection& connection,
                                                          std::span<const Delivery> deliveries,
                                                          const std::set<std::string>& keys,
                                                          WriterCache& cache, BatchStats* stats) {
    ChainValue head{};
    std::optional<projections::LedgerState> state = cache.StateFor(keys, head);
    if (!state) return std::nullopt;
    const Clock::time_point started = Clock::now();
    // Known while the ledger is the cache's, which the write's first statement checks.
    PlannedWrite planned = PlanWrite(deliveries, *state, head,
                                     cache.StoredBodies(BodyDigests(deliveries), *state, head));
    std::vector<PipelineStatement> statements;
    statements.push_back({.sql = "BEGIN"});
    statements.push_back(
        {.name = std::string(kBeginName),
         .params = {BinaryInt8(kWriterLockKey), BinaryInt8(state->next_seq),
                    BinaryInt8(state->next_receipt_id),
                    std::string(reinterpret_cast<const char*>(head.data()), head.size())}});
    statements.push_back({.name = std::string(kWriteName), .params = std::move(planned.params)});
    const Clock::time_point write_begins = Clock::now();
    std::vector<std::optional<std::string>> firsts;
    {
        TransactionBlock block{connection};
        try {
            firsts = block.OpenAndCommit(statements);
        } catch (const pqxx::sql_error& e) {
            // Written since (the check), or an order's state other than the cache's (the write's
            // own checks): nothing was committed. Anything else is the read path's failure too.
            const std::string sqlstate = e.sqlstate();
            if (!connection.is_open() || (sqlstate != kLedgerMoved && sqlstate != kAssertFailure &&
                                          sqlstate != kUniqueViolation)) {
                throw;
            }
            cache.Clear();
            return std::nullopt;  // The block rolls back as it goes.
        }
    }
    // Committed: nothing from here on may fail the batch (the committer would write it again).
    if (stats != nullptr) {
        std::int64_t lock_wait = 0;
        if (firsts.size() == 3 && firsts[1]) {
            const std::string& text = *firsts[1];
            (void)std::from_chars(text.data(), text.data() + text.size(), lock_wait);
        }
        stats->state_read = false;
        stats->lock_wait = std::chrono::microseconds(lock_wait);
        stats->read = Clock::duration::zero();
        stats->plan = write_begins - started;
        stats->write = Clock::now() - write_begins;
    }
    RememberCommitted(cache, keys, *state, planned.plan, planned.head, planned.stored_bodies);
    return ResultsOf(planned.plan);
}

// The orders the batch names.
std::set<std::string> KeysOf(std::span<const Delivery> deliveries) {
    std::set<std::string> keys;
    for (const Delivery& delivery : deliveries) {
        PAYLEDGER_ASSERT((delivery.outcome == Outcome::kAppended) == delivery.event.has_value());
        if (delivery.event) keys.insert(delivery.event->out_trade_no);
    }
    return keys;
}

}  // namespace

std::size_t PrefetchState(pqxx::connection& connection, const std::vector<std::string>& keys,
                          WriterCache& cache) {
    const std::vector<std::string> unknown = cache.Unknown(keys);
    if (unknown.empty()) return 0;
    std::map<std::string, std::vector<Event>> events;
    for (const std::string& key : unknown) events[key];  // None found: an order with none.
    ChainValue head = kChainStart;
    {
        pqxx::nontransaction tx{connection};
        const pqxx::result rows =
            tx.exec_prepared(std::string(kPrefetchName),
                             TextArray(std::set<std::string>(unknown.begin(), unknown.end())));
        PAYLEDGER_ASSERT(!rows.empty());
        if (!rows[0][0].is_null()) {
            const pqxx::binarystring stored{rows[0][0]};
            PAYLEDGER_ASSERT(stored.size() == head.size());
            std::copy(stored.begin(), stored.end(), head.begin());
        }
        for (const pqxx::row& row : rows) {
            if (row[kFirstPrefetchEventColumn].is_null()) continue;  // No event at all.
            Event event = EventFromRow(row, kFirstPrefetchEventColumn);
            events.at(event.out_trade_no).push_back(std::move(event));
        }
    }
    return cache.Learn(head, std::move(events));
}

std::vector<DeliveryResult> WriteBatch(pqxx::connection& connection,
                                       std::span<const Delivery> deliveries, BatchStats* stats,
                                       WriterCache* cache) {
    PAYLEDGER_ASSERT(!deliveries.empty());
    const std::set<std::string> keys = KeysOf(deliveries);
    // The read runs by SQL EXECUTE, inside the first round trip's string, and the others by
    // libpq's own Bind (ExecPipelineThenCommit), so all must be on the server before (libpqxx
    // prepares a statement at its first exec_prepared otherwise); a no-op once done on this
    // connection.
    for (const Statement& statement : WriterStatements()) connection.prepare_now(statement.name);
    try {
        if (cache != nullptr) {
            if (std::optional<std::vector<DeliveryResult>> results =
                    WriteFromCache(connection, deliveries, keys, *cache, stats)) {
                return std::move(*results);
            }
        }
        const Clock::time_point started = Clock::now();
        TransactionBlock block{connection};
        StoredState stored = LockAndRead(block, keys);  // BEGIN, the lock, the read.
        const Clock::time_point read_done = Clock::now();
        if (cache != nullptr) cache->ForgetUnlessAt(stored.state, stored.head);
        // Bodies known stored when the ledger read under the lock is the one the cache knows.
        const WriterCache::Digests bodies_stored =
            cache != nullptr
                ? cache->StoredBodies(BodyDigests(deliveries), stored.state, stored.head)
                : WriterCache::Digests{};
        PlannedWrite planned =
            cache != nullptr  // The cache learns from the state after.
                ? PlanWrite(deliveries, stored.state, stored.head, bodies_stored)
                : PlanWrite(deliveries, std::move(stored.state), stored.head, bodies_stored);
        const Clock::time_point write_begins = Clock::now();
        WriteAndCommit(block, std::move(planned.params));  // The write and COMMIT.
        if (stats != nullptr) {
            *stats = {.state_read = true,
                      .lock_wait = stored.lock_wait,
                      .read = read_done - started,
                      .plan = write_begins - read_done,
                      .write = Clock::now() - write_begins};
        }
        if (cache != nullptr) {
            RememberCommitted(*cache, keys, stored.state, planned.plan, planned.head,
                              planned.stored_bodies);
        }
        return ResultsOf(planned.plan);  // The answers, only now that the batch is committed.
    } catch (...) {
        // Not committed, or perhaps committed: the cache may no longer be the ledger.
        if (cache != nullptr) cache->Clear();
        throw;
    }
}

}  // namespace payledger::ledger
