#include "ledger/integrity/checkpoint.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "ledger/base/bytes.hpp"
#include "ledger/base/clock.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger {

struct Ed25519Key::Pkey {
    EVP_PKEY* key = nullptr;
    ~Pkey() { EVP_PKEY_free(key); }
};

namespace {

using nlohmann::json;

// Strict standard base64 of exactly `size` bytes.
std::optional<std::string> Unbase64(std::string_view text, std::size_t size) {
    std::optional<std::string> bytes = Base64Decode(text);
    if (!bytes || bytes->size() != size) return std::nullopt;
    return bytes;
}

EVP_PKEY* ReadPem(std::string_view pem, bool private_key) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    if (bio == nullptr) throw std::runtime_error("out of memory");
    EVP_PKEY* key = private_key ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr)
                                : PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (key == nullptr) {
        throw std::runtime_error(private_key ? "not a PEM private key" : "not a PEM public key");
    }
    if (EVP_PKEY_get_base_id(key) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(key);
        throw std::runtime_error("not an Ed25519 key");
    }
    return key;
}

}  // namespace

std::string CheckpointMessage(std::int64_t receipt_id, std::string_view chain,
                              std::string_view at) {
    std::string message = "payledger-checkpoint\n";
    message += std::to_string(receipt_id);
    message += '\n';
    message += chain;
    message += '\n';
    message += at;
    message += '\n';
    return message;
}

std::string CheckpointJson(const Checkpoint& checkpoint) {
    return json{{"receipt_id", checkpoint.receipt_id},
                {"chain", checkpoint.chain},
                {"at", checkpoint.at},
                {"key_id", checkpoint.key_id},
                {"signature", checkpoint.signature}}
        .dump();
}

std::optional<Checkpoint> ParseCheckpointJson(std::string_view text) {
    const json value = json::parse(text, nullptr, false);
    if (!value.is_object()) return std::nullopt;
    const auto id = value.find("receipt_id");
    if (id == value.end() || !id->is_number_integer()) return std::nullopt;
    Checkpoint checkpoint{.receipt_id = id->get<std::int64_t>()};
    for (auto [name, field] :
         {std::pair{"chain", &checkpoint.chain}, std::pair{"at", &checkpoint.at},
          std::pair{"key_id", &checkpoint.key_id}, std::pair{"signature", &checkpoint.signature}}) {
        const auto it = value.find(name);
        if (it == value.end() || !it->is_string()) return std::nullopt;
        *field = it->get<std::string>();
    }
    if (checkpoint.receipt_id < 0 || !ParseChainHex(checkpoint.chain)) return std::nullopt;
    return checkpoint;
}

Ed25519Key::Ed25519Key(std::unique_ptr<Pkey> pkey, bool has_private)
    : pkey_(std::move(pkey)), has_private_(has_private) {}
Ed25519Key::~Ed25519Key() = default;
Ed25519Key::Ed25519Key(Ed25519Key&&) noexcept = default;
Ed25519Key& Ed25519Key::operator=(Ed25519Key&&) noexcept = default;

Ed25519Key Ed25519Key::PrivateFromPem(std::string_view pem) {
    auto pkey = std::make_unique<Pkey>();
    pkey->key = ReadPem(pem, true);
    return Ed25519Key{std::move(pkey), true};
}

Ed25519Key Ed25519Key::PublicFromPem(std::string_view pem) {
    auto pkey = std::make_unique<Pkey>();
    pkey->key = ReadPem(pem, false);
    return Ed25519Key{std::move(pkey), false};
}

std::string Ed25519Key::KeyId() const {
    unsigned char raw[32];
    std::size_t size = sizeof raw;
    if (EVP_PKEY_get_raw_public_key(pkey_->key, raw, &size) != 1 || size != sizeof raw) {
        throw std::runtime_error("cannot read the Ed25519 public key");
    }
    return Sha256Hex(std::string_view(reinterpret_cast<const char*>(raw), size));
}

