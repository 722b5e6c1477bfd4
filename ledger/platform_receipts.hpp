#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "projections/event.hpp"

namespace payledger::ledger {

// An appended receipt of a channel whose platform signs its notices with a public key, as
// `payledger audit --platform-signatures` re-verifies it.
struct PlatformReceipt {
    std::int64_t receipt_id = 0;
    projections::Source source = projections::Source::kApi;  // The receipt's channel.
    std::int64_t seq = 0;                                    // The event it appended.
    projections::Source event_source = projections::Source::kApi;
    std::string headers = "{}";  // The JSON object of the headers the receipt keeps.
    // The raw body, inline or stored once in receipt_bodies; nullopt when it is in neither
    // place (a break that `audit` reports on its own).
    std::optional<std::string> body{};
};

// Calls `visit` for every receipt that appended an event where the receipt or its event comes
// from WeChat Pay APIv3 or Alipay, in receipt id order, in `tx`'s snapshot. Reads them through
// a cursor, a page of a bounded size at a time (constant memory, however long the ledger).
// Throws pqxx exceptions.
void ForEachPlatformReceipt(pqxx::transaction_base& tx,
                            const std::function<void(const PlatformReceipt&)>& visit);

}  // namespace payledger::ledger
