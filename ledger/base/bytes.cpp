#include "ledger/base/bytes.hpp"

#include <openssl/evp.h>

#include <climits>
#include <cstdint>
#include <stdexcept>

namespace payledger::ledger {
namespace {

constexpr char kLowerDigits[] = "0123456789abcdef";
constexpr char kUpperDigits[] = "0123456789ABCDEF";

// The 2 * bytes.size() hex digits of `bytes`, written to `out`.
void HexInto(std::string_view bytes, const char* digits, char* out) {
    for (const char c : bytes) {
        const auto byte = static_cast<unsigned char>(c);
        *out++ = digits[byte >> 4];
        *out++ = digits[byte & 0x0f];
    }
}

std::string Hex(std::string_view bytes, const char* digits) {
    std::string hex(bytes.size() * 2, '\0');
    HexInto(bytes, digits, hex.data());
    return hex;
}

int LowerHexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

const unsigned char* Bytes(std::string_view text) {
    return reinterpret_cast<const unsigned char*>(text.data());
}

// OpenSSL's base64 takes an int length.
int IntSize(std::size_t size) {
    if (size > static_cast<std::size_t>(INT_MAX)) throw std::length_error("input too large");
    return static_cast<int>(size);
}

// SHA-256 fetched once: EVP_sha256() makes every digest look the implementation up again, and
// the writer and audit hash once per receipt.
const EVP_MD* Sha256Md() {
    static const EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (md == nullptr) throw std::runtime_error("SHA-256 is not available");
    return md;
}

// The 6-bit value of a base64 character; -1 outside the alphabet.
int Base64Value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

}  // namespace

std::string HexLower(std::string_view bytes) { return Hex(bytes, kLowerDigits); }

std::string HexUpper(std::string_view bytes) { return Hex(bytes, kUpperDigits); }

void AppendHexLower(std::string_view bytes, std::string& out) {
    const std::size_t start = out.size();
    out.resize(start + bytes.size() * 2);
    HexInto(bytes, kLowerDigits, out.data() + start);
}

std::optional<std::string> ParseHexLower(std::string_view hex) {
    if (hex.size() % 2 != 0) return std::nullopt;
    std::string bytes(hex.size() / 2, '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const int high = LowerHexValue(hex[2 * i]);
        const int low = LowerHexValue(hex[2 * i + 1]);
        if (high < 0 || low < 0) return std::nullopt;
        bytes[i] = static_cast<char>(high * 16 + low);
    }
    return bytes;
}

Sha256Digest Sha256(std::string_view bytes) {
    Sha256Digest digest{};
    unsigned int size = 0;
    if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, Sha256Md(), nullptr) != 1 ||
        size != digest.size()) {
        throw std::runtime_error("SHA-256 failed");
    }
    return digest;
}

std::string_view DigestBytes(const Sha256Digest& digest) {
    return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

std::string HexLower(const Sha256Digest& digest) { return HexLower(DigestBytes(digest)); }

std::string Sha256Hex(std::string_view bytes) { return HexLower(Sha256(bytes)); }

Sha256HexDigits HexDigits(const Sha256Digest& digest) {
    Sha256HexDigits digits{};
    HexInto(DigestBytes(digest), kLowerDigits, digits.data());
    return digits;
}

struct Sha256Stream::Context {
    EVP_MD_CTX* md = EVP_MD_CTX_new();
    ~Context() { EVP_MD_CTX_free(md); }
};

Sha256Stream::Sha256Stream() : context_(std::make_unique<Context>()) {
    if (context_->md == nullptr || EVP_DigestInit_ex(context_->md, Sha256Md(), nullptr) != 1) {
        throw std::runtime_error("SHA-256 initialisation failed");
    }
}

Sha256Stream::~Sha256Stream() = default;

void Sha256Stream::Update(std::string_view bytes) {
    if (EVP_DigestUpdate(context_->md, bytes.data(), bytes.size()) != 1) {
        throw std::runtime_error("SHA-256 update failed");
    }
}

void Sha256Stream::CopyFrom(const Sha256Stream& other) {
    if (EVP_MD_CTX_copy_ex(context_->md, other.context_->md) != 1) {
        throw std::runtime_error("SHA-256 copy failed");
    }
}

std::string Sha256Stream::HexDigest() {
    Sha256Digest digest{};
    unsigned int size = 0;
    if (EVP_DigestFinal_ex(context_->md, digest.data(), &size) != 1 || size != digest.size()) {
        throw std::runtime_error("SHA-256 finalisation failed");
    }
    return HexLower(digest);
}

std::string Base64Encode(std::string_view bytes) {
    std::string text(4 * ((bytes.size() + 2) / 3), '\0');
    const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(text.data()), Bytes(bytes),
                                        IntSize(bytes.size()));
    text.resize(static_cast<std::size_t>(written));
    return text;
}

std::optional<std::string> Base64Decode(std::string_view text) {
    if (text.size() % 4 != 0) return std::nullopt;
    if (text.empty()) return std::string{};
    const std::size_t padding = text.back() != '=' ? 0 : text[text.size() - 2] == '=' ? 2 : 1;
    for (std::size_t i = 0; i < text.size() - padding; ++i) {
        if (Base64Value(text[i]) < 0) return std::nullopt;
    }
    // The bits of the last character that no byte uses are zero in the one encoding of the
    // bytes: "Zg==" is "f", "Zh==" is refused rather than read as "f" too.
    const int unused_bits_mask = padding == 2 ? 0x0f : padding == 1 ? 0x03 : 0;
    if ((Base64Value(text[text.size() - padding - 1]) & unused_bits_mask) != 0) return std::nullopt;
    // EVP_DecodeBlock writes 3 bytes per 4 characters, padding included, and cannot say how
    // many of them are real: the padding counted above says it.
    std::string bytes(text.size() / 4 * 3, '\0');
    const int written = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()), Bytes(text),
                                        IntSize(text.size()));
    if (written < 0 || static_cast<std::size_t>(written) != bytes.size()) return std::nullopt;
    bytes.resize(bytes.size() - padding);
    return bytes;
}

bool IsValidUtf8(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
        const auto byte = static_cast<unsigned char>(text[i]);
        if (byte < 0x80) {
            ++i;
            continue;
        }
        std::size_t length = 0;
        std::uint32_t code = 0;
        if (byte >= 0xC2 && byte <= 0xDF) {
            length = 2;
            code = byte & 0x1Fu;
        } else if (byte >= 0xE0 && byte <= 0xEF) {
            length = 3;
            code = byte & 0x0Fu;
        } else if (byte >= 0xF0 && byte <= 0xF4) {
            length = 4;
            code = byte & 0x07u;
        } else {
            // A continuation byte first, C0 or C1 (always overlong), or F5-FF (past U+10FFFF).
            return false;
        }
        if (text.size() - i < length) return false;
        for (std::size_t k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xC0) != 0x80) return false;
            code = (code << 6) | (next & 0x3Fu);
        }
        // The overlong three- and four-byte forms, the surrogates, and past U+10FFFF.
        if ((length == 3 && code < 0x800) || (length == 4 && code < 0x10000) || code > 0x10FFFF ||
            (code >= 0xD800 && code <= 0xDFFF)) {
            return false;
        }
        i += length;
    }
    return true;
}

}  // namespace payledger::ledger
