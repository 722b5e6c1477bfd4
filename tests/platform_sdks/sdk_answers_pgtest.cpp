// The answers `payledger simulate-platform` gives payledger's own queries and closes, checked by
// the platforms' SDKs the way their merchants' code checks the real platforms' answers
// (verify_answers.mjs beside this file, which lists every check): WeChat Pay v3 with
// wechatpay-axios-plugin's answer verifier, v2 with its Hash.sign and Transformer verifier,
// Alipay with alipay-sdk's checkResponseSign. The simulator serves from a platform ledger on
// real PostgreSQL, which a `payledger serve` fills: orders registered, paid and refunded by
// simulated notices; the requests are built by payledger's request functions and sent over real
// HTTP with payledger's WebhookClient, as `payledger query` does. Per channel, every answer the
// simulator has: an order it does not know, one unpaid, one paid, one refunded in full, a close
// refused because the order is paid, a close, the closed order asked about, a second close, and
// a close of an order it does not know; WeChat Pay v2 signed MD5, then HMAC-SHA256. payledger's
// own reader must verify each answer too, and read it as docs/query.md#mapping says. Then the
// same answers, each with one byte of its signature changed, must fail the script on the check
// that verifies that signature, and payledger must read each as a bad signature.
// Skipped when node or the SDKs are missing (npm ci --prefix tests/platform_sdks), except under
// CI, where that fails.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/channels/platform_crypto.hpp"
#include "api/channels/wechat_v2_xml.hpp"
#include "api/cli/simulate.hpp"
#include "api/config.hpp"
#include "api/query/platform_protocol.hpp"
#include "api/subscriptions/webhook_client.hpp"
#include "ledger/base/bytes.hpp"
#include "ledger/base/clock.hpp"
#include "support/http_client.hpp"
#include "support/queried_channels.hpp"
#include "support/serve_process.hpp"
#include "support/simulator_process.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"
#include "tests/platform_sdks/node_script.hpp"

