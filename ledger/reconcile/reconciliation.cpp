#include "ledger/reconcile/reconciliation.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ledger/base/bytes.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/reconcile/alipay_bill.hpp"
#include "ledger/reconcile/apply.hpp"
#include "ledger/reconcile/bill_input.hpp"
#include "ledger/reconcile/record.hpp"
#include "ledger/reconcile/session.hpp"
#include "ledger/reconcile/wechat_bill.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger::reconcile {
namespace {

using nlohmann::json;
using projections::Category;
using projections::EventType;
using projections::Side;

constexpr std::size_t kBillChunkBytes = 1024 * 1024;  // Bill bytes per stored piece.

constexpr const char* kCreateTemporaryTables = R"sql(
CREATE TEMPORARY TABLE reconcile_bill_bytes (n integer PRIMARY KEY, bytes bytea NOT NULL);
CREATE TEMPORARY TABLE reconcile_bill (
    line_number  bigint PRIMARY KEY,
    event_type   text COLLATE "C" NOT NULL,
    out_trade_no text COLLATE "C" NOT NULL,
    platform_id  text NOT NULL,
    amount       bigint NOT NULL,
    currency     text NOT NULL,
    occurred_at  bigint NOT NULL,
    pending      boolean NOT NULL,
    raw          text NOT NULL,  -- hex
    payment_id   text NOT NULL
);
-- A key may appear twice (two partial refunds of one order): each entry is classified, and
-- no entry of such a key is applied.
CREATE INDEX reconcile_bill_key ON reconcile_bill (out_trade_no, event_type);
CREATE TEMPORARY TABLE reconcile_differences (
    line_number   bigint,  -- The bill's line; null for missing_in_bill.
    category_rank integer NOT NULL,
    category      text NOT NULL,
    event_type    text COLLATE "C" NOT NULL,
    out_trade_no  text COLLATE "C" NOT NULL,
    bill          text,
    ledger        text,
    apply         boolean NOT NULL DEFAULT false,
    reason        text  -- Why --apply did not append it, if it tried or refused.
);
)sql";

constexpr const char* kInsertEntries = R"sql(
INSERT INTO reconcile_bill
SELECT * FROM json_to_recordset($1::json) AS x(line_number bigint, event_type text,
    out_trade_no text, platform_id text, amount bigint, currency text, occurred_at bigint,
    pending boolean, raw text, payment_id text)
)sql";

// Every entry with what the ledger holds for its key: the order, and the event of its type
// from any source on any day (`matched`, docs/reconciliation.md#matching).
constexpr const char* kDeclareEntries = R"sql(
DECLARE reconcile_entries NO SCROLL CURSOR FOR
SELECT b.line_number, b.event_type, b.out_trade_no, b.platform_id, b.amount, b.currency,
       b.pending, o.amount, o.currency, e.transaction_id, e.amount, e.currency,
       count(*) OVER (PARTITION BY b.out_trade_no, b.event_type)
FROM reconcile_bill AS b
LEFT JOIN ledger_events AS o
       ON o.out_trade_no = b.out_trade_no AND o.event_type = 'ORDER_CREATED'
LEFT JOIN ledger_events AS e
       ON e.out_trade_no = b.out_trade_no AND e.event_type = b.event_type
ORDER BY b.line_number
)sql";

