#pragma once

#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace payledger::api {

// Raised for a configuration that cannot run; what() names the field (SPEC §9).
class ConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

enum class Role { kMerchant, kAuditor, kAdmin };

struct GenericConfig {
    std::string secret{};
};

// SPEC §9. Sections absent from the file leave their channel unserved (404).
struct Config {
    std::string listen_host = "127.0.0.1";
    unsigned short listen_port = 8080;
    std::string database_url{};
    std::vector<std::string> merchant_tokens{};
    std::vector<std::string> auditor_tokens{};
    std::vector<std::string> admin_tokens{};
    std::optional<GenericConfig> generic{};
};

// Reads and validates the JSON config at `path`, then applies PAYLEDGER_DATABASE_URL and
// PAYLEDGER_LISTEN from the environment. Throws ConfigError naming the field at fault.
[[nodiscard]] Config LoadConfig(const std::string& path);

// The same from JSON text (tests), with the environment overrides given explicitly.
[[nodiscard]] Config ParseConfig(const std::string& text,
                                 const std::optional<std::string>& database_url_override,
                                 const std::optional<std::string>& listen_override);

}  // namespace payledger::api
