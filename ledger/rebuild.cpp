#include "ledger/rebuild.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "ledger/projection_streams.hpp"
#include "ledger/rows.hpp"
#include "projections/plan.hpp"

namespace payledger::ledger {
namespace {

using nlohmann::json;
using projections::BalanceKey;
using projections::OrderRow;

constexpr std::int64_t kProgressEveryEvents = 50'000;
// The swap waits at most this long for readers of the live tables to let go.
constexpr std::chrono::milliseconds kSwapLockTimeout{10'000};

constexpr const char* kCreateSql = R"sql(
DROP TABLE IF EXISTS orders_rebuild;
DROP TABLE IF EXISTS balances_rebuild;
CREATE TABLE orders_rebuild (LIKE orders INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
CREATE TABLE balances_rebuild (LIKE balances INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
)sql";

// Indexes are built after the bulk copy: faster than maintaining them row by row.
constexpr const char* kIndexSql = R"sql(
ALTER TABLE orders_rebuild ADD CONSTRAINT orders_rebuild_pkey PRIMARY KEY (out_trade_no);
CREATE INDEX orders_rebuild_account ON orders_rebuild (account_id);
ALTER TABLE balances_rebuild ADD CONSTRAINT balances_rebuild_pkey
    PRIMARY KEY (account_id, currency);
ANALYZE orders_rebuild;
ANALYZE balances_rebuild;
)sql";

constexpr const char* kSwapSql = R"sql(
DROP TABLE orders;
DROP TABLE balances;
ALTER TABLE orders_rebuild RENAME TO orders;
ALTER INDEX orders_rebuild_pkey RENAME TO orders_pkey;
ALTER INDEX orders_rebuild_account RENAME TO orders_account;
ALTER TABLE balances_rebuild RENAME TO balances;
ALTER INDEX balances_rebuild_pkey RENAME TO balances_pkey;
)sql";

// The events of every order that has an event committed after `seq`, in key order.
constexpr const char* kLateEventsSql =
    "SELECT seq, out_trade_no, event_type, source, account_id, amount, currency, "
    "transaction_id, (extract(epoch FROM occurred_at) * 1000000)::bigint, "
    "(extract(epoch FROM recorded_at) * 1000000)::bigint, receipt_id, data::text "
    "FROM ledger_events WHERE out_trade_no IN "
    "(SELECT out_trade_no FROM ledger_events WHERE seq > $1) ORDER BY out_trade_no, seq";

constexpr const char* kUpsertOrdersSql = R"sql(
INSERT INTO orders_rebuild (out_trade_no, account_id, amount, currency, status, transaction_id,
                            paid_amount, refunded_amount, anomalies, seq)
SELECT out_trade_no, account_id, amount, currency, status, transaction_id, paid_amount,
       refunded_amount, anomalies, seq
FROM json_to_recordset($1::json) AS x(out_trade_no text, account_id text, amount bigint,
     currency text, status text, transaction_id text, paid_amount bigint,
     refunded_amount bigint, anomalies text[], seq bigint)
ON CONFLICT (out_trade_no) DO UPDATE SET
    status = EXCLUDED.status, transaction_id = EXCLUDED.transaction_id,
    paid_amount = EXCLUDED.paid_amount, refunded_amount = EXCLUDED.refunded_amount,
    anomalies = EXCLUDED.anomalies, seq = EXCLUDED.seq
)sql";

constexpr const char* kUpsertBalancesSql = R"sql(
INSERT INTO balances_rebuild AS b (account_id, currency, balance)
SELECT account_id, currency, delta
FROM json_to_recordset($1::json) AS x(account_id text, currency text, delta bigint)
ON CONFLICT (account_id, currency) DO UPDATE SET balance = b.balance + EXCLUDED.balance
)sql";

// One order row for stream_to, in the column order of `orders`.
auto CopyRow(const OrderRow& order) {
    std::string anomalies = "{";
    for (std::size_t i = 0; i < order.anomalies.size(); ++i) {
        if (i != 0) anomalies += ',';
        anomalies += order.anomalies[i];
    }
    anomalies += '}';
    return std::make_tuple(order.out_trade_no, order.account_id, order.amount, order.currency,
                           order.status, order.transaction_id, order.paid_amount,
                           order.refunded_amount, anomalies, order.seq);
}

