// Notices built and signed by the platforms' own SDKs, posted to a real `payledger serve`:
// whatever reads the formats the way the SDKs do must be accepted, so that a misreading shared
// by payledger's channels and its own `simulate` cannot pass unseen. sign_notices.mjs (beside
// this file) signs with alipay-sdk and wechatpay-axios-plugin, pinned in package.json, using
// the keys this test generates and configures: WeChat Pay v2 payments signed MD5 and
// HMAC-SHA256 (declared in the notice or not) and a refund whose req_info the SDK encrypted
// with AES-256-ECB; v3 payments and refunds, the resource sealed with AES-256-GCM and the
// Wechatpay-Signature made by the SDK's Rsa; Alipay RSA2 payments in UTF-8 and in GBK bytes, and
// a refund. Each is answered with the platform's success answer and appended with its amount,
// number and type; a copy changed after signing is refused (401) and appends nothing. One
// divergence is pinned: alipay-sdk's request signer covers sign_type, which Alipay's notices
// never do (docs/platforms.md, "Alipay signature"); payledger refuses such a notice.
// Skipped when node or the SDKs are missing (npm ci --prefix tests/platform_sdks), except
// under CI, where that fails.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "api/channels/platform_crypto.hpp"
#include "ledger/base/bytes.hpp"
#include "support/http_client.hpp"
#include "support/serve_process.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"
#include "tests/platform_sdks/node_script.hpp"

