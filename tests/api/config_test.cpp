// Tests of api/config.hpp ParseConfig against README.md#configuration: a full config is read field
// by field, PAYLEDGER_DATABASE_URL and PAYLEDGER_LISTEN (passed explicitly, never read from the
// real environment) win over the file, and every invalid config throws ConfigError whose what()
// names the field at fault. Each invalid case changes one field of an otherwise valid config,
// so the error can only come from that field.

#include "api/config.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace payledger::api {
namespace {

constexpr const char* kFullConfig = R"({
  "listen": "0.0.0.0:9090",
  "database_url": "postgresql://ledger@db/payledger",
  "tokens": {
    "merchant": ["merchant-token-0001", "merchant-token-0002"],
    "auditor": ["auditor-token-00001"],
    "admin": ["admin-token-0000001"]
  },
  "generic": {"secret": "generic-secret-0123456789"}
})";

// The what() of the ConfigError that ParseConfig throws, or a marker when it throws nothing.
std::string ConfigErrorOf(const std::string& text,
                          const std::optional<std::string>& database_url = std::nullopt,
                          const std::optional<std::string>& listen = std::nullopt) {
    try {
        (void)ParseConfig(text, database_url, listen);
    } catch (const ConfigError& error) {
        return error.what();
    }
    return "<no ConfigError thrown>";
}

// A valid config with `member` (a JSON member, or nothing) added at the top level.
std::string ConfigWith(const std::string& member) {
    std::string text = R"({"database_url": "postgresql://ledger@db/payledger")";
    if (!member.empty()) text += ", " + member;
    return text + "}";
}

TEST(ParseConfig, ReadsEveryFieldOfAFullConfig) {
    const Config config = ParseConfig(kFullConfig, std::nullopt, std::nullopt);
    EXPECT_EQ(config.listen_host, "0.0.0.0");
    EXPECT_EQ(config.listen_port, 9090);
    EXPECT_EQ(config.database_url, "postgresql://ledger@db/payledger");
    EXPECT_EQ(config.merchant_tokens,
              (std::vector<MerchantToken>{{.token = "merchant-token-0001"},
                                          {.token = "merchant-token-0002"}}));
    EXPECT_EQ(config.auditor_tokens, std::vector<std::string>{"auditor-token-00001"});
    EXPECT_EQ(config.admin_tokens, std::vector<std::string>{"admin-token-0000001"});
    ASSERT_TRUE(config.generic.has_value());
    EXPECT_EQ(config.generic->secret, "generic-secret-0123456789");
}

TEST(ParseConfig, AMinimalConfigListensOnTheDefaultAndServesNoGenericChannel) {
    const Config config = ParseConfig(ConfigWith(""), std::nullopt, std::nullopt);
    EXPECT_EQ(config.listen_host, "127.0.0.1");
    EXPECT_EQ(config.listen_port, 8080);
    EXPECT_TRUE(config.merchant_tokens.empty());
    EXPECT_TRUE(config.auditor_tokens.empty());
    EXPECT_TRUE(config.admin_tokens.empty());
    EXPECT_FALSE(config.generic.has_value());
}

TEST(ParseConfig, EnvironmentOverridesWinOverTheFile) {
    const Config config =
        ParseConfig(kFullConfig, "postgresql://other@host:5433/ledger2", "127.0.0.2:18080");
    EXPECT_EQ(config.database_url, "postgresql://other@host:5433/ledger2");
    EXPECT_EQ(config.listen_host, "127.0.0.2");
    EXPECT_EQ(config.listen_port, 18080);
    // The rest still comes from the file.
    ASSERT_TRUE(config.generic.has_value());
    EXPECT_EQ(config.generic->secret, "generic-secret-0123456789");
}

TEST(ParseConfig, DatabaseUrlOverrideStandsInForAMissingField) {
    const Config config =
        ParseConfig(R"({"listen": "127.0.0.1:8081"})", "postgresql://env@db/x", std::nullopt);
    EXPECT_EQ(config.database_url, "postgresql://env@db/x");
    EXPECT_EQ(config.listen_port, 8081);
}

