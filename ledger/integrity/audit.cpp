#include "ledger/integrity/audit.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <pqxx/pqxx>
#include <string_view>
#include <vector>

#include "ledger/base/bytes.hpp"
#include "ledger/integrity/verify.hpp"
#include "ledger/pg/binary_copy.hpp"
#include "ledger/pg/database.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// Every receipt in id order with the event it appended (none unless the outcome is
// appended): the receipt's line fields, its stored chain, the event's fields. In COPY's binary
// format: the bodies, chains, integers and times arrive as they are stored,
// so neither PostgreSQL nor audit spends time on text forms (measured on 1 000 000 receipts:
// this COPY in text took 5.0 s on the server, in binary 3.0 s, as much as the plain
// `COPY callback_receipts TO STDOUT` in text). libpqxx 6.4's stream_from writes
// `COPY <table> TO STDOUT`: the parenthesised query stands for the table, its own options
// follow it, and the trailing comment swallows the `TO STDOUT` libpqxx appends (the reader
// checks the binary signature, so a changed libpqxx fails loudly rather than misreading).
//
// A receipt's body is inline (column 6, receipts written before schema/0008) or stored once in
// receipt_bodies under the SHA-256 it keeps (column 16). The event's source (column 18) is not
// in the line: it is compared with the receipt's instead.
constexpr const char* kReceiptsCopy =
    "(SELECT r.id, r.source, r.received_at, r.outcome, r.seq, r.out_trade_no, r.body, r.chain, "
    "e.seq, e.event_type, e.out_trade_no, e.account_id, e.amount, e.currency, "
    "e.transaction_id, e.occurred_at, r.body_sha256, r.body_stored, e.source "
    "FROM callback_receipts AS r "
    "LEFT JOIN ledger_events AS e ON r.outcome = 'appended' AND e.receipt_id = r.id "
    "ORDER BY r.id) TO STDOUT (FORMAT binary) --";
constexpr std::size_t kReceiptsCopyColumns = 19;

// The first receipts among ids $2 to $3 that keep their body (body_stored) in neither place,
// with the event each appended, and how many there are: one hash anti-join of the receipts
// against receipt_bodies, over the ids where the stream met receipts of the stored form (none
// in a ledger of inline bodies: then it is not run). Measured on 300 000 receipts of the
// stored form: 0.45 s, where a probe of receipt_bodies' key per receipt in the COPY above took
// 3 s more.
constexpr const char* kMissingBodiesSql =
    "SELECT r.id, encode(r.body_sha256, 'hex'), e.seq, e.event_type, e.out_trade_no, "
    "e.amount, e.currency, e.transaction_id, count(*) OVER () "
    "FROM callback_receipts AS r "
    "LEFT JOIN ledger_events AS e ON r.outcome = 'appended' AND e.receipt_id = r.id "
    "WHERE r.id BETWEEN $2 AND $3 AND r.body IS NULL AND r.body_sha256 IS NOT NULL "
    "AND r.body_stored "
    "AND NOT EXISTS (SELECT FROM receipt_bodies AS b WHERE b.body_sha256 = r.body_sha256) "
    "ORDER BY r.id LIMIT $1";

// Every stored body with its key, in no order: each is hashed once.
constexpr const char* kBodiesCopy =
    "(SELECT body_sha256, body FROM receipt_bodies) TO STDOUT (FORMAT binary) --";

// Events whose receipt is missing or did not append them.
constexpr const char* kOrphanEventsSql =
    "SELECT e.seq, count(*) OVER () FROM ledger_events AS e "
    "WHERE NOT EXISTS (SELECT 1 FROM callback_receipts AS r "
    "                  WHERE r.id = e.receipt_id AND r.outcome = 'appended') "
    "ORDER BY e.seq LIMIT $1";

// The line naming the event that receipt `receipt_id` appended.
std::string EventNamed(std::int64_t receipt_id, const projections::Event& event) {
    std::string line = "event " + std::to_string(event.seq) + " appended by receipt " +
                       std::to_string(receipt_id) + ": " +
                       std::string(projections::ToString(event.event_type)) + " " +
                       event.out_trade_no;
    if (event.event_type != projections::EventType::kPaymentClosed) {
        line += " " + std::to_string(event.amount);
        if (!event.currency.empty()) line += " " + event.currency;
    }
    if (event.transaction_id) line += " transaction " + *event.transaction_id;
    return line;
}

