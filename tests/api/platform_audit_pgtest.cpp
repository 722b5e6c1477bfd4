// `payledger audit --platform-signatures` (api/cli/platform_audit.hpp), run as a user runs the
// binary: genuine WeChat Pay v3 and Alipay notices, signed with the test platform keys of
// tests/api/platform_fixtures.hpp and appended through the real write path (the service
// in-process, over HTTP), verify with a config that holds the database URL and the public
// keys alone. Then a compromised host's forgeries: a receipt and its event inserted as the
// tables' owner, one WeChat v3 notice signed with a key the platform never had (its body in
// receipt_bodies), one Alipay form changed after signing (its body inline), with the chain
// recomputed over them. Plain `audit` passes (exit 0); with --platform-signatures, with or
// without a checkpoint, each forged event is named and audit exits 1.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "api/channels/alipay_form.hpp"
#include "api/channels/platform_crypto.hpp"
#include "api/cli/platform_audit.hpp"
#include "ledger/checkpoint.hpp"
#include "support/serve_process.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"
#include "tests/api/platform_fixtures.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using testing::HttpClient;
using testing::TestDatabase;
using testing::TestService;

// RFC 8032's first test key (tests/ledger/checkpoint_test.cpp).
constexpr const char* kSigningKeyPem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
    "-----END PRIVATE KEY-----\n";

// Runs `command_line` through a shell: its stdout and stderr, its exit status.
std::string RunCommand(const std::string& command_line, int* exit_status) {
    std::string out;
    FILE* pipe = popen((command_line + " 2>&1").c_str(), "r");
    char buffer[4096];
    while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    const int status = pclose(pipe);
    *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
    std::ofstream{path, std::ios::binary} << text;
    ASSERT_EQ(chmod(path.c_str(), mode), 0) << path;
}

class PlatformAuditPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        dir_ = testing::MakeTestTmpDir("payledger-platform-audit.");
        connection_ = db_.Connect();
        // The genuine notices, through the service.
        TestService service{config_};
        HttpClient client{service.port()};
        for (const char* order : {"ORD-W", "ORD-A", "ORD-F1", "ORD-F2"}) {
            ASSERT_EQ(service.CreateOrder(client, order, "acct-1", 1999).status, 201);
        }
        Post(client, BuildNotice(config_, {.channel = "wechat_v3", .out_trade_no = "ORD-W"}));
        Post(client, BuildNotice(config_, {.channel = "alipay", .out_trade_no = "ORD-A"}));
        service.Stop();
        ASSERT_EQ(db_.Scalar("SELECT count(*) FROM ledger_events WHERE source IN "
                             "('wechat_v3', 'alipay')"),
                  "2");

        // An auditor's config: the database and the platforms' public keys, no secret.
        WriteFile(dir_ + "/wechat.pem", PublicKeyPem(testing::TestPlatformKey(0).Public()), 0644);
        WriteFile(dir_ + "/alipay.pem", PublicKeyPem(testing::TestPlatformKey(2).Public()), 0644);
        WriteFile(
            dir_ + "/auditor.json",
            json{{"database_url", db_.url()},
                 {"wechat_v3", {{"platform_public_keys", {{testing::kV3Serial, "wechat.pem"}}}}},
                 {"alipay", {{"alipay_public_key", "alipay.pem"}}}}
                .dump(),
            0600);
        WriteFile(
            dir_ + "/alipay-only.json",
            json{{"database_url", db_.url()}, {"alipay", {{"alipay_public_key", "alipay.pem"}}}}
                .dump(),
            0600);
    }

    void TearDown() override {
        if (!dir_.empty()) std::filesystem::remove_all(dir_);
    }

    static void Post(HttpClient& client, const SimulatedNotice& notice) {
        const std::map<std::string, std::string> headers(notice.headers.begin(),
                                                         notice.headers.end());
        const testing::HttpResult result = client.Post(notice.target, notice.body, headers);
        ASSERT_TRUE(result.status == 200 || result.status == 204) << result.body;
    }

    // `payledger audit <arguments>` with the auditor's config.
    std::string Audit(const std::string& arguments, int* status,
                      const std::string& config = "auditor.json") {
        return RunCommand(std::string("'") + PAYLEDGER_BINARY_PATH + "' audit --config '" + dir_ +
                              "/" + config + "' " + arguments,
                          status);
    }

    // What a compromised host's owner of the tables can do: a receipt of `source` and the
    // PAYMENT_SUCCEEDED event of `event_source` it appended, inserted with the triggers off,
    // the body stored once or inline, and the receipt's chain computed by the schema's own
    // functions, as the writer would have. Returns the receipt's id and the event's seq.
    std::pair<std::string, std::string> Forge(const std::string& source,
                                              const std::string& out_trade_no,
                                              const SimulatedNotice& notice, bool stored_once,
                                              const std::string& event_source = {}) {
        json headers = json::object();
        for (const auto& [name, value] : notice.headers) headers[name] = value;
        pqxx::work tx{*connection_};
        for (const char* table : {"callback_receipts", "ledger_events", "receipt_bodies"}) {
            tx.exec(std::string("ALTER TABLE ") + table + " DISABLE TRIGGER USER");
        }
        const pqxx::row ids = tx.exec_params1(
            "SELECT nextval('callback_receipts_id_seq'), nextval('ledger_events_seq_seq')");
        const auto id = ids[0].as<std::int64_t>();
        const auto seq = ids[1].as<std::int64_t>();
        tx.exec_params(
            "INSERT INTO ledger_events (seq, out_trade_no, event_type, source, account_id, "
            "amount, currency, transaction_id, occurred_at, receipt_id) VALUES ($1, $2, "
            "'PAYMENT_SUCCEEDED', $3, 'acct-1', 1999, 'CNY', $4, now(), $5)",
            seq, out_trade_no, event_source.empty() ? source : event_source,
            "FORGED-" + out_trade_no, id);
        if (stored_once) {
            tx.exec_params(
                "INSERT INTO receipt_bodies VALUES (sha256(convert_to($1, 'UTF8')), "
                "convert_to($1, 'UTF8')) ON CONFLICT DO NOTHING",
                notice.body);
        }
        tx.exec_params(
            "INSERT INTO callback_receipts (id, source, received_at, peer, headers, body, "
            "body_sha256, outcome, seq, out_trade_no, chain) VALUES ($1, $2, now(), "
            "'10.0.0.9:40000', $3::jsonb, CASE WHEN $4 THEN NULL ELSE convert_to($5, 'UTF8') END, "
            "CASE WHEN $4 THEN sha256(convert_to($5, 'UTF8')) END, 'appended', $6, $7, "
            "decode(repeat('00', 32), 'hex'))",
            id, source, headers.dump(), stored_once, notice.body, seq, out_trade_no);
        tx.exec_params(
            "UPDATE callback_receipts AS c SET chain = payledger_chain_step("
            "(SELECT p.chain FROM callback_receipts AS p WHERE p.id < c.id "
            "ORDER BY p.id DESC LIMIT 1), "
            "(SELECT payledger_receipt_line(r, e) FROM callback_receipts AS r "
            "JOIN ledger_events AS e ON e.receipt_id = r.id WHERE r.id = c.id)) WHERE c.id = $1",
            id);
        for (const char* table : {"callback_receipts", "ledger_events", "receipt_bodies"}) {
            tx.exec(std::string("ALTER TABLE ") + table + " ENABLE TRIGGER USER");
        }
        tx.commit();
        return {std::to_string(id), std::to_string(seq)};
    }

    TestDatabase db_;
    Config config_ = testing::WithPlatforms(testing::TestConfig(db_.url()));
    std::string dir_;
    std::unique_ptr<pqxx::connection> connection_;
};