namespace payledger::api::sdk_answers_pgtest {
namespace {

using nlohmann::json;
using testing::HttpClient;
using testing::ServeProcess;
using testing::SimulatorProcess;
using testing::TestDatabase;

using testing::kQueriedV3PlatformSerial;
using testing::WriteTestFile;

constexpr std::int64_t kOrderAmount = 1999;
constexpr std::chrono::seconds kAskTimeout{10};

// One answer of the simulator, as payledger received and read it.
struct Answer {
    std::string name{};
    AskedExchange exchange{};
    PlatformAnswer read{};
};

std::string ChangeOneByteOfBase64(const std::string& signature) {
    std::string raw = ledger::Base64Decode(signature).value_or("?");
    raw[0] = static_cast<char>(static_cast<unsigned char>(raw[0]) ^ 0x01U);
    return ledger::Base64Encode(raw);
}

class PlatformSdkAnswersPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!platform_db_.available()) GTEST_SKIP() << "no test database";
        dir_ = testing::MakeTestTmpDir("sdk-answers-");
    }

    void TearDown() override {
        platform_.reset();
        simulator_.reset();
        if (!dir_.empty()) std::filesystem::remove_all(dir_);
    }

    // The simulator, with WeChat Pay v2 on `v2_sign_type`, and the platform's own ledger beside
    // it (the same channels without their query sections: it is asked about nothing).
    void Start(const std::string& v2_sign_type) {
        port_ = testing::FreePort();
        const std::string base = "http://127.0.0.1:" + std::to_string(port_);
        json channels = testing::QueriedChannels(
            dir_, base, {v3_platform_, alipay_platform_, v3_merchant_, alipay_app_});
        channels["wechat_v2"]["sign_type"] = v2_sign_type;
        json simulator_config = channels;
        simulator_config["database_url"] = platform_db_.url();
        simulator_config["listen"] = "127.0.0.1:1";
        ASSERT_TRUE(WriteTestFile(dir_ + "/simulator.json", simulator_config.dump(2), 0600))
            << dir_ << "/simulator.json";
        config_ = ParseConfig(simulator_config.dump(), std::nullopt, std::nullopt, dir_);
        simulator_ = std::make_unique<SimulatorProcess>(dir_ + "/simulator.json", port_);
        ASSERT_TRUE(simulator_->listening()) << "simulate-platform did not listen";
        for (const char* name : {"wechat_v2", "wechat_v3", "alipay"}) channels[name].erase("query");
        platform_ = std::make_unique<ServeProcess>(platform_db_.url(), channels);
    }

    // The platform's record: `out_trade_no` registered, and paid, and refunded in full, as asked.
    void Record(const std::string& channel, const std::string& out_trade_no, bool paid,
                bool refunded) {
        HttpClient client{platform_->port()};
        const json order = {{"out_trade_no", out_trade_no},
                            {"account_id", "shop-1"},
                            {"amount", kOrderAmount},
                            {"currency", "CNY"}};
        const testing::HttpResult registered =
            client.Post("/v1/orders", order.dump(),
                        {{"Authorization", std::string("Bearer ") + testing::kMerchantToken}});
        ASSERT_EQ(registered.status, 201) << registered.body;
        std::vector<std::string> kinds;
        if (paid) kinds.emplace_back("payment");
        if (refunded) kinds.emplace_back("refund");
        for (const std::string& kind : kinds) {
            const SimulatedNotice notice = BuildNotice(config_, {.channel = channel,
                                                                 .out_trade_no = out_trade_no,
                                                                 .kind = kind,
                                                                 .amount = kOrderAmount,
                                                                 .order_amount = kOrderAmount});
            const std::map<std::string, std::string> headers(notice.headers.begin(),
                                                             notice.headers.end());
            const testing::HttpResult result = client.Post(notice.target, notice.body, headers);
            ASSERT_EQ(result.status / 100, 2) << kind << " " << out_trade_no << ": " << result.body;
        }
    }

    // Asks the simulator as `payledger query` does, reads the answer with payledger's reader,
    // which must find it `kind` with `answer`, and keeps it for the SDKs.
    void Ask(QueryChannel channel, QueryAction action, const std::string& out_trade_no,
             AnswerKind kind, const std::string& answer) {
        const RequestMoment moment{
            .now = ledger::NowMicros(),
            .nonce = "SDKANSWERS" + std::to_string(100000 + answers_.size())};
        AskedExchange exchange{.channel = channel,
                               .action = action,
                               .out_trade_no = out_trade_no,
                               .peer = "127.0.0.1:" + std::to_string(port_)};
        switch (channel) {
            case QueryChannel::kWechatV2:
                exchange.request =
                    WechatV2Request(*config_.wechat_v2, action, out_trade_no, moment);
                break;
            case QueryChannel::kWechatV3:
                exchange.request =
                    WechatV3Request(*config_.wechat_v3, action, out_trade_no, moment);
                break;
            case QueryChannel::kAlipay:
                exchange.request = AlipayRequest(*config_.alipay, action, out_trade_no, moment);
                break;
        }
        exchange.result =
            client_.Send(exchange.request.method, exchange.request.url, exchange.request.headers,
                         exchange.request.body, kAskTimeout, /*keep_answer=*/true);
        exchange.received_at = ledger::NowMicros();
        Answer asked{.name = std::string(ToString(channel)) + " " +
                             (action == QueryAction::kQuery ? "query " : "close ") + out_trade_no,
                     .exchange = exchange,
                     .read = Read(exchange)};
        EXPECT_EQ(ToString(asked.read.kind), ToString(kind))
            << asked.name << ": " << asked.read.answer << "\n"
            << exchange.result.status << " " << exchange.result.answer_body;
        EXPECT_EQ(asked.read.answer, answer) << asked.name;
        answers_.push_back(std::move(asked));
    }

    PlatformAnswer Read(const AskedExchange& exchange) const {
        switch (exchange.channel) {
            case QueryChannel::kWechatV2:
                return ReadWechatV2Answer(*config_.wechat_v2, exchange);
            case QueryChannel::kWechatV3:
                return ReadWechatV3Answer(*config_.wechat_v3, exchange);
            case QueryChannel::kAlipay:
                return ReadAlipayAnswer(*config_.alipay, exchange);
        }
        return {};
    }

    // Every answer the simulator has for `channel` (the file header lists them), about orders
    // whose numbers start with `prefix`.
    void AskEverything(const std::string& channel_name, const std::string& prefix) {
        const QueryChannel channel = *ParseQueryChannel(channel_name);
        Record(channel_name, prefix + "WAIT", false, false);
        Record(channel_name, prefix + "PAID", true, false);
        Record(channel_name, prefix + "REFUND", true, true);
        Record(channel_name, prefix + "CLOSE", false, false);
        if (HasFatalFailure()) return;
        const bool v3 = channel == QueryChannel::kWechatV3;
        const bool v2 = channel == QueryChannel::kWechatV2;
        const auto words = [&](const char* wechat_v3, const char* wechat_v2, const char* alipay) {
            return std::string(v3 ? wechat_v3 : v2 ? wechat_v2 : alipay);
        };
        using enum AnswerKind;
        using enum QueryAction;
        Ask(channel, kQuery, prefix + "NONE", kNotFinal,
            words("ORDER_NOT_EXIST", "ORDERNOTEXIST", "ACQ.TRADE_NOT_EXIST"));
        Ask(channel, kQuery, prefix + "WAIT", kNotFinal,
            words("NOTPAY", "NOTPAY", "WAIT_BUYER_PAY"));
        Ask(channel, kQuery, prefix + "PAID", kFinal, words("SUCCESS", "SUCCESS", "TRADE_SUCCESS"));
        Ask(channel, kQuery, prefix + "REFUND", kFinal, words("REFUND", "REFUND", "TRADE_CLOSED"));
        Ask(channel, kClose, prefix + "PAID", kClosePaid,
            words("ORDER_PAID", "ORDERPAID", "ACQ.TRADE_STATUS_ERROR"));
        Ask(channel, kClose, prefix + "CLOSE", kClosed, "closed");
        Ask(channel, kQuery, prefix + "CLOSE", kFinal, words("CLOSED", "CLOSED", "TRADE_CLOSED"));
        Ask(channel, kClose, prefix + "CLOSE", kClosed, words("closed", "ORDERCLOSED", "closed"));
        Ask(channel, kClose, prefix + "NONE", kClosed,
            words("closed", "closed", "ACQ.TRADE_NOT_EXIST"));
    }

    // One JSON line of verify_answers.mjs (its header lists the fields).
    json Line(const Answer& answer) const {
        const AskedExchange& exchange = answer.exchange;
        json headers = json::object();
        for (const auto& [name, value] : exchange.result.answer_headers) headers[name] = value;
        json line = {{"name", answer.name},
                     {"channel", std::string(ToString(exchange.channel))},
                     {"action", exchange.action == QueryAction::kQuery ? "query" : "close"},
                     {"target", exchange.request.target},
                     {"status", exchange.result.status},
                     {"headers", headers},
                     {"body", ledger::Base64Encode(exchange.result.answer_body)}};
        switch (exchange.channel) {
            case QueryChannel::kWechatV3:
                line["platform_public_keys"] = {
                    {kQueriedV3PlatformSerial, PublicKeyPem(v3_platform_.Public())}};
                break;
            case QueryChannel::kWechatV2:
                line["mch_id"] = config_.wechat_v2->mch_id;
                line["api_key"] = config_.wechat_v2->api_key;
                line["sign_type"] = std::string(ToString(config_.wechat_v2->sign_type));
                break;
            case QueryChannel::kAlipay: {
                line["app_id"] = config_.alipay->app_id;
                line["alipay_public_key_pem"] = PublicKeyPem(alipay_platform_.Public());
                line["app_private_key_pem"] = PrivateKeyPem(alipay_app_);
                line["method"] = exchange.action == QueryAction::kQuery ? "alipay.trade.query"
                                                                        : "alipay.trade.close";
                const std::string member = exchange.action == QueryAction::kQuery
                                               ? "alipay_trade_query_response"
                                               : "alipay_trade_close_response";
                line["signed_text"] =
                    std::string(RawJsonMember(exchange.result.answer_body, member).value_or(""));
                break;
            }
        }
        return line;
    }

    // Writes the answers and runs verify_answers.mjs on them.
    testing::NodeRun Verify(const std::vector<Answer>& answers, const std::string& file) {
        const std::string path = dir_ + "/" + file;
        {
            std::ofstream out{path, std::ios::binary | std::ios::trunc};
            for (const Answer& answer : answers) out << Line(answer).dump() << '\n';
        }
        return testing::RunSdkScript("verify_answers.mjs", path, path + ".err");
    }

    // The SDKs accept every answer; then, each with one byte of its signature changed, they and
    // payledger refuse every one.
    void ExpectTheSdksVerifyEveryAnswer() {
        ASSERT_FALSE(answers_.empty());
        const testing::NodeRun run = Verify(answers_, "answers.jsonl");
        if (run.MissingOutsideCi()) GTEST_SKIP() << "node or the platform SDKs are missing";
        EXPECT_EQ(run.code, 0) << run.out << run.errors;
        EXPECT_NE(run.out.find(" checks passed"), std::string::npos) << run.out;

        std::vector<Answer> changed = answers_;
        std::vector<std::string> expected_failures;
        for (Answer& answer : changed) {
            expected_failures.push_back("FAIL " + answer.name + ": " + ChangeSignature(answer));
            const PlatformAnswer read = Read(answer.exchange);
            EXPECT_EQ(read.kind, AnswerKind::kBadSignature) << answer.name << ": " << read.answer;
        }
        const testing::NodeRun refused = Verify(changed, "changed.jsonl");
        EXPECT_EQ(refused.code, 1) << refused.out << refused.errors;
        for (const std::string& failure : expected_failures) {
            EXPECT_NE(refused.errors.find(failure), std::string::npos) << failure << "\n"
                                                                       << refused.errors;
        }
    }

    // Changes one byte of the answer's signature; returns the name of the script's check that
    // must then fail.
    static std::string ChangeSignature(Answer& answer) {
        WebhookResult& result = answer.exchange.result;
        switch (answer.exchange.channel) {
            case QueryChannel::kWechatV3:
                for (auto& [name, value] : result.answer_headers) {
                    if (name == "wechatpay-signature") value = ChangeOneByteOfBase64(value);
                }
                return "the plugin's answer verifier accepts it";
            case QueryChannel::kWechatV2: {
                Checked<PlatformFields> fields = ParseFlatXml(result.answer_body, "xml");
                EXPECT_TRUE(fields.ok()) << result.answer_body;
                if (!fields.ok()) return "?";
                std::string& sign = (*fields)["sign"];
                sign[0] = sign[0] == '0' ? '1' : '0';
                result.answer_body = WechatV2Xml(*fields, "xml");
                return "Hash.sign is the sign";
            }
            case QueryChannel::kAlipay: {
                json body = json::parse(result.answer_body);
                const std::string sign = body["sign"].get<std::string>();
                const std::size_t at = result.answer_body.rfind(sign);
                result.answer_body.replace(at, sign.size(), ChangeOneByteOfBase64(sign));
                return "checkResponseSign accepts it";
            }
        }
        return "?";
    }

    TestDatabase platform_db_;
    std::string dir_;
    unsigned short port_ = 0;
    // The keys of one process, never stored but in this test's folder.
    inline static const PrivateKey v3_platform_ = GenerateRsaKey();
    inline static const PrivateKey alipay_platform_ = GenerateRsaKey();
    inline static const PrivateKey v3_merchant_ = GenerateRsaKey();
    inline static const PrivateKey alipay_app_ = GenerateRsaKey();
    Config config_;
    std::unique_ptr<SimulatorProcess> simulator_;
    std::unique_ptr<ServeProcess> platform_;
    WebhookClient client_;
    std::vector<Answer> answers_;
};

TEST_F(PlatformSdkAnswersPgTest, EveryAnswerOfTheSimulatorVerifiesWithTheSdks) {
    Start("MD5");
    if (HasFatalFailure()) return;
    AskEverything("wechat_v3", "SDK-V3-");
    AskEverything("wechat_v2", "SDK-V2-");
    AskEverything("alipay", "SDK-ALIPAY-");
    if (HasFatalFailure()) return;
    ExpectTheSdksVerifyEveryAnswer();
}

TEST_F(PlatformSdkAnswersPgTest, WechatV2AnswersSignedHmacSha256VerifyWithTheSdk) {
    Start("HMAC-SHA256");
    if (HasFatalFailure()) return;
    AskEverything("wechat_v2", "SDK-V2H-");
    if (HasFatalFailure()) return;
    ExpectTheSdksVerifyEveryAnswer();
}

}  // namespace
}  // namespace payledger::api::sdk_answers_pgtest