TEST(ParseConfig, ListenOverrideReplacesAnInvalidListenInTheFile) {
    // The file's value is not used at all when the environment gives one.
    const Config config =
        ParseConfig(ConfigWith(R"("listen": "nonsense")"), std::nullopt, "10.0.0.1:7000");
    EXPECT_EQ(config.listen_host, "10.0.0.1");
    EXPECT_EQ(config.listen_port, 7000);
}

TEST(ParseConfig, MissingDatabaseUrlNamesTheField) {
    const std::string message = ConfigErrorOf(R"({"listen": "127.0.0.1:8080"})");
    EXPECT_PRED_FORMAT2(::testing::IsSubstring, "database_url", message);
}

TEST(ParseConfig, InvalidDatabaseUrlNamesTheField) {
    for (const char* member :
         {R"("database_url": "")", R"("database_url": 5)", R"("database_url": null)"}) {
        SCOPED_TRACE(member);
        const std::string text = std::string("{") + member + "}";
        EXPECT_PRED_FORMAT2(::testing::IsSubstring, "database_url", ConfigErrorOf(text));
    }
}

TEST(ParseConfig, SeveralHostsWithoutTargetSessionAttrsAskForReadWrite) {
    // payledger asks for the primary itself (docs/availability.md#failover); the full rules:
    // tests/ledger/pg/conninfo_test.cpp.
    const Config config = ParseConfig(R"({"database_url": "postgresql://h1,h2/payledger"})",
                                      std::nullopt, std::nullopt);
    EXPECT_EQ(config.database_url, "postgresql://h1,h2/payledger?target_session_attrs=read-write");
    const Config from_env = ParseConfig("{}", "host=h1,h2 dbname=x", std::nullopt);
    EXPECT_EQ(from_env.database_url, "host=h1,h2 dbname=x target_session_attrs=read-write");
}

