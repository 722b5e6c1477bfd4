#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <string_view>

#include "ledger/integrity/chain.hpp"
#include "projections/event.hpp"

namespace payledger::ledger {

// docs/integrity.md#checkpoints: the head of the receipt chain, signed with Ed25519 (OpenSSL 3 EVP)
// over the bytes "payledger-checkpoint\n<receipt_id>\n<chain>\n<at>\n".
struct Checkpoint {
    std::int64_t receipt_id = 0;
    std::string chain{};      // Lower-case hex.
    std::string at{};         // RFC 3339 UTC with six fractional digits.
    std::string key_id{};     // Hex SHA-256 of the raw 32-byte public key.
    std::string signature{};  // Standard base64.
};

// What is signed.
[[nodiscard]] std::string CheckpointMessage(std::int64_t receipt_id, std::string_view chain,
                                            std::string_view at);

// {"receipt_id","chain","at","key_id","signature"} (receipt_id a JSON integer), and back:
// nullopt for anything else (fields missing or of another type, a chain that is not 64 hex
// digits).
[[nodiscard]] std::string CheckpointJson(const Checkpoint& checkpoint);
[[nodiscard]] std::optional<Checkpoint> ParseCheckpointJson(std::string_view text);

// An Ed25519 key pair or public key. Throws std::runtime_error with the reason when a PEM is
// not an Ed25519 key.
class Ed25519Key {
public:
    [[nodiscard]] static Ed25519Key PrivateFromPem(std::string_view pem);
    [[nodiscard]] static Ed25519Key PublicFromPem(std::string_view pem);
    ~Ed25519Key();
    Ed25519Key(Ed25519Key&&) noexcept;
    Ed25519Key& operator=(Ed25519Key&&) noexcept;

    [[nodiscard]] bool has_private() const { return has_private_; }
    [[nodiscard]] std::string KeyId() const;
    [[nodiscard]] std::string PublicPem() const;
    // REQUIRES: has_private().
    [[nodiscard]] Checkpoint Sign(std::int64_t receipt_id, const ChainValue& chain,
                                  projections::TimeMicros at) const;
    [[nodiscard]] bool Verifies(const Checkpoint& checkpoint) const;

private:
    struct Pkey;
    Ed25519Key(std::unique_ptr<Pkey> pkey, bool has_private);
    std::unique_ptr<Pkey> pkey_;
    bool has_private_ = false;
};

// The chain's head in `tx`'s snapshot, signed now. An empty ledger's head is receipt 0 with
// 32 zero bytes.
[[nodiscard]] Checkpoint SignHead(pqxx::transaction_base& tx, const Ed25519Key& key);

// What a checkpoint says of the ledger in `tx`'s snapshot: empty when the receipt it names
// still holds its chain value; else the break line ("receipt <id> ...").
[[nodiscard]] std::optional<std::string> CheckpointBreak(pqxx::transaction_base& tx,
                                                         const Checkpoint& checkpoint);

}  // namespace payledger::ledger