// Reads the bill file once: its bytes go, a piece at a time, to reconcile_bill_bytes, to the
// SHA-256 and to a private copy, which the parser then reads (docs/reconciliation.md#the-record:
// the bytes stored and their digest are the bytes reconciled, even if the file changes meanwhile).
// Throws BillError for a file that cannot be read, is empty, or is over kBillBytesMax.
BillCopy CopyBill(pqxx::connection& connection, const std::string& path) {
    std::ifstream file{path, std::ios::binary};
    if (!file) throw BillError(path + ": cannot open: " + std::strerror(errno));
    BillCopy bill{.copy = std::make_unique<PrivateCopy>()};
    std::ofstream copy{bill.copy->path(), std::ios::binary | std::ios::trunc};
    if (!copy) throw BillError(bill.copy->path() + ": cannot write: " + std::strerror(errno));
    Sha256Stream digest;
    pqxx::work tx{connection};
    std::string chunk(kBillChunkBytes, '\0');
    std::size_t total = 0;
    for (int n = 0;; ++n) {
        file.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        const auto got = static_cast<std::size_t>(file.gcount());
        if (got == 0) break;
        total += got;
        if (total > kBillBytesMax) {
            throw BillError(path + ": the bill is larger than " + std::to_string(kBillBytesMax) +
                            " bytes");
        }
        digest.Update(std::string_view(chunk.data(), got));
        copy.write(chunk.data(), static_cast<std::streamsize>(got));
        tx.exec_params("INSERT INTO reconcile_bill_bytes VALUES ($1, decode($2, 'hex'))", n,
                       HexLower(std::string_view(chunk.data(), got)));
    }
    if (file.bad()) throw BillError(path + ": cannot read: " + std::strerror(errno));
    copy.close();
    if (!copy) throw BillError(bill.copy->path() + ": cannot write: " + std::strerror(errno));
    if (total == 0) throw BillError(path + ": the file is empty");
    tx.commit();
    bill.sha256 = digest.HexDigest();
    return bill;
}

// Parses the bill (the private copy at `copy_path`) into reconcile_bill, a batch at a time.
// Throws BillError.
std::int64_t LoadEntries(pqxx::connection& connection, const ReconcileOptions& options,
                         const std::string& copy_path) {
    // Messages name the file the user gave, not the private copy.
    const auto refused = [&](const std::string& what) {
        std::string message = what;
        const std::size_t at = message.find(copy_path);
        if (at == std::string::npos) return BillError(options.bill_path + ": " + message);
        message.replace(at, copy_path.size(), options.bill_path);
        return BillError(message);
    };
    std::unique_ptr<ByteStream> stream;
    try {
        if (options.platform == Platform::kAlipay && LooksLikeZip(copy_path)) {
            stream = OpenZipEntry(copy_path, kAlipayDetailSuffix);
        } else {
            stream = OpenTextOrGzip(copy_path);
        }
    } catch (const BillError& error) {
        throw refused(error.what());
    }
    LineReader lines{*stream};
    pqxx::work tx{connection};
    json batch = json::array();
    std::int64_t read = 0;
    const auto flush = [&] {
        if (batch.empty()) return;
        tx.exec_params(kInsertEntries, batch.dump());
        read += static_cast<std::int64_t>(batch.size());
        batch = json::array();
        if (options.progress) options.progress("reading", read, 0);
    };
    const EntrySink each = [&](const BillEntry& entry) {
        // Every text here was checked by the parser (a key, platform ids of printable ASCII,
        // a currency code): dump() cannot meet invalid UTF-8. The raw line travels as hex.
        batch.push_back({{"line_number", entry.line_number},
                         {"event_type", projections::ToString(entry.event_type)},
                         {"out_trade_no", entry.out_trade_no},
                         {"platform_id", entry.platform_id},
                         {"amount", entry.amount},
                         {"currency", entry.currency},
                         {"occurred_at", entry.occurred_at},
                         {"pending", entry.pending},
                         {"raw", HexLower(entry.raw_line)},
                         {"payment_id", entry.payment_id}});
        if (batch.size() >= kRowsPerBatch) flush();
    };
    BillTotals totals;
    try {
        totals = options.platform == Platform::kWechat
                     ? ParseWechatBill(lines, options.wechat_mch_ids, each)
                     : ParseAlipayBill(lines, options.date, each, options.alipay_seller_id);
        flush();
    } catch (const BillError& error) {
        throw refused(error.what());
    } catch (const json::exception& error) {
        // Defence in depth: the parsers refuse such text first.
        throw refused("the bill holds text that is not UTF-8 (" + std::string(error.what()) + ")");
    }
    tx.exec("ANALYZE reconcile_bill");
    tx.commit();
    return totals.rows;
}

std::optional<Side> SideOf(const pqxx::row& row, int id, int amount, int currency) {
    if (row[id].is_null()) return std::nullopt;
    return Side{.id = row[id].as<std::string>(),
                .amount = row[amount].as<std::int64_t>(),
                .currency = row[currency].as<std::string>()};
}

// The sources as one parameter, for `= ANY(string_to_array($n, ','))`. No source has a comma.
std::string SourceList(const std::vector<std::string>& sources) {
    std::string out;
    for (const std::string& source : sources) {
        PAYLEDGER_ASSERT(source.find(',') == std::string::npos);
        if (!out.empty()) out += ',';
        out += source;
    }
    return out;
}

