#include "ledger/reconcile/reconciliation.hpp"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
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

constexpr const char* kInsertDifferences = R"sql(
INSERT INTO reconcile_differences
    (line_number, category_rank, category, event_type, out_trade_no, bill, ledger, apply, reason)
SELECT * FROM json_to_recordset($1::json) AS x(line_number bigint, category_rank integer,
    category text, event_type text, out_trade_no text, bill text, ledger text, apply boolean,
    reason text)
)sql";

// Every entry with what the ledger holds for its key: the order, and the event of its type
// from any source on any day (SPEC §10 `matched`).
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

struct DigestFree {
    void operator()(EVP_MD_CTX* digest) const { EVP_MD_CTX_free(digest); }
};

// A file of our own that holds the bill's bytes as they were read, removed when it goes.
class PrivateCopy {
public:
    PrivateCopy() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "payledger-reconcile-XXXXXX").string();
        const int fd = ::mkstemp(pattern.data());  // Mode 0600, a name no one else has.
        if (fd < 0) throw BillError(std::string("cannot create a temporary file: ") +
                                    std::strerror(errno));
        ::close(fd);
        path_ = pattern;
    }
    ~PrivateCopy() { std::remove(path_.c_str()); }
    PrivateCopy(const PrivateCopy&) = delete;
    PrivateCopy& operator=(const PrivateCopy&) = delete;
    [[nodiscard]] const std::string& path() const { return path_; }

private:
    std::string path_;
};

// What CopyBill read: the SHA-256 (hex) of the bytes stored, and those very bytes in a
// private file for the parser.
struct BillCopy {
    std::string sha256{};
    std::unique_ptr<PrivateCopy> copy{};
};

// Reads the bill file once: its bytes go, a piece at a time, to reconcile_bill_bytes, to the
// SHA-256 and to a private copy, which the parser then reads (SPEC §10: the bytes stored and
// their digest are the bytes reconciled, even if the file changes meanwhile). Throws
// BillError for a file that cannot be read, is empty, or is over kBillBytesMax.
BillCopy CopyBill(pqxx::connection& connection, const std::string& path) {
    std::ifstream file{path, std::ios::binary};
    if (!file) throw BillError(path + ": cannot open: " + std::strerror(errno));
    BillCopy bill{.copy = std::make_unique<PrivateCopy>()};
    std::ofstream copy{bill.copy->path(), std::ios::binary | std::ios::trunc};
    if (!copy) throw BillError(bill.copy->path() + ": cannot write: " + std::strerror(errno));
    const std::unique_ptr<EVP_MD_CTX, DigestFree> digest{EVP_MD_CTX_new()};
    PAYLEDGER_ASSERT(digest != nullptr);
    PAYLEDGER_ASSERT(EVP_DigestInit_ex(digest.get(), EVP_sha256(), nullptr) == 1);
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
        PAYLEDGER_ASSERT(EVP_DigestUpdate(digest.get(), chunk.data(), got) == 1);
        copy.write(chunk.data(), static_cast<std::streamsize>(got));
        tx.exec_params("INSERT INTO reconcile_bill_bytes VALUES ($1, decode($2, 'hex'))", n,
                       Hex(std::string_view(chunk.data(), got)));
    }
    if (file.bad()) throw BillError(path + ": cannot read: " + std::strerror(errno));
    copy.close();
    if (!copy) throw BillError(bill.copy->path() + ": cannot write: " + std::strerror(errno));
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    PAYLEDGER_ASSERT(EVP_DigestFinal_ex(digest.get(), out, &size) == 1);
    if (total == 0) throw BillError(path + ": the file is empty");
    tx.commit();
    bill.sha256 = Hex(std::string_view(reinterpret_cast<const char*>(out), size));
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
    const auto flush = [&] {
        if (batch.empty()) return;
        tx.exec_params(kInsertEntries, batch.dump());
        batch = json::array();
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
                         {"raw", Hex(entry.raw_line)},
                         {"payment_id", entry.payment_id}});
        if (batch.size() >= kRowsPerBatch) flush();
    };
    BillTotals totals;
    try {
        totals = options.platform == Platform::kWechat
                     ? ParseWechatBill(lines, options.wechat_mch_ids, each)
                     : ParseAlipayBill(lines, options.date, each);
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

    // SPEC §10: the day's events from the platform's channels that no entry names.
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
                    row[2].as<std::string>() + ":" + row[3].as<std::string>(), false,
                    std::nullopt);
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
        // SPEC §10: one entry per key may be applied. A key the bill names twice is
        // classified entry by entry, and never applied: which entry would be the event?
        std::optional<std::string> refusal;
        if (apply_ && category == Category::kMissingInLedger) {
            const std::int64_t key_count = row[12].as<std::int64_t>();
            refusal = key_count > 1 ? std::optional<std::string>(
                                          "the bill has " + std::to_string(key_count) +
                                          " entries for this event type and out_trade_no")
                                    : projections::ApplyRefusal(*type, bill, *ledger.order);
        }
        const bool apply = apply_ && category == Category::kMissingInLedger && !refusal;
        Add(row[0].as<std::int64_t>(), category, row[1].as<std::string>(), row[2].as<std::string>(),
            projections::SideText(bill),
            ledger.event ? std::optional(projections::SideText(ledger.event)) : std::nullopt,
            apply, refusal);
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

