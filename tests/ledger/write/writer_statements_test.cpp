// Tests of ledger/write/writer_statements.hpp without a database: the write statement is rendered
// from kWriteColumns, so its parameters and each part's unnest cannot drift from the order in
// which WriteParams sends them. The rendered text is compared with the whole statement held
// below (each unnest on one line), so that a change to the table shows in the SQL it makes, and
// parsed back: every $n is one column, cast to that column's type, and every unnest names its
// columns as the table does. That the server accepts it is proved by every PostgreSQL test that
// writes a batch (writer_pgtest.cpp and others).
#include "ledger/write/writer_statements.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "ledger/pg/statements.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

constexpr const char* kExpectedWriteSql = R"sql(
WITH rx AS (
    -- The receipts, each with whether its body is kept (schema/0008): always, but for a
    -- duplicate of event S that is S's n-th duplicate overall, n = those stored (counted up to
    -- 100 on the partial index of duplicates, once per S) + $50, its rank among this batch's
    -- duplicates of S by id (the plan's order); kept iff n <= 100, so a replayed notice adds
    -- rows, not bodies. The rank comes from the plan, not a window over the rows here: the
    -- window's sort cost about 1.5 us a receipt (timed against this, paired, in one session).
    -- Referenced twice, so computed once (a CTE used more than once is materialized).
    SELECT x.*, x.outcome <> 'duplicate' OR coalesce(d.stored, 0) + x.rank <= 100 AS body_stored
    FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::bigint[], $9::text[], $10::text[], $11::bytea[], $50::bigint[]) AS x(id, source, received_at, peer, headers, body_sha256, outcome, seq, out_trade_no, message, chain, rank)
    LEFT JOIN (
        SELECT s.seq,
               (SELECT count(*)
                FROM (SELECT 1 FROM callback_receipts AS c
                      WHERE c.seq = s.seq AND c.outcome = 'duplicate' LIMIT 100) AS c) AS stored
        FROM (SELECT DISTINCT y.seq FROM unnest($7::text[], $8::bigint[]) AS y(outcome, seq)
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
    -- The batch's distinct bodies ($48 their keys, $49 their bytes), each stored once: not
    -- again when receipt_bodies holds the bytes (the writer sends none it knows stored), and
    -- not at all when none of its receipts here keeps them. Not counted: how many are new is not
    -- the plan's to know. A plain INSERT behind NOT EXISTS, not ON CONFLICT DO NOTHING, whose
    -- speculative insertion writes a second WAL record per row: every writer holds the lock, so
    -- nothing can come in between, and what did would fail the statement (a unique violation).
    INSERT INTO receipt_bodies (body_sha256, body)
    SELECT u.body_sha256, u.body
    FROM unnest($48::bytea[], $49::bytea[]) AS u(body_sha256, body)
    WHERE EXISTS (SELECT FROM rx WHERE rx.body_sha256 = u.body_sha256 AND rx.body_stored)
      AND NOT EXISTS (SELECT FROM receipt_bodies AS s WHERE s.body_sha256 = u.body_sha256)
), e AS (
    INSERT INTO ledger_events
        (seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id,
         occurred_at, receipt_id, data)
    SELECT seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id,
           occurred_at, receipt_id, data::jsonb
    FROM unnest($12::bigint[], $13::text[], $14::text[], $15::text[], $16::text[], $17::bigint[], $18::text[], $19::text[], $20::timestamptz[], $21::bigint[], $22::text[]) AS x(seq, out_trade_no, event_type, source, account_id, amount, currency, transaction_id, occurred_at, receipt_id, data)
    RETURNING 1
), o_new AS (
    INSERT INTO orders (out_trade_no, account_id, amount, currency, status, transaction_id,
                        paid_amount, refunded_amount, anomalies, seq)
    SELECT out_trade_no, account_id, amount, currency, status, transaction_id, paid_amount,
           refunded_amount, anomalies::text[], seq
    FROM unnest($23::text[], $24::text[], $25::bigint[], $26::text[], $27::text[], $28::text[], $29::bigint[], $30::bigint[], $31::text[], $32::bigint[]) AS x(out_trade_no, account_id, amount, currency, status, transaction_id, paid_amount, refunded_amount, anomalies, seq)
    RETURNING 1
), o_upd AS (
    -- Second line of defence: an update matches only the row this batch read (same last
    -- seq), and one that credits a payment only an order without one. `= ANY` of the keys
    -- makes it an index probe per order: unnest of a parameter is estimated at 10 rows, and
    -- joined to a table believed small that could be a hash join over a sequential scan.
    UPDATE orders AS o
    SET status = x.status, transaction_id = x.transaction_id, paid_amount = x.paid_amount,
        refunded_amount = x.refunded_amount, anomalies = x.anomalies::text[], seq = x.seq
    FROM unnest($33::text[], $34::text[], $35::text[], $36::bigint[], $37::bigint[], $38::text[], $39::bigint[], $40::bigint[], $41::boolean[]) AS x(out_trade_no, status, transaction_id, paid_amount, refunded_amount, anomalies, seq, prev_seq, credits_payment)
    WHERE o.out_trade_no = ANY ($33) AND o.out_trade_no = x.out_trade_no
      AND o.seq = x.prev_seq AND (NOT x.credits_payment OR o.transaction_id IS NULL)
    RETURNING 1
), b AS (
    INSERT INTO balances AS b (account_id, currency, balance)
    SELECT account_id, currency, delta
    FROM unnest($42::text[], $43::text[], $44::bigint[]) AS x(account_id, currency, delta)
    ON CONFLICT (account_id, currency) DO UPDATE SET balance = b.balance + EXCLUDED.balance
    RETURNING 1
)
SELECT payledger_expect_counts(
           ARRAY[(SELECT count(*) FROM r), (SELECT count(*) FROM e), (SELECT count(*) FROM o_new),
                 (SELECT count(*) FROM o_upd), (SELECT count(*) FROM b)],
           $47::bigint[]),
       setval('callback_receipts_id_seq', $45::bigint),
       CASE WHEN $46::bigint > 0 THEN setval('ledger_events_seq_seq', $46::bigint) END
)sql";

