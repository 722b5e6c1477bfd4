#include "ledger/reconcile/reconciliation.hpp"

#include <openssl/evp.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "ledger/committer.hpp"
#include "ledger/database.hpp"
#include "ledger/reconcile/alipay_bill.hpp"
#include "ledger/reconcile/bill_input.hpp"
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
constexpr std::size_t kRowsPerBatch = 1000;           // Rows per insert and per FETCH.
constexpr std::size_t kAppliesPerRound = 500;         // Below the committer's queue_max.
// A 200 000-row bill is one statement of a few seconds; the service's 10 s would be tight.
const SessionSettings kSession{.application_name = "payledger reconcile",
                               .statement_timeout = std::chrono::minutes{10},
                               .lock_timeout = std::chrono::seconds{30},
                               .idle_in_transaction_timeout = std::chrono::minutes{10}};

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
    -- SPEC §10: one entry per (event type, out_trade_no).
    CONSTRAINT reconcile_bill_one_per_key UNIQUE (out_trade_no, event_type)
);
CREATE TEMPORARY TABLE reconcile_differences (
    line_number   bigint,  -- The bill's line; null for missing_in_bill.
    category_rank integer NOT NULL,
    category      text NOT NULL,
    event_type    text COLLATE "C" NOT NULL,
    out_trade_no  text COLLATE "C" NOT NULL,
    bill          text,
    ledger        text,
    apply         boolean NOT NULL DEFAULT false
);
)sql";

constexpr const char* kInsertEntries = R"sql(
INSERT INTO reconcile_bill
SELECT * FROM json_to_recordset($1::json) AS x(line_number bigint, event_type text,
    out_trade_no text, platform_id text, amount bigint, currency text, occurred_at bigint,
    pending boolean, raw text)
)sql";

constexpr const char* kInsertDifferences = R"sql(
INSERT INTO reconcile_differences
    (line_number, category_rank, category, event_type, out_trade_no, bill, ledger, apply)
SELECT * FROM json_to_recordset($1::json) AS x(line_number bigint, category_rank integer,
    category text, event_type text, out_trade_no text, bill text, ledger text, apply boolean)
)sql";

// Every entry with what the ledger holds for its key: the order, and the event of its type
// from any source on any day (SPEC §10 `matched`).
constexpr const char* kDeclareEntries = R"sql(
DECLARE reconcile_entries NO SCROLL CURSOR FOR
SELECT b.line_number, b.event_type, b.out_trade_no, b.platform_id, b.amount, b.currency,
       b.pending, o.amount, o.currency, e.transaction_id, e.amount, e.currency
FROM reconcile_bill AS b
LEFT JOIN ledger_events AS o
       ON o.out_trade_no = b.out_trade_no AND o.event_type = 'ORDER_CREATED'
LEFT JOIN ledger_events AS e
       ON e.out_trade_no = b.out_trade_no AND e.event_type = b.event_type
ORDER BY b.line_number
)sql";

std::string Hex(std::string_view bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) {
        const auto byte = static_cast<unsigned char>(c);
        out += kDigits[byte >> 4];
        out += kDigits[byte & 0x0f];
    }
    return out;
}

std::string Unhex(std::string_view hex) {
    PAYLEDGER_ASSERT(hex.size() % 2 == 0);
    const auto value = [](char c) {
        if (c >= '0' && c <= '9') return c - '0';
        PAYLEDGER_ASSERT(c >= 'a' && c <= 'f');
        return c - 'a' + 10;
    };
    std::string out;
    out.reserve(hex.size() / 2);
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        out += static_cast<char>(value(hex[i]) * 16 + value(hex[i + 1]));
    }
    return out;
}

