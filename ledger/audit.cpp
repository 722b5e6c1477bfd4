#include "ledger/audit.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <pqxx/pqxx>

#include "ledger/database.hpp"
#include "ledger/verify.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// Every receipt in id order with the event it appended (none unless the outcome is
// appended): the receipt's line fields, its stored chain, the event's fields. In COPY's binary
// format (issue 14 point 5): the bodies, chains, integers and times arrive as they are stored,
// so neither PostgreSQL nor audit spends time on text forms (measured on 1 000 000 receipts:
// this COPY in text took 5.0 s on the server, in binary 3.0 s, as much as the plain
// `COPY callback_receipts TO STDOUT` in text). libpqxx 6.4's stream_from writes
// `COPY <table> TO STDOUT`: the parenthesised query stands for the table, its own options
// follow it, and the trailing comment swallows the `TO STDOUT` libpqxx appends (the reader
// checks the binary signature, so a changed libpqxx fails loudly rather than misreading).
constexpr const char* kReceiptsCopy =
    "(SELECT r.id, r.source, r.received_at, r.outcome, r.seq, r.out_trade_no, r.body, r.chain, "
    "e.seq, e.event_type, e.out_trade_no, e.account_id, e.amount, e.currency, "
    "e.transaction_id, e.occurred_at "
    "FROM callback_receipts AS r "
    "LEFT JOIN ledger_events AS e ON r.outcome = 'appended' AND e.receipt_id = r.id "
    "ORDER BY r.id) TO STDOUT (FORMAT binary) --";

// The rows of a binary COPY (PostgreSQL's documentation, "COPY", "Binary Format"): an 11-byte
// signature, a 32-bit flags field and a header extension, then for each row a 16-bit field
// count and for each field a 32-bit length (-1: null) and its bytes, all in network order;
// a count of -1 ends the data. Each CopyData message holds whole rows.
class BinaryCopyRows {
public:
    explicit BinaryCopyRows(pqxx::stream_from& stream) : stream_(stream) {}

    // The next row (its fields stay valid until the next call); false after the last.
    bool Next() {
        if (done_) return false;
        if (rest_.empty()) {
            PAYLEDGER_ASSERT(stream_.get_raw_line(message_));  // The trailer comes first.
            rest_ = message_;
            if (!header_read_) ReadHeader();
        }
        const std::int16_t count = static_cast<std::int16_t>(Take(2));
        if (count == -1) {
            PAYLEDGER_ASSERT(rest_.empty());
            PAYLEDGER_ASSERT(!stream_.get_raw_line(message_));  // Then the COPY ends.
            done_ = true;
            return false;
        }
        PAYLEDGER_ASSERT(count >= 0);
        fields_.clear();
        for (std::int16_t i = 0; i < count; ++i) {
            const auto length = static_cast<std::int32_t>(Take(4));
            if (length == -1) {
                fields_.push_back(std::nullopt);
                continue;
            }
            PAYLEDGER_ASSERT(length >= 0 && static_cast<std::size_t>(length) <= rest_.size());
            fields_.emplace_back(rest_.substr(0, static_cast<std::size_t>(length)));
            rest_.remove_prefix(static_cast<std::size_t>(length));
        }
        return true;
    }

