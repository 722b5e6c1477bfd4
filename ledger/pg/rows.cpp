#include "ledger/pg/rows.hpp"

#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

template <typename T>
std::optional<T> Optional(const pqxx::field& field) {
    if (field.is_null()) return std::nullopt;
    return field.as<T>();
}

}  // namespace

projections::Event EventFromRow(const pqxx::row& row, pqxx::row::size_type first) {
    const auto at = [&](pqxx::row::size_type index) { return row[first + index]; };
    const std::optional<projections::EventType> type =
        projections::ParseEventType(at(2).as<std::string>());
    const std::optional<projections::Source> source =
        projections::ParseSource(at(3).as<std::string>());
    PAYLEDGER_ASSERT(type.has_value());  // The schema's CHECK allows no other value.
    PAYLEDGER_ASSERT(source.has_value());
    return projections::Event{
        .seq = at(0).as<std::int64_t>(),
        .out_trade_no = at(1).as<std::string>(),
        .event_type = *type,
        .source = *source,
        .account_id = at(4).as<std::string>(),
        .amount = at(5).is_null() ? 0 : at(5).as<std::int64_t>(),
        .currency = at(6).is_null() ? std::string{} : at(6).as<std::string>(),
        .transaction_id = Optional<std::string>(at(7)),
        .occurred_at = at(8).as<std::int64_t>(),
        .recorded_at = at(9).as<std::int64_t>(),
        .receipt_id = at(10).as<std::int64_t>(),
        .data = at(11).as<std::string>(),
    };
}

Receipt ReceiptFromRow(const pqxx::row& row) {
    const std::optional<projections::Source> source =
        projections::ParseSource(row[1].as<std::string>());
    const std::optional<projections::Outcome> outcome =
        projections::ParseOutcome(row[6].as<std::string>());
    PAYLEDGER_ASSERT(source.has_value());
    PAYLEDGER_ASSERT(outcome.has_value());
    return Receipt{
        .id = row[0].as<std::int64_t>(),
        .source = *source,
        .received_at = row[2].as<std::int64_t>(),
        .peer = row[3].as<std::string>(),
        .headers = row[4].as<std::string>(),
        .body = row[5].is_null() ? std::string{} : pqxx::binarystring(row[5]).str(),
        .outcome = *outcome,
        .seq = Optional<std::int64_t>(row[7]),
        .out_trade_no = Optional<std::string>(row[8]),
        .message = row[9].as<std::string>(),
        .chain = row[10].as<std::string>(),
        .body_sha256 = row[11].as<std::string>(),
        .body_stored = row[12].as<bool>(),
    };
}

projections::OrderRow OrderFromRow(const pqxx::row& row) {
    projections::OrderRow order{
        .out_trade_no = row[0].as<std::string>(),
        .account_id = row[1].as<std::string>(),
        .amount = row[2].as<std::int64_t>(),
        .currency = row[3].as<std::string>(),
        .status = row[4].as<std::string>(),
        .transaction_id = Optional<std::string>(row[5]),
        .paid_amount = row[6].as<std::int64_t>(),
        .refunded_amount = row[7].as<std::int64_t>(),
        .seq = row[9].as<std::int64_t>(),
    };
    const std::string anomalies = row[8].as<std::string>();
    std::size_t start = 0;
    while (start < anomalies.size()) {
        const std::size_t comma = anomalies.find(',', start);
        const std::size_t end = comma == std::string::npos ? anomalies.size() : comma;
        order.anomalies.push_back(anomalies.substr(start, end - start));
        start = end + 1;
    }
    return order;
}

}  // namespace payledger::ledger
