#include "ledger/integrity/platform_receipts.hpp"

#include <string>

#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// At most 256 bodies of 64 KiB in memory at once.
constexpr std::int64_t kPageRows = 256;

constexpr const char* kReceiptsCursor = "payledger_platform_receipts";
constexpr const char* kSharedCursor = "payledger_shared_notices";

// The appended receipts with their events (one join over both tables, sorted once), and each
// body from either form (a probe of receipt_bodies' key, for the rows returned only). Read
// through a cursor: one execution of the query, fetched a page at a time.
constexpr const char* kReceiptsSql =
    "SELECT r.id, r.source, (extract(epoch FROM r.received_at) * 1000000)::bigint, "
    "r.headers::text, coalesce(r.body, (SELECT b.body FROM receipt_bodies AS b "
    "WHERE b.body_sha256 = r.body_sha256)), "
    "e.seq, e.source, e.out_trade_no, e.event_type, e.amount, e.currency, e.transaction_id, "
    "(extract(epoch FROM e.occurred_at) * 1000000)::bigint, e.data::text "
    "FROM callback_receipts AS r JOIN ledger_events AS e ON e.receipt_id = r.id "
    "WHERE r.outcome = 'appended' "
    // What the platforms sign with their keys: WeChat Pay APIv3's and Alipay's notices, and
    // their answers to queries and closes (docs/query.md).
    "AND (r.source IN ('wechat_v3', 'alipay', 'wechat_v3_query', 'wechat_v3_close', "
    "'alipay_query', 'alipay_close') OR e.source IN ('wechat_v3', 'alipay', 'wechat_v3_query', "
    "'wechat_v3_close', 'alipay_query', 'alipay_close')) "
    "ORDER BY r.id";

// The appended receipts of the two channels with their body's hash and their notice's id,
// once (materialized: the database keeps it, spilling to disk past work_mem); the groups of
// more than one event by body and by notice id, each with its first event; every event of
// such a group but the first.
constexpr const char* kSharedSql =
    "WITH a AS MATERIALIZED ("
    "SELECT r.id, r.source, e.seq, coalesce(r.body_sha256, sha256(r.body)) AS body_key, "
    "nullif(CASE r.source WHEN 'alipay' THEN e.data->>'notify_id' ELSE e.data->>'id' END, '') "
    "AS notice_id "
    "FROM callback_receipts AS r JOIN ledger_events AS e ON e.receipt_id = r.id "
    "WHERE r.outcome = 'appended' AND r.source IN ('wechat_v3', 'alipay')), "
    "by_body AS (SELECT source, body_key, min(seq) AS first_seq FROM a "
    "WHERE body_key IS NOT NULL GROUP BY source, body_key HAVING count(*) > 1), "
    "by_id AS (SELECT source, notice_id, min(seq) AS first_seq FROM a "
    "WHERE notice_id IS NOT NULL GROUP BY source, notice_id HAVING count(*) > 1) "
    "SELECT a.id, a.source, a.seq, least(b.first_seq, i.first_seq) FROM a "
    "LEFT JOIN by_body AS b ON b.source = a.source AND b.body_key = a.body_key "
    "LEFT JOIN by_id AS i ON i.source = a.source AND i.notice_id = a.notice_id "
    "WHERE a.seq > b.first_seq OR a.seq > i.first_seq "
    "ORDER BY a.seq";

// Runs `sql` through the cursor `name`, a page at a time, calling `visit` for each row.
void ForEachRow(pqxx::transaction_base& tx, const char* name, const char* sql,
                const std::function<void(const pqxx::row&)>& visit) {
    tx.exec(std::string("DECLARE ") + name + " NO SCROLL CURSOR FOR " + sql);
    const std::string fetch = "FETCH FORWARD " + std::to_string(kPageRows) + " FROM " + name;
    for (;;) {
        const pqxx::result page = tx.exec(fetch);
        for (const pqxx::row& row : page) visit(row);
        if (page.size() < static_cast<std::size_t>(kPageRows)) break;
    }
    tx.exec(std::string("CLOSE ") + name);
}

projections::Source SourceOf(const pqxx::field& field) {
    const auto source = projections::ParseSource(field.as<std::string>());
    PAYLEDGER_ASSERT(source.has_value());  // The tables' CHECKs.
    return *source;
}

}  // namespace

void ForEachPlatformReceipt(pqxx::transaction_base& tx,
                            const std::function<void(const PlatformReceipt&)>& visit) {
    PlatformReceipt receipt;
    ForEachRow(tx, kReceiptsCursor, kReceiptsSql, [&](const pqxx::row& row) {
        receipt.receipt_id = row[0].as<std::int64_t>();
        receipt.source = SourceOf(row[1]);
        receipt.received_at = row[2].as<std::int64_t>();
        receipt.headers = row[3].as<std::string>();
        if (row[4].is_null()) {
            receipt.body.reset();
        } else {
            receipt.body = pqxx::binarystring(row[4]).str();
        }
        projections::Event& event = receipt.event;
        event.seq = row[5].as<std::int64_t>();
        event.source = SourceOf(row[6]);
        event.out_trade_no = row[7].as<std::string>();
        const auto type = projections::ParseEventType(row[8].as<std::string>());
        PAYLEDGER_ASSERT(type.has_value());  // Its CHECK.
        event.event_type = *type;
        event.amount = row[9].is_null() ? 0 : row[9].as<std::int64_t>();
        event.currency = row[10].is_null() ? std::string{} : row[10].as<std::string>();
        event.transaction_id =
            row[11].is_null() ? std::nullopt : std::optional(row[11].as<std::string>());
        event.occurred_at = row[12].as<std::int64_t>();
        event.receipt_id = receipt.receipt_id;
        event.data = row[13].as<std::string>();
        visit(receipt);
    });
}

void ForEachSharedNotice(pqxx::transaction_base& tx,
                         const std::function<void(const SharedNotice&)>& visit) {
    ForEachRow(tx, kSharedCursor, kSharedSql, [&](const pqxx::row& row) {
        visit({.receipt_id = row[0].as<std::int64_t>(),
               .source = SourceOf(row[1]),
               .seq = row[2].as<std::int64_t>(),
               .first_seq = row[3].as<std::int64_t>()});
    });
}

}  // namespace payledger::ledger
