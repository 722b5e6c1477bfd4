#include "ledger/write/writer_statements.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ledger/pg/database.hpp"  // kWriterLockKey.
#include "ledger/pg/rows.hpp"      // kEventColumns.
#include "ledger/pg/statements.hpp"
#include "projections/assert.hpp"
#include "projections/event.hpp"

namespace payledger::ledger {
namespace {

// The stored events (kEventColumns) of the orders named in $1, at most one per type each.
std::string EventsOfTheKeys() {
    return std::string(R"sql(LEFT JOIN LATERAL (
    SELECT e.*
    FROM unnest($1::text[]) AS k(out_trade_no)
    CROSS JOIN LATERAL (
        SELECT )sql") +
           kEventColumns + R"sql(
        FROM ledger_events
        WHERE out_trade_no = k.out_trade_no
        ORDER BY event_type
        LIMIT )sql" +
           std::to_string(projections::kEventsPerOrderMax) + R"sql(
    ) AS e
) AS e ON true)sql";
}

// Reads, under the writer lock, the next ids of both sequences, the chain's head and the
// stored events of the orders named in $1 (a text array). Ids are taken from the sequences'
// state rather than nextval() so that they can be assigned while deciding; the write statement
// moves the sequences past them. Safe because every writer holds the lock.
// lock_wait: the time from the arrival of the query string that runs this (kBeginSql) to the
// read, that is BEGIN and the lock wait (statement_timestamp() is when the string arrived, the
// same for all its statements).
// Plan-proof: one index probe per order, whatever the statistics say. A plain
// `out_trade_no = ANY ($1)` is estimated at 1/200 of the table per key on a never-analyzed
// database (out_trade_no alone is not unique), so a few dozen keys made it a sequential
// scan. LIMIT 4 (one event per type, projections::kEventsPerOrderMax) keeps the lateral
// subquery from being flattened into a hash join: each key is an index range of at most 4.
// The chain's head is the last receipt's: a backward probe of the primary key.
const std::string& ReadStateSql() {
    static const std::string sql = std::string(R"sql(
SELECT s.next_seq, s.next_receipt_id, s.head, s.lock_wait, e.*
FROM (SELECT (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
              FROM ledger_events_seq_seq) AS next_seq,
             (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
              FROM callback_receipts_id_seq) AS next_receipt_id,
             (SELECT chain FROM callback_receipts ORDER BY id DESC LIMIT 1) AS head,
             (extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000000)::bigint
                 AS lock_wait) AS s
)sql") + EventsOfTheKeys() + "\nORDER BY e.seq\n";
    return sql;
}

// The prefetch: the read above without the lock and the sequences (the write's check under the
// lock proves what it read still stands, WriterCache::Learn), one statement so one snapshot.
const std::string& PrefetchSql() {
    static const std::string sql = std::string(R"sql(
SELECT s.head, e.*
FROM (SELECT (SELECT chain FROM callback_receipts ORDER BY id DESC LIMIT 1) AS head) AS s
)sql") + EventsOfTheKeys() + "\n";
    return sql;
}

// The batch's first round trip, one simple query (under load each round trip cost 0.4-0.9 ms,
// on 2 cores shared with PostgreSQL): opens the transaction, sets how its
// statements are planned, takes the writer lock and runs the read, which is its own statement
// after the lock, so that its snapshot holds every batch committed before the lock was granted.
// The lock's key follows, then the read's EXECUTE (ReadStateQuery).
//
// How the block's statements are planned, the triggers' queries included: once per session,
// never for the tables' statistics, and never as a sequential scan.
// Every access of the write path is by key, so with sequential scans disabled the planner
// takes the index whatever the statistics say, and a plan made on the first, empty-looking
// batch stays right as the tables grow; force_custom_plan, which replanned every statement of
// every batch for its own parameters instead, cost about 0.6 ms of PostgreSQL's time per batch
// (pg_stat_statements). A sequence can only be scanned sequentially: the penalty that
// enable_seqscan adds to the cost of reading one would make every plan look expensive enough
// for JIT compilation (about 300 ms), so JIT is off: the block's statements are all small.
constexpr std::string_view kBeginSql =
    "BEGIN; SET LOCAL enable_seqscan = off; SET LOCAL jit = off; "
    "SET LOCAL plan_cache_mode = force_generic_plan; SELECT pg_advisory_xact_lock(";