    [[nodiscard]] std::size_t size() const { return fields_.size(); }
    [[nodiscard]] bool null(std::size_t i) const { return !fields_.at(i).has_value(); }
    // REQUIRES: !null(i).
    [[nodiscard]] std::string_view bytes(std::size_t i) const {
        PAYLEDGER_ASSERT(!null(i));
        return *fields_[i];
    }
    // A bigint. REQUIRES: !null(i).
    [[nodiscard]] std::int64_t int8(std::size_t i) const {
        const std::string_view field = bytes(i);
        PAYLEDGER_ASSERT(field.size() == 8);
        return static_cast<std::int64_t>(BigEndian(field));
    }
    [[nodiscard]] std::optional<std::int64_t> optional_int8(std::size_t i) const {
        return null(i) ? std::nullopt : std::optional(int8(i));
    }
    // A timestamptz as microseconds since the Unix epoch (binary: since 2000-01-01 UTC).
    [[nodiscard]] projections::TimeMicros time(std::size_t i) const {
        constexpr std::int64_t kUnixToPostgresMicros = 946'684'800'000'000;
        const std::int64_t since_2000 = int8(i);
        // Not ±infinity, nor a time the receipt's line could not show (years 0 to 9999).
        PAYLEDGER_ASSERT(since_2000 > -63'082'281'600'000'000 &&
                         since_2000 < 252'455'616'000'000'000);
        return since_2000 + kUnixToPostgresMicros;
    }

private:
    static std::uint64_t BigEndian(std::string_view bytes) {
        std::uint64_t value = 0;
        for (const char byte : bytes) value = value << 8 | static_cast<unsigned char>(byte);
        return value;
    }
    std::uint64_t Take(std::size_t size) {
        PAYLEDGER_ASSERT(rest_.size() >= size);  // A row never spans two messages.
        const std::uint64_t value = BigEndian(rest_.substr(0, size));
        rest_.remove_prefix(size);
        return value;
    }
    void ReadHeader() {
        constexpr std::string_view kSignature{"PGCOPY\n\377\r\n\0", 11};
        PAYLEDGER_ASSERT(rest_.substr(0, kSignature.size()) == kSignature);
        rest_.remove_prefix(kSignature.size());
        static_cast<void>(Take(4));  // Flags: none that matter to a reader of plain types.
        const std::uint64_t extension = Take(4);
        PAYLEDGER_ASSERT(extension <= rest_.size());
        rest_.remove_prefix(extension);
        header_read_ = true;
    }

    pqxx::stream_from& stream_;
    std::string message_{};
    std::string_view rest_{};
    bool header_read_ = false;
    bool done_ = false;
    std::vector<std::optional<std::string_view>> fields_{};
};

// Events whose receipt is missing or did not append them.
constexpr const char* kOrphanEventsSql =
    "SELECT e.seq, count(*) OVER () FROM ledger_events AS e "
    "WHERE NOT EXISTS (SELECT 1 FROM callback_receipts AS r "
    "                  WHERE r.id = e.receipt_id AND r.outcome = 'appended') "
    "ORDER BY e.seq LIMIT $1";

class Breaks {
public:
    explicit Breaks(AuditReport& report) : report_(report) {}
    void Add(std::string what) {
        ++report_.break_count;
        if (report_.breaks.size() < kBreaksListedMax) report_.breaks.push_back(std::move(what));
    }

private:
    AuditReport& report_;
};

}  // namespace

