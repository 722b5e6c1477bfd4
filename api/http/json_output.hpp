#pragma once

#include <nlohmann/json.hpp>

#include "ledger/pg/rows.hpp"
#include "projections/event.hpp"
#include "projections/order_fold.hpp"

namespace payledger::api {

// The objects of docs/api.md#objects.
[[nodiscard]] nlohmann::json EventJson(const projections::Event& event);
[[nodiscard]] nlohmann::json ReceiptJson(const ledger::Receipt& receipt);
// The order object is ledger::OrderJson (ledger/read/order_json.hpp): `rebuild` writes it too.

// Dumps without throwing on invalid UTF-8 (replaced), for output to clients and logs.
[[nodiscard]] std::string Dump(const nlohmann::json& value);

}  // namespace payledger::api