// The breaks as they are found, listed in the ledger's order: the checkpoint's, each
// receipt's in id order (one group with the line naming the event it appended, listed whole
// or not at all, so that a receipt's line is never shown without its event's), then the rest.
// Every break is counted; at most kBreaksListedMax lines are kept (constant memory).
class Breaks {
public:
    explicit Breaks(AuditReport& report) : report_(report) {}

    // A break that is not at a receipt: before the receipts' until ReceiptsDone, after them
    // from then on.
    void Add(std::string what) {
        ++report_.break_count;
        if (lines_kept_ >= kBreaksListedMax) return;
        groups_.push_back({.position = receipts_done_ ? kAfterReceipts : 0, .lines = {}});
        groups_.back().lines.push_back(std::move(what));
        ++lines_kept_;
    }
    // A break at receipt `id`, met in id order, that appended `appended` (null: none).
    void AddAtReceipt(std::int64_t id, std::string what, const projections::Event* appended) {
        ++report_.break_count;
        if (!groups_.empty() && groups_.back().position == id) {
            groups_.back().lines.push_back(std::move(what));
            ++lines_kept_;
            return;
        }
        if (lines_kept_ >= kBreaksListedMax) return;  // Listed after as many lines: never.
        Group group{.position = id, .lines = {std::move(what)}};
        if (appended != nullptr) group.event_line = EventNamed(id, *appended);
        lines_kept_ += group.event_line.empty() ? 1U : 2U;
        groups_.push_back(std::move(group));
    }
    // A break at receipt `id` found after the stream of receipts, put in its place.
    void MergeAtReceipt(std::int64_t id, std::string what, std::string event_line) {
        PAYLEDGER_ASSERT(!receipts_done_);
        ++report_.break_count;
        auto at = std::lower_bound(
            groups_.begin(), groups_.end(), id,
            [](const Group& group, std::int64_t position) { return group.position < position; });
        if (at != groups_.end() && at->position == id) {
            at->lines.push_back(std::move(what));
        } else {
            groups_.insert(at, Group{.position = id,
                                     .lines = {std::move(what)},
                                     .event_line = std::move(event_line)});
        }
    }
    // After the receipts' breaks, the merged ones included.
    void ReceiptsDone() {
        Trim();
        receipts_done_ = true;
    }
    // Breaks counted but not listed one by one.
    void Count(std::int64_t more) { report_.break_count += more; }
    // Lists the groups that fit, in order, in the report.
    void Finish() {
        Trim();
        for (Group& group : groups_) {
            for (std::string& line : group.lines) report_.breaks.push_back(std::move(line));
            if (!group.event_line.empty()) report_.breaks.push_back(std::move(group.event_line));
        }
        groups_.clear();
    }

private:
    static constexpr std::int64_t kAfterReceipts = std::numeric_limits<std::int64_t>::max();

    struct Group {
        std::int64_t position = 0;  // The receipt's id; 0 before the receipts.
        std::vector<std::string> lines{};
        std::string event_line{};  // Empty: the receipt appended no event.
    };

    // Keeps the groups that fit in kBreaksListedMax lines, from the first on.
    void Trim() {
        std::size_t lines = 0;
        std::size_t kept = 0;
        for (; kept < groups_.size(); ++kept) {
            const std::size_t more =
                groups_[kept].lines.size() + (groups_[kept].event_line.empty() ? 0 : 1);
            if (lines + more > kBreaksListedMax) break;
            lines += more;
        }
        groups_.resize(kept);
        lines_kept_ = lines;
    }

    AuditReport& report_;
    std::vector<Group> groups_{};
    std::size_t lines_kept_ = 0;
    bool receipts_done_ = false;
};

// The stored bodies that do not hash to their key: up to kBreaksListedMax of their keys (each
// then named at the first receipt that names it), and how many there are in all.
struct ChangedBodies {
    std::vector<std::string> keys{};
    std::vector<bool> named{};
    std::int64_t total = 0;
};

ChangedBodies HashStoredBodies(pqxx::transaction_base& tx) {
    ChangedBodies changed;
    pqxx::stream_from stream{tx, kBodiesCopy};
    BinaryCopyRows rows{stream};
    while (rows.Next()) {
        PAYLEDGER_ASSERT(rows.size() == 2);
        const std::string_view key = rows.bytes(0);
        if (key == DigestBytes(Sha256(rows.bytes(1)))) continue;
        ++changed.total;
        if (changed.keys.size() < kBreaksListedMax) changed.keys.emplace_back(key);
    }
    stream.complete();
    changed.named.assign(changed.keys.size(), false);
    return changed;
}

