#pragma once

#include <string>
#include <string_view>

namespace payledger::api {

// Lower-case hex of HMAC-SHA256(key, message), by OpenSSL.
[[nodiscard]] std::string HmacSha256Hex(std::string_view key, std::string_view message);

// Lower-case hex of SHA-256(message), by OpenSSL.
[[nodiscard]] std::string Sha256Hex(std::string_view message);

// Compares in time that depends only on the lengths (OpenSSL CRYPTO_memcmp).
[[nodiscard]] bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace payledger::api
