// Tests of the platform sections of the config (api/channels/platform_config.hpp through
// api::ParseConfig): key files are written to a fresh temporary folder (test-only keys generated in
// the test), referenced by absolute and by relative paths; every invalid section must stop the
// config with a ConfigError whose message names the field.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "api/channels/platform_crypto.hpp"
#include "api/config.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

class PlatformConfigTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ =
            std::filesystem::temp_directory_path() / ("payledger-platform-config-" + RandomHex(8));
        std::filesystem::create_directories(dir_);
        Write("platform.pem", PublicKeyPem(key_.Public()));
        Write("platform.key", PrivateKeyPem(key_));
        Write("alipay.txt", PublicKeyDerBase64(key_.Public()));  // Alipay's bare base64.
        Write("junk.pem", "-----BEGIN PUBLIC KEY-----\nZm9v\n-----END PUBLIC KEY-----\n");
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    // Owner read and write only, whatever the umask: keys others can read are refused.
    void Write(const std::string& name, const std::string& text) const {
        std::ofstream{dir_ / name, std::ios::binary} << text;
        std::filesystem::permissions(
            dir_ / name, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    }

    json Valid() const {
        return {{"database_url", "postgresql://localhost/x"},
                {"wechat_v2", {{"appid", "wx1"}, {"mch_id", "1900000001"}, {"api_key", "k"}}},
                {"wechat_v3",
                 {{"appid", "wx1"},
                  {"mchid", "1900000001"},
                  {"api_v3_key", "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb"},
                  {"platform_public_keys",
                   {{"5157F09EFDC096DE15EBE81A47057A7232F1B8E1", "platform.pem"},
                    {"PUB_KEY_ID_0114232004152025010600000000000001",
                     (dir_ / "platform.pem").string()}}},
                  {"simulate_private_key", "platform.key"},
                  {"simulate_serial", "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"}}},
                {"alipay",
                 {{"app_id", "2021000000000001"},
                  {"alipay_public_key", "alipay.txt"},
                  {"simulate_private_key", "platform.key"}}}};
    }

    Config Parse(const json& root) const {
        return ParseConfig(root.dump(), std::nullopt, std::nullopt, dir_.string());
    }

    // `mutate` applied to Valid() must fail with a message that names `field`.
    void ExpectError(const std::function<void(json&)>& mutate, const std::string& field) const {
        json root = Valid();
        mutate(root);
        try {
            (void)Parse(root);
            ADD_FAILURE() << "accepted: " << root.dump();
        } catch (const ConfigError& error) {
            EXPECT_NE(std::string(error.what()).find(field), std::string::npos) << error.what();
        }
    }

    const PrivateKey key_ = GenerateRsaKey();
    std::filesystem::path dir_;
};

TEST_F(PlatformConfigTest, ValidSectionsLoadTheirKeys) {
    const Config config = Parse(Valid());
    ASSERT_TRUE(config.wechat_v2 && config.wechat_v3 && config.alipay);
    EXPECT_EQ(config.wechat_v2->sign_type, WechatV2SignType::kMd5);
    EXPECT_EQ(config.wechat_v3->platform_public_keys.size(), 2u);
    EXPECT_EQ(config.wechat_v3->simulate_serial, "5157F09EFDC096DE15EBE81A47057A7232F1B8E1");
    const std::string signature = RsaSha256Sign(key_, "m");
    for (const auto& [serial, key] : config.wechat_v3->platform_public_keys) {
        EXPECT_TRUE(RsaSha256Verify(key, "m", signature)) << serial;
    }
    EXPECT_TRUE(RsaSha256Verify(config.alipay->alipay_public_key, "m", signature));
    ASSERT_TRUE(config.alipay->simulate_private_key);
    EXPECT_TRUE(RsaSha256Verify(key_.Public(), "m",
                                RsaSha256Sign(*config.alipay->simulate_private_key, "m")));
}

TEST_F(PlatformConfigTest, OneKeyIsTheSimulateSerialByDefault) {
    json root = Valid();
    root["wechat_v3"].erase("simulate_serial");
    ExpectError([](json& r) { r["wechat_v3"].erase("simulate_serial"); },
                "wechat_v3.simulate_serial");  // Two keys: which one is ambiguous.
    root["wechat_v3"]["platform_public_keys"] = {{"CAFE01", "platform.pem"}};
    EXPECT_EQ(Parse(root).wechat_v3->simulate_serial, "CAFE01");
}

