#include "ledger/order_json.hpp"

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

}  // namespace payledger::ledger
