#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "api/channels/channel.hpp"
#include "api/config.hpp"

namespace payledger::api {

// `generic` (docs/platforms.md#generic): an internal gateway or queue consumer. Header
// `Payledger-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`,
// JSON body {"event_type","out_trade_no","transaction_id","amount","currency","occurred_at"}.
class GenericChannel final : public Channel {
public:
    explicit GenericChannel(GenericConfig config) : config_(std::move(config)) {}

    [[nodiscard]] projections::Source source() const override {
        return projections::Source::kGeneric;
    }
    [[nodiscard]] ledger::Delivery Verify(Incoming& incoming) const override;
    [[nodiscard]] Response Answer(const ledger::DeliveryResult& result) const override;

    // The header value for `body` signed at `unix_seconds` (simulate, tests).
    [[nodiscard]] static std::string Sign(std::string_view secret, std::int64_t unix_seconds,
                                          std::string_view body);

private:
    // nullopt when the signature holds.
    [[nodiscard]] std::optional<Refusal> CheckSignature(const Incoming& incoming,
                                                        std::string_view body) const;

    GenericConfig config_;
};

}  // namespace payledger::api
