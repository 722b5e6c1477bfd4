#include "ledger/projection_streams.hpp"

#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// libpqxx 6.4's stream_from writes `COPY <table> TO STDOUT`; a parenthesised query in place
// of the table name streams the query's rows the same way.
constexpr const char* kEventsQuery =
    "(SELECT out_trade_no, event_type, account_id, amount, currency, transaction_id, seq "
    "FROM ledger_events ORDER BY out_trade_no, seq)";
constexpr const char* kBalancesQuery =
    "(SELECT account_id, currency, balance FROM balances ORDER BY account_id, currency)";

std::string OrdersQuery(const std::string& table) {
    // `table` is ours ("orders" or a rebuild table), never input.
    return "(SELECT out_trade_no, account_id, amount, currency, status, transaction_id, "
           "paid_amount, refunded_amount, array_to_string(anomalies, ','), seq FROM " +
           table + " ORDER BY out_trade_no)";
}

std::int64_t ToInt(const std::optional<std::string>& field) {
    PAYLEDGER_ASSERT(field.has_value());
    return std::stoll(*field);
}

const std::string& Text(const std::optional<std::string>& field) {
    PAYLEDGER_ASSERT(field.has_value());
    return *field;
}

std::vector<std::string> SplitComma(const std::string& text) {
    std::vector<std::string> items;
    std::size_t start = 0;
    while (start < text.size()) {
        const std::size_t comma = text.find(',', start);
        const std::size_t end = comma == std::string::npos ? text.size() : comma;
        items.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return items;
}

// Reads the next COPY line; at the end, completes the stream once and keeps answering false.
bool ReadLine(pqxx::stream_from& stream, std::string& line, bool& exhausted) {
    if (exhausted) return false;
    if (stream.get_raw_line(line)) return true;
    stream.complete();
    exhausted = true;
    return false;
}

}  // namespace

std::vector<std::optional<std::string>> SplitCopyLine(std::string_view line) {
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    std::vector<std::optional<std::string>> fields;
    std::string field;
    bool null = false;
    for (std::size_t i = 0; i <= line.size(); ++i) {
        if (i == line.size() || line[i] == '\t') {
            fields.push_back(null ? std::nullopt : std::optional<std::string>(std::move(field)));
            field.clear();
            null = false;
            continue;
        }
        if (line[i] != '\\' || i + 1 == line.size()) {
            field += line[i];
            continue;
        }
        const char escaped = line[++i];
        switch (escaped) {
            case 'N':
                null = true;
                break;
            case 't':
                field += '\t';
                break;
            case 'n':
                field += '\n';
                break;
            case 'r':
                field += '\r';
                break;
            case 'b':
                field += '\b';
                break;
            case 'f':
                field += '\f';
                break;
            case 'v':
                field += '\v';
                break;
            default:
                field += escaped;  // "\\" and any other escaped character stand for themselves.
                break;
        }
    }
    return fields;
}

FoldedOrderStream::FoldedOrderStream(pqxx::transaction_base& tx) : stream_(tx, kEventsQuery) {}

std::optional<projections::Event> FoldedOrderStream::ReadEvent() {
    if (!ReadLine(stream_, line_, exhausted_)) return std::nullopt;
    const std::vector<std::optional<std::string>> f = SplitCopyLine(line_);
    PAYLEDGER_ASSERT(f.size() == 7);
    const std::optional<projections::EventType> type = projections::ParseEventType(Text(f[1]));
    PAYLEDGER_ASSERT(type.has_value());
    ++events_read_;
    return projections::Event{.seq = ToInt(f[6]),
                              .out_trade_no = Text(f[0]),
                              .event_type = *type,
                              .account_id = Text(f[2]),
                              .amount = f[3] ? ToInt(f[3]) : 0,
                              .currency = f[4].value_or(""),
                              .transaction_id = f[5]};
}

std::optional<projections::OrderRow> FoldedOrderStream::Next() {
    if (done_) return std::nullopt;
    if (!pending_) pending_ = ReadEvent();
    if (!pending_) {
        done_ = true;
        return std::nullopt;
    }
    order_events_.clear();
    const std::string out_trade_no = pending_->out_trade_no;
    while (pending_ && pending_->out_trade_no == out_trade_no) {
        order_events_.push_back(std::move(*pending_));
        pending_ = ReadEvent();
    }
    if (pending_) PAYLEDGER_ASSERT(out_trade_no < pending_->out_trade_no);  // Byte order.
    return projections::FoldOrder(order_events_);
}

LiveOrderStream::LiveOrderStream(pqxx::transaction_base& tx, const std::string& table)
    : stream_(tx, OrdersQuery(table)) {}

std::optional<projections::OrderRow> LiveOrderStream::Next() {
    if (!ReadLine(stream_, line_, exhausted_)) return std::nullopt;
    const std::vector<std::optional<std::string>> f = SplitCopyLine(line_);
    PAYLEDGER_ASSERT(f.size() == 10);
    return projections::OrderRow{.out_trade_no = Text(f[0]),
                                 .account_id = Text(f[1]),
                                 .amount = ToInt(f[2]),
                                 .currency = Text(f[3]),
                                 .status = Text(f[4]),
                                 .transaction_id = f[5],
                                 .paid_amount = ToInt(f[6]),
                                 .refunded_amount = ToInt(f[7]),
                                 .anomalies = SplitComma(Text(f[8])),
                                 .seq = ToInt(f[9])};
}

LiveBalanceStream::LiveBalanceStream(pqxx::transaction_base& tx) : stream_(tx, kBalancesQuery) {}

std::optional<projections::BalanceRow> LiveBalanceStream::Next() {
    if (!ReadLine(stream_, line_, exhausted_)) return std::nullopt;
    const std::vector<std::optional<std::string>> f = SplitCopyLine(line_);
    PAYLEDGER_ASSERT(f.size() == 3);
    return projections::BalanceRow{
        .account_id = Text(f[0]), .currency = Text(f[1]), .balance = ToInt(f[2])};
}

}  // namespace payledger::ledger
