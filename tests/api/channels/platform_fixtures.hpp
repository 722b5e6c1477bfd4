#pragma once

// Shared by the platform channel tests (unit and PostgreSQL): merchant ids, test-only keys
// generated once per process (never stored), the three platform config sections with their
// simulate keys, and the conversion of a simulated notice into a delivery.

#include <chrono>
#include <cstdint>
#include <string>

#include "api/channels/platform_crypto.hpp"
#include "api/channels/wechat_v2_xml.hpp"
#include "api/cli/simulate.hpp"
#include "api/config.hpp"
#include "api/http/http.hpp"

namespace payledger::testing {

// The shared test configuration (docs/platforms.md#test-vectors); the API keys are those of the
// published vectors.
inline constexpr const char* kV2AppId = "wx0000000000000001";
inline constexpr const char* kV2MchId = "1900000001";
inline constexpr const char* kV2ApiKey = "192006250b4c09247ec02edce69f6a2d";
inline constexpr const char* kV3AppId = "wx0000000000000002";
inline constexpr const char* kV3MchId = "1900000002";
inline constexpr const char* kV3ApiKey = "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb";
inline constexpr const char* kV3Serial = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1";
inline constexpr const char* kV3PublicKeyId = "PUB_KEY_ID_0114232004152025010600000000000001";
inline constexpr const char* kAlipayAppId = "2021000000000001";

// Test-only RSA keys: 0 the v3 certificate key, 1 the v3 public-key-id key, 2 Alipay's,
// 3 a stranger's (signs nothing anyone trusts).
inline const api::PrivateKey& TestPlatformKey(int index) {
    static const api::PrivateKey keys[] = {api::GenerateRsaKey(), api::GenerateRsaKey(),
                                           api::GenerateRsaKey(), api::GenerateRsaKey()};
    return keys[index];
}

// `config` with the wechat_v2, wechat_v3 and alipay sections of the keys above.
inline api::Config WithPlatforms(api::Config config) {
    config.wechat_v2 =
        api::WechatV2Config{.appid = kV2AppId, .mch_id = kV2MchId, .api_key = kV2ApiKey};
    config.wechat_v3 =
        api::WechatV3Config{.appid = kV3AppId,
                            .mchid = kV3MchId,
                            .api_v3_key = kV3ApiKey,
                            .platform_public_keys = {{kV3Serial, TestPlatformKey(0).Public()},
                                                     {kV3PublicKeyId, TestPlatformKey(1).Public()}},
                            .simulate_private_key = TestPlatformKey(0),
                            .simulate_serial = kV3Serial};
    config.alipay = api::AlipayConfig{.app_id = kAlipayAppId,
                                      .alipay_public_key = TestPlatformKey(2).Public(),
                                      .simulate_private_key = TestPlatformKey(2)};
    return config;
}

inline std::int64_t PlatformNowSeconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The delivery of `notice` as the server would hand it over at `received_seconds`.
inline api::Incoming ToIncoming(const api::SimulatedNotice& notice, std::int64_t received_seconds) {
    api::Incoming incoming{.peer = "10.0.0.9:40000", .received_at = received_seconds * 1'000'000};
    incoming.request = api::Request{api::http::verb::post, notice.target, 11};
    for (const auto& [name, value] : notice.headers) incoming.request.set(name, value);
    incoming.request.body() = notice.body;
    incoming.request.prepare_payload();
    return incoming;
}

inline constexpr std::size_t kAesBlockBytes = 16;

// For the ECB block-splicing attack on WeChat v2 refunds (docs/platforms.md#cross-checks): the
// refund plaintext of `fields` as WeChat writes it, its out_refund_no padded so that the
// out_trade_no element ends on an AES block boundary, which is returned in `boundary`. Two such
// plaintexts whose out_trade_no values have one length share the boundary: the blocks before it of
// one notice and the blocks after it of the other decrypt to one order's number with the other's
// refund.
inline std::string AlignedRefundPlaintext(api::PlatformFields fields, std::size_t& boundary) {
    const std::string end_tag = "</out_trade_no>";
    fields["out_refund_no"] = "RF";
    const std::string unaligned = api::WechatV2Xml(fields, "root");
    const std::size_t end = unaligned.find(end_tag) + end_tag.size();
    fields["out_refund_no"] +=
        std::string((kAesBlockBytes - end % kAesBlockBytes) % kAesBlockBytes, 'X');
    const std::string aligned = api::WechatV2Xml(fields, "root");
    boundary = aligned.find(end_tag) + end_tag.size();
    return aligned;
}

}  // namespace payledger::testing
