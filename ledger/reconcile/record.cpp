#include "ledger/reconcile/record.hpp"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "ledger/pg/database.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger::reconcile {
namespace {

using nlohmann::json;
using projections::Category;
using projections::EventType;

json CountsJson(const ReconcileReport& report) {
    json counts = {{"rows", report.rows}};
    for (int i = 0; i < projections::kCategoryCount; ++i) {
        counts[std::string(projections::ToString(static_cast<Category>(i)))] =
            report.counts.at(static_cast<std::size_t>(i));
    }
    return counts;
}

// The bill's bytes (the session's copy) into reconciliation_bills, unless they are there.
constexpr const char* kStoreBillSql = R"sql(
INSERT INTO reconciliation_bills (bill_sha256, bill)
SELECT $1::text, string_agg(bytes, ''::bytea ORDER BY n) FROM reconcile_bill_bytes
WHERE NOT EXISTS (SELECT 1 FROM reconciliation_bills WHERE bill_sha256 = $1::text)
HAVING count(*) > 0
ON CONFLICT (bill_sha256) DO NOTHING
)sql";

// The same from the private copy, for a new session.
constexpr const char* kStoreBillBytesSql = R"sql(
INSERT INTO reconciliation_bills (bill_sha256, bill) VALUES ($1, $2)
ON CONFLICT (bill_sha256) DO NOTHING
)sql";

// The run, its bill named by its SHA-256 (stored before, by kStoreBillSql).
constexpr const char* kRecordSql = R"sql(
INSERT INTO reconciliations
    (platform, date, stored_bill_sha256, bill_sha256, applied, counts, ok, differences)
SELECT $1, $2::date, $3, $3, $4, $5::jsonb, $6,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'category', category, 'event_type', event_type, 'out_trade_no', out_trade_no,
                   'bill', bill, 'ledger', ledger)
                   ORDER BY category_rank, event_type, out_trade_no, line_number), '[]'::jsonb)
        FROM reconcile_differences)
RETURNING id
)sql";

// The fallback record when the session (and its temporary tables) is gone: the counts, no
// differences.
constexpr const char* kRecordWithoutDifferencesSql = R"sql(
INSERT INTO reconciliations
    (platform, date, stored_bill_sha256, bill_sha256, applied, counts, ok, differences)
VALUES ($1, $2::date, $3, $3, $4, $5::jsonb, false, '[]'::jsonb)
RETURNING id
)sql";

constexpr int kRecordAttemptsMax = 3;

}  // namespace

bool IsDifference(Category category) {
    switch (category) {
        case Category::kMatched:
        case Category::kPending:
        case Category::kApplied:
            return false;
        case Category::kMissingInLedger:
        case Category::kMissingInBill:
        case Category::kAmountMismatch:
        case Category::kTransactionMismatch:
        case Category::kUnknownOrder:
            return true;
    }
    PAYLEDGER_ASSERT(false);
    return true;
}

void Print(pqxx::connection& connection, const ReconcileOptions& options,
           const ReconcileReport& report, std::ostream& out) {
    out << "reconcile " << ToString(options.platform) << ' ' << options.date
        << " rows=" << report.rows;
    for (int i = 0; i < projections::kCategoryCount; ++i) {
        out << ' ' << projections::ToString(static_cast<Category>(i)) << '='
            << report.counts.at(static_cast<std::size_t>(i));
    }
    out << (report.ok ? " OK" : " DIFFERS") << '\n';
    pqxx::work tx{connection};
    tx.exec(
        "DECLARE reconcile_output NO SCROLL CURSOR FOR SELECT category_rank, event_type, "
        "out_trade_no, coalesce(bill, '-'), coalesce(ledger, '-') FROM reconcile_differences "
        "ORDER BY category_rank, event_type, out_trade_no, line_number");
    for (;;) {
        const pqxx::result rows = tx.exec("FETCH FORWARD 1000 FROM reconcile_output");
        if (rows.empty()) break;
        for (const pqxx::row& row : rows) {
            const std::optional<EventType> type = projections::ParseEventType(row[1].c_str());
            PAYLEDGER_ASSERT(type.has_value());
            out << projections::DifferenceLine(static_cast<Category>(row[0].as<int>()), *type,
                                               row[2].c_str(), row[3].c_str(), row[4].c_str())
                << '\n';
        }
    }
    tx.exec("CLOSE reconcile_output");
    tx.commit();
    out.flush();
}