TEST_F(PlatformConfigTest, SectionsAreOptional) {
    const Config config = Parse({{"database_url", "postgresql://localhost/x"}});
    EXPECT_FALSE(config.wechat_v2 || config.wechat_v3 || config.alipay);
}

TEST_F(PlatformConfigTest, SignTypeIsMd5OrHmacSha256) {
    json root = Valid();
    root["wechat_v2"]["sign_type"] = "HMAC-SHA256";
    EXPECT_EQ(Parse(root).wechat_v2->sign_type, WechatV2SignType::kHmacSha256);
    ExpectError([](json& r) { r["wechat_v2"]["sign_type"] = "SHA1"; }, "wechat_v2.sign_type");
    ExpectError([](json& r) { r["wechat_v2"]["sign_type"] = "md5"; }, "wechat_v2.sign_type");
}

// alipay.seller_id is optional (then no notice's seller_id is checked); when given it
// must be an Alipay user id, "2088" and twelve more digits.
TEST_F(PlatformConfigTest, AlipaySellerIdIsOptionalAndMustBeAnAlipayUserId) {
    EXPECT_EQ(Parse(Valid()).alipay->seller_id, "");
    json root = Valid();
    root["alipay"]["seller_id"] = "2088102176044281";
    EXPECT_EQ(Parse(root).alipay->seller_id, "2088102176044281");
    for (const json& bad :
         {json(""), json(2088102176044281), json("208810217604428"), json("20881021760442811"),
          json("1088102176044281"), json("2088102176O44281"), json(nullptr)}) {
        SCOPED_TRACE(bad.dump());
        ExpectError([&bad](json& r) { r["alipay"]["seller_id"] = bad; }, "alipay.seller_id");
    }
}

TEST_F(PlatformConfigTest, InvalidSectionsNameTheField) {
    ExpectError([](json& r) { r["wechat_v2"] = "x"; }, "wechat_v2");
    ExpectError([](json& r) { r["wechat_v2"].erase("mch_id"); }, "wechat_v2.mch_id");
    ExpectError([](json& r) { r["wechat_v2"]["api_key"] = ""; }, "wechat_v2.api_key");
    ExpectError([](json& r) { r["wechat_v3"]["api_v3_key"] = "short"; }, "wechat_v3.api_v3_key");
    ExpectError([](json& r) { r["wechat_v3"].erase("mchid"); }, "wechat_v3.mchid");
    ExpectError([](json& r) { r["wechat_v3"]["platform_public_keys"] = json::object(); },
                "wechat_v3.platform_public_keys");
    ExpectError(
        [](json& r) {
            r["wechat_v3"]["platform_public_keys"] = {{"abc", "platform.pem"}};
        },
        "wechat_v3.platform_public_keys.abc");
    ExpectError(
        [](json& r) {
            r["wechat_v3"]["platform_public_keys"] = {{"AB", "missing.pem"}};
        },
        "wechat_v3.platform_public_keys.AB");
    ExpectError(
        [](json& r) {
            r["wechat_v3"]["platform_public_keys"] = {{"AB", "junk.pem"}};
        },
        "wechat_v3.platform_public_keys.AB");
    ExpectError(
        [](json& r) {
            r["wechat_v3"]["platform_public_keys"] = {{"AB", "platform.key"}};
        },
        "wechat_v3.platform_public_keys.AB");
    ExpectError([](json& r) { r["wechat_v3"]["simulate_serial"] = "CAFE"; },
                "wechat_v3.simulate_serial");
    ExpectError([](json& r) { r["wechat_v3"]["simulate_private_key"] = "platform.pem"; },
                "wechat_v3.simulate_private_key");
    ExpectError([](json& r) { r["alipay"]["alipay_public_key"] = "junk.pem"; },
                "alipay.alipay_public_key");
    ExpectError([](json& r) { r["alipay"].erase("alipay_public_key"); },
                "alipay.alipay_public_key");
    ExpectError([](json& r) { r["alipay"]["app_id"] = 2021; }, "alipay.app_id");
}

}  // namespace
// A private key that other users may read or write, and a public key that they may
// write, stop the process at start, with the file and its mode named.
TEST_F(PlatformConfigTest, KeyFilesOthersMayReadOrWriteAreRefusedWithTheirMode) {
    namespace fs = std::filesystem;
    const auto expect_refused = [&](const std::string& file, fs::perms perms,
                                    const std::string& mode) {
        fs::permissions(dir_ / file, perms);
        try {
            (void)ParseConfig(Valid().dump(), std::nullopt, std::nullopt, dir_.string());
            ADD_FAILURE() << file << " with mode " << mode << " was accepted";
        } catch (const ConfigError& error) {
            EXPECT_NE(std::string(error.what()).find((dir_ / file).string()), std::string::npos)
                << error.what();
            EXPECT_NE(std::string(error.what()).find("mode " + mode), std::string::npos)
                << error.what();
        }
        fs::permissions(dir_ / file, fs::perms::owner_read | fs::perms::owner_write);
    };
    using fs::perms;
    expect_refused("platform.key", perms::owner_read | perms::owner_write | perms::group_read,
                   "0640");
    expect_refused("platform.key", perms::owner_read | perms::others_write, "0402");
    expect_refused("platform.pem", perms::owner_all | perms::group_write, "0720");
    expect_refused("platform.pem",
                   perms::owner_read | perms::owner_write | perms::group_read | perms::others_read |
                       perms::others_write,
                   "0646");
    // A public key that everybody may read is fine.
    fs::permissions(dir_ / "platform.pem", perms::owner_read | perms::owner_write |
                                               perms::group_read | perms::others_read);
    EXPECT_NO_THROW((void)ParseConfig(Valid().dump(), std::nullopt, std::nullopt, dir_.string()));
}

