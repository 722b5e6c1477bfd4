#include "ledger/integrity/rebuild.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ledger/pg/rows.hpp"
#include "ledger/read/order_json.hpp"
#include "ledger/read/projection_streams.hpp"
#include "ledger/read/reads.hpp"
#include "projections/assert.hpp"
#include "projections/plan.hpp"

namespace payledger::ledger {
namespace {

using nlohmann::json;
using projections::BalanceKey;
using projections::OrderRow;

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

// The swap replaces `orders` and `balances` with new tables, and rights belong to a table: the
// new ones must get the owner and the ACL of the old ones, or the service's role (which holds
// only the grants of `payledger migrate --grant`, ledger/pg/migrate.cpp) loses its rights on the
// projections. Whether this session can give them, checked before anything is built: it needs
// the owner's privileges (DROP), CREATE on the schema, the owner CREATE on it too when this
// session is another, non-superuser role (ALTER ... OWNER TO requires it), and membership in
// every other role that granted something there (its grants are re-made as that role).
constexpr const char* kRightsCheckSql = R"sql(
SELECT c.relname::text,
       pg_get_userbyid(c.relowner),
       pg_has_role(c.relowner, 'USAGE'),
       has_schema_privilege(c.relnamespace, 'CREATE'),
       c.relowner = me.oid OR me.rolsuper
           OR has_schema_privilege(c.relowner, c.relnamespace, 'CREATE'),
       (SELECT string_agg(DISTINCT pg_get_userbyid(a.grantor), ', ')
        FROM aclexplode(c.relacl) a
        WHERE a.grantor <> c.relowner AND NOT pg_has_role(a.grantor, 'MEMBER'))
FROM pg_class c, pg_roles me
WHERE c.oid IN ('orders'::regclass, 'balances'::regclass) AND me.rolname = current_user
ORDER BY c.relname DESC
)sql";

// The owner and ACL of the live projections, one row per ACL item (a grantee's privileges from
// one grantor; aclexplode lists an item's privileges together) in ACL order; a table with an
// empty ACL has one row of nulls. A null relacl stands for the owner's default, which is made
// explicit here.
constexpr const char* kRightsSql = R"sql(
SELECT c.relname::text, quote_ident(pg_get_userbyid(c.relowner)), c.relacl::text,
       CASE WHEN a.grantor <> c.relowner THEN quote_ident(pg_get_userbyid(a.grantor)) END,
       CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END,
       string_agg(a.privilege_type, ', ') FILTER (WHERE NOT a.is_grantable),
       string_agg(a.privilege_type, ', ') FILTER (WHERE a.is_grantable)
FROM pg_class c
LEFT JOIN LATERAL aclexplode(coalesce(c.relacl, acldefault('r', c.relowner)))
    WITH ORDINALITY AS a ON true
WHERE c.oid IN ('orders'::regclass, 'balances'::regclass)
GROUP BY c.relname, c.relowner, c.relacl, a.grantor, a.grantee
ORDER BY c.relname, min(a.ordinality)
)sql";

// Everyone the new tables grant something to (after the owner change), and whether each
// table's ACL already equals the old one's ($1, $2: the old relacl of orders, of balances, ''
// for null).
constexpr const char* kNewGranteesSql = R"sql(
SELECT c.relname::text,
       c.relacl::text IS NOT DISTINCT FROM
           NULLIF(CASE c.relname WHEN 'orders' THEN $1 ELSE $2 END, ''),
       CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END
FROM pg_class c
LEFT JOIN LATERAL aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) AS a ON true
WHERE c.oid IN ('orders'::regclass, 'balances'::regclass)
GROUP BY c.relname, c.relacl, a.grantee
)sql";

// The owner and the effective ACL of both projections, to compare before and after the swap.
constexpr const char* kRightsDigestSql = R"sql(
SELECT string_agg(c.relname || ' ' || pg_get_userbyid(c.relowner) || ' '
                  || coalesce(c.relacl, acldefault('r', c.relowner))::text, '; '
                  ORDER BY c.relname)
FROM pg_class c WHERE c.oid IN ('orders'::regclass, 'balances'::regclass)
)sql";

// The events of every order that has an event committed after `seq`, in key order.
const std::string kLateEventsSql =
    std::string("SELECT ") + kEventColumns +
    " FROM ledger_events WHERE out_trade_no IN "
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