constexpr const char* kBeginFromCacheSql =
    "SELECT payledger_writer_begin($1::bigint, $2::bigint, $3::bigint, $4::bytea)";

// One statement writes everything and checks how many rows each part touched against the
// plan's counts (statement.expected_counts: a row count other than expected aborts the
// transaction).
// Events, receipts and new orders are plain INSERTs: the plan made them from what it read
// under the writer lock, so each is new, and one that exists (written behind the lock's back,
// or a plan that is wrong) fails the statement with a unique violation, which is the same
// invariant error as a wrong count. ON CONFLICT DO NOTHING, which only turned that into a
// wrong count, cost a speculative insertion per row (an arbiter index probe, and a WAL record
// that confirms the row): bench/write/run.sh measures about 5 us per event and per new
// order, 15-25 % of their inserts. Balances stay an upsert: their rows may exist. A receipt's
// body may exist too (receipt_bodies, keyed by its SHA-256: stored by an earlier batch), and is
// inserted only where it does not (rb).
// Each part's rows come as one array per column, bound in binary (ledger/pg/binary_params.hpp):
// no JSON to parse and no literal to scan, only headers and data become jsonb (and an order's
// anomalies, a text array literal each, text[]). bench/write/run.sh measures it against the
// JSON rows this statement took before.
// A template: RenderWriteSql replaces `{unnest PART AS ALIAS}` with the part's columns
// (kWriteColumns), `{PART.COLUMN}` with the column's parameter and cast, `{ref PART.COLUMN}`
// with its parameter alone. tests/ledger/write/writer_statements_test.cpp holds the rendered text.
constexpr std::string_view kWriteSqlTemplate = R"sql(
WITH rx AS (
    -- The receipts, each with whether its body is kept (schema/0008): always, but for a
    -- duplicate of event S that is S's n-th duplicate overall, n = those stored (counted up to
    -- 100 on the partial index of duplicates, once per S) + {ref receipts.rank}, its rank among this batch's
    -- duplicates of S by id (the plan's order); kept iff n <= 100, so a replayed notice adds
    -- rows, not bodies. The rank comes from the plan, not a window over the rows here: the
    -- window's sort cost about 1.5 us a receipt (timed against this, paired, in one session).
    -- Referenced twice, so computed once (a CTE used more than once is materialized).
    SELECT x.*, x.outcome <> 'duplicate' OR coalesce(d.stored, 0) + x.rank <= 100 AS body_stored
    FROM {unnest receipts AS x}
    LEFT JOIN (
        SELECT s.seq,
               (SELECT count(*)
                FROM (SELECT 1 FROM callback_receipts AS c
                      WHERE c.seq = s.seq AND c.outcome = 'duplicate' LIMIT 100) AS c) AS stored
        FROM (SELECT DISTINCT y.seq FROM unnest({receipts.outcome}, {receipts.seq}) AS y(outcome, seq)
              WHERE y.outcome = 'duplicate') AS s
    ) AS d ON d.seq = x.seq
), r AS (
    INSERT INTO callback_receipts
        (id, source, received_at, peer, headers, body_sha256, body_stored, outcome, seq,
         out_trade_no, message, chain)
    -- A duplicate kept without its body keeps no headers either (docs/security.md).
    SELECT id, source, received_at, peer,
           CASE WHEN body_stored THEN headers::jsonb ELSE jsonb_build_object() END, body_sha256,
           body_stored, outcome, seq, out_trade_no, message, chain
    FROM rx
    RETURNING 1
), rb AS (
    -- The batch's distinct bodies ({ref bodies.body_sha256} their keys, {ref bodies.body} their bytes), each stored once: not
    -- again when receipt_bodies holds the bytes (the writer sends none it knows stored), and
    -- not at all when none of its receipts here keeps them. Not counted: how many are new is not
    -- the plan's to know. A plain INSERT behind NOT EXISTS, not ON CONFLICT DO NOTHING, whose
    -- speculative insertion writes a second WAL record per row: every writer holds the lock, so
    -- nothing can come in between, and what did would fail the statement (a unique violation).
    INSERT INTO receipt_bodies (body_sha256, body)
    SELECT u.body_sha256, u.body
    FROM {unnest bodies AS u}
    WHERE EXISTS (SELECT FROM rx WHERE rx.body_sha256 = u.body_sha256 AND rx.body_stored)
      AND NOT EXISTS (SELECT FROM receipt_bodies AS s WHERE s.body_sha256 = u.body_sha256)
), e AS (
    INSERT INTO ledger_events
        (seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id,
         occurred_at, receipt_id, data)
    SELECT seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id,
           occurred_at, receipt_id, data::jsonb
    FROM {unnest events AS x}
    RETURNING 1
), o_new AS (
    INSERT INTO orders (out_trade_no, account_id, amount, currency, status, transaction_id,
                        paid_amount, refunded_amount, anomalies, seq)
    SELECT out_trade_no, account_id, amount, currency, status, transaction_id, paid_amount,
           refunded_amount, anomalies::text[], seq
    FROM {unnest new_orders AS x}
    RETURNING 1
), o_upd AS (
    -- Second line of defence: an update matches only the row this batch read (same last
    -- seq), and one that credits a payment only an order without one. `= ANY` of the keys
    -- makes it an index probe per order: unnest of a parameter is estimated at 10 rows, and
    -- joined to a table believed small that could be a hash join over a sequential scan.
    UPDATE orders AS o
    SET status = x.status, transaction_id = x.transaction_id, paid_amount = x.paid_amount,
        refunded_amount = x.refunded_amount, anomalies = x.anomalies::text[], seq = x.seq
    FROM {unnest updated_orders AS x}
    WHERE o.out_trade_no = ANY ({ref updated_orders.out_trade_no}) AND o.out_trade_no = x.out_trade_no
      AND o.seq = x.prev_seq AND (NOT x.credits_payment OR o.transaction_id IS NULL)
    RETURNING 1
), b AS (
    INSERT INTO balances AS b (account_id, currency, balance)
    SELECT account_id, currency, delta
    FROM {unnest balances AS x}
    ON CONFLICT (account_id, currency) DO UPDATE SET balance = b.balance + EXCLUDED.balance
    RETURNING 1
)
SELECT payledger_expect_counts(
           ARRAY[(SELECT count(*) FROM r), (SELECT count(*) FROM e), (SELECT count(*) FROM o_new),
                 (SELECT count(*) FROM o_upd), (SELECT count(*) FROM b)],
           {statement.expected_counts}),
       setval('callback_receipts_id_seq', {statement.last_receipt_id}),
       CASE WHEN {statement.last_seq} > 0 THEN setval('ledger_events_seq_seq', {statement.last_seq}) END
)sql";

