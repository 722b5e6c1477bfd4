#include "ledger/digest.hpp"

#include <openssl/evp.h>

#include <stdexcept>

namespace payledger::ledger {

struct Sha256::Context {
    EVP_MD_CTX* md = EVP_MD_CTX_new();
    ~Context() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
    if (context_->md == nullptr || EVP_DigestInit_ex(context_->md, EVP_sha256(), nullptr) != 1) {
        throw std::runtime_error("SHA-256 initialisation failed");
    }
}

Sha256::~Sha256() = default;

void Sha256::Update(std::string_view bytes) {
    if (EVP_DigestUpdate(context_->md, bytes.data(), bytes.size()) != 1) {
        throw std::runtime_error("SHA-256 update failed");
    }
}

void Sha256::CopyFrom(const Sha256& other) {
    if (EVP_MD_CTX_copy_ex(context_->md, other.context_->md) != 1) {
        throw std::runtime_error("SHA-256 copy failed");
    }
}

std::string Sha256::HexDigest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (EVP_DigestFinal_ex(context_->md, digest, &size) != 1) {
        throw std::runtime_error("SHA-256 finalisation failed");
    }
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < size; ++i) {
        hex += kDigits[digest[i] >> 4];
        hex += kDigits[digest[i] & 0x0f];
    }
    return hex;
}

}  // namespace payledger::ledger
