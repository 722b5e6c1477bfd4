#include "ledger/chain.hpp"

#include <openssl/sha.h>

#include <charconv>
#include <system_error>

#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

// The 2 * size lower-case hex digits of `bytes`, written to `out`.
void HexInto(const unsigned char* bytes, std::size_t size, char* out) {
    for (std::size_t i = 0; i < size; ++i) {
        out[2 * i] = kHexDigits[bytes[i] >> 4];
        out[2 * i + 1] = kHexDigits[bytes[i] & 0x0f];
    }
}

int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

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
    scratch.append(reinterpret_cast<const char*>(previous.data()), previous.size());
    scratch.append(line);
    ChainValue next{};
    SHA256(reinterpret_cast<const unsigned char*>(scratch.data()), scratch.size(), next.data());
    return next;
}

ChainValue NextChain(const ChainValue& previous, const ReceiptLineFields& receipt,
                     const projections::Event* appended, std::string& scratch) {
    scratch.assign(reinterpret_cast<const char*>(previous.data()), previous.size());
    AppendReceiptLine(receipt, appended, scratch);
    ChainValue next{};
    SHA256(reinterpret_cast<const unsigned char*>(scratch.data()), scratch.size(), next.data());
    return next;
}

std::string ChainHex(const ChainValue& value) {
    std::string hex(value.size() * 2, '\0');
    HexInto(value.data(), value.size(), hex.data());
    return hex;
}

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
    const Sha256HexDigits digits = Sha256HexOf(bytes);
    return std::string(digits.data(), digits.size());
}

Sha256HexDigits Sha256HexOf(std::string_view bytes) { return HexDigitsOf(Sha256Of(bytes)); }

Sha256Digest Sha256Of(std::string_view bytes) {
    static_assert(std::tuple_size_v<Sha256Digest> == SHA256_DIGEST_LENGTH);
    Sha256Digest digest{};
    SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest.data());
    return digest;
}

Sha256HexDigits HexDigitsOf(const Sha256Digest& digest) {
    Sha256HexDigits digits{};
    HexInto(digest.data(), digest.size(), digits.data());
    return digits;
}

}  // namespace payledger::ledger