std::string_view PartName(WritePart part) {
    switch (part) {
        case WritePart::kReceipts:
            return "receipts";
        case WritePart::kBodies:
            return "bodies";
        case WritePart::kEvents:
            return "events";
        case WritePart::kNewOrders:
            return "new_orders";
        case WritePart::kUpdatedOrders:
            return "updated_orders";
        case WritePart::kBalances:
            return "balances";
        case WritePart::kStatement:
            return "statement";
    }
    PAYLEDGER_ASSERT(false);
}

std::string_view SqlTypeName(PgType type) {
    switch (type) {
        case PgType::kBool:
            return "boolean";
        case PgType::kBytea:
            return "bytea";
        case PgType::kInt8:
            return "bigint";
        case PgType::kText:
            return "text";
        case PgType::kTimestamptz:
            return "timestamptz";
    }
    PAYLEDGER_ASSERT(false);
}

// `$n`, the parameter of kWriteColumns[index].
std::string Parameter(std::size_t index) { return "$" + std::to_string(index + 1); }

// `$n::type` or `$n::type[]`: the parameter with its cast, from which the server takes its type.
std::string Declaration(std::size_t index) {
    const WriteColumnSpec& spec = kWriteColumns[index];
    std::string out = Parameter(index).append("::").append(SqlTypeName(spec.type));
    if (spec.array) out += "[]";
    return out;
}

// The index of `part.column` (as the template names it) in kWriteColumns.
std::size_t ColumnNamed(std::string_view qualified) {
    const std::size_t dot = qualified.find('.');
    PAYLEDGER_ASSERT(dot != std::string_view::npos);
    for (std::size_t i = 0; i < kWriteColumnCount; ++i) {
        if (PartName(kWriteColumns[i].part) == qualified.substr(0, dot) &&
            kWriteColumns[i].name == qualified.substr(dot + 1)) {
            return i;
        }
    }
    PAYLEDGER_ASSERT(false);  // A name the template misspells.
}