// Stores the file's bytes in pieces and returns their SHA-256 (hex).
std::string StoreBillBytes(pqxx::connection& connection, const std::string& path) {
    std::ifstream file{path, std::ios::binary};
    if (!file) throw BillError(path + ": cannot open: " + std::strerror(errno));
    EVP_MD_CTX* digest = EVP_MD_CTX_new();
    PAYLEDGER_ASSERT(digest != nullptr);
    PAYLEDGER_ASSERT(EVP_DigestInit_ex(digest, EVP_sha256(), nullptr) == 1);
    pqxx::work tx{connection};
    std::string chunk(kBillChunkBytes, '\0');
    std::size_t total = 0;
    for (int n = 0;; ++n) {
        file.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        const auto got = static_cast<std::size_t>(file.gcount());
        if (got == 0) break;
        total += got;
        PAYLEDGER_ASSERT(EVP_DigestUpdate(digest, chunk.data(), got) == 1);
        tx.exec_params("INSERT INTO reconcile_bill_bytes VALUES ($1, decode($2, 'hex'))", n,
                       Hex(std::string_view(chunk.data(), got)));
    }
    if (file.bad()) throw BillError(path + ": cannot read: " + std::strerror(errno));
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    PAYLEDGER_ASSERT(EVP_DigestFinal_ex(digest, out, &size) == 1);
    EVP_MD_CTX_free(digest);
    if (total == 0) throw BillError(path + ": the file is empty");
    tx.commit();
    return Hex(std::string_view(reinterpret_cast<const char*>(out), size));
}

