#pragma once

#include <string>
#include <string_view>

namespace payledger::api {

// HMAC-SHA256(key, message) by OpenSSL: the raw 32 bytes, and their lower-case hex
// (ledger/base/bytes.hpp has the hex and SHA-256 itself).
[[nodiscard]] std::string HmacSha256(std::string_view key, std::string_view message);
[[nodiscard]] std::string HmacSha256Hex(std::string_view key, std::string_view message);

// Compares in time that depends only on the lengths (OpenSSL CRYPTO_memcmp).
[[nodiscard]] bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace payledger::api
