#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace payledger::ledger {

// Incremental SHA-256 (OpenSSL EVP), for the canonical digests of SPEC §4.
class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;

    void Update(std::string_view bytes);
    // Continues from `other`'s state: the digest of what `other` was given so far.
    void CopyFrom(const Sha256& other);
    // Lower-case hex of the digest of everything updated so far. Call once.
    [[nodiscard]] std::string HexDigest();

private:
    struct Context;
    std::unique_ptr<Context> context_;
};

}  // namespace payledger::ledger