// Parses the bill into reconcile_bill, a batch at a time. Throws BillError.
std::int64_t LoadEntries(pqxx::connection& connection, const ReconcileOptions& options) {
    std::unique_ptr<ByteStream> stream;
    if (options.platform == Platform::kAlipay && LooksLikeZip(options.bill_path)) {
        stream = OpenZipEntry(options.bill_path, kAlipayDetailSuffix);
    } else {
        stream = OpenTextOrGzip(options.bill_path);
    }
    LineReader lines{*stream};
    pqxx::work tx{connection};
    json batch = json::array();
    const auto flush = [&] {
        if (batch.empty()) return;
        try {
            tx.exec_params(kInsertEntries, batch.dump());
        } catch (const pqxx::unique_violation& error) {
            throw BillError(
                "the bill has two entries for one event type and out_trade_no (SPEC §10: one "
                "entry per key): " +
                std::string(error.what()));
        }
        batch = json::array();
    };
    const EntrySink each = [&](const BillEntry& entry) {
        batch.push_back({{"line_number", entry.line_number},
                         {"event_type", projections::ToString(entry.event_type)},
                         {"out_trade_no", entry.out_trade_no},
                         {"platform_id", entry.platform_id},
                         {"amount", entry.amount},
                         {"currency", entry.currency},
                         {"occurred_at", entry.occurred_at},
                         {"pending", entry.pending},
                         {"raw", Hex(entry.raw_line)}});
        if (batch.size() >= kRowsPerBatch) flush();
    };
    BillTotals totals;
    try {
        totals = options.platform == Platform::kWechat
                     ? ParseWechatBill(lines, options.wechat_mch_ids, each)
                     : ParseAlipayBill(lines, options.date, each);
    } catch (const BillError& error) {
        throw BillError(options.bill_path + ": " + error.what());
    }
    flush();
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

std::string QuotedList(pqxx::transaction_base& tx, const std::vector<std::string>& values) {
    std::string out;
    for (const std::string& value : values) {
        if (!out.empty()) out += ", ";
        out += tx.quote(value);
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

    // SPEC §10: the day's events from the platform's channels that no entry names.
    void LedgerOnly(const std::vector<std::string>& sources, projections::TimeMicros start,
                    projections::TimeMicros end) {
        tx_.exec(
            "DECLARE reconcile_ledger NO SCROLL CURSOR FOR "
            "SELECT e.event_type, e.out_trade_no, e.transaction_id, e.amount FROM ledger_events e "
            "WHERE e.event_type IN ('PAYMENT_SUCCEEDED', 'REFUND_SUCCEEDED') "
            "AND e.occurred_at >= 'epoch'::timestamptz + " +
            tx_.quote(start) +
            " * interval '1 microsecond' AND e.occurred_at < 'epoch'::timestamptz + " +
            tx_.quote(end) + " * interval '1 microsecond' AND e.source IN (" +
            QuotedList(tx_, sources) +
            ") AND NOT EXISTS (SELECT 1 FROM reconcile_bill b WHERE b.out_trade_no = "
            "e.out_trade_no AND b.event_type = e.event_type)");
        for (;;) {
            const pqxx::result rows = tx_.exec("FETCH FORWARD 1000 FROM reconcile_ledger");
            if (rows.empty()) break;
            for (const pqxx::row& row : rows) {
                Count(Category::kMissingInBill);
                Add(std::nullopt, Category::kMissingInBill, row[0].as<std::string>(),
                    row[1].as<std::string>(), std::nullopt,
                    row[2].as<std::string>() + ":" + row[3].as<std::string>(), false);
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
        const bool apply = apply_ && category == Category::kMissingInLedger &&
                           !projections::ApplyRefusal(*type, bill, *ledger.order).has_value();
        Add(row[0].as<std::int64_t>(), category, row[1].as<std::string>(), row[2].as<std::string>(),
            projections::SideText(bill),
            ledger.event ? std::optional(projections::SideText(ledger.event)) : std::nullopt,
            apply);
    }

    void Count(Category category) { ++report_.counts.at(static_cast<std::size_t>(category)); }

    void Add(std::optional<std::int64_t> line_number, Category category,
             const std::string& event_type, const std::string& out_trade_no,
             const std::optional<std::string>& bill, const std::optional<std::string>& ledger,
             bool apply) {
        batch_.push_back({{"line_number", line_number ? json(*line_number) : json(nullptr)},
                          {"category_rank", static_cast<int>(category)},
                          {"category", projections::ToString(category)},
                          {"event_type", event_type},
                          {"out_trade_no", out_trade_no},
                          {"bill", bill ? json(*bill) : json(nullptr)},
                          {"ledger", ledger ? json(*ledger) : json(nullptr)},
                          {"apply", apply}});
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

projections::TimeMicros NowMicros() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Waits for the committer's answers to one round of deliveries.
class Answers {
public:
    explicit Answers(std::size_t count) : results_(count), left_(count) {}

    Committer::Done For(std::size_t index) {
        return [this, index](DeliveryResult result) {
            std::lock_guard lock{mutex_};
            results_.at(index) = std::move(result);
            if (--left_ == 0) done_.notify_all();
        };
    }

    std::vector<DeliveryResult> Wait() {
        std::unique_lock lock{mutex_};
        done_.wait(lock, [this] { return left_ == 0; });
        return std::move(results_);
    }

private:
    std::mutex mutex_;
    std::condition_variable done_;
    std::vector<DeliveryResult> results_;
    std::size_t left_;
};

// --apply: every entry marked `apply`, through the callbacks' write path (SPEC §10).
void ApplyMissing(pqxx::connection& connection, const std::string& database_url,
                  const ReconcileOptions& options, const std::string& bill_sha256,
                  ReconcileReport& report) {
    const projections::Source source = options.platform == Platform::kWechat
                                           ? projections::Source::kWechatBill
                                           : projections::Source::kAlipayBill;
    Committer committer{{.url = database_url, .session = kSession}};
    std::int64_t after = 0;
    for (;;) {
        pqxx::result rows;
        {
            pqxx::read_transaction tx{connection};
            rows = tx.exec_params(
                "SELECT b.line_number, b.event_type, b.out_trade_no, b.platform_id, b.amount, "
                "b.currency, b.occurred_at, b.raw FROM reconcile_differences d "
                "JOIN reconcile_bill b USING (line_number) "
                "WHERE d.apply AND d.line_number > $1 ORDER BY d.line_number LIMIT $2",
                after, static_cast<std::int64_t>(kAppliesPerRound));
        }
        if (rows.empty()) break;
        Answers answers{rows.size()};
        const projections::TimeMicros now = NowMicros();
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const pqxx::row row = rows[static_cast<pqxx::result::size_type>(i)];
            const std::int64_t line_number = row[0].as<std::int64_t>();
            const json evidence = {{"bill", ToString(options.platform)},
                                   {"bill_date", options.date},
                                   {"bill_line", line_number},
                                   {"bill_sha256", bill_sha256}};
            const std::optional<EventType> type = projections::ParseEventType(row[1].c_str());
            PAYLEDGER_ASSERT(type.has_value());
            Delivery delivery{
                .receipt = {.source = source,
                            .received_at = now,
                            .peer = "payledger reconcile",
                            .headers = evidence.dump(),
                            .body = Unhex(row[7].as<std::string>()),
                            .out_trade_no = row[2].as<std::string>()},
                .verdict = projections::Outcome::kAppended,
                .event = projections::Event{.out_trade_no = row[2].as<std::string>(),
                                            .event_type = *type,
                                            .source = source,
                                            .amount = row[4].as<std::int64_t>(),
                                            .currency = row[5].as<std::string>(),
                                            .transaction_id = row[3].as<std::string>(),
                                            .occurred_at = row[6].as<std::int64_t>(),
                                            .data = evidence.dump()}};
            committer.Submit(std::move(delivery), answers.For(i));
            after = line_number;
        }
        const std::vector<DeliveryResult> results = answers.Wait();
        json applied = json::array();
        for (std::size_t i = 0; i < results.size(); ++i) {
            const DeliveryResult& result = results[i];
            const pqxx::row row = rows[static_cast<pqxx::result::size_type>(i)];
            if (result.outcome == projections::Outcome::kUnavailable) {
                throw std::runtime_error("--apply could not write line " +
                                         row[0].as<std::string>() + ": " + result.message);
            }
            if (result.outcome != projections::Outcome::kAppended) continue;  // Stays missing.
            applied.push_back(
                {{"line_number", row[0].as<std::int64_t>()},
                 {"ledger", row[3].as<std::string>() + ":" + row[4].as<std::string>()}});
        }
        if (applied.empty()) continue;
        pqxx::work tx{connection};
        const pqxx::result updated = tx.exec_params(
            "UPDATE reconcile_differences d SET category = 'applied', category_rank = $2, "
            "ledger = x.ledger FROM json_to_recordset($1::json) AS x(line_number bigint, "
            "ledger text) WHERE d.line_number = x.line_number",
            applied.dump(), static_cast<int>(Category::kApplied));
        PAYLEDGER_ASSERT(updated.affected_rows() == applied.size());
        tx.commit();
        const auto moved = static_cast<std::int64_t>(applied.size());
        report.counts.at(static_cast<std::size_t>(Category::kMissingInLedger)) -= moved;
        report.counts.at(static_cast<std::size_t>(Category::kApplied)) += moved;
    }
    committer.Stop();
}

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

json CountsJson(const ReconcileReport& report) {
    json counts = {{"rows", report.rows}};
    for (int i = 0; i < projections::kCategoryCount; ++i) {
        counts[std::string(projections::ToString(static_cast<Category>(i)))] =
            report.counts.at(static_cast<std::size_t>(i));
    }
    return counts;
}

constexpr const char* kRecordSql = R"sql(
INSERT INTO reconciliations (platform, date, bill, bill_sha256, applied, counts, ok, differences)
SELECT $1, $2::date, (SELECT string_agg(bytes, ''::bytea ORDER BY n) FROM reconcile_bill_bytes),
       $3, $4, $5::jsonb, $6,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'category', category, 'event_type', event_type, 'out_trade_no', out_trade_no,
                   'bill', bill, 'ledger', ledger) ORDER BY category_rank, event_type,
                   out_trade_no), '[]'::jsonb)
        FROM reconcile_differences)
RETURNING id
)sql";

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
        "ORDER BY category_rank, event_type, out_trade_no");
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
    tx.commit();
    out.flush();
}

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
            return {"wechat_v2", "wechat_v3", "wechat_bill"};
        case Platform::kAlipay:
            return {"alipay", "alipay_bill"};
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