json OrderJson(const OrderRow& order) {
    return {{"out_trade_no", order.out_trade_no},
            {"account_id", order.account_id},
            {"amount", order.amount},
            {"currency", order.currency},
            {"status", order.status},
            {"transaction_id", order.transaction_id ? json(*order.transaction_id) : json(nullptr)},
            {"paid_amount", order.paid_amount},
            {"refunded_amount", order.refunded_amount},
            {"anomalies", order.anomalies},
            {"seq", order.seq}};
}

// Phase 1. Returns the last seq of the snapshot the tables were built from.
std::int64_t Build(pqxx::connection& read_connection, pqxx::connection& write_connection,
                   const Progress& progress) {
    using ReadOnlySnapshot = pqxx::transaction<pqxx::repeatable_read, pqxx::read_only>;
    ReadOnlySnapshot read{read_connection};
    const std::int64_t snapshot_seq =
        read.exec("SELECT coalesce(max(seq), 0) FROM ledger_events")[0][0].as<std::int64_t>();
    pqxx::work write{write_connection};
    write.exec(kCreateSql);
    projections::BalanceTotals balances;
    {
        FoldedOrderStream folded{read};
        pqxx::stream_to orders{write, "orders_rebuild"};
        std::int64_t next_report = kProgressEveryEvents;
        while (std::optional<OrderRow> order = folded.Next()) {
            orders << CopyRow(*order);
            balances.Add(*order);
            if (progress && folded.events_read() >= next_report) {
                progress(folded.events_read());
                next_report = folded.events_read() + kProgressEveryEvents;
            }
        }
        orders.complete();
        if (progress) progress(folded.events_read());
    }
    {
        pqxx::stream_to out{write, "balances_rebuild"};
        for (const auto& [key, balance] : balances.Sorted()) {
            out << std::make_tuple(key.first, key.second, balance);
        }
        out.complete();
    }
    write.exec(kIndexSql);
    write.commit();
    read.commit();
    return snapshot_seq;
}

// Phase 2: under the writer lock, folds the orders touched after the snapshot into the new
// tables, then swaps them in.
void Swap(pqxx::connection& connection, std::int64_t snapshot_seq) {
    pqxx::work tx{connection};
    tx.exec("SET LOCAL lock_timeout = " + std::to_string(kSwapLockTimeout.count()));
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", kWriterLockKey);
    std::map<std::string, std::vector<projections::Event>> late;
    for (const pqxx::row& row : tx.exec_params(kLateEventsSql, snapshot_seq)) {
        projections::Event event = EventFromRow(row);
        late[event.out_trade_no].push_back(std::move(event));
    }
    if (!late.empty()) {
        json keys = json::array();
        for (const auto& [key, events] : late) keys.push_back(key);
        std::map<std::string, OrderRow> before;
        for (const pqxx::row& row :
             tx.exec_params(std::string("SELECT ") + kOrderColumns +
                                " FROM orders_rebuild WHERE out_trade_no IN "
                                "(SELECT json_array_elements_text($1::json))",
                            keys.dump())) {
            OrderRow order = OrderFromRow(row);
            before.emplace(order.out_trade_no, std::move(order));
        }
        json orders = json::array();
        std::map<BalanceKey, std::int64_t> deltas;
        for (const auto& [key, events] : late) {
            const OrderRow after = projections::FoldOrder(events);
            const auto it = before.find(key);
            projections::AddBalanceChange(
                it != before.end() ? std::optional(it->second) : std::nullopt, after, deltas);
            orders.push_back(OrderJson(after));
        }
        json balances = json::array();
        for (const auto& [key, delta] : deltas) {
            balances.push_back(
                {{"account_id", key.first}, {"currency", key.second}, {"delta", delta}});
        }
        tx.exec_params(kUpsertOrdersSql, orders.dump());
        tx.exec_params(kUpsertBalancesSql, balances.dump());
    }
    tx.exec(kSwapSql);
    tx.commit();
}

}  // namespace

std::int64_t BuildRebuildTables(const std::string& url, const Progress& progress) {
    auto read_connection = Connect(url, LongRunningSession());
    auto write_connection = Connect(url, LongRunningSession());
    return Build(*read_connection, *write_connection, progress);
}

void SwapRebuildTables(const std::string& url, std::int64_t snapshot_seq) {
    auto connection = Connect(url, LongRunningSession());
    Swap(*connection, snapshot_seq);
}

VerifyReport Rebuild(const std::string& url, const Progress& progress) {
    SwapRebuildTables(url, BuildRebuildTables(url, progress));
    return Verify(url);
}

}  // namespace payledger::ledger
