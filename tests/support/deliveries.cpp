#include "support/deliveries.hpp"

#include <utility>

namespace payledger::testing {

ledger::Receipt ReceiptOf(const std::string& out_trade_no, projections::Source source,
                          ReceiptFields fields) {
    return ledger::Receipt{
        .source = source,
        .received_at = fields.received_at,
        .peer = std::move(fields.peer),
        .headers = std::move(fields.headers),
        .body = fields.body ? std::move(*fields.body) : "body of " + out_trade_no,
        .out_trade_no = out_trade_no};
}

ledger::Delivery OrderRegistration(const std::string& out_trade_no, OrderFields fields) {
    const projections::TimeMicros at = fields.receipt.received_at;
    return ledger::Delivery{
        .receipt = ReceiptOf(out_trade_no, projections::Source::kApi, std::move(fields.receipt)),
        .event = projections::Event{.out_trade_no = out_trade_no,
                                    .event_type = projections::EventType::kOrderCreated,
                                    .source = projections::Source::kApi,
                                    .account_id = std::move(fields.account_id),
                                    .amount = fields.amount,
                                    .currency = std::move(fields.currency),
                                    .occurred_at = at}};
}

ledger::Delivery VerifiedCallback(const std::string& out_trade_no, projections::EventType type,
                                  CallbackFields fields) {
    const projections::TimeMicros at = fields.occurred_at.value_or(fields.receipt.received_at);
    std::string currency = fields.currency ? std::move(*fields.currency)
                           : type == projections::EventType::kPaymentClosed ? ""
                                                                            : "CNY";
    return ledger::Delivery{
        .receipt = ReceiptOf(out_trade_no, fields.source, std::move(fields.receipt)),
        .event = projections::Event{.out_trade_no = out_trade_no,
                                    .event_type = type,
                                    .source = fields.source,
                                    .account_id = std::move(fields.account_id),
                                    .amount = fields.amount,
                                    .currency = std::move(currency),
                                    .transaction_id = std::move(fields.transaction_id),
                                    .occurred_at = at}};
}

ledger::Delivery Refusal(const std::string& out_trade_no, RefusalFields fields) {
    return ledger::Delivery{
        .receipt = ReceiptOf(out_trade_no, fields.source, std::move(fields.receipt)),
        .outcome = fields.outcome,
        .message = std::move(fields.message)};
}

}  // namespace payledger::testing