namespace payledger::api::sdk_notices_pgtest {
namespace {

using nlohmann::json;
using testing::HttpClient;
using testing::HttpResult;
using testing::ServeProcess;
using testing::TestDatabase;

constexpr const char* kV2AppId = "wx0000000000000001";
constexpr const char* kV2MchId = "1900000001";
constexpr const char* kV2ApiKey = "192006250b4c09247ec02edce69f6a2d";
constexpr const char* kV3AppId = "wx0000000000000002";
constexpr const char* kV3MchId = "1900000002";
constexpr const char* kV3ApiKey = "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb";
constexpr const char* kV3Serial = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1";
constexpr const char* kAlipayAppId = "2021000000000001";
constexpr std::int64_t kOrderAmount = 8880;
constexpr std::int64_t kRefundAmount = 1000;
constexpr const char* kV2Success =
    "<xml><return_code><![CDATA[SUCCESS]]></return_code><return_msg><![CDATA[OK]]></return_msg>"
    "</xml>";

// One notice of sign_notices.mjs.
struct SdkNotice {
    std::string name{};
    std::string target{};
    std::map<std::string, std::string> headers{};
    std::string body{};
    std::string tampered_body{};
};

void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
    std::ofstream{path, std::ios::binary} << text;
    ASSERT_EQ(chmod(path.c_str(), mode), 0) << path;
}

std::string Decoded(const json& line, const char* field) {
    const std::optional<std::string> bytes =
        ledger::Base64Decode(line.at(field).get<std::string>());
    EXPECT_TRUE(bytes.has_value()) << field << " is not base64";
    return bytes.value_or("");
}

// A notice spec for sign_notices.mjs (its header lists the fields).
json Spec(const std::string& kind, const std::string& out_trade_no, std::int64_t amount,
          const std::string& transaction_id) {
    return {{"name", kind + " " + out_trade_no}, {"kind", kind},
            {"out_trade_no", out_trade_no},      {"amount", amount},
            {"order_amount", kOrderAmount},      {"transaction_id", transaction_id}};
}

json With(json spec, const json& extra) {
    spec.update(extra);
    return spec;
}

json RefundSpec(const std::string& kind, const std::string& out_trade_no,
                const std::string& refund_number, const std::string& payment_number) {
    json spec = Spec(kind, out_trade_no, kRefundAmount, refund_number);
    spec["payment_transaction_id"] = payment_number;
    return spec;
}

class PlatformSdkNoticesPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        dir_ = testing::MakeTestTmpDir("platform-sdks-");
        WriteFile(dir_ + "/wechatpay.pem", PublicKeyPem(wechat_key_.Public()), 0644);
        WriteFile(dir_ + "/alipay.pem", PublicKeyPem(alipay_key_.Public()), 0644);
    }

    void TearDown() override {
        client_.reset();
        serve_.reset();
        if (!dir_.empty()) std::filesystem::remove_all(dir_);
    }

    // Serves the three platform channels with the keys above, WeChat v2 on `v2_sign_type`.
    void StartServe(const std::string& v2_sign_type) {
        const json platforms = {
            {"wechat_v2",
             {{"appid", kV2AppId},
              {"mch_id", kV2MchId},
              {"api_key", kV2ApiKey},
              {"sign_type", v2_sign_type}}},
            {"wechat_v3",
             {{"appid", kV3AppId},
              {"mchid", kV3MchId},
              {"api_v3_key", kV3ApiKey},
              {"platform_public_keys", {{kV3Serial, dir_ + "/wechatpay.pem"}}}}},
            {"alipay", {{"app_id", kAlipayAppId}, {"alipay_public_key", dir_ + "/alipay.pem"}}}};
        serve_ = std::make_unique<ServeProcess>(db_.url(), platforms);
        client_ = std::make_unique<HttpClient>(serve_->port());
    }

    // The notices of `specs` (a JSON array), signed by the SDKs now, into notices_. Skips the
    // test when node or the SDKs are missing (outside CI): callers return when IsSkipped().
    void SignWithSdks(const json& specs) {
        const json input = {
            {"now", testing::UnixNow()},
            {"wechat_v2", {{"appid", kV2AppId}, {"mch_id", kV2MchId}, {"api_key", kV2ApiKey}}},
            {"wechat_v3",
             {{"appid", kV3AppId},
              {"mchid", kV3MchId},
              {"api_v3_key", kV3ApiKey},
              {"serial", kV3Serial},
              {"private_key_pem", PrivateKeyPem(wechat_key_)}}},
            {"alipay",
             {{"app_id", kAlipayAppId},
              {"private_key_pem", PrivateKeyPem(alipay_key_)},
              {"public_key_pem", PublicKeyPem(alipay_key_.Public())}}},
            {"notices", specs}};
        const std::string input_path = dir_ + "/input.json";
        WriteFile(input_path, input.dump(), 0600);
        const testing::NodeRun run =
            testing::RunSdkScript("sign_notices.mjs", input_path, dir_ + "/node.err");
        if (run.MissingOutsideCi()) {
            GTEST_SKIP() << "node or the platform SDKs are missing: " << run.errors;
        }
        EXPECT_EQ(run.code, 0) << run.errors;
        std::istringstream lines{run.out};
        for (std::string text; std::getline(lines, text);) {
            const json line = json::parse(text);
            SdkNotice notice{.name = line.at("name").get<std::string>(),
                             .target = line.at("target").get<std::string>(),
                             .body = Decoded(line, "body"),
                             .tampered_body = Decoded(line, "tampered_body")};
            for (const auto& [name, value] : line.at("headers").items()) {
                notice.headers[name] = value.get<std::string>();
            }
            notices_.push_back(std::move(notice));
        }
        ASSERT_EQ(notices_.size(), specs.size()) << run.out << run.errors;
    }

    void CreateOrder(const std::string& out_trade_no) {
        const json body = {{"out_trade_no", out_trade_no},
                           {"account_id", "acct-sdk"},
                           {"amount", kOrderAmount},
                           {"currency", "CNY"}};
        const HttpResult created =
            client_->Post("/v1/orders", body.dump(),
                          {{"Authorization", std::string("Bearer ") + testing::kMerchantToken},
                           {"Content-Type", "application/json"}});
        ASSERT_EQ(created.status, 201) << created.body;
    }

    json Audit(const std::string& target) {
        const HttpResult result = client_->Get(target, testing::kAuditorToken);
        EXPECT_EQ(result.status, 200) << target << ": " << result.body;
        return result.Json();
    }

    json Events(const std::string& out_trade_no) {
        return Audit("/v1/orders/" + out_trade_no + "/events")["events"];
    }

    // The platform's exact success answer for a notice posted to `target`.
    static void ExpectSuccess(const std::string& target, const HttpResult& result) {
        if (target == "/v1/callbacks/wechat/v2") {
            EXPECT_EQ(result.status, 200);
            EXPECT_EQ(result.body, kV2Success);
        } else if (target == "/v1/callbacks/wechat/v3") {
            EXPECT_EQ(result.status, 204) << result.body;
            EXPECT_TRUE(result.body.empty()) << result.body;
        } else {
            EXPECT_EQ(result.status, 200);
            EXPECT_EQ(result.body, "success");
        }
    }

    // The tampered copy is refused and appends nothing; then the notice is answered with
    // success and appended as `event_type` of `amount` numbered `transaction_id`. Returns
    // the event, or an empty object when none was appended (callers index it: not const).
    json ExpectTamperedRefusedThenAppended(const SdkNotice& notice, const std::string& out_trade_no,
                                           const std::string& event_type, std::int64_t amount,
                                           const std::string& transaction_id) {
        SCOPED_TRACE(notice.name);
        const std::size_t before = Events(out_trade_no).size();
        const HttpResult refused =
            client_->Post(notice.target, notice.tampered_body, notice.headers);
        EXPECT_EQ(refused.status, 401) << refused.body;
        EXPECT_EQ(Events(out_trade_no).size(), before);

        const HttpResult accepted = client_->Post(notice.target, notice.body, notice.headers);
        ExpectSuccess(notice.target, accepted);
        const json events = Events(out_trade_no);
        EXPECT_EQ(events.size(), before + 1) << accepted.body;
        if (events.size() != before + 1) return json::object();
        json event = events.back();
        EXPECT_EQ(event["event_type"], event_type);
        EXPECT_EQ(event["amount"], amount);
        EXPECT_EQ(event["currency"], "CNY");
        EXPECT_EQ(event["transaction_id"], transaction_id);
        return event;
    }

    void ExpectPaidAndRefunded(const std::string& out_trade_no, std::int64_t refunded) {
        json order = Audit("/v1/orders/" + out_trade_no);
        EXPECT_EQ(order["paid_amount"], kOrderAmount) << order.dump();
        EXPECT_EQ(order["refunded_amount"], refunded) << order.dump();
    }

    TestDatabase db_;
    std::string dir_;
    // The platforms' keys, generated once per process (never stored).
    inline static const PrivateKey wechat_key_ = GenerateRsaKey();
    inline static const PrivateKey alipay_key_ = GenerateRsaKey();
    std::unique_ptr<ServeProcess> serve_;
    std::unique_ptr<HttpClient> client_;
    std::vector<SdkNotice> notices_;
};

