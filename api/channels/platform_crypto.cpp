#include "api/channels/platform_crypto.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include <climits>
#include <functional>
#include <stdexcept>
#include <vector>

#include "api/crypto.hpp"
#include "ledger/base/bytes.hpp"

namespace payledger::api {
namespace {

constexpr std::size_t kAes256KeyBytes = 32;
constexpr std::size_t kGcmTagBytes = 16;
constexpr std::size_t kAesBlockBytes = 16;

using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;
using DigestContext = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;
using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;

const unsigned char* Bytes(std::string_view text) {
    return reinterpret_cast<const unsigned char*>(text.data());
}

unsigned char* Bytes(std::string& text) { return reinterpret_cast<unsigned char*>(text.data()); }

int IntSize(std::size_t size) {
    if (size > static_cast<std::size_t>(INT_MAX)) throw std::length_error("input too large");
    return static_cast<int>(size);
}

std::string Md5Hex(std::string_view message, bool upper) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (EVP_Digest(message.data(), message.size(), digest, &size, EVP_md5(), nullptr) != 1) {
        throw std::runtime_error("MD5 failed");
    }
    const std::string_view bytes(reinterpret_cast<const char*>(digest), size);
    return upper ? ledger::HexUpper(bytes) : ledger::HexLower(bytes);
}

std::shared_ptr<evp_pkey_st> Own(EVP_PKEY* key) {
    return std::shared_ptr<evp_pkey_st>(key, EVP_PKEY_free);
}

// Only RSA keys sign for the platforms we serve.
std::shared_ptr<evp_pkey_st> OwnRsa(EVP_PKEY* key) {
    if (key == nullptr) return nullptr;
    std::shared_ptr<evp_pkey_st> owned = Own(key);
    if (EVP_PKEY_is_a(key, "RSA") != 1) return nullptr;
    return owned;
}

// The passphrase callback of every PEM read: no passphrase. Without one, OpenSSL asks for it
// on the terminal, or reads it from stdin when there is none, and `serve` would block at start
// on an encrypted key file.
int NoPassphrase(char* /*buffer*/, int /*size*/, int /*rwflag*/, void* /*user*/) { return -1; }

Bio MemoryBio(std::string_view text) {
    Bio bio{BIO_new_mem_buf(text.data(), IntSize(text.size())), BIO_free};
    if (!bio) throw std::runtime_error("BIO_new_mem_buf failed");
    return bio;
}

std::shared_ptr<evp_pkey_st> PublicFromPem(std::string_view text) {
    if (EVP_PKEY* key =
            PEM_read_bio_PUBKEY(MemoryBio(text).get(), nullptr, NoPassphrase, nullptr)) {
        return OwnRsa(key);
    }
    if (EVP_PKEY* key =
            PEM_read_bio_PrivateKey(MemoryBio(text).get(), nullptr, NoPassphrase, nullptr)) {
        EVP_PKEY_free(key);  // A private key is never configured where a public one belongs.
        return nullptr;
    }
    if (X509* certificate =
            PEM_read_bio_X509(MemoryBio(text).get(), nullptr, NoPassphrase, nullptr)) {
        EVP_PKEY* key = X509_get_pubkey(certificate);  // A new reference.
        X509_free(certificate);
        return OwnRsa(key);
    }
    return nullptr;
}

std::string Serialize(const std::function<int(BIO*)>& write) {
    Bio bio{BIO_new(BIO_s_mem()), BIO_free};
    if (!bio || write(bio.get()) != 1) throw std::runtime_error("writing a key failed");
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<std::size_t>(size));
}

}  // namespace

std::string Md5HexUpper(std::string_view message) { return Md5Hex(message, true); }

std::string Md5HexLower(std::string_view message) { return Md5Hex(message, false); }

std::string HmacSha256HexUpper(std::string_view key, std::string_view message) {
    return ledger::HexUpper(HmacSha256(key, message));
}

std::optional<PublicKey> ParsePublicKey(std::string_view text) {
    std::shared_ptr<evp_pkey_st> key;
    if (text.find("-----BEGIN") != std::string_view::npos) {
        key = PublicFromPem(text);
    } else {
        std::string compact;
        for (const char c : text) {
            if (c != ' ' && c != '\n' && c != '\r' && c != '\t') compact += c;
        }
        if (const std::optional<std::string> der = ledger::Base64Decode(compact)) {
            const unsigned char* cursor = Bytes(*der);
            EVP_PKEY* parsed = d2i_PUBKEY(nullptr, &cursor, static_cast<long>(der->size()));
            if (parsed != nullptr && cursor != Bytes(*der) + der->size()) {
                EVP_PKEY_free(parsed);  // Trailing bytes: not one key.
                parsed = nullptr;
            }
            key = OwnRsa(parsed);
        }
    }
    ERR_clear_error();  // Failed attempts leave errors on this thread's queue.
    if (!key) return std::nullopt;
    return PublicKey{std::move(key)};
}