// What one answered apply changes in reconcile_differences and the counts.
struct ApplyOutcome {
    std::int64_t line_number = 0;
    std::optional<Category> category{};  // nullopt: matched after all (the row goes).
    std::optional<std::string> ledger{};
    std::optional<std::string> reason{};
};

// A conflict: the key was taken meanwhile by another event. Classifies the entry against it.
ApplyOutcome Reclassify(pqxx::transaction_base& tx, const pqxx::row& row, std::int64_t line_number,
                        const std::string& message) {
    const pqxx::result stored = tx.exec_params(
        "SELECT transaction_id, amount, currency FROM ledger_events "
        "WHERE out_trade_no = $1 AND event_type = $2",
        row[2].as<std::string>(), row[1].as<std::string>());
    PAYLEDGER_ASSERT(stored.size() == 1);  // A conflict names the event that holds the key.
    const Side event{.id = stored[0][0].as<std::string>(),
                     .amount = stored[0][1].as<std::int64_t>(),
                     .currency = stored[0][2].as<std::string>()};
    const Side bill{.id = row[3].as<std::string>(),
                    .amount = row[4].as<std::int64_t>(),
                    .currency = row[5].as<std::string>()};
    const Category category =
        projections::ClassifyEntry(bill, false, {.order = Side{}, .event = event});
    // The same id, amount and currency is matched (SPEC §10), whatever else differed.
    if (category == Category::kMatched) return {.line_number = line_number};
    return {.line_number = line_number,
            .category = category,
            .ledger = projections::SideText(event),
            .reason = "not applied: conflict: " + message};
}

// Writes a round's outcomes into reconcile_differences, then into the counts.
void RecordRound(pqxx::connection& connection, const std::vector<ApplyOutcome>& outcomes,
                 ReconcileReport& report) {
    if (outcomes.empty()) return;
    json updates = json::array();
    json removed = json::array();
    for (const ApplyOutcome& outcome : outcomes) {
        if (!outcome.category) {
            removed.push_back({{"line_number", outcome.line_number}});
            continue;
        }
        updates.push_back(
            {{"line_number", outcome.line_number},
             {"category_rank", static_cast<int>(*outcome.category)},
             {"category", projections::ToString(*outcome.category)},
             {"ledger", outcome.ledger ? json(*outcome.ledger) : json(nullptr)},
             {"reason", outcome.reason ? json(*outcome.reason) : json(nullptr)}});
    }
    pqxx::work tx{connection};
    const pqxx::result updated = tx.exec_params(
        "UPDATE reconcile_differences d SET category = x.category, "
        "category_rank = x.category_rank, ledger = coalesce(x.ledger, d.ledger), "
        "reason = x.reason, apply = false FROM json_to_recordset($1::json) AS x(line_number "
        "bigint, category_rank integer, category text, ledger text, reason text) "
        "WHERE d.line_number = x.line_number",
        updates.dump());
    PAYLEDGER_ASSERT(updated.affected_rows() == updates.size());
    const pqxx::result deleted = tx.exec_params(
        "DELETE FROM reconcile_differences d USING json_to_recordset($1::json) AS "
        "x(line_number bigint) WHERE d.line_number = x.line_number",
        removed.dump());
    PAYLEDGER_ASSERT(deleted.affected_rows() == removed.size());
    tx.commit();
    for (const ApplyOutcome& outcome : outcomes) {
        const Category now = outcome.category.value_or(Category::kMatched);
        if (now == Category::kMissingInLedger) continue;
        --report.counts.at(static_cast<std::size_t>(Category::kMissingInLedger));
        ++report.counts.at(static_cast<std::size_t>(now));
    }
}