class Classifier {
public:
    Classifier(pqxx::transaction_base& tx, ReconcileReport& report, bool apply)
        : tx_(tx), report_(report), apply_(apply) {}

    void Entries() {
        tx_.exec(kDeclareEntries);
        for (;;) {
            const pqxx::result rows = tx_.exec("FETCH FORWARD 1000 FROM reconcile_entries");
            if (rows.empty()) break;
            for (const pqxx::row& row : rows) Entry(row);
            Flush();
        }
        tx_.exec("CLOSE reconcile_entries");
    }

    // The day's events from the platform's channels that no entry names (missing_in_bill).
    void LedgerOnly(const std::vector<std::string>& sources, projections::TimeMicros start,
                    projections::TimeMicros end) {
        tx_.exec_params(
            "DECLARE reconcile_ledger NO SCROLL CURSOR FOR "
            "SELECT e.event_type, e.out_trade_no, e.transaction_id, e.amount FROM ledger_events e "
            "WHERE e.event_type IN ('PAYMENT_SUCCEEDED', 'REFUND_SUCCEEDED') "
            "AND e.occurred_at >= 'epoch'::timestamptz + $1::bigint * interval '1 microsecond' "
            "AND e.occurred_at < 'epoch'::timestamptz + $2::bigint * interval '1 microsecond' "
            "AND e.source = ANY(string_to_array($3::text, ',')) "
            "AND NOT EXISTS (SELECT 1 FROM reconcile_bill b WHERE b.out_trade_no = "
            "e.out_trade_no AND b.event_type = e.event_type)",
            start, end, SourceList(sources));
        for (;;) {
            const pqxx::result rows = tx_.exec("FETCH FORWARD 1000 FROM reconcile_ledger");
            if (rows.empty()) break;
            for (const pqxx::row& row : rows) {
                Count(Category::kMissingInBill);
                Add(std::nullopt, Category::kMissingInBill, row[0].as<std::string>(),
                    row[1].as<std::string>(), std::nullopt,
                    row[2].as<std::string>() + ":" + row[3].as<std::string>(), false, std::nullopt);
            }
            Flush();
        }
        tx_.exec("CLOSE reconcile_ledger");
    }

private:
    void Entry(const pqxx::row& row) {
        const std::optional<EventType> type = projections::ParseEventType(row[1].c_str());
        PAYLEDGER_ASSERT(type.has_value());
        const Side bill{.id = row[3].as<std::string>(),
                        .amount = row[4].as<std::int64_t>(),
                        .currency = row[5].as<std::string>()};
        const projections::LedgerFacts ledger{
            .order = row[7].is_null()
                         ? std::nullopt
                         : std::optional<Side>(Side{.amount = row[7].as<std::int64_t>(),
                                                    .currency = row[8].as<std::string>()}),
            .event = SideOf(row, 9, 10, 11)};
        const Category category = projections::ClassifyEntry(bill, row[6].as<bool>(), ledger);
        Count(category);
        if (category == Category::kMatched || category == Category::kPending) return;
        // One entry per key may be applied (docs/reconciliation.md#matching). A key the bill names
        // twice is classified entry by entry, and never applied: which entry would be the event?
        std::optional<std::string> refusal;
        if (apply_ && category == Category::kMissingInLedger) {
            const std::int64_t key_count = row[12].as<std::int64_t>();
            refusal =
                key_count > 1
                    ? std::optional<std::string>("the bill has " + std::to_string(key_count) +
                                                 " entries for this event type and out_trade_no")
                    : projections::ApplyRefusal(*type, bill, *ledger.order);
        }
        const bool apply = apply_ && category == Category::kMissingInLedger && !refusal;
        Add(row[0].as<std::int64_t>(), category, row[1].as<std::string>(), row[2].as<std::string>(),
            projections::SideText(bill),
            ledger.event ? std::optional(projections::SideText(ledger.event)) : std::nullopt, apply,
            refusal);
    }

    void Count(Category category) { ++report_.counts.at(static_cast<std::size_t>(category)); }

