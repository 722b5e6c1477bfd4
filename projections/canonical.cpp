#include "projections/canonical.hpp"

namespace payledger::projections {
namespace {

std::string Join(const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& item : items) {
        if (!out.empty()) out += ',';
        out += item;
    }
    return out;
}

void Compare(std::string& out, const char* field, const std::string& folded,
             const std::string& live) {
    if (folded == live) return;
    if (!out.empty()) out += "; ";
    out += std::string(field) + " " + (folded.empty() ? "null" : folded) + ", live " +
           (live.empty() ? "null" : live);
}

}  // namespace

void AppendCanonicalLine(const OrderRow& order, std::string& line) {
    line += order.out_trade_no;
    line += '\t';
    line += order.account_id;
    line += '\t';
    line += order.currency;
    line += '\t';
    line += std::to_string(order.amount);
    line += '\t';
    line += order.status;
    line += '\t';
    if (order.transaction_id) line += *order.transaction_id;
    line += '\t';
    line += std::to_string(order.paid_amount);
    line += '\t';
    line += std::to_string(order.refunded_amount);
    line += '\t';
    for (std::size_t i = 0; i < order.anomalies.size(); ++i) {
        if (i != 0) line += ',';
        line += order.anomalies[i];
    }
    line += '\n';
}

std::string CanonicalLine(const OrderRow& order) {
    std::string line;
    line.reserve(128);
    AppendCanonicalLine(order, line);
    return line;
}

std::string CanonicalLine(const BalanceRow& balance) {
    return balance.account_id + '\t' + balance.currency + '\t' + std::to_string(balance.balance) +
           '\n';
}

std::string Differences(const OrderRow& folded, const OrderRow& live) {
    std::string out;
    Compare(out, "account_id", folded.account_id, live.account_id);
    Compare(out, "currency", folded.currency, live.currency);
    Compare(out, "amount", std::to_string(folded.amount), std::to_string(live.amount));
    Compare(out, "status", folded.status, live.status);
    Compare(out, "transaction_id", folded.transaction_id.value_or(""),
            live.transaction_id.value_or(""));
    Compare(out, "paid_amount", std::to_string(folded.paid_amount),
            std::to_string(live.paid_amount));
    Compare(out, "refunded_amount", std::to_string(folded.refunded_amount),
            std::to_string(live.refunded_amount));
    Compare(out, "anomalies", Join(folded.anomalies), Join(live.anomalies));
    Compare(out, "seq", std::to_string(folded.seq), std::to_string(live.seq));
    return out;
}

}  // namespace payledger::projections
