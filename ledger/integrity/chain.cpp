#include "ledger/integrity/chain.hpp"

#include <algorithm>
#include <charconv>
#include <system_error>

#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger {
namespace {

void AppendInteger(std::int64_t value, std::string& out) {
    char digits[24];
    const auto [end, error] = std::to_chars(digits, digits + sizeof digits, value);
    PAYLEDGER_ASSERT(error == std::errc{});
    out.append(digits, end);
}

void AppendEvent(const projections::Event& event, std::string& out) {
    const bool has_money = event.event_type != projections::EventType::kPaymentClosed;
    AppendInteger(event.seq, out);
    out += ',';
    out += projections::ToString(event.event_type);
    out += ',';
    out += event.out_trade_no;
    out += ',';
    out += event.account_id;
    out += ',';
    if (has_money) AppendInteger(event.amount, out);
    out += ',';
    if (has_money) out += event.currency;
    out += ',';
    if (event.transaction_id) out += *event.transaction_id;
    out += ',';
    projections::AppendRfc3339Micros(event.occurred_at, out);
}

}  // namespace

std::string ReceiptLine(const Receipt& receipt, const projections::Event* appended) {
    const std::string body_sha256 =
        receipt.body_sha256.empty() ? Sha256Hex(receipt.body) : receipt.body_sha256;
    return ReceiptLine({.id = receipt.id,
                        .source = receipt.source,
                        .received_at = receipt.received_at,
                        .outcome = receipt.outcome,
                        .seq = receipt.seq,
                        .out_trade_no = receipt.out_trade_no ? *receipt.out_trade_no : "",
                        .body_sha256_hex = body_sha256},
                       appended);
}

std::string ReceiptLine(const ReceiptLineFields& receipt, const projections::Event* appended) {
    std::string line;
    line.reserve(192);
    AppendReceiptLine(receipt, appended, line);
    return line;
}

void AppendReceiptLine(const ReceiptLineFields& receipt, const projections::Event* appended,
                       std::string& out) {
    PAYLEDGER_ASSERT((appended != nullptr) == (receipt.outcome == projections::Outcome::kAppended));
    AppendInteger(receipt.id, out);
    out += '\t';
    out += projections::ToString(receipt.source);
    out += '\t';
    projections::AppendRfc3339Micros(receipt.received_at, out);
    out += '\t';
    out += projections::ToString(receipt.outcome);
    out += '\t';
    if (receipt.seq) AppendInteger(*receipt.seq, out);
    out += '\t';
    out += receipt.out_trade_no;
    out += '\t';
    out += receipt.body_sha256_hex;
    out += '\t';
    if (appended != nullptr) AppendEvent(*appended, out);
    out += '\n';
}

ChainValue NextChain(const ChainValue& previous, std::string_view line) {
    std::string scratch;
    scratch.reserve(previous.size() + line.size());
    scratch.append(DigestBytes(previous));
    scratch.append(line);
    return Sha256(scratch);
}

ChainValue NextChain(const ChainValue& previous, const ReceiptLineFields& receipt,
                     const projections::Event* appended, std::string& scratch) {
    scratch.assign(DigestBytes(previous));
    AppendReceiptLine(receipt, appended, scratch);
    return Sha256(scratch);
}

std::optional<ChainValue> ParseChainHex(std::string_view hex) {
    const std::optional<std::string> bytes = ParseHexLower(hex);
    ChainValue value{};
    if (!bytes || bytes->size() != value.size()) return std::nullopt;
    std::copy(bytes->begin(), bytes->end(), value.begin());
    return value;
}

}  // namespace payledger::ledger
