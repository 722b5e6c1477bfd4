#include "ledger/read/projection_streams.hpp"

#include <charconv>

#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// libpqxx 6.4's stream_from writes `COPY <table> TO STDOUT`; a parenthesised query in place
// of the table name streams the query's rows the same way. The events come in the order of
// the covering unique index (out_trade_no, event_type): grouped by order, which is all the
// set-based fold needs.
constexpr const char* kEventsQuery =
    "(SELECT out_trade_no, event_type, account_id, amount, currency, transaction_id, seq "
    "FROM ledger_events ORDER BY out_trade_no, event_type)";
constexpr const char* kOrdersQuery =
    "(SELECT out_trade_no, account_id, amount, currency, status, transaction_id, paid_amount, "
    "refunded_amount, array_to_string(anomalies, ','), seq FROM orders ORDER BY out_trade_no)";
constexpr const char* kBalancesQuery =
    "(SELECT account_id, currency, balance FROM balances ORDER BY account_id, currency)";

// Reads the next COPY line; at the end, completes the stream once and keeps answering false.
bool ReadLine(pqxx::stream_from& stream, std::string& line, bool& exhausted) {
    if (exhausted) return false;
    if (stream.get_raw_line(line)) return true;
    stream.complete();
    exhausted = true;
    return false;
}

char Unescaped(char escaped) {
    switch (escaped) {
        case 't':
            return '\t';
        case 'n':
            return '\n';
        case 'r':
            return '\r';
        case 'b':
            return '\b';
        case 'f':
            return '\f';
        case 'v':
            return '\v';
        default:
            return escaped;  // "\\" and any other escaped character stand for themselves.
    }
}

std::vector<std::string> SplitComma(std::string_view text) {
    std::vector<std::string> items;
    std::size_t start = 0;
    while (start < text.size()) {
        const std::size_t comma = text.find(',', start);
        const std::size_t end = comma == std::string_view::npos ? text.size() : comma;
        items.emplace_back(text.substr(start, end - start));
        start = end + 1;
    }
    return items;
}

}  // namespace

void CopyFields::Parse(std::string& line) {
    views_.clear();
    nulls_.clear();
    std::size_t end = line.size();
    if (end > 0 && line[end - 1] == '\n') --end;
    std::size_t read = 0;
    while (read <= end) {
        const std::size_t start = read;
        std::size_t write = read;
        bool null = false;
        while (read < end && line[read] != '\t') {
            if (line[read] == '\\' && read + 1 < end) {
                if (line[read + 1] == 'N') null = true;
                line[write++] = Unescaped(line[read + 1]);
                read += 2;
            } else {
                line[write++] = line[read++];
            }
        }
        views_.emplace_back(line.data() + start, write - start);
        nulls_.push_back(null);
        ++read;  // Past the tab (or the end).
    }
}

std::string_view CopyFields::text(std::size_t index) const {
    PAYLEDGER_ASSERT(index < views_.size());
    PAYLEDGER_ASSERT(!nulls_[index]);
    return views_[index];
}

std::int64_t CopyFields::integer(std::size_t index) const {
    const std::string_view digits = text(index);
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    PAYLEDGER_ASSERT(error == std::errc{});
    PAYLEDGER_ASSERT(end == digits.data() + digits.size());
    return value;
}

std::optional<std::string> CopyFields::optional_text(std::size_t index) const {
    if (null(index)) return std::nullopt;
    return std::string(text(index));
}

FoldedOrderStream::FoldedOrderStream(pqxx::transaction_base& tx) : stream_(tx, kEventsQuery) {}

std::optional<projections::Event> FoldedOrderStream::ReadEvent() {
    if (!ReadLine(stream_, line_, exhausted_)) return std::nullopt;
    fields_.Parse(line_);
    PAYLEDGER_ASSERT(fields_.size() == 7);
    const std::optional<projections::EventType> type = projections::ParseEventType(fields_.text(1));
    PAYLEDGER_ASSERT(type.has_value());
    ++events_read_;
    return projections::Event{.seq = fields_.integer(6),
                              .out_trade_no = std::string(fields_.text(0)),
                              .event_type = *type,
                              .account_id = std::string(fields_.text(2)),
                              .amount = fields_.null(3) ? 0 : fields_.integer(3),
                              .currency = fields_.optional_text(4).value_or(""),
                              .transaction_id = fields_.optional_text(5)};
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

LiveOrderStream::LiveOrderStream(pqxx::transaction_base& tx) : stream_(tx, kOrdersQuery) {}

std::optional<projections::OrderRow> LiveOrderStream::Next() {
    if (!ReadLine(stream_, line_, exhausted_)) return std::nullopt;
    fields_.Parse(line_);
    PAYLEDGER_ASSERT(fields_.size() == 10);
    return projections::OrderRow{.out_trade_no = std::string(fields_.text(0)),
                                 .account_id = std::string(fields_.text(1)),
                                 .amount = fields_.integer(2),
                                 .currency = std::string(fields_.text(3)),
                                 .status = std::string(fields_.text(4)),
                                 .transaction_id = fields_.optional_text(5),
                                 .paid_amount = fields_.integer(6),
                                 .refunded_amount = fields_.integer(7),
                                 .anomalies = SplitComma(fields_.text(8)),
                                 .seq = fields_.integer(9)};
}

LiveBalanceStream::LiveBalanceStream(pqxx::transaction_base& tx) : stream_(tx, kBalancesQuery) {}

std::optional<projections::BalanceRow> LiveBalanceStream::Next() {
    if (!ReadLine(stream_, line_, exhausted_)) return std::nullopt;
    fields_.Parse(line_);
    PAYLEDGER_ASSERT(fields_.size() == 3);
    return projections::BalanceRow{.account_id = std::string(fields_.text(0)),
                                   .currency = std::string(fields_.text(1)),
                                   .balance = fields_.integer(2)};
}

}  // namespace payledger::ledger