// Refuses, before anything is built, a session that could not give the new tables the owner
// and the ACL of the live ones (see kRightsCheckSql).
void CheckCanKeepRights(pqxx::work& tx) {
    for (const pqxx::row& row : tx.exec(kRightsCheckSql)) {
        const std::string table = row[0].as<std::string>();
        const std::string owner = row[1].as<std::string>();
        const std::string why =
            !row[2].as<bool>()
                ? "this role may not act as " + owner + ", the owner of " + table +
                      " (run rebuild as the tables' owner, or a role that is a member of it)"
            : !row[3].as<bool>() ? "this role may not create tables in the schema of " + table
            : !row[4].as<bool>()
                ? owner + ", the owner of " + table +
                      ", may not create tables in its schema, so the new table cannot be "
                      "given to it (run rebuild as " +
                      owner + ")"
            : !row[5].is_null()
                ? "privileges on " + table + " were granted by " + row[5].as<std::string>() +
                      ", which this role is not a member of, so they cannot be granted again"
                : std::string();
        if (!why.empty()) {
            throw RebuildRefused("rebuild refused, nothing was changed: the new " + table +
                                 " table would not keep the privileges of the old one: " + why);
        }
    }
}

// The owner and ACL of one live projection, as statements that give them to its successor.
struct TableRights {
    std::string acl;    // pg_class.relacl as text; empty when null (the owner's default)
    std::string owner;  // quoted
    std::vector<std::string> grants;
};

std::map<std::string, TableRights> ReadRights(pqxx::work& tx) {
    std::map<std::string, TableRights> tables;
    for (const pqxx::row& row : tx.exec(kRightsSql)) {
        TableRights& rights = tables[row[0].as<std::string>()];
        rights.owner = row[1].as<std::string>();
        rights.acl = row[2].is_null() ? std::string() : row[2].as<std::string>();
        if (row[4].is_null()) continue;  // An empty ACL.
        const std::string table = tx.quote_name(row[0].as<std::string>());
        const std::string grantee = row[4].as<std::string>();
        std::string grant;
        if (!row[5].is_null()) {
            grant += "GRANT " + row[5].as<std::string>() + " ON " + table + " TO " + grantee + ";";
        }
        if (!row[6].is_null()) {
            grant += "GRANT " + row[6].as<std::string>() + " ON " + table + " TO " + grantee +
                     " WITH GRANT OPTION;";
        }
        // Made by the role that made it on the old table, so that the grantor is the same.
        if (!row[3].is_null()) {
            grant = "SET LOCAL ROLE " + row[3].as<std::string>() + ";" + grant + "RESET ROLE;";
        }
        rights.grants.push_back(std::move(grant));
    }
    PAYLEDGER_ASSERT(tables.size() == 2);
    return tables;
}

// Gives the new `orders` and `balances` the owner and the ACL `old` read from the old ones:
// the owner first, then, where the ACL differs, every privilege revoked and the old ACL's
// items granted again in their order.
void RestoreRights(pqxx::work& tx, const std::map<std::string, TableRights>& old) {
    std::string statements;
    for (const auto& [table, rights] : old) {
        statements += "ALTER TABLE " + tx.quote_name(table) + " OWNER TO " + rights.owner + ";";
    }
    tx.exec(statements);
    std::map<std::string, std::string> revokes;
    for (const pqxx::row& row :
         tx.exec_params(kNewGranteesSql, old.at("orders").acl, old.at("balances").acl)) {
        const std::string table = row[0].as<std::string>();
        if (row[1].as<bool>()) continue;  // Already the same ACL.
        std::string& revoke = revokes[table];
        if (!row[2].is_null()) {
            revoke += "REVOKE ALL ON " + tx.quote_name(table) + " FROM " +
                      row[2].as<std::string>() + " CASCADE;";
        }
    }
    statements.clear();
    for (const auto& [table, revoke] : revokes) {
        statements += revoke;
        for (const std::string& grant : old.at(table).grants) statements += grant;
    }
    if (!statements.empty()) tx.exec(statements);
}

// Phase 1. Returns the last seq of the snapshot the tables were built from.
std::int64_t Build(pqxx::connection& read_connection, pqxx::connection& write_connection,
                   const Progress& progress) {
    using ReadOnlySnapshot = pqxx::transaction<pqxx::repeatable_read, pqxx::read_only>;
    ReadOnlySnapshot read{read_connection};
    const std::int64_t snapshot_seq = ReadFeedHead(read);
    pqxx::work write{write_connection};
    CheckCanKeepRights(write);
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
    // The new tables take the old ones' owner and ACL in this transaction, so that no role,
    // the service's included, is ever without its rights on the projections.
    const std::string rights_before = tx.exec(kRightsDigestSql)[0][0].as<std::string>();
    const std::map<std::string, TableRights> rights = ReadRights(tx);
    tx.exec(kSwapSql);
    RestoreRights(tx, rights);
    const std::string rights_after = tx.exec(kRightsDigestSql)[0][0].as<std::string>();
    if (rights_after != rights_before) {
        throw std::runtime_error("rebuild: the new tables' privileges (" + rights_after +
                                 ") differ from the old ones' (" + rights_before +
                                 "); nothing was swapped");
    }
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