TEST_F(PlatformAuditPgTest, GenuineNoticesVerifyWithThePublicKeysAlone) {
    int status = -1;
    const std::string out = Audit("--platform-signatures", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(out.rfind("audit receipts=6 events=6 head=", 0), 0u) << out;
    EXPECT_EQ(out.substr(out.size() - 4), " OK\n") << out;
}

TEST_F(PlatformAuditPgTest, AnEventWithoutAKeyToVerifyItIsReported) {
    // Without wechat_v3's key nothing proves the WeChat payment: it is named, not skipped.
    const std::string seq = db_.Scalar("SELECT seq FROM ledger_events WHERE source = 'wechat_v3'");
    const std::string receipt =
        db_.Scalar("SELECT receipt_id FROM ledger_events WHERE source = 'wechat_v3'");
    int status = -1;
    const std::string out = Audit("--platform-signatures", &status, "alipay-only.json");
    EXPECT_EQ(status, 1) << out;
    EXPECT_NE(out.find(" BROKEN\n  event " + seq + " not signed by the platform: receipt " +
                       receipt + " (wechat_v3): Wechatpay-Serial " + testing::kV3Serial +
                       " names no key of wechat_v3.platform_public_keys\n"),
              std::string::npos)
        << out;
}

TEST_F(PlatformAuditPgTest, ForgedEventsPassThePlainAuditAndAreNamedWithPlatformSignatures) {
    // A WeChat v3 notice the platform never signed: signed with a stranger's key, under the
    // platform key's serial. Stored once, as the writer stores bodies now.
    Config stranger = config_;
    stranger.wechat_v3->simulate_private_key = testing::TestPlatformKey(3);
    const auto [wechat_receipt, wechat_seq] =
        Forge("wechat_v3", "ORD-F1",
              BuildNotice(stranger, {.channel = "wechat_v3", .out_trade_no = "ORD-F1"}),
              /*stored_once=*/true);
    // A genuine Alipay signature over a form whose amount was changed afterwards. Inline, as
    // receipts written before bodies were stored once.
    SimulatedNotice alipay =
        BuildNotice(config_, {.channel = "alipay", .out_trade_no = "ORD-F2", .amount = 1});
    const std::size_t amount = alipay.body.find("total_amount=0.01");
    ASSERT_NE(amount, std::string::npos) << alipay.body;
    alipay.body.replace(amount, 17, "total_amount=19.99");
    const auto [alipay_receipt, alipay_seq] = Forge("alipay", "ORD-F2", alipay, false);

    int status = -1;
    std::string out = Audit("", &status);
    EXPECT_EQ(status, 0) << out;  // The chain holds: the forger recomputed it.
    EXPECT_EQ(out.rfind("audit receipts=8 events=8 head=" + alipay_receipt + ":", 0), 0u) << out;

    const std::string lines =
        "  event " + wechat_seq + " not signed by the platform: receipt " + wechat_receipt +
        " (wechat_v3): Wechatpay-Signature does not verify with the platform key " +
        testing::kV3Serial + "\n  event " + alipay_seq + " not signed by the platform: receipt " +
        alipay_receipt + " (alipay): sign does not verify with the Alipay public key\n";
    out = Audit("--platform-signatures", &status);
    EXPECT_EQ(status, 1) << out;
    EXPECT_EQ(out.rfind("audit receipts=8 events=8 head=" + alipay_receipt + ":", 0), 0u) << out;
    EXPECT_EQ(out.substr(out.find(" BROKEN\n") + 8), lines) << out;

    // With a checkpoint of the forged head: it holds, the signatures still do not.
    const ledger::Ed25519Key signer = ledger::Ed25519Key::PrivateFromPem(kSigningKeyPem);
    {
        pqxx::read_transaction tx{*connection_};
        WriteFile(dir_ + "/checkpoint.json", ledger::CheckpointJson(ledger::SignHead(tx, signer)),
                  0644);
    }
    WriteFile(dir_ + "/checkpoint.pem", signer.PublicPem(), 0644);
    const std::string checkpoint =
        "--checkpoint '" + dir_ + "/checkpoint.json' --public-key '" + dir_ + "/checkpoint.pem'";
    out = Audit(checkpoint, &status);
    EXPECT_EQ(status, 0) << out;
    out = Audit(checkpoint + " --platform-signatures", &status);
    EXPECT_EQ(status, 1) << out;
    EXPECT_EQ(out.substr(out.find(" BROKEN\n") + 8), lines) << out;
}

TEST_F(PlatformAuditPgTest, AnEventWhoseReceiptCameThroughAnotherChannelIsReported) {
    // An event that claims WeChat v3 with a generic receipt: the generic secret is on the
    // host, so nothing the platform signed stands behind it.
    const auto [receipt, seq] =
        Forge("generic", "ORD-F1",
              BuildNotice(config_, {.channel = "wechat_v3", .out_trade_no = "ORD-F1"}),
              /*stored_once=*/true, "wechat_v3");
    int status = -1;
    const std::string out = Audit("--platform-signatures", &status);
    EXPECT_EQ(status, 1) << out;
    EXPECT_NE(out.find("\n  event " + seq + " not signed by the platform: receipt " + receipt +
                       " (generic): the event names wechat_v3, its receipt came through "
                       "generic\n"),
              std::string::npos)
        << out;
}

TEST_F(PlatformAuditPgTest, ReadsPastAPageOfReceipts) {
    // 600 more appended Alipay receipts, each the genuine notice's stored bytes, one of them
    // (the 500th) with one byte changed; read in pages of 256, every one is checked.
    pqxx::work tx{*connection_};
    for (const char* table : {"callback_receipts", "ledger_events", "receipt_bodies"}) {
        tx.exec(std::string("ALTER TABLE ") + table + " DISABLE TRIGGER USER");
    }
    tx.exec(
        "CREATE TEMP TABLE genuine AS SELECT r.headers, "
        "coalesce(r.body, (SELECT b.body FROM receipt_bodies AS b "
        "WHERE b.body_sha256 = r.body_sha256)) AS body "
        "FROM callback_receipts AS r WHERE r.source = 'alipay'; "
        "CREATE TEMP TABLE copies AS SELECT i, nextval('callback_receipts_id_seq') AS id, "
        "nextval('ledger_events_seq_seq') AS seq, "
        "CASE WHEN i = 500 THEN overlay(g.body placing '9' from position('total_amount' in "
        "g.body) + 13) ELSE g.body END AS body, g.headers "
        "FROM generate_series(1, 600) AS i, genuine AS g ORDER BY i; "
        "INSERT INTO ledger_events (seq, out_trade_no, event_type, source, account_id, amount, "
        "currency, transaction_id, occurred_at, receipt_id) SELECT seq, 'MANY-' || i, "
        "'PAYMENT_SUCCEEDED', 'alipay', 'acct-1', 1999, 'CNY', 'TX-MANY-' || i, now(), id "
        "FROM copies; "
        "INSERT INTO callback_receipts (id, source, received_at, peer, headers, body, outcome, "
        "seq, out_trade_no, chain) SELECT id, 'alipay', now(), '10.0.0.9:40000', headers, body, "
        "'appended', seq, 'MANY-' || i, decode(repeat('00', 32), 'hex') FROM copies");
    for (const char* table : {"callback_receipts", "ledger_events", "receipt_bodies"}) {
        tx.exec(std::string("ALTER TABLE ") + table + " ENABLE TRIGGER USER");
    }
    const pqxx::row changed = tx.exec1("SELECT id, seq FROM copies WHERE i = 500");
    // Their chain, receipt after receipt, as the writer would have made it.
    tx.exec(
        "ALTER TABLE callback_receipts DISABLE TRIGGER USER; "
        "DO $$ DECLARE x record; BEGIN "
        "FOR x IN SELECT id FROM copies ORDER BY id LOOP "
        "UPDATE callback_receipts AS c SET chain = payledger_chain_step("
        "(SELECT p.chain FROM callback_receipts AS p WHERE p.id < c.id "
        "ORDER BY p.id DESC LIMIT 1), "
        "(SELECT payledger_receipt_line(r, e) FROM callback_receipts AS r "
        "JOIN ledger_events AS e ON e.receipt_id = r.id WHERE r.id = c.id)) WHERE c.id = x.id; "
        "END LOOP; END $$; "
        "ALTER TABLE callback_receipts ENABLE TRIGGER USER");
    tx.commit();

    const ledger::AuditReport report =
        ledger::Audit(db_.url(), nullptr, nullptr, {},
                      PlatformSignaturesCheck({.wechat_v3 = config_.wechat_v3->platform_public_keys,
                                               .alipay = config_.alipay->alipay_public_key}));
    EXPECT_EQ(report.receipts, 606);
    EXPECT_EQ(report.break_count, 1);
    ASSERT_EQ(report.breaks.size(), 1u) << ledger::FormatAuditReport(report);
    EXPECT_EQ(report.breaks[0], "event " + changed[1].as<std::string>() +
                                    " not signed by the platform: receipt " +
                                    changed[0].as<std::string>() +
                                    " (alipay): sign does not verify with the Alipay public key")
        << ledger::FormatAuditReport(report);
}

TEST(PlatformSignatureProblemTest, NamesWhatIsWrongWithAStoredNotice) {
    Config config = testing::WithPlatforms(testing::TestConfig("postgresql://unused"));
    const PlatformKeys keys{.wechat_v3 = config.wechat_v3->platform_public_keys,
                            .alipay = config.alipay->alipay_public_key};
    const SimulatedNotice wechat =
        BuildNotice(config, {.channel = "wechat_v3", .out_trade_no = "ORD-1"});
    json headers = json::object();
    for (const auto& [name, value] : wechat.headers) headers[name] = value;
    EXPECT_EQ(
        PlatformSignatureProblem(keys, projections::Source::kWechatV3, headers.dump(), wechat.body),
        std::nullopt);
    // Signed long ago: no time window applies.
    const SimulatedNotice old = BuildNotice(
        config, {.channel = "wechat_v3", .out_trade_no = "ORD-1", .unix_seconds = 1'700'000'000});
    json old_headers = json::object();
    for (const auto& [name, value] : old.headers) old_headers[name] = value;
    EXPECT_EQ(PlatformSignatureProblem(keys, projections::Source::kWechatV3, old_headers.dump(),
                                       old.body),
              std::nullopt);
    // Header names stored in another case still count.
    json lower = json::object();
    for (const auto& [name, value] : wechat.headers) {
        std::string key = name;
        for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        lower[key] = value;
    }
    EXPECT_EQ(
        PlatformSignatureProblem(keys, projections::Source::kWechatV3, lower.dump(), wechat.body),
        std::nullopt);
    json missing = headers;
    missing.erase("Wechatpay-Nonce");
    EXPECT_EQ(
        PlatformSignatureProblem(keys, projections::Source::kWechatV3, missing.dump(), wechat.body),
        "the receipt keeps no Wechatpay-Timestamp, -Nonce, -Serial and -Signature");
    EXPECT_EQ(PlatformSignatureProblem(keys, projections::Source::kWechatV3, headers.dump(),
                                       wechat.body + " "),
              "Wechatpay-Signature does not verify with the platform key " +
                  std::string(testing::kV3Serial));
    const SimulatedNotice alipay =
        BuildNotice(config, {.channel = "alipay", .out_trade_no = "ORD-1"});
    EXPECT_EQ(PlatformSignatureProblem(keys, projections::Source::kAlipay, "{}", alipay.body),
              std::nullopt);
    EXPECT_EQ(PlatformSignatureProblem({}, projections::Source::kAlipay, "{}", alipay.body),
              "no alipay.alipay_public_key is configured");
    EXPECT_EQ(PlatformSignatureProblem(keys, projections::Source::kGeneric, "{}", "{}"),
              "it came through generic, which the platform does not sign");
}

}  // namespace
}  // namespace payledger::api