TEST(ParseConfig, ADatabaseUrlLibpqCannotParseNamesTheField) {
    EXPECT_PRED_FORMAT2(::testing::IsSubstring, "database_url: not a valid PostgreSQL",
                        ConfigErrorOf(R"({"database_url": "postgresql://h/db?nonsense=1"})"));
    EXPECT_PRED_FORMAT2(::testing::IsSubstring, "PAYLEDGER_DATABASE_URL: not a valid",
                        ConfigErrorOf("{}", "host='unterminated"));
}

TEST(ParseConfig, ReadsTheReadReplicaAndItsLagLimit) {
    const Config defaults = ParseConfig(ConfigWith(""), std::nullopt, std::nullopt);
    EXPECT_FALSE(defaults.read_database_url.has_value());
    EXPECT_EQ(defaults.read_max_lag, std::chrono::seconds{30});
    const Config config =
        ParseConfig(ConfigWith(R"("read_database_url": "postgresql://replica/payledger")"),
                    std::nullopt, std::nullopt);
    EXPECT_EQ(config.read_database_url, "postgresql://replica/payledger");
    EXPECT_EQ(config.read_max_lag, std::chrono::seconds{30});
    const Config limited = ParseConfig(ConfigWith(R"("read_database_url": "host=r1,r2",
                                                     "read_max_lag_seconds": 86400)"),
                                       std::nullopt, std::nullopt);
    EXPECT_EQ(limited.read_database_url, "host=r1,r2");  // Never rewritten: a replica's.
    EXPECT_EQ(limited.read_max_lag, std::chrono::hours{24});
}

TEST(ParseConfig, InvalidReadReplicaSettingsNameTheField) {
    const struct {
        const char* members;
        const char* field;
    } cases[] = {
        {R"("read_database_url": "")", "read_database_url"},
        {R"("read_database_url": 5)", "read_database_url"},
        {R"("read_database_url": "postgresql://r/db?nonsense=1")", "read_database_url"},
        {R"("read_max_lag_seconds": 30)", "read_max_lag_seconds: only with read_database_url"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.members);
        EXPECT_PRED_FORMAT2(::testing::IsSubstring, c.field, ConfigErrorOf(ConfigWith(c.members)));
    }
    for (const char* lag : {"0", "-1", "86401", "1.5", "\"30\"", "null", "1e3"}) {
        SCOPED_TRACE(lag);
        EXPECT_PRED_FORMAT2(
            ::testing::IsSubstring, "read_max_lag_seconds: must be an integer from 1 to 86400",
            ConfigErrorOf(ConfigWith(std::string(R"("read_database_url": "host=r", )") +
                                     R"("read_max_lag_seconds": )" + lag)));
    }
}

TEST(ParseConfig, InvalidListenNamesTheField) {
    for (const char* listen :
         {"localhost", ":8080", "127.0.0.1:", "", "127.0.0.1:70000", "127.0.0.1:65536",
          "127.0.0.1:abc", "127.0.0.1:-1", "127.0.0.1:80x", "127.0.0.1:8080 "}) {
        SCOPED_TRACE(listen);
        const std::string message =
            ConfigErrorOf(ConfigWith(std::string(R"("listen": ")") + listen + "\""));
        EXPECT_PRED_FORMAT2(::testing::IsSubstring, "listen", message);
    }
    EXPECT_PRED_FORMAT2(::testing::IsSubstring, "listen",
                        ConfigErrorOf(ConfigWith(R"("listen": 8080)")));
}

TEST(ParseConfig, HighestPortIsAccepted) {
    const Config config =
        ParseConfig(ConfigWith(R"("listen": "0.0.0.0:65535")"), std::nullopt, std::nullopt);
    EXPECT_EQ(config.listen_host, "0.0.0.0");
    EXPECT_EQ(config.listen_port, 65535);
}

TEST(ParseConfig, InvalidListenOverrideNamesTheEnvironmentVariable) {
    EXPECT_PRED_FORMAT2(::testing::IsSubstring, "PAYLEDGER_LISTEN",
                        ConfigErrorOf(kFullConfig, std::nullopt, "no-port"));
}

TEST(ParseConfig, EmptyDatabaseUrlOverrideNamesTheEnvironmentVariable) {
    EXPECT_PRED_FORMAT2(::testing::IsSubstring, "PAYLEDGER_DATABASE_URL",
                        ConfigErrorOf(kFullConfig, std::string(), std::nullopt));
}

TEST(ParseConfig, TokensThatAreNotAnArrayOfLongStringsNameTheRole) {
    const struct {
        const char* tokens;
        const char* field;
    } cases[] = {
        {R"({"merchant": "merchant-token-0001"})", "tokens.merchant"},
        {R"({"merchant": {"a": "merchant-token-0001"}})", "tokens.merchant"},
        {R"({"merchant": [42]})", "tokens.merchant"},
        {R"({"merchant": ["short"]})", "tokens.merchant"},
        {R"({"auditor": "auditor-token-00001"})", "tokens.auditor"},
        {R"({"admin": [null]})", "tokens.admin"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.tokens);
        const std::string message =
            ConfigErrorOf(ConfigWith(std::string(R"("tokens": )") + c.tokens));
        EXPECT_PRED_FORMAT2(::testing::IsSubstring, c.field, message);
    }
}

TEST(ParseConfig, TokensThatAreNotAnObjectNameTokens) {
    EXPECT_PRED_FORMAT2(::testing::IsSubstring, "tokens",
                        ConfigErrorOf(ConfigWith(R"("tokens": ["merchant-token-0001"])")));
}

TEST(ParseConfig, ShortOrMissingGenericSecretNamesGenericSecret) {
    for (const char* generic :
         {R"({"secret": "short"})", R"({"secret": "123456789012345"})", R"({"secret": ""})",
          R"({"secret": 1234567890123456789})", R"({})"}) {
        SCOPED_TRACE(generic);
        const std::string message =
            ConfigErrorOf(ConfigWith(std::string(R"("generic": )") + generic));
        EXPECT_PRED_FORMAT2(::testing::IsSubstring, "generic.secret", message);
    }
}

TEST(ParseConfig, SixteenCharacterGenericSecretIsAccepted) {
    const Config config = ParseConfig(ConfigWith(R"("generic": {"secret": "1234567890123456"})"),
                                      std::nullopt, std::nullopt);
    ASSERT_TRUE(config.generic.has_value());
    EXPECT_EQ(config.generic->secret, "1234567890123456");
}

TEST(ParseConfig, GenericSectionThatIsNotAnObjectNamesGeneric) {
    EXPECT_PRED_FORMAT2(::testing::IsSubstring, "generic",
                        ConfigErrorOf(ConfigWith(R"("generic": "generic-secret-0123456789")")));
}

TEST(ParseConfig, TextThatIsNotJsonIsAConfigError) {
    for (const char* text : {"", "not json", "{", R"({"database_url": "x",})", "listen=1"}) {
        SCOPED_TRACE(text);
        EXPECT_THROW((void)ParseConfig(text, std::nullopt, std::nullopt), ConfigError);
        // The overrides cannot rescue a file that does not parse.
        EXPECT_THROW((void)ParseConfig(text, "postgresql://env@db/x", "127.0.0.1:1"), ConfigError);
    }
}

TEST(ParseConfig, JsonThatIsNotAnObjectIsAConfigError) {
    for (const char* text :
         {"[]", R"(["database_url"])", "42", R"("postgresql://x")", "null", "true"}) {
        SCOPED_TRACE(text);
        EXPECT_THROW((void)ParseConfig(text, "postgresql://env@db/x", std::nullopt), ConfigError);
    }
}

TEST(ParseConfig, ReadsLimitsAndScopedMerchantTokens) {
    const Config defaults = ParseConfig(ConfigWith(""), std::nullopt, std::nullopt);
    EXPECT_EQ(defaults.limits.unverified_per_peer_per_minute, 120u);
    EXPECT_EQ(defaults.limits.connections_per_peer, 256u);
    EXPECT_EQ(defaults.limits.write_queue_bytes_max, 64u * 1024 * 1024);
    EXPECT_EQ(defaults.limits.writer_cache_orders, 50'000u);
    EXPECT_EQ(defaults.limits.read_seconds, std::chrono::seconds{15});

    const Config config = ParseConfig(
        R"({"database_url": "postgresql://x/y",
            "limits": {"unverified_per_peer_per_minute": 7, "connections_per_peer": 3,
                       "write_queue_bytes_max": 2097152, "writer_cache_orders": 0,
                       "read_seconds": 600},
            "tokens": {"merchant": ["plain-merchant-token-01",
                                    {"token": "scoped-merchant-token-1",
                                     "accounts": ["shop-1", "shop-2"]}]}})",
        std::nullopt, std::nullopt);
    EXPECT_EQ(config.limits.unverified_per_peer_per_minute, 7u);
    EXPECT_EQ(config.limits.connections_per_peer, 3u);
    EXPECT_EQ(config.limits.write_queue_bytes_max, 2097152u);
    EXPECT_EQ(config.limits.writer_cache_orders, 0u);  // 0: every batch reads.
    EXPECT_EQ(config.limits.read_seconds, std::chrono::seconds{600});
    ASSERT_EQ(config.merchant_tokens.size(), 2u);
    EXPECT_EQ(config.merchant_tokens[0], (MerchantToken{.token = "plain-merchant-token-01"}));
    EXPECT_EQ(config.merchant_tokens[1],
              (MerchantToken{.token = "scoped-merchant-token-1",
                             .accounts = std::vector<std::string>{"shop-1", "shop-2"}}));
}

TEST(ParseConfig, AnUnsetPrefixLimitFollowsALargerPerPeerLimitAndASmallerOneIsRefused) {
    const auto parse = [](const std::string& limits) {
        return ParseConfig(R"({"database_url": "postgresql://x/y", "limits": )" + limits + "}",
                           std::nullopt, std::nullopt);
    };
    EXPECT_EQ(parse("{}").limits.connections_per_prefix, 1024u);
    EXPECT_EQ(parse(R"({"connections_per_peer": 2000})").limits.connections_per_prefix, 2000u);
    EXPECT_EQ(parse(R"({"connections_per_peer": 2000, "connections_per_prefix": 5000})")
                  .limits.connections_per_prefix,
              5000u);
    try {
        (void)parse(R"({"connections_per_peer": 2000, "connections_per_prefix": 1999})");
        ADD_FAILURE() << "a prefix limit below the per-peer limit was accepted";
    } catch (const ConfigError& error) {
        EXPECT_EQ(std::string(error.what()).rfind("limits.connections_per_prefix", 0), 0u)
            << error.what();
    }
}

TEST(ParseConfig, InvalidLimitsAndScopedTokensNameTheField) {
    const auto expect_error = [](const std::string& json_text, const std::string& field) {
        try {
            (void)ParseConfig(json_text, std::nullopt, std::nullopt);
            ADD_FAILURE() << "accepted: " << json_text;
        } catch (const ConfigError& error) {
            EXPECT_EQ(std::string(error.what()).rfind(field, 0), 0u) << error.what();
        }
    };
    const std::string url = R"("database_url": "postgresql://x/y")";
    expect_error("{" + url + R"(, "limits": 5})", "limits");
    expect_error("{" + url + R"(, "limits": {"connections_per_peer": 0}})",
                 "limits.connections_per_peer");
    expect_error("{" + url + R"(, "limits": {"write_queue_bytes_max": 65536}})",
                 "limits.write_queue_bytes_max: must be an integer from 1048576");
    expect_error("{" + url + R"(, "limits": {"writer_cache_orders": 10000001}})",
                 "limits.writer_cache_orders");
    expect_error("{" + url + R"(, "limits": {"read_seconds": 0}})",
                 "limits.read_seconds: must be an integer from 1 to 3600");
    expect_error("{" + url + R"(, "limits": {"read_seconds": 3601}})", "limits.read_seconds");
    expect_error("{" + url + R"(, "limits": {"unverified_per_peer_per_minute": -1}})",
                 "limits.unverified_per_peer_per_minute");
    expect_error("{" + url + R"(, "limits": {"unverified_per_peer_per_minute": 1.5}})",
                 "limits.unverified_per_peer_per_minute");
    expect_error("{" + url + R"(, "tokens": {"merchant": [{"token": "scoped-merchant-token-1"}]}})",
                 "tokens.merchant[].accounts");
    expect_error(
        "{" + url + R"(, "tokens": {"merchant": [{"token": "short", "accounts": ["a"]}]}})",
        "tokens.merchant[].token");
    expect_error("{" + url +
                     R"(, "tokens": {"merchant": [{"token": "scoped-merchant-token-1",
                                                   "accounts": ["no spaces"]}]}})",
                 "tokens.merchant[].accounts");
}

// A config file other users may read or write is refused (docs/api.md#configuration), naming it
// and its mode; scripts/run writes the development config with mode 0600 from its first byte.
TEST(LoadConfig, RefusesAConfigFileOthersMayReadOrWrite) {
    namespace fs = std::filesystem;
    const fs::path path = fs::temp_directory_path() /
                          ("payledger-config-mode-" + std::to_string(::getpid()) + ".json");
    std::ofstream{path} << R"({"database_url": "postgresql://x/y"})";
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
    EXPECT_NO_THROW((void)LoadConfig(path.string()));
    for (const auto extra : {fs::perms::group_read, fs::perms::others_read, fs::perms::group_write,
                             fs::perms::others_write}) {
        fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | extra);
        try {
            (void)LoadConfig(path.string());
            ADD_FAILURE() << "accepted with extra permission " << static_cast<int>(extra);
        } catch (const ConfigError& error) {
            EXPECT_NE(std::string(error.what()).find(path.string() + " has mode 06"),
                      std::string::npos)
                << error.what();
        }
    }
    fs::remove(path);
}

}  // namespace
}  // namespace payledger::api