// The receipts among ids `first` to `last` that keep their body but whose body is in neither
// place, each put among the receipts' breaks, with the event it appended.
void AddMissingBodies(pqxx::transaction_base& tx, std::int64_t first, std::int64_t last,
                      Breaks& breaks) {
    const pqxx::result missing =
        tx.exec_params(kMissingBodiesSql, static_cast<std::int64_t>(kBreaksListedMax), first, last);
    for (const pqxx::row& row : missing) {
        const auto id = row[0].as<std::int64_t>();
        std::string event_line;
        if (!row[2].is_null()) {
            const auto type = projections::ParseEventType(row[3].as<std::string>());
            PAYLEDGER_ASSERT(type.has_value());  // Its CHECK.
            event_line = EventNamed(
                id, {.seq = row[2].as<std::int64_t>(),
                     .out_trade_no = row[4].as<std::string>(),
                     .event_type = *type,
                     .amount = row[5].is_null() ? 0 : row[5].as<std::int64_t>(),
                     .currency = row[6].is_null() ? std::string{} : row[6].as<std::string>(),
                     .transaction_id = row[7].is_null() ? std::nullopt
                                                        : std::optional(row[7].as<std::string>())});
        }
        breaks.MergeAtReceipt(id,
                              "receipt " + std::to_string(id) + " body " +
                                  row[1].as<std::string>() +
                                  " missing: receipt_bodies holds no such body",
                              std::move(event_line));
    }
    if (!missing.empty()) {
        breaks.Count(missing[0][8].as<std::int64_t>() - static_cast<std::int64_t>(missing.size()));
    }
}

}  // namespace

