// The order queries and closes payledger signs (api/query/platform_protocol.hpp), checked by
// code nobody here wrote: the platforms' own SDKs (verify_queries.mjs beside this file, which
// lists every check). Each request is built by payledger's own function with keys generated
// here (WechatV3Request, WechatV2Request with MD5 and with HMAC-SHA256, AlipayRequest; a query
// and a close of an order number with nothing to escape and of one that WeChat Pay v3's path
// escapes) and written as a JSON line with what the SDK needs to check it: the public key, and
// the private key so that the SDK can sign the same request itself; the API key for v2. WeChat
// Pay's signing example goes with them, as payledger's WechatV3RequestMessage gives it, for the
// plugin's Formatter to rebuild. Then the same requests, each with one byte of its
// signature changed, must fail the script, on the check that verifies that signature.
// No database. Skipped when node or the SDKs are missing (npm ci --prefix tests/platform_sdks),
// except under CI, where that fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "api/channels/alipay_form.hpp"
#include "api/channels/platform_crypto.hpp"
#include "api/channels/wechat_v2_xml.hpp"
#include "api/query/platform_protocol.hpp"
#include "ledger/base/bytes.hpp"
#include "tests/platform_sdks/node_script.hpp"

namespace payledger::api::sdk_queries_test {
namespace {

using nlohmann::json;

// 2024-05-01T02:30:15Z: the requests are signed at a fixed moment, so that a failure repeats.
constexpr projections::TimeMicros kSignedAt = 1714530615LL * 1'000'000;
constexpr const char* kMerchantSerial = "1DDE55AD98ED71D6EDD4A4A16996DE7B47773A8C";
// One order number with nothing to escape, and one whose '*' and '|' WeChat Pay v3's path
// escapes (PathEscape), which the SDK's signer must sign as sent.
const std::vector<std::string> kOrderNumbers = {"SDK-QUERY_1", "SDK*QUERY|2"};

// The keys of one process, never stored.
struct SdkQueryKeys {
    PrivateKey wechat_merchant = GenerateRsaKey();
    PrivateKey alipay_app = GenerateRsaKey();
};

const SdkQueryKeys& Keys() {
    static const SdkQueryKeys keys;
    return keys;
}

WechatV3Config V3Config() {
    WechatV3Config config{.appid = "wxd678efh567hg6787", .mchid = "1230000109"};
    config.query = WechatV3QueryConfig{.endpoint = {.api_base = "https://api.mch.weixin.qq.com"},
                                       .merchant_private_key = Keys().wechat_merchant,
                                       .merchant_serial = kMerchantSerial};
    return config;
}

WechatV2Config V2Config(WechatV2SignType sign_type) {
    return WechatV2Config{.appid = "wx2421b1c4370ec43b",
                          .mch_id = "10000100",
                          .api_key = "192006250b4c09247ec02edce69f6a2d",
                          .sign_type = sign_type,
                          .query = QueryEndpoint{.api_base = "https://api.mch.weixin.qq.com"}};
}

AlipayConfig AlipaySdkConfig() {
    AlipayConfig config{.app_id = "2014072300007148"};
    config.query =
        AlipayQueryConfig{.endpoint = {.api_base = "https://openapi.alipay.com/gateway.do"},
                          .app_private_key = Keys().alipay_app};
    return config;
}

std::string_view ActionName(QueryAction action) {
    return action == QueryAction::kQuery ? "query" : "close";
}

// A nonce of WeChat's alphabet (A-Z0-9, 32 characters), a different one per request.
std::string Nonce(std::size_t index) {
    std::string nonce = "593BEC0C930BF1AFEB40B4A08C8F" + std::to_string(1000 + index);
    return nonce.substr(0, 32);
}

json Headers(const PlatformRequest& request) {
    json headers = json::object();
    for (const auto& [name, value] : request.headers) headers[name] = value;
    return headers;
}

// Every request of the file header, one JSON object each (verify_queries.mjs lists the fields).
std::vector<json> SignedRequests() {
    std::vector<json> lines;
    for (const std::string& out_trade_no : kOrderNumbers) {
        for (const QueryAction action : {QueryAction::kQuery, QueryAction::kClose}) {
            const std::string suffix = std::string(ActionName(action)) + " " + out_trade_no;
            const RequestMoment moment{.now = kSignedAt, .nonce = Nonce(lines.size())};
            const WechatV3Config v3 = V3Config();
            const PlatformRequest v3_request = WechatV3Request(v3, action, out_trade_no, moment);
            lines.push_back({{"name", "wechat_v3 " + suffix},
                             {"channel", "wechat_v3"},
                             {"method", v3_request.method},
                             {"url", v3_request.url},
                             {"target", v3_request.target},
                             {"headers", Headers(v3_request)},
                             {"body", v3_request.body},
                             {"timestamp", kSignedAt / 1'000'000},
                             {"nonce", moment.nonce},
                             {"message", WechatV3RequestMessage(
                                             v3_request.method, v3_request.target,
                                             kSignedAt / 1'000'000, moment.nonce, v3_request.body)},
                             {"mchid", v3.mchid},
                             {"serial", kMerchantSerial},
                             {"public_key_pem", PublicKeyPem(Keys().wechat_merchant.Public())},
                             {"private_key_pem", PrivateKeyPem(Keys().wechat_merchant)}});
            for (const WechatV2SignType sign_type :
                 {WechatV2SignType::kMd5, WechatV2SignType::kHmacSha256}) {
                const WechatV2Config v2 = V2Config(sign_type);
                const RequestMoment v2_moment{.now = kSignedAt, .nonce = Nonce(lines.size())};
                const PlatformRequest request =
                    WechatV2Request(v2, action, out_trade_no, v2_moment);
                lines.push_back(
                    {{"name", "wechat_v2 " + std::string(ToString(sign_type)) + " " + suffix},
                     {"channel", "wechat_v2"},
                     {"url", request.url},
                     {"body", request.body},
                     {"appid", v2.appid},
                     {"mch_id", v2.mch_id},
                     {"out_trade_no", out_trade_no},
                     {"nonce", v2_moment.nonce},
                     {"sign_type", std::string(ToString(sign_type))},
                     {"api_key", v2.api_key}});
            }
            const AlipayConfig alipay = AlipaySdkConfig();
            const PlatformRequest request = AlipayRequest(alipay, action, out_trade_no, moment);
            const Checked<PlatformFields> form = DecodeForm(request.body);
            EXPECT_TRUE(form.ok()) << request.body;
            lines.push_back({{"name", "alipay " + suffix},
                             {"channel", "alipay"},
                             {"url", request.url},
                             {"body", request.body},
                             {"app_id", alipay.app_id},
                             {"out_trade_no", out_trade_no},
                             {"sign_content", form.ok() ? AlipayRequestSignContent(*form) : ""},
                             {"public_key_pem", PublicKeyPem(Keys().alipay_app.Public())},
                             {"private_key_pem", PrivateKeyPem(Keys().alipay_app)}});
        }
    }
    return lines;
}

// WeChat Pay's signing example (the APIv3 signing guide: a GET of /v3/certificates at 1554208460
// with nonce 593BEC0C930BF1AFEB40B4A08C8FB242, which tests/api/query/platform_protocol_test.cpp
// holds as a known answer), and a POST of its /v3/pay/transactions/jsapi with a JSON body, as
// payledger's WechatV3RequestMessage gives them.
std::vector<json> SigningExamples() {
    std::vector<json> lines;
    const std::int64_t timestamp = 1554208460;
    const std::string nonce = "593BEC0C930BF1AFEB40B4A08C8FB242";
    const std::vector<std::tuple<std::string, std::string, std::string>> examples = {
        {"GET", "/v3/certificates", ""},
        {"POST", "/v3/pay/transactions/jsapi", R"({"appid":"wxd678efh567hg6787"})"}};
    for (const auto& [method, target, body] : examples) {
        lines.push_back(
            {{"name", "wechat_v3 signing example " + method + " " + target},
             {"channel", "wechat_v3_example"},
             {"method", method},
             {"target", target},
             {"timestamp", timestamp},
             {"nonce", nonce},
             {"body", body},
             {"message", WechatV3RequestMessage(method, target, timestamp, nonce, body)}});
    }
    return lines;
}

std::string ChangeOneByteOfBase64(const std::string& signature) {
    std::string raw = ledger::Base64Decode(signature).value_or("?");
    raw[0] = static_cast<char>(static_cast<unsigned char>(raw[0]) ^ 0x01U);
    return ledger::Base64Encode(raw);
}

// The request of `line` with one byte of its signature changed, and the name of the check that
// must then fail: the one that verifies that signature with the SDK.
std::string WithSignatureChanged(json& line) {
    const std::string channel = line["channel"].get<std::string>();
    if (channel == "wechat_v3") {
        std::string header = line["headers"]["Authorization"].get<std::string>();
        const std::size_t start = header.find("signature=\"") + 11;
        const std::size_t end = header.find('"', start);
        header.replace(start, end - start,
                       ChangeOneByteOfBase64(header.substr(start, end - start)));
        line["headers"]["Authorization"] = header;
        return "Rsa.verify accepts the signature";
    }
    if (channel == "wechat_v2") {
        Checked<PlatformFields> fields = ParseFlatXml(line["body"].get<std::string>(), "xml");
        EXPECT_TRUE(fields.ok());
        std::string& sign = (*fields)["sign"];
        sign[0] = sign[0] == '0' ? '1' : '0';
        line["body"] = WechatV2Xml(*fields, "xml");
        return "Hash.sign is the sign";
    }
    Checked<PlatformFields> fields = DecodeForm(line["body"].get<std::string>());
    EXPECT_TRUE(fields.ok());
    (*fields)["sign"] = ChangeOneByteOfBase64((*fields)["sign"]);
    line["body"] = EncodeForm(*fields);
    return "the sign verifies over alipay-sdk's content";
}

class PlatformSdkQueriesTest : public ::testing::Test {
protected:
    void SetUp() override { dir_ = testing::MakeSdkScriptDir("sdk-queries-"); }
    void TearDown() override {
        if (!dir_.empty()) std::filesystem::remove_all(dir_);
    }