    void Add(std::optional<std::int64_t> line_number, Category category,
             const std::string& event_type, const std::string& out_trade_no,
             const std::optional<std::string>& bill, const std::optional<std::string>& ledger,
             bool apply, const std::optional<std::string>& reason) {
        batch_.push_back({{"line_number", line_number ? json(*line_number) : json(nullptr)},
                          {"category_rank", static_cast<int>(category)},
                          {"category", projections::ToString(category)},
                          {"event_type", event_type},
                          {"out_trade_no", out_trade_no},
                          {"bill", bill ? json(*bill) : json(nullptr)},
                          {"ledger", ledger ? json(*ledger) : json(nullptr)},
                          {"apply", apply},
                          {"reason", reason ? json(*reason) : json(nullptr)}});
    }

    void Flush() {
        if (batch_.empty()) return;
        tx_.exec_params(kInsertDifferences, batch_.dump());
        batch_ = json::array();
    }

    pqxx::transaction_base& tx_;
    ReconcileReport& report_;
    const bool apply_;
    json batch_ = json::array();
};

}  // namespace

std::optional<std::pair<projections::TimeMicros, projections::TimeMicros>> ShanghaiDay(
    std::string_view date) {
    if (date.size() != 10) return std::nullopt;
    const std::optional<projections::TimeMicros> start =
        projections::ParseShanghaiDashed(std::string(date) + " 00:00:00");
    if (!start) return std::nullopt;
    constexpr projections::TimeMicros kDayMicros = 86'400'000'000;  // No daylight saving.
    return std::pair{*start, *start + kDayMicros};
}

std::vector<std::string> LedgerSources(Platform platform) {
    switch (platform) {
        case Platform::kWechat:
            return {"wechat_v2", "wechat_v3", "wechat_bill", "wechat_v2_query", "wechat_v3_query"};
        case Platform::kAlipay:
            return {"alipay", "alipay_bill", "alipay_query"};
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

ReconcileReport Reconcile(const std::string& database_url, const ReconcileOptions& options,
                          std::ostream& out, std::ostream* log) {
    const auto day = ShanghaiDay(options.date);
    if (!day) throw BillError("--date must be a date YYYY-MM-DD, not \"" + options.date + "\"");
    if (options.platform == Platform::kWechat && options.wechat_mch_ids.empty()) {
        throw BillError(
            "reconcile wechat needs wechat_v2.mch_id or wechat_v3.mchid in the config: the "
            "bill's 商户号 must be one of them");
    }
    std::unique_ptr<pqxx::connection> connection = Connect(database_url, kSession);
    {
        pqxx::work tx{*connection};
        tx.exec(kCreateTemporaryTables);
        tx.commit();
    }
    // The file is read once, and its size checked, before anything is parsed or applied.
    const BillCopy bill = CopyBill(*connection, options.bill_path);
    ReconcileReport report;
    report.rows = LoadEntries(*connection, options, bill.copy->path());
    {
        pqxx::work tx{*connection};
        Classifier classifier{tx, report, options.apply};
        classifier.Entries();
        classifier.LedgerOnly(LedgerSources(options.platform), day->first, day->second);
        tx.commit();
    }
    if (options.before_apply) options.before_apply();
    if (options.apply) {
        // From here on events may be appended: the run is stored whatever happens next.
        try {
            if (std::optional<std::string> failure =
                    ApplyMissing(*connection, database_url, options, bill.sha256, report)) {
                report.failure = std::move(*failure);
            }
        } catch (const std::exception& error) {
            report.failure = std::string("--apply stopped: ") + error.what();
        }
    }
    report.ok = report.failure.empty();
    for (int i = 0; i < projections::kCategoryCount; ++i) {
        if (report.counts.at(static_cast<std::size_t>(i)) > 0 &&
            IsDifference(static_cast<Category>(i))) {
            report.ok = false;
        }
    }
    if (std::optional<std::string> failure =
            Record(*connection, database_url, options, bill, report)) {
        report.failure += (report.failure.empty() ? "" : "; ") + *failure;
        // The session is gone: the lines it held cannot be printed.
        return report;
    }
    if (options.progress) options.progress("done", 0, 0);
    Print(*connection, options, report, out);
    if (log != nullptr) PrintReasons(*connection, *log);
    return report;
}

}  // namespace payledger::ledger::reconcile
