#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

// OpenSSL's EVP_PKEY, declared here so that this header pulls in no OpenSSL header.
struct evp_pkey_st;

namespace payledger::api {

// Thin wrappers over OpenSSL for the payment platforms' signatures and ciphers (docs/platforms.md).
// No cryptography is written here by hand. Every function is thread-safe; the key classes are
// immutable after construction and may be shared between threads.

// An RSA public key (a WeChat Pay platform key, the Alipay public key).
class PublicKey {
public:
    PublicKey() = default;
    explicit PublicKey(std::shared_ptr<evp_pkey_st> key) : key_(std::move(key)) {}
    [[nodiscard]] evp_pkey_st* get() const { return key_.get(); }
    [[nodiscard]] bool empty() const { return key_ == nullptr; }

private:
    std::shared_ptr<evp_pkey_st> key_{};
};

// An RSA private key: only `payledger simulate` and the tests sign.
class PrivateKey {
public:
    PrivateKey() = default;
    explicit PrivateKey(std::shared_ptr<evp_pkey_st> key) : key_(std::move(key)) {}
    [[nodiscard]] evp_pkey_st* get() const { return key_.get(); }
    [[nodiscard]] bool empty() const { return key_ == nullptr; }
    // The public half (the same OpenSSL object, used only to verify).
    [[nodiscard]] PublicKey Public() const { return PublicKey{key_}; }

private:
    std::shared_ptr<evp_pkey_st> key_{};
};

// Upper-case hex of MD5(message) (WeChat Pay v2 MD5 signatures).
[[nodiscard]] std::string Md5HexUpper(std::string_view message);
// Lower-case hex of MD5(message) (the WeChat Pay v2 refund key,
// docs/platforms.md#apiv2-refund-notices).
[[nodiscard]] std::string Md5HexLower(std::string_view message);
// Upper-case hex of HMAC-SHA256(key, message) (WeChat Pay v2 HMAC-SHA256 signatures).
[[nodiscard]] std::string HmacSha256HexUpper(std::string_view key, std::string_view message);

// An RSA public key from text: PEM "PUBLIC KEY" (SubjectPublicKeyInfo), PEM "CERTIFICATE"
// (its key, as WeChat Pay platform certificates come), or Alipay's bare base64 of the DER
// SubjectPublicKeyInfo (whitespace allowed).
// nullopt when the text holds none of these, or a key that is not RSA.
[[nodiscard]] std::optional<PublicKey> ParsePublicKey(std::string_view text);
// An RSA private key from PEM ("PRIVATE KEY" or "RSA PRIVATE KEY"); nullopt otherwise, an
// encrypted key included (no passphrase is ever asked for, on a terminal or on stdin).
[[nodiscard]] std::optional<PrivateKey> ParsePrivateKey(std::string_view pem);

// RSASSA-PKCS1-v1_5 with SHA-256 ("SHA256withRSA", Alipay RSA2, WeChat Pay v3).
[[nodiscard]] bool RsaSha256Verify(const PublicKey& key, std::string_view message,
                                   std::string_view signature);
// The raw signature bytes. Throws std::runtime_error when OpenSSL fails.
[[nodiscard]] std::string RsaSha256Sign(const PrivateKey& key, std::string_view message);

// The longest AES-256-GCM nonce OpenSSL 3 takes (its GCM_IV_MAX_SIZE). WeChat Pay's are 12.
inline constexpr std::size_t kGcmNonceMaxBytes = 128;

// AES-256-GCM (WeChat Pay v3 resources, docs/platforms.md#the-encrypted-resource): `key` 32 bytes,
// `nonce` the raw bytes, `aad` the associated data, `sealed` = ciphertext followed by the 16-byte
// tag. nullopt when the key is not 32 bytes, the nonce is empty or over kGcmNonceMaxBytes, the
// input is shorter than the tag, or the tag fails.
[[nodiscard]] std::optional<std::string> Aes256GcmDecrypt(std::string_view key,
                                                          std::string_view nonce,
                                                          std::string_view aad,
                                                          std::string_view sealed);
// The inverse: ciphertext followed by the 16-byte tag. Throws std::invalid_argument when the
// key is not 32 bytes or the nonce is empty or over kGcmNonceMaxBytes.
[[nodiscard]] std::string Aes256GcmEncrypt(std::string_view key, std::string_view nonce,
                                           std::string_view aad, std::string_view plaintext);

// AES-256-ECB with PKCS#7 padding (WeChat Pay v2 refund `req_info`,
// docs/platforms.md#apiv2-refund-notices). nullopt when the key is not 32 bytes, the input is empty
// or not whole blocks, or the padding is invalid.
[[nodiscard]] std::optional<std::string> Aes256EcbDecrypt(std::string_view key,
                                                          std::string_view ciphertext);
// The inverse. Throws std::invalid_argument when the key is not 32 bytes.
[[nodiscard]] std::string Aes256EcbEncrypt(std::string_view key, std::string_view plaintext);

// Key material for tests and development: a fresh RSA key (EVP_PKEY_Q_keygen), and PEM or
// Alipay-style bare base64 DER texts of keys. Throw std::runtime_error when OpenSSL fails.
[[nodiscard]] PrivateKey GenerateRsaKey(unsigned bits = 2048);
[[nodiscard]] std::string PrivateKeyPem(const PrivateKey& key);
[[nodiscard]] std::string PublicKeyPem(const PublicKey& key);
[[nodiscard]] std::string PublicKeyDerBase64(const PublicKey& key);

// `bytes` random bytes from OpenSSL's CSPRNG, as lower-case hex (nonces).
[[nodiscard]] std::string RandomHex(std::size_t bytes);

}  // namespace payledger::api