std::string SqlTypeOf(const WriteColumnSpec& spec) {
    std::string type;
    switch (spec.type) {
        case PgType::kBool:
            type = "boolean";
            break;
        case PgType::kBytea:
            type = "bytea";
            break;
        case PgType::kInt8:
            type = "bigint";
            break;
        case PgType::kText:
            type = "text";
            break;
        case PgType::kTimestamptz:
            type = "timestamptz";
            break;
    }
    return spec.array ? type + "[]" : type;
}

// One value, of its type, that tells column `index` from every other.
void AppendValueOf(std::size_t index, BinaryArray& column) {
    const auto value = static_cast<std::int64_t>(index);
    switch (kWriteColumns[index].type) {
        case PgType::kBool:
            column.Bool(index % 2 == 0);
            return;
        case PgType::kBytea:
        case PgType::kText:
            column.Bytes("column " + std::to_string(index));
            return;
        case PgType::kInt8:
            column.Int8(value);
            return;
        case PgType::kTimestamptz:
            column.TimeMicros(value);
            return;
    }
    FAIL() << "type of column " << index;
}

TEST(WriterStatementsTest, TheWriteIsRenderedAsTheTestHoldsIt) {
    EXPECT_EQ(WriteSql(), kExpectedWriteSql) << WriteSql();
    std::size_t named = 0;
    for (const Statement& statement : WriterStatements()) {
        if (statement.name != kWriteName) continue;
        ++named;
        EXPECT_EQ(statement.sql, WriteSql());
    }
    EXPECT_EQ(named, 1u);
}

TEST(WriterStatementsTest, EveryParameterIsOneColumnCastToItsType) {
    const std::string& sql = WriteSql();
    const std::regex parameter(R"(\$(\d+)(::([a-z]+(\[\])?))?)");
    std::map<std::size_t, std::set<std::string>> casts;  // By column index; "" when bare.
    for (auto it = std::sregex_iterator(sql.begin(), sql.end(), parameter);
         it != std::sregex_iterator(); ++it) {
        const std::size_t n = std::stoul((*it)[1].str());
        ASSERT_GE(n, 1u);
        ASSERT_LE(n, kWriteColumnCount) << (*it)[0].str();
        casts[n - 1].insert((*it)[3].str());
    }
    ASSERT_EQ(casts.size(), kWriteColumnCount);  // $1..$N, each used.
    for (const auto& [index, seen] : casts) {
        const std::string expected = SqlTypeOf(kWriteColumns[index]);
        for (const std::string& cast : seen) {
            if (!cast.empty()) {
                EXPECT_EQ(cast, expected) << "$" << index + 1;
            }
        }
        EXPECT_TRUE(seen.contains(expected)) << "$" << index + 1 << " is never cast";
    }
}