// The channels' `query` sections and the top-level `query` schedule (docs/query.md#configuration):
// each optional; an api_base is https://, or http:// to a loopback address; the signing keys are
// secrets (mode 0600) that must hold an RSA private key; the schedule's numbers are bounded.
TEST_F(PlatformConfigTest, QuerySectionsAskThePlatformsOnlyWhenConfigured) {
    EXPECT_FALSE(Parse(Valid()).AsksPlatforms());
    json root = Valid();
    root["wechat_v2"]["query"] = {{"api_base", "https://api.mch.weixin.qq.com/"}};
    root["wechat_v3"]["query"] = {{"api_base", "https://api.mch.weixin.qq.com"},
                                  {"merchant_private_key", "platform.key"},
                                  {"merchant_serial", "1DDE55AD98ED71D6EDD4A4A16996DE7B47773A8C"}};
    root["alipay"]["query"] = {{"api_base", "http://127.0.0.1:9000/gateway.do"},
                               {"app_private_key", (dir_ / "platform.key").string()}};
    const Config config = Parse(root);
    EXPECT_TRUE(config.AsksPlatforms());
    ASSERT_TRUE(config.wechat_v2->query && config.wechat_v3->query && config.alipay->query);
    EXPECT_EQ(config.wechat_v2->query->api_base, "https://api.mch.weixin.qq.com");  // No '/'.
    EXPECT_EQ(config.wechat_v3->query->merchant_serial, "1DDE55AD98ED71D6EDD4A4A16996DE7B47773A8C");
    EXPECT_TRUE(RsaSha256Verify(key_.Public(), "m",
                                RsaSha256Sign(config.wechat_v3->query->merchant_private_key, "m")));
    EXPECT_EQ(config.alipay->query->endpoint.api_base, "http://127.0.0.1:9000/gateway.do");
    // The schedule's defaults: a minute, then 1, 2, 5, 10, 30 min, 1, 2, 6, 24 h.
    EXPECT_EQ(config.query.first_after, std::chrono::seconds{60});
    EXPECT_EQ(config.query.steps, DefaultQuerySteps());
    EXPECT_EQ(config.query.steps.size(), 9u);
    EXPECT_EQ(config.query.steps.back(), std::chrono::hours{24});
    root["query"] = {{"first_after_seconds", 0},
                     {"schedule_seconds", {5, 10}},
                     {"concurrency", 2},
                     {"timeout_seconds", 3}};
    const Config tuned = Parse(root);
    EXPECT_EQ(tuned.query.first_after, std::chrono::seconds{0});
    EXPECT_EQ(tuned.query.steps, (std::vector<std::chrono::seconds>{std::chrono::seconds{5},
                                                                    std::chrono::seconds{10}}));
    EXPECT_EQ(tuned.query.concurrency, 2u);
    EXPECT_EQ(tuned.query.timeout, std::chrono::seconds{3});
}

