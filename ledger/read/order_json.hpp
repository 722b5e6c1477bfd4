#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "projections/event.hpp"
#include "projections/order_fold.hpp"

namespace payledger::ledger {

// An order as JSON: the order object of the HTTP API (docs/api.md#objects; GET
// /v1/orders/{out_trade_no}, the answer of POST /v1/orders) and the rows `rebuild` upserts
// through json_to_recordset, whose keys are the orders table's columns. One function, so
// that the two cannot drift apart.
[[nodiscard]] nlohmann::json OrderJson(const projections::OrderRow& order);

// What an order's registration said beside its fingerprint (POST /v1/orders `channel` and
// `expires_at`, kept in its ORDER_CREATED's data: docs/query.md).
struct OrderRegistration {
    std::optional<std::string> channel{};
    std::optional<projections::TimeMicros> expires_at{};
};
// The registration an ORDER_CREATED's data holds (none for data that is not such JSON).
[[nodiscard]] OrderRegistration RegistrationOf(std::string_view order_created_data);

// Where asking the platform about an order stands (the table order_queries: docs/query.md).
struct QueryState {
    std::int64_t attempts = 0;
    std::optional<projections::TimeMicros> last_at{};
    std::optional<std::string> last_answer{};
    std::optional<projections::TimeMicros> next_at{};  // None once done, or once settled.
    std::optional<projections::TimeMicros> closed_at{};
};

// The order object of the HTTP API: OrderJson's fields, then `channel`, `expires_at` and
// `query` (null when not given, or not queried).
[[nodiscard]] nlohmann::json OrderObject(const projections::OrderRow& order,
                                         const OrderRegistration& registration,
                                         const std::optional<QueryState>& query);

}  // namespace payledger::ledger