    // Writes `lines` and runs verify_queries.mjs on them.
    testing::NodeRun Verify(const std::vector<json>& lines) {
        const std::string path = dir_ + "/requests.jsonl";
        {
            std::ofstream file{path, std::ios::binary | std::ios::trunc};
            for (const json& line : lines) file << line.dump() << '\n';
        }
        return testing::RunSdkScript("verify_queries.mjs", path, dir_ + "/node.err");
    }

    std::string dir_;
};

TEST_F(PlatformSdkQueriesTest, EveryRequestPayledgerSignsVerifiesWithTheSdks) {
    std::vector<json> lines = SignedRequests();
    for (json& example : SigningExamples()) lines.push_back(std::move(example));
    // Per order number and action: v3, v2 MD5, v2 HMAC-SHA256, Alipay; then the two examples.
    ASSERT_EQ(lines.size(), kOrderNumbers.size() * 2 * 4 + 2);
    const testing::NodeRun run = Verify(lines);
    if (run.MissingOutsideCi()) GTEST_SKIP() << "node or the platform SDKs are missing";
    EXPECT_EQ(run.code, 0) << run.out << run.errors;
    EXPECT_NE(run.out.find(" checks passed"), std::string::npos) << run.out;
}

TEST_F(PlatformSdkQueriesTest, ASignatureWithOneByteChangedFailsTheScript) {
    std::vector<json> lines = SignedRequests();
    std::vector<std::string> expected_failures;
    for (json& line : lines) {
        const std::string check = WithSignatureChanged(line);
        expected_failures.push_back("FAIL " + line["name"].get<std::string>() + ": " + check);
    }
    const testing::NodeRun run = Verify(lines);
    if (run.MissingOutsideCi()) GTEST_SKIP() << "node or the platform SDKs are missing";
    EXPECT_EQ(run.code, 1) << run.out << run.errors;
    for (const std::string& failure : expected_failures) {
        EXPECT_NE(run.errors.find(failure), std::string::npos) << failure << "\n" << run.errors;
    }
}

}  // namespace
}  // namespace payledger::api::sdk_queries_test