ReconcileReport Reconcile(const std::string& database_url, const ReconcileOptions& options,
                          std::ostream& out) {
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
    const std::string bill_sha256 = StoreBillBytes(*connection, options.bill_path);
    ReconcileReport report;
    report.rows = LoadEntries(*connection, options);
    {
        pqxx::work tx{*connection};
        Classifier classifier{tx, report, options.apply};
        classifier.Entries();
        classifier.LedgerOnly(LedgerSources(options.platform), day->first, day->second);
        tx.commit();
    }
    if (options.apply) ApplyMissing(*connection, database_url, options, bill_sha256, report);
    report.ok = true;
    for (int i = 0; i < projections::kCategoryCount; ++i) {
        if (report.counts.at(static_cast<std::size_t>(i)) > 0 &&
            IsDifference(static_cast<Category>(i))) {
            report.ok = false;
        }
    }
    {
        pqxx::work tx{*connection};
        // Under the writer lock, as every append-only table: a reader paging by id never
        // skips a run (SPEC §7).
        tx.exec_params("SELECT pg_advisory_xact_lock($1)", kWriterLockKey);
        const pqxx::result id =
            tx.exec_params(kRecordSql, std::string(ToString(options.platform)), options.date,
                           bill_sha256, options.apply, CountsJson(report).dump(), report.ok);
        report.id = id[0][0].as<std::int64_t>();
        tx.commit();
    }
    Print(*connection, options, report, out);
    return report;
}

}  // namespace payledger::ledger::reconcile
