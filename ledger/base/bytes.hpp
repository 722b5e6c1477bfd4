#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

// The one home of the byte encodings and the hash every layer above uses: hex, SHA-256,
// base64 and the UTF-8 check. OpenSSL does the hashing and the base64; no OpenSSL header is
// included here. Every function is thread-safe.
namespace payledger::ledger {

// Two hex digits per byte, lower case ("00ff") or upper case ("00FF").
[[nodiscard]] std::string HexLower(std::string_view bytes);
[[nodiscard]] std::string HexUpper(std::string_view bytes);
// The same as HexLower, appended to `out`.
void AppendHexLower(std::string_view bytes, std::string& out);
// The bytes of lower-case hex: nullopt unless `hex` has an even length and only 0-9 a-f.
[[nodiscard]] std::optional<std::string> ParseHexLower(std::string_view hex);

// The raw SHA-256 of `bytes`: what callback_receipts.body_sha256 and receipt_bodies' key
// store, and each value of the receipt chain (docs/integrity.md#the-receipt-chain).
using Sha256Digest = std::array<unsigned char, 32>;
[[nodiscard]] Sha256Digest Sha256(std::string_view bytes);
// The digest's bytes, as text.
[[nodiscard]] std::string_view DigestBytes(const Sha256Digest& digest);
// Lower-case hex of the digest, and of SHA-256(bytes) (a receipt's body_sha256).
[[nodiscard]] std::string HexLower(const Sha256Digest& digest);
[[nodiscard]] std::string Sha256Hex(std::string_view bytes);
// The digest's 64 lower-case hex digits in place, for the loops that must not allocate per
// receipt (the writer's and audit's chain lines).
using Sha256HexDigits = std::array<char, 64>;
[[nodiscard]] Sha256HexDigits HexDigits(const Sha256Digest& digest);

// SHA-256 of bytes given piece by piece (the canonical digests of `verify`).
class Sha256Stream {
public:
    Sha256Stream();
    ~Sha256Stream();
    Sha256Stream(const Sha256Stream&) = delete;
    Sha256Stream& operator=(const Sha256Stream&) = delete;

    void Update(std::string_view bytes);
    // Continues from `other`'s state: the digest of what `other` was given so far.
    void CopyFrom(const Sha256Stream& other);
    // Lower-case hex of the digest of everything updated so far. Call once.
    [[nodiscard]] std::string HexDigest();

private:
    struct Context;
    std::unique_ptr<Context> context_;
};

// Standard base64 (RFC 4648 alphabet, `=` padding, no line breaks).
[[nodiscard]] std::string Base64Encode(std::string_view bytes);
// The inverse, strict: nullopt for a length that is not a multiple of 4, a character outside
// the alphabet (whitespace included), padding anywhere but at the end, or unused bits that
// are not zero (so each byte string has one text). WeChat Pay's `WECHATPAY/SIGNTEST/...`
// signature probes give nullopt.
[[nodiscard]] std::optional<std::string> Base64Decode(std::string_view text);

// True when `text` is well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates
// (U+D800-U+DFFF), no code points past U+10FFFF, no truncated or stray sequences.
[[nodiscard]] bool IsValidUtf8(std::string_view text);

}  // namespace payledger::ledger