TEST_F(PlatformSdkNoticesPgTest, WechatV2Md5PaymentAndEcbRefundFromTheSdkAreAppended) {
    StartServe("MD5");
    CreateOrder("SDK-V2-MD5");
    SignWithSdks(json::array(
        {With(Spec("wechat_v2_payment", "SDK-V2-MD5", kOrderAmount, "4200000001202612040001"),
              {{"sign_type", "MD5"}}),
         RefundSpec("wechat_v2_refund", "SDK-V2-MD5", "50300000012026120400001",
                    "4200000001202612040001")}));
    if (IsSkipped() || HasFatalFailure()) return;
    json payment = ExpectTamperedRefusedThenAppended(notices_[0], "SDK-V2-MD5", "PAYMENT_SUCCEEDED",
                                                     kOrderAmount, "4200000001202612040001");
    EXPECT_EQ(payment["source"], "wechat_v2");
    EXPECT_EQ(payment["data"]["attach"], "支付测试");
    json refund = ExpectTamperedRefusedThenAppended(notices_[1], "SDK-V2-MD5", "REFUND_SUCCEEDED",
                                                    kRefundAmount, "50300000012026120400001");
    EXPECT_EQ(refund["data"]["refund_recv_accout"], "支付用户的零钱");
    ExpectPaidAndRefunded("SDK-V2-MD5", kRefundAmount);
}

TEST_F(PlatformSdkNoticesPgTest, WechatV2HmacSha256PaymentsFromTheSdkAreAppended) {
    StartServe("HMAC-SHA256");
    CreateOrder("SDK-V2-HMAC-DECLARED");
    CreateOrder("SDK-V2-HMAC-UNDECLARED");
    // WeChat often leaves sign_type out of HMAC-SHA256 notices: both are the configured type.
    SignWithSdks(json::array({With(Spec("wechat_v2_payment", "SDK-V2-HMAC-DECLARED", kOrderAmount,
                                        "4200000002202612040001"),
                                   {{"sign_type", "HMAC-SHA256"}, {"declare_sign_type", true}}),
                              With(Spec("wechat_v2_payment", "SDK-V2-HMAC-UNDECLARED", kOrderAmount,
                                        "4200000002202612040002"),
                                   {{"sign_type", "HMAC-SHA256"}, {"declare_sign_type", false}})}));
    if (IsSkipped() || HasFatalFailure()) return;
    EXPECT_NE(notices_[0].body.find("<sign_type>HMAC-SHA256</sign_type>"), std::string::npos);
    EXPECT_EQ(notices_[1].body.find("sign_type"), std::string::npos);
    ExpectTamperedRefusedThenAppended(notices_[0], "SDK-V2-HMAC-DECLARED", "PAYMENT_SUCCEEDED",
                                      kOrderAmount, "4200000002202612040001");
    ExpectTamperedRefusedThenAppended(notices_[1], "SDK-V2-HMAC-UNDECLARED", "PAYMENT_SUCCEEDED",
                                      kOrderAmount, "4200000002202612040002");
    ExpectPaidAndRefunded("SDK-V2-HMAC-DECLARED", 0);
    ExpectPaidAndRefunded("SDK-V2-HMAC-UNDECLARED", 0);
}

