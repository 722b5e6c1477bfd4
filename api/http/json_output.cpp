#include "api/http/json_output.hpp"

#include "ledger/base/bytes.hpp"
#include "projections/validate.hpp"

namespace payledger::api {

using nlohmann::json;

std::string Dump(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

json EventJson(const projections::Event& event) {
    const bool has_money = event.event_type != projections::EventType::kPaymentClosed;
    json data = json::parse(event.data, nullptr, false);
    if (data.is_discarded()) data = json::object();
    return {{"seq", event.seq},
            {"out_trade_no", event.out_trade_no},
            {"event_type", projections::ToString(event.event_type)},
            {"source", projections::ToString(event.source)},
            {"account_id", event.account_id},
            {"amount", has_money ? json(event.amount) : json(nullptr)},
            {"currency", has_money ? json(event.currency) : json(nullptr)},
            {"transaction_id", event.transaction_id ? json(*event.transaction_id) : json(nullptr)},
            {"occurred_at", projections::FormatRfc3339(event.occurred_at)},
            {"recorded_at", projections::FormatRfc3339(event.recorded_at)},
            {"receipt_id", event.receipt_id},
            {"data", std::move(data)}};
}

json ReceiptJson(const ledger::Receipt& receipt) {
    json headers = json::parse(receipt.headers, nullptr, false);
    if (headers.is_discarded()) headers = json::object();
    json out = {
        {"id", receipt.id},
        {"source", projections::ToString(receipt.source)},
        {"received_at", projections::FormatRfc3339(receipt.received_at)},
        {"outcome", projections::ToString(receipt.outcome)},
        {"seq", receipt.seq ? json(*receipt.seq) : json(nullptr)},
        {"out_trade_no", receipt.out_trade_no ? json(*receipt.out_trade_no) : json(nullptr)},
        {"peer", receipt.peer},
        {"headers", std::move(headers)},
        {"message", receipt.message},
        {"body_sha256",
         receipt.body_sha256.empty() ? ledger::Sha256Hex(receipt.body) : receipt.body_sha256},
        {"chain", receipt.chain},
        {"body_stored", receipt.body_stored}};
    // A duplicate kept without its body (schema/0008) has neither body nor body_base64:
    // body_sha256 still names the bytes received.
    if (!receipt.body_stored) return out;
    if (ledger::IsValidUtf8(receipt.body)) {
        out["body"] = receipt.body;
    } else {
        out["body_base64"] = ledger::Base64Encode(receipt.body);
    }
    return out;
}

}  // namespace payledger::api