TEST_F(PlatformConfigTest, InvalidQuerySectionsNameTheField) {
    const auto with_query = [](json& r) {
        r["wechat_v3"]["query"] = {{"api_base", "https://api.mch.weixin.qq.com"},
                                   {"merchant_private_key", "platform.key"},
                                   {"merchant_serial", "1DDE55AD98ED71D6EDD4A4A16996DE7B47773A8C"}};
        r["alipay"]["query"] = {{"api_base", "https://openapi.alipay.com/gateway.do"},
                                {"app_private_key", "platform.key"}};
    };
    // Plain HTTP to anything but this machine could be read and answered by anybody on the path.
    ExpectError(
        [&](json& r) {
            with_query(r);
            r["wechat_v3"]["query"]["api_base"] = "http://api.mch.weixin.qq.com";
        },
        "wechat_v3.query.api_base");
    ExpectError(
        [](json& r) {
            r["wechat_v2"]["query"] = {{"api_base", "http://10.0.0.1"}};
        },
        "wechat_v2.query.api_base");
    ExpectError(
        [](json& r) {
            r["wechat_v2"]["query"] = {{"api_base", "ftp://x"}};
        },
        "wechat_v2.query.api_base");
    ExpectError(
        [](json& r) {
            r["wechat_v2"]["query"] = {{"api_base", "https://u:p@api.example"}};
        },
        "wechat_v2.query.api_base");
    ExpectError([](json& r) { r["wechat_v2"]["query"] = "https://api.mch.weixin.qq.com"; },
                "wechat_v2.query");
    ExpectError([](json& r) { r["wechat_v2"]["query"] = json::object(); },
                "wechat_v2.query.api_base");
    ExpectError(
        [&](json& r) {
            with_query(r);
            r["wechat_v3"]["query"].erase("merchant_private_key");
        },
        "wechat_v3.query.merchant_private_key");
    ExpectError(
        [&](json& r) {
            with_query(r);
            r["wechat_v3"]["query"]["merchant_private_key"] = "platform.pem";  // A public key.
        },
        "wechat_v3.query.merchant_private_key");
    ExpectError(
        [&](json& r) {
            with_query(r);
            r["wechat_v3"]["query"]["merchant_serial"] =
                "PUB_KEY_ID_0114232004152025010600000000000001";
        },
        "wechat_v3.query.merchant_serial");
    ExpectError(
        [&](json& r) {
            with_query(r);
            r["wechat_v3"]["query"]["merchant_serial"] = "1dde55ad";
        },
        "wechat_v3.query.merchant_serial");
    ExpectError(
        [&](json& r) {
            with_query(r);
            r["alipay"]["query"].erase("app_private_key");
        },
        "alipay.query.app_private_key");
    ExpectError([](json& r) { r["query"] = json::array(); }, "query");
    ExpectError(
        [](json& r) {
            r["query"] = {{"first_after_seconds", 86401}};
        },
        "query.first_after_seconds");
    ExpectError(
        [](json& r) {
            r["query"] = {{"first_after_seconds", -1}};
        },
        "query.first_after_seconds");
    ExpectError(
        [](json& r) {
            r["query"] = {{"schedule_seconds", {60, 0}}};
        },
        "query.schedule_seconds[1]");
    ExpectError([](json& r) { r["query"] = {{"schedule_seconds", 60}}; }, "query.schedule_seconds");
    ExpectError(
        [](json& r) {
            r["query"] = {{"schedule_seconds", json(std::vector<int>(33, 60))}};
        },
        "query.schedule_seconds");
    ExpectError([](json& r) { r["query"] = {{"concurrency", 0}}; }, "query.concurrency");
    ExpectError([](json& r) { r["query"] = {{"concurrency", 65}}; }, "query.concurrency");
    ExpectError([](json& r) { r["query"] = {{"timeout_seconds", 61}}; }, "query.timeout_seconds");
    ExpectError([](json& r) { r["query"] = {{"timeout_seconds", 1.5}}; }, "query.timeout_seconds");
}

// A signing key others may read is refused like any secret.
TEST_F(PlatformConfigTest, AQuerySigningKeyOthersMayReadIsRefused) {
    namespace fs = std::filesystem;
    Write("merchant.key", PrivateKeyPem(key_));
    fs::permissions(dir_ / "merchant.key",
                    fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    json root = Valid();
    root["alipay"]["query"] = {{"api_base", "https://openapi.alipay.com/gateway.do"},
                               {"app_private_key", "merchant.key"}};
    try {
        (void)Parse(root);
        ADD_FAILURE() << "a group-readable signing key was accepted";
    } catch (const ConfigError& error) {
        EXPECT_NE(std::string(error.what()).find("alipay.query.app_private_key"), std::string::npos)
            << error.what();
        EXPECT_NE(std::string(error.what()).find("mode 0640"), std::string::npos) << error.what();
    }
}

}  // namespace payledger::api
