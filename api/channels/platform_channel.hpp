#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "api/channels/refusal.hpp"
#include "ledger/write/writer.hpp"
#include "projections/event.hpp"

namespace payledger::api {

// Helpers shared by the WeChat Pay and Alipay channels (docs/platforms.md).

// Decoded platform fields by name, in byte order of the names (the order both platforms sign).
using PlatformFields = std::map<std::string, std::string>;

// The field `name`, or "" when absent.
[[nodiscard]] std::string_view FieldOr(const PlatformFields& fields, const std::string& name);

// JSON object text of those of `names` that `fields` holds with a non-empty value: the normalised
// platform fields an event keeps in `data`.
[[nodiscard]] std::string KeptFields(const PlatformFields& fields,
                                     std::initializer_list<const char*> names);

// A platform time: `received_at` when `text` is empty (the platform left it out, as the
// generic channel defaults occurred_at), else `parse(text)`, nullopt when malformed.
[[nodiscard]] std::optional<projections::TimeMicros> PlatformTime(
    std::string_view text, projections::TimeMicros received_at,
    std::optional<projections::TimeMicros> (*parse)(std::string_view));

// True when the outcome is acknowledged as success (appended, duplicate, ignored).
[[nodiscard]] bool IsAcknowledged(const ledger::DeliveryResult& result);

// The reason a failure answer gives: "<outcome>: <message>".
[[nodiscard]] std::string FailureReason(const ledger::DeliveryResult& result);

}  // namespace payledger::api