AuditReport Audit(const std::string& url, const Checkpoint* checkpoint, const Ed25519Key* key,
                  const Progress& progress, const AuditCheck& check) {
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
    // Each stored body once, before the receipts that name them.
    ChangedBodies changed = HashStoredBodies(tx);
    // The ids of the receipts that keep their body in receipt_bodies (0: none met).
    std::int64_t stored_form_first = 0;
    std::int64_t stored_form_last = 0;
    {
        pqxx::stream_from stream{tx, kReceiptsCopy};
        BinaryCopyRows rows{stream};
        ChainValue previous = kChainStart;
        // Reused from one receipt to the next (their capacity stays): no allocation per row.
        std::string scratch;
        std::string body_sha256;
        projections::Event stored_event;
        while (rows.Next()) {
            PAYLEDGER_ASSERT(rows.size() == kReceiptsCopyColumns);
            const std::int64_t id = rows.int8(0);
            const auto source = projections::ParseSource(rows.bytes(1));
            const auto outcome = projections::ParseOutcome(rows.bytes(3));
            PAYLEDGER_ASSERT(source && outcome);
            const std::optional<std::int64_t> seq = rows.optional_int8(4);
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
            const projections::Event* appended =
                event != nullptr && *outcome == projections::Outcome::kAppended ? event : nullptr;
            // Built only for a break: no allocation per receipt.
            const auto receipt = [id] { return "receipt " + std::to_string(id); };
            if (*outcome == projections::Outcome::kAppended && event == nullptr) {
                breaks.AddAtReceipt(id, receipt() + " appended no event", nullptr);
            } else if (event != nullptr && seq != event->seq) {
                breaks.AddAtReceipt(id,
                                    receipt() + " names seq " +
                                        (seq ? std::to_string(*seq) : std::string("none")) +
                                        ", its event is seq " + std::to_string(event->seq),
                                    appended);
            }

            // The body's hash in the line: the stored one, else that of the inline body (the
            // form's CHECK allows exactly one; an owner who dropped it may have left both or
            // neither, and audit says so rather than trust either).
            const bool has_inline = !rows.null(6);
            const bool has_hash = !rows.null(16);
            if (has_hash) {
                // Any bytes: a stored key is 32 by its CHECK, audit shows whatever it finds.
                body_sha256.clear();
                AppendHexLower(rows.bytes(16), body_sha256);
                if (has_inline) {
                    const Sha256HexDigits inline_hex = HexDigits(Sha256(rows.bytes(6)));
                    if (std::string_view(inline_hex.data(), inline_hex.size()) != body_sha256) {
                        breaks.AddAtReceipt(id,
                                            receipt() + " body " + body_sha256 +
                                                ": its inline body hashes to " +
                                                std::string(inline_hex.data(), inline_hex.size()),
                                            appended);
                    }
                }
            } else if (has_inline) {
                const Sha256HexDigits inline_hex = HexDigits(Sha256(rows.bytes(6)));
                body_sha256.assign(inline_hex.data(), inline_hex.size());
            } else {
                body_sha256.clear();
                breaks.AddAtReceipt(id, receipt() + " has neither its body nor its body_sha256",
                                    appended);
            }
            const bool body_stored = rows.boolean(17);
            if (!body_stored && *outcome != projections::Outcome::kDuplicate) {
                breaks.AddAtReceipt(id,
                                    receipt() +
                                        " is kept without its body, which only a "
                                        "duplicate may be",
                                    appended);
            }
            if (has_hash && !has_inline && body_stored) {
                if (stored_form_first == 0) stored_form_first = id;
                stored_form_last = id;
            }
            if (has_hash && !changed.keys.empty()) {
                for (std::size_t i = 0; i < changed.keys.size(); ++i) {
                    if (changed.named[i] || changed.keys[i] != rows.bytes(16)) continue;
                    changed.named[i] = true;
                    breaks.AddAtReceipt(id,
                                        receipt() + " body " + body_sha256 +
                                            ": the body stored under it was changed (it no "
                                            "longer hashes to it)",
                                        appended);
                }
            }

            const ChainValue computed =
                NextChain(previous,
                          {.id = id,
                           .source = *source,
                           .received_at = rows.time(2),
                           .outcome = *outcome,
                           .seq = seq,
                           .out_trade_no = rows.null(5) ? std::string_view{} : rows.bytes(5),
                           .body_sha256_hex = body_sha256},
                          appended, scratch);
            if (computed != stored) {
                breaks.AddAtReceipt(id,
                                    receipt() +
                                        " chain differs: a receipt, its event or the receipt "
                                        "before it was changed or removed",
                                    appended);
            }
            // The writer gives an event its receipt's source (a channel's; reconcile --apply
            // writes wechat_bill or alipay_bill on both), and the line names only the
            // receipt's: an event's source changed afterwards shows here alone. The line
            // names the event itself.
            if (appended != nullptr && !rows.null(18) && rows.bytes(18) != rows.bytes(1)) {
                breaks.AddAtReceipt(id,
                                    "event " + std::to_string(appended->seq) + " source " +
                                        std::string(rows.bytes(18)) + " differs from its " +
                                        receipt() + "'s " + std::string(rows.bytes(1)),
                                    nullptr);
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
    if (stored_form_first != 0) AddMissingBodies(tx, stored_form_first, stored_form_last, breaks);
    breaks.ReceiptsDone();
    // Changed bodies that no receipt names, and those past the listed ones.
    for (std::size_t i = 0; i < changed.keys.size(); ++i) {
        if (changed.named[i]) continue;
        breaks.Add("body " + HexLower(changed.keys[i]) +
                   " in receipt_bodies no longer hashes to its key, and no receipt names it");
    }
    breaks.Count(changed.total - static_cast<std::int64_t>(changed.keys.size()));

    const std::int64_t events_total =
        tx.exec1("SELECT count(*) FROM ledger_events")[0].as<std::int64_t>();
    const pqxx::result orphans =
        tx.exec_params(kOrphanEventsSql, static_cast<std::int64_t>(kBreaksListedMax));
    for (const pqxx::row& row : orphans) {
        breaks.Add("event " + row[0].as<std::string>() + " has no receipt that appended it");
    }
    // Those past the listed ones count too.
    if (!orphans.empty()) {
        breaks.Count(orphans[0][1].as<std::int64_t>() - static_cast<std::int64_t>(orphans.size()));
    }
    report.events = events_total;
    if (check) check(tx, [&breaks](std::string what) { breaks.Add(std::move(what)); });
    breaks.Finish();
    tx.commit();
    return report;
}

std::string FormatAuditReport(const AuditReport& report) {
    std::string out = "audit receipts=" + std::to_string(report.receipts) +
                      " events=" + std::to_string(report.events) +
                      " head=" + std::to_string(report.head_id) + ":" + HexLower(report.head) +
                      (report.ok() ? " OK\n" : " BROKEN\n");
    for (const std::string& line : report.breaks) out += "  " + line + "\n";
    return out;
}

}  // namespace payledger::ledger
