#pragma once

#include <nlohmann/json.hpp>

#include "projections/order_fold.hpp"

namespace payledger::ledger {

// An order as JSON: the order object of the HTTP API (docs/design.md#objects; GET
// /v1/orders/{out_trade_no}, the answer of POST /v1/orders) and the rows `rebuild` upserts
// through json_to_recordset, whose keys are the orders table's columns. One function, so
// that the two cannot drift apart.
[[nodiscard]] nlohmann::json OrderJson(const projections::OrderRow& order);

}  // namespace payledger::ledger