// What the committer's answer to one entry's delivery makes of it.
ApplyOutcome Answered(pqxx::connection& connection, const pqxx::row& row,
                      const DeliveryResult& result) {
    const std::int64_t line_number = row[0].as<std::int64_t>();
    switch (result.outcome) {
        case projections::Outcome::kAppended:
            return {.line_number = line_number,
                    .category = Category::kApplied,
                    .ledger = row[3].as<std::string>() + ":" + row[4].as<std::string>()};
        case projections::Outcome::kDuplicate:
            // The platform's callback committed meanwhile, with this very fingerprint.
            return {.line_number = line_number};
        case projections::Outcome::kConflict: {
            pqxx::read_transaction tx{connection};
            ApplyOutcome outcome = Reclassify(tx, row, line_number, result.message);
            tx.commit();
            return outcome;
        }
        case projections::Outcome::kMalformed:
        case projections::Outcome::kBadSignature:
        case projections::Outcome::kUnknownOrder:
        case projections::Outcome::kMismatch:
        case projections::Outcome::kIgnored:
        case projections::Outcome::kRateLimited:
        case projections::Outcome::kUnavailable:
            // Stays missing_in_ledger, with the write path's reason (SPEC §6 mismatch: the
            // refund names another payment than the stored one).
            return {.line_number = line_number,
                    .category = Category::kMissingInLedger,
                    .reason = "not applied: " +
                              std::string(projections::ToString(result.outcome)) + ": " +
                              result.message};
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

// --apply: every entry marked `apply`, through the callbacks' write path (SPEC §10). Returns
// why applying stopped part-way (the committer answered unavailable), or nullopt; what was
// applied until then is in the counts and reconcile_differences either way.
std::optional<std::string> ApplyMissing(pqxx::connection& connection,
                                        const std::string& database_url,
                                        const ReconcileOptions& options,
                                        const std::string& bill_sha256, ReconcileReport& report) {
    const projections::Source source = options.platform == Platform::kWechat
                                           ? projections::Source::kWechatBill
                                           : projections::Source::kAlipayBill;
    Committer committer{{.url = database_url, .session = kSession}};
    std::int64_t after = 0;
    std::optional<std::string> failure;
    while (!failure) {
        pqxx::result rows;
        {
            pqxx::read_transaction tx{connection};
            rows = tx.exec_params(
                "SELECT b.line_number, b.event_type, b.out_trade_no, b.platform_id, b.amount, "
                "b.currency, b.occurred_at, b.raw, b.payment_id FROM reconcile_differences d "
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
            // SPEC §6: a refund row names its payment (WeChat 微信订单号, Alipay 支付宝交易号),
            // which must be the stored payment's, as for a refund notice.
            if (*type == EventType::kRefundSucceeded) {
                delivery.claims.payment_transaction_id = row[8].as<std::string>();
            }
            committer.Submit(std::move(delivery), answers.For(i));
            after = line_number;
        }
        const std::vector<DeliveryResult> results = answers.Wait();
        std::vector<ApplyOutcome> outcomes;
        for (std::size_t i = 0; i < results.size(); ++i) {
            const pqxx::row row = rows[static_cast<pqxx::result::size_type>(i)];
            if (results[i].outcome == projections::Outcome::kUnavailable && !failure) {
                failure = "--apply could not write line " + row[0].as<std::string>() + ": " +
                          results[i].message;
            }
            outcomes.push_back(Answered(connection, row, results[i]));
        }
        RecordRound(connection, outcomes, report);
    }
    committer.Stop();
    return failure;
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
                   'bill', bill, 'ledger', ledger)
                   || CASE WHEN reason IS NULL THEN '{}'::jsonb
                           ELSE jsonb_build_object('reason', reason) END
                   ORDER BY category_rank, event_type, out_trade_no, line_number), '[]'::jsonb)
        FROM reconcile_differences)
RETURNING id
)sql";

// The fallback record when the session (and its temporary tables) is gone: the bill's bytes
// from the private copy, the counts, no differences.
constexpr const char* kRecordWithoutDifferencesSql = R"sql(
INSERT INTO reconciliations (platform, date, bill, bill_sha256, applied, counts, ok, differences)
VALUES ($1, $2::date, $3, $4, $5, $6::jsonb, false, '[]'::jsonb)
RETURNING id
)sql";

constexpr int kRecordAttemptsMax = 3;

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

// Why entries were not applied, one line each, in the output's order.
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

// Stores the run under the writer lock (a reader paging by id never skips one, SPEC §7).
// A statement that fails is tried again; a session that is gone takes its temporary tables
// with it, so the run is then stored from the private copy without its differences.
// Returns why the full record could not be written, or nullopt.
std::optional<std::string> Record(pqxx::connection& connection, const std::string& database_url,
                                  const ReconcileOptions& options, const BillCopy& bill,
                                  ReconcileReport& report) {
    const std::string platform{ToString(options.platform)};
    const std::string counts = CountsJson(report).dump();
    std::string failure;
    for (int attempt = 1; attempt <= kRecordAttemptsMax; ++attempt) {
        try {
            pqxx::work tx{connection};
            tx.exec_params("SELECT pg_advisory_xact_lock($1)", kWriterLockKey);
            const pqxx::result id = tx.exec_params(kRecordSql, platform, options.date,
                                                   bill.sha256, options.apply, counts, report.ok);
            report.id = id[0][0].as<std::int64_t>();
            tx.commit();
            return std::nullopt;
        } catch (const pqxx::in_doubt_error&) {
            // It may have committed: storing it again could record the run twice.
            throw;
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
    pqxx::work tx{*fresh};
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", kWriterLockKey);
    const pqxx::result id =
        tx.exec_params(kRecordWithoutDifferencesSql, platform, options.date,
                       pqxx::binarystring(bytes), bill.sha256, options.apply, counts);
    report.id = id[0][0].as<std::int64_t>();
    tx.commit();
    report.ok = false;
    return "the run could not be stored with its differences (" + failure +
           "); it is stored as reconciliation " + std::to_string(report.id) +
           " with its counts only";
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
    Print(*connection, options, report, out);
    if (log != nullptr) PrintReasons(*connection, *log);
    return report;
}

}  // namespace payledger::ledger::reconcile
