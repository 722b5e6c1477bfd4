#pragma once

#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "api/channels/platform_crypto.hpp"

namespace payledger::testing {

// The three platform channels, each with its `query` section, pointed at one
// `payledger simulate-platform` (simulator_process.hpp) listening at `base`: the sections that
// the query tests (tests/api/query/platform_query_pgtest.cpp) and the SDK answer tests
// (tests/platform_sdks/sdk_answers_pgtest.cpp) give the simulator and the merchant's serve. Fixed
// test ids, secrets and serials.

inline constexpr const char* kQueriedV3PlatformSerial = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1";
inline constexpr const char* kQueriedV3MerchantSerial = "1DDE55AD98ED71D6EDD4A4A16996DE7B47773A8C";

// The keys behind the channels' key files: the platform's (the simulator signs with them,
// payledger checks) and the merchant's (payledger signs its requests with them).
struct QueriedChannelKeys {
    const api::PrivateKey& v3_platform;
    const api::PrivateKey& alipay_platform;
    const api::PrivateKey& v3_merchant;
    const api::PrivateKey& alipay_app;
};

// `text` into `path` with `mode` (serve refuses a private key other users can read); false when
// either failed.
inline bool WriteTestFile(const std::string& path, const std::string& text, mode_t mode) {
    const bool written = static_cast<bool>(std::ofstream{path, std::ios::binary} << text);
    return chmod(path.c_str(), mode) == 0 && written;
}

// Writes the keys' files into `dir` and returns the sections that name them.
inline nlohmann::json QueriedChannels(const std::string& dir, const std::string& base,
                                      const QueriedChannelKeys& keys) {
    WriteTestFile(dir + "/v3_platform.pem", api::PrivateKeyPem(keys.v3_platform), 0600);
    WriteTestFile(dir + "/v3_platform.pub", api::PublicKeyPem(keys.v3_platform.Public()), 0644);
    WriteTestFile(dir + "/alipay_platform.pem", api::PrivateKeyPem(keys.alipay_platform), 0600);
    WriteTestFile(dir + "/alipay_platform.pub", api::PublicKeyPem(keys.alipay_platform.Public()),
                  0644);
    WriteTestFile(dir + "/v3_merchant.pem", api::PrivateKeyPem(keys.v3_merchant), 0600);
    WriteTestFile(dir + "/alipay_app.pem", api::PrivateKeyPem(keys.alipay_app), 0600);
    return {
        {"wechat_v2",
         {{"appid", "wx0000000000000001"},
          {"mch_id", "1900000001"},
          {"api_key", "192006250b4c09247ec02edce69f6a2d"},
          {"query", {{"api_base", base}}}}},
        {"wechat_v3",
         {{"appid", "wx0000000000000002"},
          {"mchid", "1900000002"},
          {"api_v3_key", "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb"},
          {"platform_public_keys", {{kQueriedV3PlatformSerial, dir + "/v3_platform.pub"}}},
          {"simulate_private_key", dir + "/v3_platform.pem"},
          {"query",
           {{"api_base", base},
            {"merchant_private_key", dir + "/v3_merchant.pem"},
            {"merchant_serial", kQueriedV3MerchantSerial}}}}},
        {"alipay",
         {{"app_id", "2021000000000001"},
          {"alipay_public_key", dir + "/alipay_platform.pub"},
          {"simulate_private_key", dir + "/alipay_platform.pem"},
          {"query",
           {{"api_base", base + "/gateway.do"}, {"app_private_key", dir + "/alipay_app.pem"}}}}}};
}

}  // namespace payledger::testing
