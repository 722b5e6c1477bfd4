#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/channel.hpp"
#include "api/config.hpp"

namespace payledger::api {

// SPEC §6 `wechat_v3` (providers.md §2): WeChat Pay APIv3 notifications. The headers sign
// "<Wechatpay-Timestamp>\n<Wechatpay-Nonce>\n<raw body>\n" with SHA256withRSA under the
// platform key that Wechatpay-Serial names; the JSON envelope carries the notice as an
// AES-256-GCM `resource` under the APIv3 key. Answers: 204 on success, else
// {"code":"FAIL","message":...} with the SPEC §5 status.
class WechatV3Channel final : public Channel {
public:
    explicit WechatV3Channel(WechatV3Config config) : config_(std::move(config)) {}

    [[nodiscard]] projections::Source source() const override {
        return projections::Source::kWechatV3;
    }
    [[nodiscard]] ledger::Delivery Verify(const Incoming& incoming) const override;
    [[nodiscard]] Response Answer(const ledger::DeliveryResult& result) const override;

private:
    // The decrypted resource, or the outcome that refuses it and why.
    struct Opened {
        std::optional<nlohmann::json> resource{};
        projections::Outcome failure = projections::Outcome::kMalformed;
        std::string error{};
    };

    // Empty when the headers hold a valid, fresh signature of the body; else why not.
    [[nodiscard]] std::string CheckSignature(const Incoming& incoming) const;
    [[nodiscard]] Opened Open(const nlohmann::json& envelope) const;
    [[nodiscard]] ledger::Delivery Decide(ledger::Receipt receipt, const nlohmann::json& envelope,
                                          const nlohmann::json& resource,
                                          projections::TimeMicros received_at) const;
    [[nodiscard]] ledger::Delivery Payment(ledger::Receipt receipt, const nlohmann::json& envelope,
                                           const nlohmann::json& resource,
                                           projections::TimeMicros received_at) const;
    [[nodiscard]] ledger::Delivery Refund(ledger::Receipt receipt, const nlohmann::json& envelope,
                                          const nlohmann::json& resource,
                                          projections::TimeMicros received_at) const;

    WechatV3Config config_;
};

// providers.md §2.2: the signed message, three lines each ending in "\n".
[[nodiscard]] std::string WechatV3SignatureMessage(std::string_view timestamp,
                                                   std::string_view nonce, std::string_view body);

}  // namespace payledger::api