AuditReport Audit(const std::string& url, const Checkpoint* checkpoint, const Ed25519Key* key,
                  const Progress& progress) {
    constexpr std::int64_t kProgressEvery = 10'000;
    PAYLEDGER_ASSERT((checkpoint == nullptr) == (key == nullptr));
    auto connection = Connect(url, LongRunningSession());
    pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> tx{*connection};
    AuditReport report;
    Breaks breaks{report};
    if (checkpoint != nullptr) {
        if (!key->Verifies(*checkpoint)) {
            breaks.Add("checkpoint of receipt " + std::to_string(checkpoint->receipt_id) +
                       ": the signature does not verify with key " + key->KeyId());
        } else if (const auto broken = CheckpointBreak(tx, *checkpoint)) {
            breaks.Add(*broken);
        }
    }
    {
        pqxx::stream_from stream{tx, kReceiptsCopy};
        BinaryCopyRows rows{stream};
        ChainValue previous = kChainStart;
        // Reused from one receipt to the next (their capacity stays): no allocation per row.
        std::string scratch;
        projections::Event stored_event;
        while (rows.Next()) {
            PAYLEDGER_ASSERT(rows.size() == 16);
            const std::int64_t id = rows.int8(0);
            const auto source = projections::ParseSource(rows.bytes(1));
            const auto outcome = projections::ParseOutcome(rows.bytes(3));
            PAYLEDGER_ASSERT(source && outcome);
            const std::optional<std::int64_t> seq = rows.optional_int8(4);
            const Sha256HexDigits body_sha256 = Sha256HexOf(rows.bytes(6));
            const std::string_view stored_bytes = rows.bytes(7);
            PAYLEDGER_ASSERT(stored_bytes.size() == kChainStart.size());  // Its CHECK.
            ChainValue stored{};
            std::copy(stored_bytes.begin(), stored_bytes.end(), stored.begin());

            const projections::Event* event = nullptr;
            if (!rows.null(8)) {
                const auto type = projections::ParseEventType(rows.bytes(9));
                PAYLEDGER_ASSERT(type.has_value());
                stored_event.seq = rows.int8(8);
                stored_event.out_trade_no.assign(rows.bytes(10));
                stored_event.event_type = *type;
                stored_event.account_id.assign(rows.bytes(11));
                stored_event.amount = rows.optional_int8(12).value_or(0);
                if (rows.null(13)) {
                    stored_event.currency.clear();
                } else {
                    stored_event.currency.assign(rows.bytes(13));
                }
                if (rows.null(14)) {
                    stored_event.transaction_id.reset();
                } else if (stored_event.transaction_id) {
                    stored_event.transaction_id->assign(rows.bytes(14));
                } else {
                    stored_event.transaction_id.emplace(rows.bytes(14));
                }
                stored_event.occurred_at = rows.time(15);
                event = &stored_event;
            }
            if (*outcome == projections::Outcome::kAppended && event == nullptr) {
                breaks.Add("receipt " + std::to_string(id) + " appended no event");
            } else if (event != nullptr && seq != event->seq) {
                breaks.Add("receipt " + std::to_string(id) + " names seq " +
                           (seq ? std::to_string(*seq) : std::string("none")) +
                           ", its event is seq " + std::to_string(event->seq));
            }
            const ChainValue computed = NextChain(
                previous,
                {.id = id,
                 .source = *source,
                 .received_at = rows.time(2),
                 .outcome = *outcome,
                 .seq = seq,
                 .out_trade_no = rows.null(5) ? std::string_view{} : rows.bytes(5),
                 .body_sha256_hex = std::string_view(body_sha256.data(), body_sha256.size())},
                event != nullptr && *outcome == projections::Outcome::kAppended ? event : nullptr,
                scratch);
            if (computed != stored) {
                breaks.Add("receipt " + std::to_string(id) +
                           " chain differs: a receipt, its event or the receipt before it was "
                           "changed or removed");
            }
            previous = stored;
            ++report.receipts;
            report.head_id = id;
            report.head = stored;
            if (progress && report.receipts % kProgressEvery == 0) progress(report.receipts);
        }
        stream.complete();
        if (progress) progress(report.receipts);
    }
    const std::int64_t events_total =
        tx.exec1("SELECT count(*) FROM ledger_events")[0].as<std::int64_t>();
    const pqxx::result orphans =
        tx.exec_params(kOrphanEventsSql, static_cast<std::int64_t>(kBreaksListedMax));
    for (const pqxx::row& row : orphans) {
        breaks.Add("event " + row[0].as<std::string>() + " has no receipt that appended it");
    }
    // Those past the listed ones count too.
    if (!orphans.empty()) {
        report.break_count +=
            orphans[0][1].as<std::int64_t>() - static_cast<std::int64_t>(orphans.size());
    }
    report.events = events_total;
    tx.commit();
    return report;
}

std::string FormatAuditReport(const AuditReport& report) {
    std::string out = "audit receipts=" + std::to_string(report.receipts) +
                      " events=" + std::to_string(report.events) +
                      " head=" + std::to_string(report.head_id) + ":" + ChainHex(report.head) +
                      (report.ok() ? " OK\n" : " BROKEN\n");
    for (const std::string& line : report.breaks) out += "  " + line + "\n";
    return out;
}

}  // namespace payledger::ledger
