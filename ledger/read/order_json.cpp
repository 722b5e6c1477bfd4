#include "ledger/read/order_json.hpp"

#include "projections/validate.hpp"

namespace payledger::ledger {

nlohmann::json OrderJson(const projections::OrderRow& order) {
    using nlohmann::json;
    return {{"out_trade_no", order.out_trade_no},
            {"account_id", order.account_id},
            {"amount", order.amount},
            {"currency", order.currency},
            {"status", order.status},
            {"transaction_id", order.transaction_id ? json(*order.transaction_id) : json(nullptr)},
            {"paid_amount", order.paid_amount},
            {"refunded_amount", order.refunded_amount},
            {"anomalies", order.anomalies},
            {"seq", order.seq}};
}

OrderRegistration RegistrationOf(std::string_view order_created_data) {
    using nlohmann::json;
    OrderRegistration registration;
    const json data = json::parse(order_created_data, nullptr, false);
    if (!data.is_object()) return registration;
    if (const auto channel = data.find("channel"); channel != data.end() && channel->is_string()) {
        registration.channel = channel->get<std::string>();
    }
    if (const auto expires = data.find("expires_at");
        expires != data.end() && expires->is_string()) {
        registration.expires_at = projections::ParseRfc3339(expires->get<std::string>());
    }
    return registration;
}

nlohmann::json OrderObject(const projections::OrderRow& order,
                           const OrderRegistration& registration,
                           const std::optional<QueryState>& query) {
    using nlohmann::json;
    const auto time = [](const std::optional<projections::TimeMicros>& at) {
        return at ? json(projections::FormatRfc3339(*at)) : json(nullptr);
    };
    json out = OrderJson(order);
    out["channel"] = registration.channel ? json(*registration.channel) : json(nullptr);
    out["expires_at"] = time(registration.expires_at);
    if (query) {
        out["query"] = {
            {"attempts", query->attempts},
            {"last_at", time(query->last_at)},
            {"last_answer", query->last_answer ? json(*query->last_answer) : json(nullptr)},
            {"next_at", time(query->next_at)},
            {"closed_at", time(query->closed_at)}};
    } else {
        out["query"] = nullptr;
    }
    return out;
}

}  // namespace payledger::ledger