TEST_F(PlatformSdkNoticesPgTest, WechatV3PaymentAndRefundFromTheSdkAreAppended) {
    StartServe("MD5");
    CreateOrder("SDK-V3");
    SignWithSdks(
        json::array({Spec("wechat_v3_payment", "SDK-V3", kOrderAmount, "4200000003202612040001"),
                     RefundSpec("wechat_v3_refund", "SDK-V3", "50300000032026120400001",
                                "4200000003202612040001")}));
    if (IsSkipped() || HasFatalFailure()) return;
    json payment = ExpectTamperedRefusedThenAppended(notices_[0], "SDK-V3", "PAYMENT_SUCCEEDED",
                                                     kOrderAmount, "4200000003202612040001");
    EXPECT_EQ(payment["source"], "wechat_v3");
    EXPECT_EQ(payment["data"]["summary"], "支付成功");
    ExpectTamperedRefusedThenAppended(notices_[1], "SDK-V3", "REFUND_SUCCEEDED", kRefundAmount,
                                      "50300000032026120400001");
    ExpectPaidAndRefunded("SDK-V3", kRefundAmount);
}

TEST_F(PlatformSdkNoticesPgTest, AlipayUtf8AndGbkNoticesFromTheSdkAreAppended) {
    StartServe("MD5");
    CreateOrder("SDK-ALIPAY-UTF8");
    CreateOrder("SDK-ALIPAY-GBK");
    SignWithSdks(
        json::array({Spec("alipay_payment", "SDK-ALIPAY-UTF8", kOrderAmount, "2026120422001"),
                     With(Spec("alipay_payment", "SDK-ALIPAY-GBK", kOrderAmount, "2026120422002"),
                          {{"charset", "gbk"}}),
                     RefundSpec("alipay_refund", "SDK-ALIPAY-UTF8", "RF-SDK-1", "2026120422001")}));
    if (IsSkipped() || HasFatalFailure()) return;
    // The GBK notice carries its Chinese text as GBK bytes ("支付宝"), which are not UTF-8.
    EXPECT_NE(notices_[1].body.find("subject=%D6%A7%B8%B6%B1%A6"), std::string::npos)
        << notices_[1].body;
    json utf8 = ExpectTamperedRefusedThenAppended(
        notices_[0], "SDK-ALIPAY-UTF8", "PAYMENT_SUCCEEDED", kOrderAmount, "2026120422001");
    EXPECT_EQ(utf8["source"], "alipay");
    EXPECT_EQ(utf8["data"]["charset"], "utf-8");
    json gbk = ExpectTamperedRefusedThenAppended(notices_[1], "SDK-ALIPAY-GBK", "PAYMENT_SUCCEEDED",
                                                 kOrderAmount, "2026120422002");
    EXPECT_EQ(gbk["data"]["charset"], "gbk");
    ExpectTamperedRefusedThenAppended(notices_[2], "SDK-ALIPAY-UTF8", "REFUND_SUCCEEDED",
                                      kRefundAmount, "RF-SDK-1");
    ExpectPaidAndRefunded("SDK-ALIPAY-UTF8", kRefundAmount);
    ExpectPaidAndRefunded("SDK-ALIPAY-GBK", 0);
}

// alipay-sdk's checkNotifySign accepts a signature with or without sign_type (Alipay's Java
// rsaCheckV2 and rsaCheckV1); Alipay signs its trade notices without it, and payledger
// verifies them so. A notice signed by the SDK's request signer is therefore refused.
TEST_F(PlatformSdkNoticesPgTest, AlipayNoticeSignedByTheSdkRequestSignerIsRefused) {
    StartServe("MD5");
    CreateOrder("SDK-ALIPAY-REQUEST-RULE");
    SignWithSdks(json::array({Spec("alipay_request_rule_payment", "SDK-ALIPAY-REQUEST-RULE",
                                   kOrderAmount, "2026120422003")}));
    if (IsSkipped() || HasFatalFailure()) return;
    const SdkNotice& notice = notices_[0];
    EXPECT_NE(notice.body.find("sign_type=RSA2"), std::string::npos) << notice.body;
    const std::size_t before = Events("SDK-ALIPAY-REQUEST-RULE").size();
    const HttpResult result = client_->Post(notice.target, notice.body, notice.headers);
    EXPECT_EQ(result.status, 401) << result.body;
    EXPECT_EQ(result.body, "failure");
    EXPECT_EQ(Events("SDK-ALIPAY-REQUEST-RULE").size(), before);
}

}  // namespace
}  // namespace payledger::api::sdk_notices_pgtest
