#include "ledger/chain.hpp"

#include <openssl/sha.h>

#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

std::string Hex(const unsigned char* bytes, std::size_t size) {
    std::string out;
    out.reserve(size * 2);
    for (std::size_t i = 0; i < size; ++i) {
        out += kHexDigits[bytes[i] >> 4];
        out += kHexDigits[bytes[i] & 0x0f];
    }
    return out;
}

int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

void AppendEvent(const projections::Event& event, std::string& out) {
    const bool has_money = event.event_type != projections::EventType::kPaymentClosed;
    out += std::to_string(event.seq);
    out += ',';
    out += projections::ToString(event.event_type);
    out += ',';
    out += event.out_trade_no;
    out += ',';
    out += event.account_id;
    out += ',';
    if (has_money) out += std::to_string(event.amount);
    out += ',';
    if (has_money) out += event.currency;
    out += ',';
    out += event.transaction_id.value_or("");
    out += ',';
    out += projections::FormatRfc3339Micros(event.occurred_at);
}

}  // namespace

std::string ReceiptLine(const Receipt& receipt, const projections::Event* appended) {
    const std::string body_sha256 = Sha256Hex(receipt.body);
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
    PAYLEDGER_ASSERT((appended != nullptr) == (receipt.outcome == projections::Outcome::kAppended));
    std::string line;
    line.reserve(192);
    line += std::to_string(receipt.id);
    line += '\t';
    line += projections::ToString(receipt.source);
    line += '\t';
    line += projections::FormatRfc3339Micros(receipt.received_at);
    line += '\t';
    line += projections::ToString(receipt.outcome);
    line += '\t';
    if (receipt.seq) line += std::to_string(*receipt.seq);
    line += '\t';
    line += receipt.out_trade_no;
    line += '\t';
    line += receipt.body_sha256_hex;
    line += '\t';
    if (appended != nullptr) AppendEvent(*appended, line);
    line += '\n';
    return line;
}

ChainValue NextChain(const ChainValue& previous, std::string_view line) {
    std::string input;
    input.reserve(previous.size() + line.size());
    input.append(reinterpret_cast<const char*>(previous.data()), previous.size());
    input.append(line);
    ChainValue next{};
    SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), next.data());
    return next;
}

std::string ChainHex(const ChainValue& value) { return Hex(value.data(), value.size()); }

std::optional<ChainValue> ParseChainHex(std::string_view hex) {
    ChainValue value{};
    if (hex.size() != value.size() * 2) return std::nullopt;
    for (std::size_t i = 0; i < value.size(); ++i) {
        const int high = HexValue(hex[2 * i]);
        const int low = HexValue(hex[2 * i + 1]);
        if (high < 0 || low < 0) return std::nullopt;
        value[i] = static_cast<unsigned char>(high * 16 + low);
    }
    return value;
}

std::string Sha256Hex(std::string_view bytes) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
    return Hex(digest, sizeof digest);
}

}  // namespace payledger::ledger