TEST(WriterStatementsTest, EachUnnestNamesItsParametersAsTheTableDoes) {
    const std::string& sql = WriteSql();
    const std::regex unnest(R"(unnest\(([^)]*)\)\s+AS\s+([a-z]+)\(([^)]*)\))");
    const std::regex number(R"(\$(\d+))");
    const std::regex name(R"([a-z_0-9]+)");
    std::map<WritePart, std::size_t> columns_listed;
    for (auto it = std::sregex_iterator(sql.begin(), sql.end(), unnest);
         it != std::sregex_iterator(); ++it) {
        const std::string arguments = (*it)[1].str();
        const std::string names = (*it)[3].str();
        std::vector<std::size_t> indexes;
        for (auto n = std::sregex_iterator(arguments.begin(), arguments.end(), number);
             n != std::sregex_iterator(); ++n) {
            indexes.push_back(std::stoul((*n)[1].str()) - 1);
        }
        std::vector<std::string> aliases;
        for (auto n = std::sregex_iterator(names.begin(), names.end(), name);
             n != std::sregex_iterator(); ++n) {
            aliases.push_back(n->str());
        }
        if (indexes.empty()) continue;  // The read's unnest of keys is not a write part.
        ASSERT_EQ(indexes.size(), aliases.size()) << (*it)[0].str();
        const WritePart part = kWriteColumns[indexes[0]].part;
        for (std::size_t i = 0; i < indexes.size(); ++i) {
            const WriteColumnSpec& spec = kWriteColumns[indexes[i]];
            EXPECT_EQ(spec.part, part) << (*it)[0].str();
            EXPECT_EQ(spec.name, aliases[i]) << (*it)[0].str();
            if (i > 0) {
                EXPECT_LT(indexes[i - 1], indexes[i]) << (*it)[0].str();
            }
        }
        columns_listed[part] = std::max(columns_listed[part], indexes.size());
    }
    // Each part's rows come from one unnest of all its columns.
    std::map<WritePart, std::size_t> columns_of;
    for (const WriteColumnSpec& spec : kWriteColumns) {
        if (spec.part != WritePart::kStatement) ++columns_of[spec.part];
    }
    EXPECT_EQ(columns_listed, columns_of);
}

TEST(WriterStatementsTest, WriteParamsSendsEachColumnAsItsParameter) {
    WriteParams params;
    for (std::size_t i = 0; i < kWriteColumnCount; ++i) {
        const WriteColumnSpec& spec = kWriteColumns[i];
        if (!spec.array) {
            params.SetInt8(spec.column, 1000 + static_cast<std::int64_t>(i));
            continue;
        }
        AppendValueOf(i, params[spec.column]);
    }
    const std::vector<std::string> taken = params.Take();
    ASSERT_EQ(taken.size(), kWriteColumnCount);
    for (std::size_t i = 0; i < kWriteColumnCount; ++i) {
        const WriteColumnSpec& spec = kWriteColumns[i];
        const std::string& param = taken[i];
        if (!spec.array) {
            EXPECT_EQ(param, BinaryInt8(1000 + static_cast<std::int64_t>(i))) << "$" << i + 1;
            continue;
        }
        // array_recv's header: one dimension, no null, the element type's oid, then the one
        // element, whose bytes end the parameter.
        BinaryArray expected{spec.type};
        AppendValueOf(i, expected);
        EXPECT_EQ(param, expected.Take()) << "$" << i + 1;
    }
}

TEST(WriterStatementsTest, WriteParamsRefusesAScalarUnsetOrSetAsAnArray) {
    WriteParams unset;
    EXPECT_THROW((void)unset.Take(), InvariantError);  // last_receipt_id and last_seq unset.
    WriteParams params;
    EXPECT_THROW(params.SetInt8(WriteColumn::kReceiptId, 1), InvariantError);  // An array.
    params.SetInt8(WriteColumn::kLastReceiptId, 1);
    params.SetInt8(WriteColumn::kLastSeq, 0);
    params[WriteColumn::kLastSeq].Int8(5);  // Appended to a scalar's array: never sent.
    EXPECT_THROW((void)params.Take(), InvariantError);
}

}  // namespace
}  // namespace payledger::ledger
