#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "api/config.hpp"

namespace payledger::api {

// Parses the optional `audit`, `wechat_v2`, `wechat_v3` and `alipay` sections of the config `root`
// (docs/platforms.md) into `config`, reading key files at config time; relative paths are taken
// from `base_dir` (empty: the working directory). Throws ConfigError naming the field at fault:
// a missing or empty string, an unknown sign_type, an api_v3_key that is not 32 bytes, a key
// file that cannot be read or holds no RSA key, an alipay.seller_id that is no Alipay user id.
void ParsePlatformSections(const nlohmann::json& root, const std::string& base_dir, Config& config);

}  // namespace payledger::api
