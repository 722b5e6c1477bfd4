#pragma once

#include <nlohmann/json.hpp>

#include "ledger/rows.hpp"
#include "projections/event.hpp"
#include "projections/order_fold.hpp"

namespace payledger::api {

// The SPEC §5 objects.
[[nodiscard]] nlohmann::json EventJson(const projections::Event& event);
[[nodiscard]] nlohmann::json ReceiptJson(const ledger::Receipt& receipt);
[[nodiscard]] nlohmann::json OrderJson(const projections::OrderRow& order);

// Standard base64 with padding (OpenSSL).
[[nodiscard]] std::string Base64Encode(std::string_view bytes);

// Dumps without throwing on invalid UTF-8 (replaced), for output to clients and logs.
[[nodiscard]] std::string Dump(const nlohmann::json& value);

}  // namespace payledger::api
