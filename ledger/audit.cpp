#include "ledger/audit.hpp"

#include <array>

#include <pqxx/pqxx>

#include "ledger/database.hpp"
#include "ledger/projection_streams.hpp"
#include "ledger/verify.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// Every receipt in id order with the event it appended (none unless the outcome is
// appended), as COPY text: the receipt's line fields, its stored chain, the event's fields.
constexpr const char* kReceiptsQuery =
    "(SELECT r.id, r.source, (extract(epoch FROM r.received_at) * 1000000)::bigint, r.outcome, "
    "r.seq, r.out_trade_no, r.body, encode(r.chain, 'hex'), e.seq, e.event_type, "
    "e.out_trade_no, e.account_id, e.amount, e.currency, e.transaction_id, "
    "(extract(epoch FROM e.occurred_at) * 1000000)::bigint "
    "FROM callback_receipts AS r "
    "LEFT JOIN ledger_events AS e ON r.outcome = 'appended' AND e.receipt_id = r.id "
    "ORDER BY r.id)";

// Events whose receipt is missing or did not append them.
constexpr const char* kOrphanEventsSql =
    "SELECT e.seq, count(*) OVER () FROM ledger_events AS e "
    "WHERE NOT EXISTS (SELECT 1 FROM callback_receipts AS r "
    "                  WHERE r.id = e.receipt_id AND r.outcome = 'appended') "
    "ORDER BY e.seq LIMIT $1";

// The value of each hex digit, and -1 for every other byte.
constexpr std::array<signed char, 256> kHexValue = [] {
    std::array<signed char, 256> table{};
    table.fill(-1);
    for (int c = '0'; c <= '9'; ++c) table[static_cast<std::size_t>(c)] = static_cast<signed char>(c - '0');
    for (int c = 'a'; c <= 'f'; ++c) table[static_cast<std::size_t>(c)] = static_cast<signed char>(c - 'a' + 10);
    for (int c = 'A'; c <= 'F'; ++c) table[static_cast<std::size_t>(c)] = static_cast<signed char>(c - 'A' + 10);
    return table;
}();

// A bytea in PostgreSQL's hex output ("\x4142"), as bytes, into `bytes` (reused from one row
// to the next: a million bodies, no allocation each).
void ByteaFromHex(std::string_view text, std::string& bytes) {
    PAYLEDGER_ASSERT(text.size() >= 2 && text[0] == '\\' && text[1] == 'x' && text.size() % 2 == 0);
    bytes.resize((text.size() - 2) / 2);
    const auto* hex = reinterpret_cast<const unsigned char*>(text.data()) + 2;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const int high = kHexValue[hex[2 * i]];
        const int low = kHexValue[hex[2 * i + 1]];
        PAYLEDGER_ASSERT(high >= 0 && low >= 0);
        bytes[i] = static_cast<char>(high * 16 + low);
    }
}

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
        pqxx::stream_from stream{tx, kReceiptsQuery};
        std::string line;
        CopyFields fields;
        ChainValue previous = kChainStart;
        // Reused from one receipt to the next (their capacity stays): no allocation per row.
        std::string body;
        std::string scratch;
        projections::Event stored_event;
        while (stream.get_raw_line(line)) {
            fields.Parse(line);
            PAYLEDGER_ASSERT(fields.size() == 16);
            const std::int64_t id = fields.integer(0);
            const auto source = projections::ParseSource(fields.text(1));
            const auto outcome = projections::ParseOutcome(fields.text(3));
            PAYLEDGER_ASSERT(source && outcome);
            const std::optional<std::int64_t> seq =
                fields.null(4) ? std::nullopt : std::optional(fields.integer(4));
            ByteaFromHex(fields.text(6), body);
            const Sha256HexDigits body_sha256 = Sha256HexOf(body);
            const std::optional<ChainValue> stored = ParseChainHex(fields.text(7));
            PAYLEDGER_ASSERT(stored.has_value());

            const projections::Event* event = nullptr;
            if (!fields.null(8)) {
                const auto type = projections::ParseEventType(fields.text(9));
                PAYLEDGER_ASSERT(type.has_value());
                stored_event.seq = fields.integer(8);
                stored_event.out_trade_no.assign(fields.text(10));
                stored_event.event_type = *type;
                stored_event.account_id.assign(fields.text(11));
                stored_event.amount = fields.null(12) ? 0 : fields.integer(12);
                if (fields.null(13)) {
                    stored_event.currency.clear();
                } else {
                    stored_event.currency.assign(fields.text(13));
                }
                if (fields.null(14)) {
                    stored_event.transaction_id.reset();
                } else if (stored_event.transaction_id) {
                    stored_event.transaction_id->assign(fields.text(14));
                } else {
                    stored_event.transaction_id.emplace(fields.text(14));
                }
                stored_event.occurred_at = fields.integer(15);
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
                 .received_at = fields.integer(2),
                 .outcome = *outcome,
                 .seq = seq,
                 .out_trade_no = fields.null(5) ? std::string_view{} : fields.text(5),
                 .body_sha256_hex = std::string_view(body_sha256.data(), body_sha256.size())},
                event != nullptr && *outcome == projections::Outcome::kAppended ? event : nullptr,
                scratch);
            if (computed != *stored) {
                breaks.Add("receipt " + std::to_string(id) +
                           " chain differs: a receipt, its event or the receipt before it was "
                           "changed or removed");
            }
            previous = *stored;
            ++report.receipts;
            report.head_id = id;
            report.head = *stored;
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