// `unnest($a::type[], ...) AS alias(name, ...)` of every column of `part`, in kWriteColumns'
// order, on one line (however long: the server does not mind, and the test holds the text).
std::string Unnest(std::string_view part, std::string_view alias) {
    std::string declarations;
    std::string names;
    for (std::size_t i = 0; i < kWriteColumnCount; ++i) {
        if (PartName(kWriteColumns[i].part) != part) continue;
        PAYLEDGER_ASSERT(kWriteColumns[i].array);
        if (!names.empty()) {
            declarations += ", ";
            names += ", ";
        }
        declarations += Declaration(i);
        names += kWriteColumns[i].name;
    }
    PAYLEDGER_ASSERT(!names.empty());
    return "unnest(" + declarations + ") AS " + std::string(alias) + "(" + names + ")";
}

// The template with each `{...}` replaced (kWriteSqlTemplate).
std::string RenderWriteSql(std::string_view sql) {
    std::string out;
    out.reserve(sql.size() * 2);
    std::size_t from = 0;
    for (std::size_t open = sql.find('{'); open != std::string_view::npos;
         open = sql.find('{', from)) {
        const std::size_t close = sql.find('}', open);
        PAYLEDGER_ASSERT(close != std::string_view::npos);
        out += sql.substr(from, open - from);
        const std::string_view inside = sql.substr(open + 1, close - open - 1);
        if (inside.starts_with("unnest ")) {
            const std::size_t as = inside.find(" AS ");
            PAYLEDGER_ASSERT(as != std::string_view::npos);
            out += Unnest(inside.substr(7, as - 7), inside.substr(as + 4));
        } else if (inside.starts_with("ref ")) {
            out += Parameter(ColumnNamed(inside.substr(4)));
        } else {
            out += Declaration(ColumnNamed(inside));
        }
        from = close + 1;
    }
    out += sql.substr(from);
    return out;
}

template <std::size_t... I>
std::array<BinaryArray, sizeof...(I)> BuildersOf(std::index_sequence<I...>) {
    return {BinaryArray{kWriteColumns[I].type}...};
}

}  // namespace

std::string ReadStateQuery(std::string_view quoted_keys) {
    std::string query;
    query.append(kBeginSql)
        .append(std::to_string(kWriterLockKey))
        .append("); EXECUTE ")
        .append(kReadStateName)
        .append("(")
        .append(quoted_keys)
        .append(")");
    return query;
}

const std::string& WriteSql() {
    static const std::string sql = RenderWriteSql(kWriteSqlTemplate);
    return sql;
}

const std::vector<Statement>& WriterStatements() {
    static const std::vector<Statement> statements = {
        {kReadStateName.data(), ReadStateSql()},  // None by exec_prepared: see WriteBatch.
        {kWriteName.data(), WriteSql()},
        {kBeginName.data(), kBeginFromCacheSql},
        {kPrefetchName.data(), PrefetchSql()},
    };
    return statements;
}

WriteParams::WriteParams()
    : columns_(BuildersOf(std::make_index_sequence<kWriteColumnCount>{})),
      params_(kWriteColumnCount) {}

void WriteParams::SetInt8(WriteColumn column, std::int64_t value) {
    const WriteColumnSpec& spec = kWriteColumns[IndexOf(column)];
    PAYLEDGER_ASSERT(!spec.array && spec.type == PgType::kInt8);
    PAYLEDGER_ASSERT(params_.size() == kWriteColumnCount);  // Not taken yet.
    params_[IndexOf(column)] = BinaryInt8(value);
}

std::vector<std::string> WriteParams::Take() {
    PAYLEDGER_ASSERT(params_.size() == kWriteColumnCount);  // Taken once.
    for (std::size_t i = 0; i < kWriteColumnCount; ++i) {
        if (kWriteColumns[i].array) {
            params_[i] = columns_[i].Take();
        } else {
            PAYLEDGER_ASSERT(!params_[i].empty() && columns_[i].size() == 0);
        }
    }
    return std::move(params_);
}

}  // namespace payledger::ledger
