#include "ledger/platform_receipts.hpp"

#include <string>

#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// At most 256 bodies of 64 KiB in memory at once.
constexpr std::int64_t kPageRows = 256;

constexpr const char* kCursor = "payledger_platform_receipts";

// The appended receipts with their events (one join over both tables, sorted once), and each
// body from either form (a probe of receipt_bodies' key, for the rows returned only). Read
// through a cursor: one execution of the query, fetched a page at a time.
constexpr const char* kReceiptsSql =
    "SELECT r.id, r.source, e.seq, e.source, r.headers::text, "
    "coalesce(r.body, (SELECT b.body FROM receipt_bodies AS b "
    "WHERE b.body_sha256 = r.body_sha256)) "
    "FROM callback_receipts AS r JOIN ledger_events AS e ON e.receipt_id = r.id "
    "WHERE r.outcome = 'appended' "
    "AND (r.source IN ('wechat_v3', 'alipay') OR e.source IN ('wechat_v3', 'alipay')) "
    "ORDER BY r.id";

}  // namespace

void ForEachPlatformReceipt(pqxx::transaction_base& tx,
                            const std::function<void(const PlatformReceipt&)>& visit) {
    tx.exec(std::string("DECLARE ") + kCursor + " NO SCROLL CURSOR FOR " + kReceiptsSql);
    const std::string fetch = "FETCH FORWARD " + std::to_string(kPageRows) + " FROM " + kCursor;
    PlatformReceipt receipt;
    for (;;) {
        const pqxx::result page = tx.exec(fetch);
        for (const pqxx::row& row : page) {
            const auto source = projections::ParseSource(row[1].as<std::string>());
            const auto event_source = projections::ParseSource(row[3].as<std::string>());
            PAYLEDGER_ASSERT(source && event_source);  // The tables' CHECKs.
            receipt.receipt_id = row[0].as<std::int64_t>();
            receipt.source = *source;
            receipt.seq = row[2].as<std::int64_t>();
            receipt.event_source = *event_source;
            receipt.headers = row[4].as<std::string>();
            if (row[5].is_null()) {
                receipt.body.reset();
            } else {
                receipt.body = pqxx::binarystring(row[5]).str();
            }
            visit(receipt);
        }
        if (page.size() < static_cast<std::size_t>(kPageRows)) break;
    }
    tx.exec(std::string("CLOSE ") + kCursor);
}

}  // namespace payledger::ledger