std::optional<PrivateKey> ParsePrivateKey(std::string_view pem) {
    std::shared_ptr<evp_pkey_st> key =
        OwnRsa(PEM_read_bio_PrivateKey(MemoryBio(pem).get(), nullptr, NoPassphrase, nullptr));
    ERR_clear_error();
    if (!key) return std::nullopt;
    return PrivateKey{std::move(key)};
}

bool RsaSha256Verify(const PublicKey& key, std::string_view message, std::string_view signature) {
    if (key.empty() || signature.empty()) return false;
    DigestContext context{EVP_MD_CTX_new(), EVP_MD_CTX_free};
    // An RSA key's default padding is PKCS#1 v1.5.
    const bool ok =
        context &&
        EVP_DigestVerifyInit(context.get(), nullptr, EVP_sha256(), nullptr, key.get()) == 1 &&
        EVP_DigestVerify(context.get(), Bytes(signature), signature.size(), Bytes(message),
                         message.size()) == 1;
    ERR_clear_error();
    return ok;
}

std::string RsaSha256Sign(const PrivateKey& key, std::string_view message) {
    DigestContext context{EVP_MD_CTX_new(), EVP_MD_CTX_free};
    std::size_t size = 0;
    if (key.empty() || !context ||
        EVP_DigestSignInit(context.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
        EVP_DigestSign(context.get(), nullptr, &size, Bytes(message), message.size()) != 1) {
        throw std::runtime_error("RSA-SHA256 signing failed");
    }
    std::string signature(size, '\0');
    if (EVP_DigestSign(context.get(), Bytes(signature), &size, Bytes(message), message.size()) !=
        1) {
        throw std::runtime_error("RSA-SHA256 signing failed");
    }
    signature.resize(size);
    return signature;
}

std::optional<std::string> Aes256GcmDecrypt(std::string_view key, std::string_view nonce,
                                            std::string_view aad, std::string_view sealed) {
    if (key.size() != kAes256KeyBytes || nonce.empty() || nonce.size() > kGcmNonceMaxBytes ||
        sealed.size() < kGcmTagBytes) {
        return std::nullopt;
    }
    const std::string_view ciphertext = sealed.substr(0, sealed.size() - kGcmTagBytes);
    std::string tag{sealed.substr(ciphertext.size())};
    CipherContext context{EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free};
    std::string plaintext(ciphertext.size() + kAesBlockBytes, '\0');
    int length = 0;
    int final_length = 0;
    const bool ok =
        context &&
        EVP_DecryptInit_ex(context.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
        EVP_CIPHER_CTX_ctrl(context.get(), EVP_CTRL_GCM_SET_IVLEN, IntSize(nonce.size()),
                            nullptr) == 1 &&
        EVP_DecryptInit_ex(context.get(), nullptr, nullptr, Bytes(key), Bytes(nonce)) == 1 &&
        EVP_DecryptUpdate(context.get(), nullptr, &length, Bytes(aad), IntSize(aad.size())) == 1 &&
        EVP_DecryptUpdate(context.get(), Bytes(plaintext), &length, Bytes(ciphertext),
                          IntSize(ciphertext.size())) == 1 &&
        EVP_CIPHER_CTX_ctrl(context.get(), EVP_CTRL_GCM_SET_TAG, IntSize(kGcmTagBytes),
                            tag.data()) == 1 &&
        EVP_DecryptFinal_ex(context.get(), Bytes(plaintext) + length, &final_length) == 1;
    ERR_clear_error();
    if (!ok) return std::nullopt;
    plaintext.resize(static_cast<std::size_t>(length + final_length));
    return plaintext;
}

std::string Aes256GcmEncrypt(std::string_view key, std::string_view nonce, std::string_view aad,
                             std::string_view plaintext) {
    if (key.size() != kAes256KeyBytes || nonce.empty() || nonce.size() > kGcmNonceMaxBytes) {
        throw std::invalid_argument(
            "AES-256-GCM needs a 32-byte key and a nonce of 1 to 128 bytes");
    }
    CipherContext context{EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free};
    std::string sealed(plaintext.size() + kAesBlockBytes + kGcmTagBytes, '\0');
    int length = 0;
    int final_length = 0;
    const bool ok =
        context &&
        EVP_EncryptInit_ex(context.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
        EVP_CIPHER_CTX_ctrl(context.get(), EVP_CTRL_GCM_SET_IVLEN, IntSize(nonce.size()),
                            nullptr) == 1 &&
        EVP_EncryptInit_ex(context.get(), nullptr, nullptr, Bytes(key), Bytes(nonce)) == 1 &&
        EVP_EncryptUpdate(context.get(), nullptr, &length, Bytes(aad), IntSize(aad.size())) == 1 &&
        EVP_EncryptUpdate(context.get(), Bytes(sealed), &length, Bytes(plaintext),
                          IntSize(plaintext.size())) == 1 &&
        EVP_EncryptFinal_ex(context.get(), Bytes(sealed) + length, &final_length) == 1;
    if (!ok) throw std::runtime_error("AES-256-GCM encryption failed");
    const auto size = static_cast<std::size_t>(length + final_length);
    if (EVP_CIPHER_CTX_ctrl(context.get(), EVP_CTRL_GCM_GET_TAG, IntSize(kGcmTagBytes),
                            Bytes(sealed) + size) != 1) {
        throw std::runtime_error("AES-256-GCM encryption failed");
    }
    sealed.resize(size + kGcmTagBytes);
    return sealed;
}

std::optional<std::string> Aes256EcbDecrypt(std::string_view key, std::string_view ciphertext) {
    if (key.size() != kAes256KeyBytes || ciphertext.empty() ||
        ciphertext.size() % kAesBlockBytes != 0) {
        return std::nullopt;
    }
    CipherContext context{EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free};
    std::string plaintext(ciphertext.size() + kAesBlockBytes, '\0');
    int length = 0;
    int final_length = 0;
    // PKCS#7 padding is on by default; EVP_DecryptFinal_ex checks it.
    const bool ok =
        context &&
        EVP_DecryptInit_ex(context.get(), EVP_aes_256_ecb(), nullptr, Bytes(key), nullptr) == 1 &&
        EVP_DecryptUpdate(context.get(), Bytes(plaintext), &length, Bytes(ciphertext),
                          IntSize(ciphertext.size())) == 1 &&
        EVP_DecryptFinal_ex(context.get(), Bytes(plaintext) + length, &final_length) == 1;
    ERR_clear_error();
    if (!ok) return std::nullopt;
    plaintext.resize(static_cast<std::size_t>(length + final_length));
    return plaintext;
}

std::string Aes256EcbEncrypt(std::string_view key, std::string_view plaintext) {
    if (key.size() != kAes256KeyBytes) {
        throw std::invalid_argument("AES-256-ECB needs a 32-byte key");
    }
    CipherContext context{EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free};
    std::string out(plaintext.size() + kAesBlockBytes, '\0');
    int length = 0;
    int final_length = 0;
    const bool ok =
        context &&
        EVP_EncryptInit_ex(context.get(), EVP_aes_256_ecb(), nullptr, Bytes(key), nullptr) == 1 &&
        EVP_EncryptUpdate(context.get(), Bytes(out), &length, Bytes(plaintext),
                          IntSize(plaintext.size())) == 1 &&
        EVP_EncryptFinal_ex(context.get(), Bytes(out) + length, &final_length) == 1;
    if (!ok) throw std::runtime_error("AES-256-ECB encryption failed");
    out.resize(static_cast<std::size_t>(length + final_length));
    return out;
}

PrivateKey GenerateRsaKey(unsigned bits) {
    EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<std::size_t>(bits));
    if (key == nullptr) throw std::runtime_error("RSA key generation failed");
    return PrivateKey{Own(key)};
}

std::string PrivateKeyPem(const PrivateKey& key) {
    return Serialize([&](BIO* bio) {
        return PEM_write_bio_PrivateKey(bio, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
    });
}

std::string PublicKeyPem(const PublicKey& key) {
    return Serialize([&](BIO* bio) { return PEM_write_bio_PUBKEY(bio, key.get()); });
}

std::string PublicKeyDerBase64(const PublicKey& key) {
    unsigned char* der = nullptr;
    const int size = i2d_PUBKEY(key.get(), &der);
    if (size <= 0) throw std::runtime_error("writing a public key failed");
    const std::string text = ledger::Base64Encode(
        std::string_view(reinterpret_cast<const char*>(der), static_cast<std::size_t>(size)));
    OPENSSL_free(der);
    return text;
}

std::string RandomHex(std::size_t bytes) {
    std::vector<unsigned char> buffer(bytes);
    if (RAND_bytes(buffer.data(), IntSize(bytes)) != 1) {
        throw std::runtime_error("RAND_bytes failed");
    }
    return ledger::HexLower(
        std::string_view(reinterpret_cast<const char*>(buffer.data()), buffer.size()));
}

}  // namespace payledger::api
