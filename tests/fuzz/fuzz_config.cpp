// Fuzzes api::ParseConfig (README.md#configuration) with the whole input as the config text and no
// environment overrides. Key file paths are read from a private folder of test keys made at
// start-up, $TMPDIR/payledger-fuzz-config-<pid> (wechat.pem: PEM public key, alipay.txt:
// Alipay's bare base64 DER, private.pem: PEM private key, junk.pem: none); the folders of
// crashed runs are removed at the next start. An input whose key file paths hold a '/' is
// skipped, so the fuzzer never reads another file. Checks: ParseConfig throws only
// ConfigError (its contract: the message names the field); a Config it returns keeps the
// rules it enforces.

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/channels/platform_crypto.hpp"
#include "api/config.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace payledger::fuzz {
namespace {

constexpr const char* kKeyFolderPrefix = "payledger-fuzz-config-";

std::string& KeyFolder() {
    static std::string folder;
    return folder;
}

void RemoveKeyFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(KeyFolder(), ignored);
}

// A crash ends the process without atexit: remove the folders of processes that are gone.
void RemoveStaleKeyFolders(const std::filesystem::path& parent) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(parent, error)) {
        const std::string name = entry.path().filename().string();
        if (!name.starts_with(kKeyFolderPrefix)) continue;
        const std::string pid_text = name.substr(std::strlen(kKeyFolderPrefix));
        if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        if (kill(static_cast<pid_t>(std::stol(pid_text)), 0) != 0 && errno == ESRCH) {
            std::error_code ignored;
            std::filesystem::remove_all(entry.path(), ignored);
        }
    }
}

void Write(const std::string& name, const std::string& text) {
    std::ofstream{KeyFolder() + "/" + name, std::ios::binary} << text;
}

// True when a key file path that ParseConfig would read holds '/': a file outside the key
// folder. The paths are wechat_v3.platform_public_keys.*, wechat_v3.simulate_private_key,
// alipay.alipay_public_key and alipay.simulate_private_key (api/channels/platform_config.cpp).
bool NamesOtherFiles(std::string_view text) {
    using nlohmann::json;
    const json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!root.is_object()) return false;  // Refused before any file is read.
    std::vector<const json*> paths;
    const auto add = [&](const json& section, const char* key) {
        if (const auto it = section.find(key); it != section.end()) paths.push_back(&*it);
    };
    if (const auto v3 = root.find("wechat_v3"); v3 != root.end() && v3->is_object()) {
        add(*v3, "simulate_private_key");
        const auto keys = v3->find("platform_public_keys");
        if (keys != v3->end() && keys->is_object()) {
            for (const json& path : *keys) paths.push_back(&path);
        }
    }
    if (const auto alipay = root.find("alipay"); alipay != root.end() && alipay->is_object()) {
        add(*alipay, "alipay_public_key");
        add(*alipay, "simulate_private_key");
    }
    for (const json* path : paths) {
        if (path->is_string() &&
            path->get_ref<const std::string&>().find('/') != std::string::npos) {
            return true;
        }
    }
    return false;
}

void CheckConfig(const api::Config& config) {
    FUZZ_CHECK(!config.database_url.empty());
    FUZZ_CHECK(!config.listen_host.empty());
    for (const api::MerchantToken& token : config.merchant_tokens) {
        FUZZ_CHECK(token.token.size() >= 16);
        if (token.accounts) FUZZ_CHECK(!token.accounts->empty());
    }
    for (const auto* tokens : {&config.auditor_tokens, &config.admin_tokens}) {
        for (const std::string& token : *tokens) FUZZ_CHECK(token.size() >= 16);
    }
    FUZZ_CHECK(config.limits.unverified_per_peer_per_minute >= 1);
    FUZZ_CHECK(config.limits.connections_per_peer >= 1);
    if (config.generic) FUZZ_CHECK(config.generic->secret.size() >= 16);
    if (const auto& v2 = config.wechat_v2) {
        FUZZ_CHECK(!v2->appid.empty() && !v2->mch_id.empty() && !v2->api_key.empty());
    }
    if (const auto& v3 = config.wechat_v3) {
        FUZZ_CHECK(!v3->appid.empty() && !v3->mchid.empty());
        FUZZ_CHECK(v3->api_v3_key.size() == 32);
        FUZZ_CHECK(!v3->platform_public_keys.empty());
        for (const auto& [serial, key] : v3->platform_public_keys) FUZZ_CHECK(!key.empty());
        if (v3->simulate_private_key) {
            FUZZ_CHECK(v3->platform_public_keys.contains(v3->simulate_serial));
        }
    }
    if (const auto& alipay = config.alipay) {
        FUZZ_CHECK(!alipay->app_id.empty());
        FUZZ_CHECK(!alipay->alipay_public_key.empty());
    }
}

}  // namespace
}  // namespace payledger::fuzz

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    using namespace payledger;
    const std::filesystem::path parent = std::filesystem::temp_directory_path();
    fuzz::RemoveStaleKeyFolders(parent);
    fuzz::KeyFolder() = parent / (fuzz::kKeyFolderPrefix + std::to_string(getpid()));
    std::filesystem::create_directories(fuzz::KeyFolder());
    std::atexit(fuzz::RemoveKeyFolder);
    const api::PrivateKey key = api::GenerateRsaKey(1024);
    fuzz::Write("wechat.pem", api::PublicKeyPem(key.Public()));
    fuzz::Write("alipay.txt", api::PublicKeyDerBase64(key.Public()));
    fuzz::Write("private.pem", api::PrivateKeyPem(key));
    fuzz::Write("junk.pem", "-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n");
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace payledger;
    const std::string text(fuzz::AsText(data, size));
    if (fuzz::NamesOtherFiles(text)) return 0;
    try {
        fuzz::CheckConfig(api::ParseConfig(text, std::nullopt, std::nullopt, fuzz::KeyFolder()));
    } catch (const api::ConfigError&) {
        // The contract: a config that cannot run is refused with the field named.
    } catch (const std::exception& error) {
        std::fprintf(stderr, "ParseConfig threw a non-ConfigError: %s\n", error.what());
        FUZZ_CHECK(!"ParseConfig throws only ConfigError");
    }
    return 0;
}