std::string Ed25519Key::PublicPem() const {
    BIO* bio = BIO_new(BIO_s_mem());
    if (bio == nullptr || PEM_write_bio_PUBKEY(bio, pkey_->key) != 1) {
        BIO_free(bio);
        throw std::runtime_error("cannot write the public key");
    }
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio, &data);
    std::string pem(data, static_cast<std::size_t>(size));
    BIO_free(bio);
    return pem;
}

Checkpoint Ed25519Key::Sign(std::int64_t receipt_id, const ChainValue& chain,
                            projections::TimeMicros at) const {
    PAYLEDGER_ASSERT(has_private_);
    Checkpoint checkpoint{.receipt_id = receipt_id,
                          .chain = HexLower(chain),
                          .at = projections::FormatRfc3339Micros(at),
                          .key_id = KeyId()};
    const std::string message = CheckpointMessage(receipt_id, checkpoint.chain, checkpoint.at);
    EVP_MD_CTX* context = EVP_MD_CTX_new();
    unsigned char signature[64];
    std::size_t size = sizeof signature;
    const bool signed_ok =
        context != nullptr &&
        EVP_DigestSignInit(context, nullptr, nullptr, nullptr, pkey_->key) == 1 &&
        EVP_DigestSign(context, signature, &size,
                       reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
    EVP_MD_CTX_free(context);
    if (!signed_ok || size != sizeof signature) throw std::runtime_error("Ed25519 signing failed");
    checkpoint.signature =
        Base64Encode(std::string_view(reinterpret_cast<const char*>(signature), size));
    return checkpoint;
}

bool Ed25519Key::Verifies(const Checkpoint& checkpoint) const {
    const auto signature = Unbase64(checkpoint.signature, 64);
    if (!signature || checkpoint.key_id != KeyId()) return false;
    const std::string message =
        CheckpointMessage(checkpoint.receipt_id, checkpoint.chain, checkpoint.at);
    EVP_MD_CTX* context = EVP_MD_CTX_new();
    const bool verified =
        context != nullptr &&
        EVP_DigestVerifyInit(context, nullptr, nullptr, nullptr, pkey_->key) == 1 &&
        EVP_DigestVerify(context, reinterpret_cast<const unsigned char*>(signature->data()),
                         signature->size(), reinterpret_cast<const unsigned char*>(message.data()),
                         message.size()) == 1;
    EVP_MD_CTX_free(context);
    return verified;
}

Checkpoint SignHead(pqxx::transaction_base& tx, const Ed25519Key& key) {
    const pqxx::result head =
        tx.exec("SELECT id, encode(chain, 'hex') FROM callback_receipts ORDER BY id DESC LIMIT 1");
    std::int64_t id = 0;
    ChainValue chain = kChainStart;
    if (!head.empty()) {
        id = head[0][0].as<std::int64_t>();
        const auto stored = ParseChainHex(head[0][1].as<std::string>());
        PAYLEDGER_ASSERT(stored.has_value());
        chain = *stored;
    }
    return key.Sign(id, chain, NowMicros());
}

std::optional<std::string> CheckpointBreak(pqxx::transaction_base& tx,
                                           const Checkpoint& checkpoint) {
    if (checkpoint.receipt_id == 0) {
        if (checkpoint.chain == HexLower(kChainStart)) return std::nullopt;
        return "receipt 0 cannot hold a chain other than 32 zero bytes";
    }
    const pqxx::result row = tx.exec_params(
        "SELECT encode(chain, 'hex') FROM callback_receipts WHERE id = $1", checkpoint.receipt_id);
    const std::string id = std::to_string(checkpoint.receipt_id);
    if (row.empty()) return "receipt " + id + " is missing: the checkpoint names it";
    if (row[0][0].as<std::string>() != checkpoint.chain) {
        return "receipt " + id + " chain differs from the checkpoint's";
    }
    return std::nullopt;
}

}  // namespace payledger::ledger