void PrintReasons(pqxx::connection& connection, std::ostream& log) {
    pqxx::work tx{connection};
    tx.exec(
        "DECLARE reconcile_reasons NO SCROLL CURSOR FOR SELECT line_number, event_type, "
        "out_trade_no, reason FROM reconcile_differences WHERE reason IS NOT NULL "
        "ORDER BY category_rank, event_type, out_trade_no, line_number");
    for (;;) {
        const pqxx::result rows = tx.exec("FETCH FORWARD 1000 FROM reconcile_reasons");
        if (rows.empty()) break;
        for (const pqxx::row& row : rows) {
            log << "payledger: reconcile: line " << row[0].c_str() << ' ' << row[1].c_str() << ' '
                << row[2].c_str() << " not applied: " << row[3].c_str() << '\n';
        }
    }
    tx.exec("CLOSE reconcile_reasons");
    tx.commit();
    log.flush();
}

std::optional<std::string> Record(pqxx::connection& connection, const std::string& database_url,
                                  const ReconcileOptions& options, const BillCopy& bill,
                                  ReconcileReport& report) {
    const std::string platform{ToString(options.platform)};
    const std::string counts = CountsJson(report).dump();
    std::string failure;
    bool bill_stored = false;
    for (int attempt = 1; attempt <= kRecordAttemptsMax; ++attempt) {
        try {
            if (!bill_stored) {
                // Up to kBillBytesMax bytes: copied and checked without the writer lock, so
                // that the callbacks' batches never wait behind them.
                pqxx::work tx{connection};
                tx.exec_params(kStoreBillSql, bill.sha256);
                tx.commit();
                bill_stored = true;
            }
            pqxx::work tx{connection};
            tx.exec_params("SELECT pg_advisory_xact_lock($1)", kWriterLockKey);
            const pqxx::result id = tx.exec_params(kRecordSql, platform, options.date, bill.sha256,
                                                   options.apply, counts, report.ok);
            report.id = id[0][0].as<std::int64_t>();
            tx.commit();
            return std::nullopt;
        } catch (const pqxx::in_doubt_error& error) {
            // The record may have committed: storing it again could record the run twice.
            if (bill_stored) throw;
            // Only the bill's bytes were in doubt, which a new session stores at most once.
            failure = error.what();
            break;
        } catch (const pqxx::broken_connection& error) {
            failure = error.what();
            break;
        } catch (const pqxx::sql_error& error) {
            failure = error.what();
        }
    }
    std::string bytes;
    {
        std::ifstream file{bill.copy->path(), std::ios::binary};
        bytes.assign(std::istreambuf_iterator<char>(file), {});
    }
    std::unique_ptr<pqxx::connection> fresh = Connect(database_url, kSession);
    {
        pqxx::work tx{*fresh};
        tx.exec_params(kStoreBillBytesSql, bill.sha256, pqxx::binarystring(bytes));
        tx.commit();
    }
    pqxx::work tx{*fresh};
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", kWriterLockKey);
    const pqxx::result id = tx.exec_params(kRecordWithoutDifferencesSql, platform, options.date,
                                           bill.sha256, options.apply, counts);
    report.id = id[0][0].as<std::int64_t>();
    tx.commit();
    report.ok = false;
    return "the run could not be stored with its differences (" + failure +
           "); it is stored as reconciliation " + std::to_string(report.id) +
           " with its counts only";
}

}  // namespace payledger::ledger::reconcile
