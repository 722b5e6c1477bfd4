#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "projections/event.hpp"

namespace payledger::ledger {

// An appended receipt of a channel whose platform signs its notices with a public key, as
// `payledger audit --platform-signatures` re-verifies it, with the event it appended.
struct PlatformReceipt {
    std::int64_t receipt_id = 0;
    projections::Source source = projections::Source::kApi;  // The receipt's channel.
    projections::TimeMicros received_at = 0;
    std::string headers = "{}";  // The JSON object of the headers the receipt keeps.
    // The raw body, inline or stored once in receipt_bodies; nullopt when it is in neither
    // place (a break that `audit` reports on its own).
    std::optional<std::string> body{};
    // The event it appended, as stored: seq, out_trade_no, event_type, source, amount (0 when
    // null), currency (empty when null), transaction_id, occurred_at and data.
    projections::Event event{};
};

// Calls `visit` for every receipt that appended an event where the receipt or its event comes
// from WeChat Pay APIv3 or Alipay (a notice, or an answer to a query or a close), in receipt id
// order, in `tx`'s snapshot. Reads them through a cursor, a page of a bounded size at a time
// (constant memory, however long the ledger). Throws pqxx exceptions.
void ForEachPlatformReceipt(pqxx::transaction_base& tx,
                            const std::function<void(const PlatformReceipt&)>& visit);

// An event appended by a receipt of WeChat Pay APIv3 or Alipay whose notice already backs an
// earlier event: the same body bytes, or the same notice id as the events' data keep it
// (Alipay notify_id, WeChat Pay APIv3 id).
struct SharedNotice {
    std::int64_t receipt_id = 0;
    projections::Source source = projections::Source::kApi;  // The receipt's channel.
    std::int64_t seq = 0;                                    // The later event.
    std::int64_t first_seq = 0;  // The first event that the same notice backs.
};

// Calls `visit` for every such later event, in seq order, in `tx`'s snapshot: grouped in SQL
// (the database sorts or hashes, spilling to disk past work_mem; nothing is kept here), read
// through a cursor a page at a time. The notice ids are the events' `data`, which a forger
// writes: they count only where the caller has checked them against the signed notice (as
// the platform signature check does for every such receipt). Throws pqxx exceptions.
void ForEachSharedNotice(pqxx::transaction_base& tx,
                         const std::function<void(const SharedNotice&)>& visit);

}  // namespace payledger::ledger
