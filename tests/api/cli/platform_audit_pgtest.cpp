// `payledger audit --platform-signatures` (api/cli/platform_audit.hpp), run as a user runs the
// binary: genuine WeChat Pay v3 and Alipay notices, signed with the test platform keys of
// tests/api/channels/platform_fixtures.hpp and appended through the real write path (the service
// in-process, over HTTP), verify with a config that holds the database URL and the public
// keys alone. Then a compromised host's forgeries: a receipt and its event inserted as the
// tables' owner, one WeChat v3 notice signed with a key the platform never had (its body in
// receipt_bodies), one Alipay form changed after signing (its body inline), with the chain
// recomputed over them. Plain `audit` passes (exit 0); with --platform-signatures, with or
// without a checkpoint, each forged event is named and audit exits 1. A valid signature over
// some genuine notice proves nothing of the event it is attached to, so forgeries that carry
// genuine notices are named too: a notice of another order or amount (Alipay; WeChat v3 with
// the merchant's APIv3 key), a WeChat v3 notice of another kind, one notice behind two events.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <vector>

#include "api/channels/alipay_channel.hpp"
#include "api/channels/alipay_form.hpp"
#include "api/channels/platform_crypto.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "api/cli/platform_audit.hpp"
#include "ledger/integrity/checkpoint.hpp"
#include "ledger/write/writer.hpp"
#include "projections/validate.hpp"
#include "support/serve_process.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"
#include "tests/api/channels/platform_fixtures.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::EventType;
using testing::HttpClient;
using testing::TestDatabase;
using testing::TestService;

// RFC 8032's first test key (tests/ledger/integrity/checkpoint_test.cpp).
constexpr const char* kSigningKeyPem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
    "-----END PRIVATE KEY-----\n";

// Runs `command_line` through a shell: its stdout, its exit status.
std::string RunCommand(const std::string& command_line, int* exit_status) {
    std::string out;
    FILE* pipe = popen(command_line.c_str(), "r");
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

std::string ReadFile(const std::string& path) {
    std::ifstream file{path, std::ios::binary};
    return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// The event a forger writes beside a receipt.
struct ForgedEvent {
    std::string event_type = "PAYMENT_SUCCEEDED";
    std::string source{};  // Empty: the receipt's.
    std::int64_t amount = 1999;
    std::string transaction_id{};  // Empty: "FORGED-<out_trade_no>".
    std::string occurred_at = "now";
    std::string data = "{}";
};

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
        // An auditor with the merchant's cooperation: the APIv3 key too.
        WriteFile(dir_ + "/with-api-v3-key.json",
                  json{{"database_url", db_.url()},
                       {"wechat_v3",
                        {{"platform_public_keys", {{testing::kV3Serial, "wechat.pem"}}},
                         {"api_v3_key", config_.wechat_v3->api_v3_key}}},
                       {"alipay", {{"alipay_public_key", "alipay.pem"}}}}
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

    // `payledger audit <arguments>` with the auditor's config: its stdout; its stderr in
    // stderr_.
    std::string Audit(const std::string& arguments, int* status,
                      const std::string& config = "auditor.json") {
        std::string out =
            RunCommand(std::string("'") + PAYLEDGER_BINARY_PATH + "' audit --config '" + dir_ +
                           "/" + config + "' " + arguments + " 2>'" + dir_ + "/stderr'",
                       status);
        stderr_ = ReadFile(dir_ + "/stderr");
        return out;
    }

    // The breaks `audit` listed (its output after the first line).
    static std::string Breaks(const std::string& out) {
        const std::size_t end = out.find('\n');
        return end == std::string::npos ? std::string{} : out.substr(end + 1);
    }

    // The stored headers and body of the receipt that appended the event of `source`.
    SimulatedNotice StoredNotice(const std::string& source) {
        const std::string receipt =
            db_.Scalar("SELECT receipt_id FROM ledger_events WHERE source = '" + source + "'");
        SimulatedNotice notice;
        pqxx::read_transaction tx{*connection_};
        const pqxx::row row = tx.exec1(
            "SELECT r.headers::text, coalesce(r.body, (SELECT b.body FROM receipt_bodies AS b "
            "WHERE b.body_sha256 = r.body_sha256)) FROM callback_receipts AS r WHERE r.id = " +
            receipt);
        const json headers = json::parse(row[0].as<std::string>());
        for (const auto& [name, value] : headers.items()) {
            notice.headers.emplace_back(name, value.get<std::string>());
        }
        notice.body = pqxx::binarystring(row[1]).str();
        return notice;
    }

    // What a compromised host's owner of the tables can do: a receipt of `source` and the
    // PAYMENT_SUCCEEDED event of `event_source` it appended, inserted with the triggers off,
    // the body stored once or inline, and the receipt's chain computed by the schema's own
    // functions, as the writer would have. Returns the receipt's id and the event's seq.
    std::pair<std::string, std::string> Forge(const std::string& source,
                                              const std::string& out_trade_no,
                                              const SimulatedNotice& notice, bool stored_once,
                                              const ForgedEvent& event = {}) {
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
            "amount, currency, transaction_id, occurred_at, receipt_id, data) VALUES ($1, $2, "
            "$3, $4, 'acct-1', $5, 'CNY', $6, $7::timestamptz, $8, $9::jsonb)",
            seq, out_trade_no, event.event_type, event.source.empty() ? source : event.source,
            event.amount,
            event.transaction_id.empty() ? "FORGED-" + out_trade_no : event.transaction_id,
            event.occurred_at, id, event.data);
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
    std::string stderr_;
    std::unique_ptr<pqxx::connection> connection_;
};

TEST_F(PlatformAuditPgTest, GenuineNoticesVerifyWithThePublicKeysAlone) {
    int status = -1;
    std::string out = Audit("--platform-signatures", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(out.rfind("audit receipts=6 events=6 head=", 0), 0u) << out;
    EXPECT_EQ(out.substr(out.size() - 4), " OK\n") << out;
    // What was checked, on stderr: without the APIv3 key, not the encrypted resource.
    EXPECT_NE(stderr_.find("platform signatures: alipay: 1 receipts: the signature, and "
                           "out_trade_no, event_type, amount, currency, transaction_id, "
                           "occurred_at and notify_id of the signed notice against the event\n"),
              std::string::npos)
        << stderr_;
    EXPECT_NE(stderr_.find("platform signatures: wechat_v3: 1 receipts: the signature, and "
                           "event_type, id, create_time and summary of the signed envelope "
                           "against the event; not its encrypted out_trade_no, amount and "
                           "transaction_id (no wechat_v3.api_v3_key)\n"),
              std::string::npos)
        << stderr_;
    // With it, the decrypted resource matches its event too.
    out = Audit("--platform-signatures", &status, "with-api-v3-key.json");
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(out.substr(out.size() - 4), " OK\n") << out;
    EXPECT_NE(stderr_.find("; with wechat_v3.api_v3_key, out_trade_no, amount, currency, "
                           "transaction_id and occurred_at of the decrypted resource too\n"),
              std::string::npos)
        << stderr_;
    // Plain audit says nothing of platform signatures.
    out = Audit("", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(stderr_, "");
}

TEST_F(PlatformAuditPgTest, AnApiV3KeyOfTheWrongSizeIsAConfigError) {
    WriteFile(dir_ + "/short-key.json",
              json{{"database_url", db_.url()},
                   {"wechat_v3",
                    {{"platform_public_keys", {{testing::kV3Serial, "wechat.pem"}}},
                     {"api_v3_key", "short"}}}}
                  .dump(),
              0600);
    int status = -1;
    const std::string out = Audit("--platform-signatures", &status, "short-key.json");
    EXPECT_EQ(status, 2) << out;
    EXPECT_NE(stderr_.find("wechat_v3.api_v3_key: must be exactly 32 bytes"), std::string::npos)
        << stderr_;
}

TEST_F(PlatformAuditPgTest, GenuineRefundsAndClosesMatchTheirEvents) {
    {
        TestService service{config_};
        HttpClient client{service.port()};
        Post(client, BuildNotice(config_, {.channel = "alipay",
                                           .out_trade_no = "ORD-A",
                                           .kind = "refund",
                                           .amount = 500,
                                           .order_amount = 1999}));
        Post(client, BuildNotice(config_, {.channel = "wechat_v3",
                                           .out_trade_no = "ORD-W",
                                           .kind = "refund",
                                           .amount = 700,
                                           .order_amount = 1999}));
        Post(client, BuildNotice(config_,
                                 {.channel = "alipay", .out_trade_no = "ORD-F1", .kind = "close"}));
        service.Stop();
    }
    ASSERT_EQ(db_.Scalar("SELECT string_agg(event_type || ' ' || source, ',' ORDER BY seq) "
                         "FROM ledger_events WHERE event_type <> 'ORDER_CREATED'"),
              "PAYMENT_SUCCEEDED wechat_v3,PAYMENT_SUCCEEDED alipay,REFUND_SUCCEEDED alipay,"
              "REFUND_SUCCEEDED wechat_v3,PAYMENT_CLOSED alipay");
    for (const char* config : {"auditor.json", "with-api-v3-key.json"}) {
        int status = -1;
        const std::string out = Audit("--platform-signatures", &status, config);
        EXPECT_EQ(status, 0) << config << "\n" << out;
        EXPECT_EQ(out.rfind("audit receipts=9 events=9 head=", 0), 0u) << out;
        EXPECT_EQ(out.substr(out.size() - 4), " OK\n") << out;
    }
}

TEST_F(PlatformAuditPgTest, AGenuineAlipayNoticeOfAnotherOrderOrAmountIsNamed) {
    // Notices the platform really signed (with its key) but that were never delivered: any
    // auditor, and so any host, can read such genuine notices. ORD-F2's behind an event of
    // ORD-F1; ORD-F2's for 0.01 behind an event of 19.99. Their signatures verify.
    const auto [other_receipt, other_seq] = Forge(
        "alipay", "ORD-F1", BuildNotice(config_, {.channel = "alipay", .out_trade_no = "ORD-F2"}),
        /*stored_once=*/true);
    const auto [amount_receipt, amount_seq] =
        Forge("alipay", "ORD-F2",
              BuildNotice(config_, {.channel = "alipay", .out_trade_no = "ORD-F2", .amount = 1}),
              /*stored_once=*/false);
    int status = -1;
    std::string out = Audit("", &status);
    EXPECT_EQ(status, 0) << out;  // The chain holds.
    out = Audit("--platform-signatures", &status);
    EXPECT_EQ(status, 1) << out;
    EXPECT_EQ(Breaks(out),
              "  event " + other_seq + " not signed by the platform: receipt " + other_receipt +
                  " (alipay): the signed notice says out_trade_no ORD-F2, the "
                  "event ORD-F1\n  event " +
                  amount_seq + " not signed by the platform: receipt " + amount_receipt +
                  " (alipay): the signed notice says amount 1, the event 1999\n")
        << out;
}

TEST_F(PlatformAuditPgTest, OneGenuineNoticeBehindTwoEventsIsNamed) {
    const std::string wechat_seq =
        db_.Scalar("SELECT seq FROM ledger_events WHERE source = 'wechat_v3'");
    const std::string alipay_seq =
        db_.Scalar("SELECT seq FROM ledger_events WHERE source = 'alipay'");
    // ORD-W's WeChat v3 notice, bytes and headers as stored, behind a payment of ORD-F1 whose
    // data copies ORD-W's: without the APIv3 key nothing else tells them apart.
    const auto [wechat_receipt, forged_wechat_seq] =
        Forge("wechat_v3", "ORD-F1", StoredNotice("wechat_v3"), /*stored_once=*/true,
              {.data = db_.Scalar("SELECT data::text FROM ledger_events WHERE source = "
                                  "'wechat_v3'")});
    // ORD-A's Alipay notice with its first field moved to the end: other bytes, the same
    // signed fields (the signature is over the decoded, sorted fields), the same notify_id.
    SimulatedNotice alipay = StoredNotice("alipay");
    const std::size_t first_end = alipay.body.find('&');
    ASSERT_NE(first_end, std::string::npos);
    alipay.body = alipay.body.substr(first_end + 1) + "&" + alipay.body.substr(0, first_end);
    const auto [alipay_receipt, forged_alipay_seq] =
        Forge("alipay", "ORD-F2", alipay, /*stored_once=*/false,
              {.data = db_.Scalar("SELECT data::text FROM ledger_events WHERE source = 'alipay'")});
    int status = -1;
    std::string out = Audit("", &status);
    EXPECT_EQ(status, 0) << out;
    out = Audit("--platform-signatures", &status);
    EXPECT_EQ(status, 1) << out;
    EXPECT_EQ(Breaks(out),
              "  event " + forged_alipay_seq + " not signed by the platform: receipt " +
                  alipay_receipt +
                  " (alipay): the signed notice says out_trade_no ORD-A, the event ORD-F2\n"
                  "  event " +
                  forged_wechat_seq + " not signed by the platform: receipt " + wechat_receipt +
                  " (wechat_v3): the same signed notice backs event " + wechat_seq +
                  "\n"
                  "  event " +
                  forged_alipay_seq + " not signed by the platform: receipt " + alipay_receipt +
                  " (alipay): the same signed notice backs event " + alipay_seq + "\n")
        << out;
    EXPECT_NE(stderr_.find("behind several events: 2 later events\n"), std::string::npos)
        << stderr_;
}

TEST_F(PlatformAuditPgTest, AWechatV3NoticeOfAnotherKindIsNamed) {
    // A genuine refund notice of ORD-F1 behind a payment of ORD-F1: its event_type is in plain
    // text, so no key is needed to see it.
    const auto [receipt, seq] = Forge("wechat_v3", "ORD-F1",
                                      BuildNotice(config_, {.channel = "wechat_v3",
                                                            .out_trade_no = "ORD-F1",
                                                            .kind = "refund",
                                                            .amount = 500,
                                                            .order_amount = 1999}),
                                      /*stored_once=*/true);
    int status = -1;
    const std::string out = Audit("--platform-signatures", &status);
    EXPECT_EQ(status, 1) << out;
    EXPECT_EQ(Breaks(out), "  event " + seq + " not signed by the platform: receipt " + receipt +
                               " (wechat_v3): the signed notice says event_type REFUND.SUCCESS, "
                               "the event PAYMENT_SUCCEEDED\n")
        << out;
}

TEST_F(PlatformAuditPgTest, WithTheApiV3KeyAWechatV3NoticeOfAnotherOrderIsNamed) {
    // A genuine, never delivered payment notice of ORD-F2 behind a payment of ORD-F1, its data
    // copying the envelope's plain fields: its order is inside the encrypted resource.
    const SimulatedNotice notice =
        BuildNotice(config_, {.channel = "wechat_v3", .out_trade_no = "ORD-F2"});
    const auto [receipt, seq] =
        Forge("wechat_v3", "ORD-F1", notice, /*stored_once=*/true,
              {.data = WechatV3EnvelopeData(json::parse(notice.body)).dump()});
    int status = -1;
    // Without the APIv3 key an outside auditor cannot tell, and says what it did not check.
    std::string out = Audit("--platform-signatures", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(stderr_.find("(no wechat_v3.api_v3_key)"), std::string::npos) << stderr_;
    out = Audit("--platform-signatures", &status, "with-api-v3-key.json");
    EXPECT_EQ(status, 1) << out;
    EXPECT_EQ(Breaks(out), "  event " + seq + " not signed by the platform: receipt " + receipt +
                               " (wechat_v3): the signed notice says out_trade_no ORD-F2, the "
                               "event ORD-F1\n")
        << out;
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
              /*stored_once=*/true, {.source = "wechat_v3"});
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
    // 600 more orders paid through Alipay, written as the channel writes them: each notice
    // genuine and its event the one it records, but the 500th event names another trade
    // number (a host that appended what its notice does not say). Read in pages of 256, every
    // one is checked.
    constexpr int kPaid = 600;
    constexpr int kForged = 500;
    constexpr projections::TimeMicros kReceivedAt = 1'795'941'000'000'000;
    std::vector<ledger::Delivery> orders;
    std::vector<ledger::Delivery> payments;
    std::string genuine_trade_no;
    for (int i = 1; i <= kPaid; ++i) {
        const std::string order = "MANY-" + std::to_string(i);
        orders.push_back({.receipt = {.source = projections::Source::kApi,
                                      .received_at = kReceivedAt,
                                      .peer = "127.0.0.1:9",
                                      .body = "order " + order,
                                      .out_trade_no = order},
                          .event = projections::Event{.out_trade_no = order,
                                                      .event_type = EventType::kOrderCreated,
                                                      .source = projections::Source::kApi,
                                                      .account_id = "acct-1",
                                                      .amount = 1999,
                                                      .currency = "CNY",
                                                      .occurred_at = kReceivedAt}});
        const SimulatedNotice notice = BuildNotice(
            config_, {.channel = "alipay", .out_trade_no = order, .unix_seconds = 1'795'940'000});
        const Checked<PlatformFields> fields = DecodeForm(notice.body);
        ASSERT_TRUE(fields.ok());
        Checked<NoticeEvent> recorded = AlipayNoticeEvent(*fields, kReceivedAt);
        ASSERT_TRUE(recorded.ok()) << recorded.refusal().message;
        if (i == kForged) {
            genuine_trade_no = *recorded->event.transaction_id;
            recorded->event.transaction_id = "FORGED-500";
        }
        payments.push_back({.receipt = {.source = projections::Source::kAlipay,
                                        .received_at = kReceivedAt,
                                        .peer = "10.0.0.9:40000",
                                        .body = notice.body,
                                        .out_trade_no = order},
                            .event = std::move(recorded->event)});
    }
    (void)ledger::WriteBatch(*connection_, orders);
    const std::vector<ledger::DeliveryResult> results = ledger::WriteBatch(*connection_, payments);
    ASSERT_EQ(results.at(kForged - 1).outcome, projections::Outcome::kAppended);
    const std::string seq = std::to_string(results[kForged - 1].seq);
    const std::string receipt =
        db_.Scalar("SELECT receipt_id FROM ledger_events WHERE seq = " + seq);

    const ledger::AuditReport report =
        ledger::Audit(db_.url(), nullptr, nullptr, {},
                      PlatformSignaturesCheck({.wechat_v3 = config_.wechat_v3->platform_public_keys,
                                               .alipay = config_.alipay->alipay_public_key}));
    EXPECT_EQ(report.receipts, 6 + 2 * kPaid);
    EXPECT_EQ(report.break_count, 1);
    ASSERT_EQ(report.breaks.size(), 1u) << ledger::FormatAuditReport(report);
    EXPECT_EQ(report.breaks[0], "event " + seq + " not signed by the platform: receipt " + receipt +
                                    " (alipay): the signed notice says transaction_id " +
                                    genuine_trade_no + ", the event FORGED-500")
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

TEST(NoticeEventProblemTest, ComparesTheEventWithWhatTheSignedNoticeRecords) {
    Config config = testing::WithPlatforms(testing::TestConfig("postgresql://unused"));
    PlatformKeys keys{.wechat_v3 = config.wechat_v3->platform_public_keys,
                      .alipay = config.alipay->alipay_public_key};
    constexpr std::int64_t kSignedAt = 1'795'940'000;
    constexpr projections::TimeMicros kReceivedAt = (kSignedAt + 2) * 1'000'000;
    const auto alipay = projections::Source::kAlipay;

    // Alipay: the event the channel appends from a notice matches it, field by field.
    const SimulatedNotice payment = BuildNotice(
        config, {.channel = "alipay", .out_trade_no = "ORD-1", .unix_seconds = kSignedAt});
    const Checked<PlatformFields> fields = DecodeForm(payment.body);
    ASSERT_TRUE(fields.ok());
    const Checked<NoticeEvent> recorded = AlipayNoticeEvent(*fields, kReceivedAt);
    ASSERT_TRUE(recorded.ok());
    const projections::Event& event = recorded->event;
    EXPECT_EQ(NoticeEventProblem(keys, alipay, kReceivedAt, payment.body, event), std::nullopt);
    projections::Event changed = event;
    changed.occurred_at += 1'000'000;
    EXPECT_EQ(NoticeEventProblem(keys, alipay, kReceivedAt, payment.body, changed),
              "the signed notice says occurred_at " +
                  projections::FormatRfc3339(kSignedAt * 1'000'000) + ", the event " +
                  projections::FormatRfc3339((kSignedAt + 1) * 1'000'000));
    changed = event;
    changed.currency = "USD";
    EXPECT_EQ(NoticeEventProblem(keys, alipay, kReceivedAt, payment.body, changed),
              "the signed notice says currency CNY, the event USD");
    changed = event;
    changed.data = "{}";
    EXPECT_EQ(NoticeEventProblem(keys, alipay, kReceivedAt, payment.body, changed),
              "the signed notice says notify_id " + std::string(FieldOr(*fields, "notify_id")) +
                  ", the event none");
    const SimulatedNotice close =
        BuildNotice(config, {.channel = "alipay", .out_trade_no = "ORD-1", .kind = "close"});
    EXPECT_EQ(NoticeEventProblem(keys, alipay, kReceivedAt, close.body, event),
              "the signed notice says event_type PAYMENT_CLOSED, the event PAYMENT_SUCCEEDED");
    PlatformFields waiting = *fields;
    waiting["trade_status"] = "WAIT_BUYER_PAY";
    EXPECT_EQ(NoticeEventProblem(keys, alipay, kReceivedAt, EncodeForm(waiting), event),
              "the signed notice records no event: WAIT_BUYER_PAY records no event");

    // WeChat Pay v3: the envelope's plain fields without the APIv3 key, the resource with it.
    const auto wechat = projections::Source::kWechatV3;
    const SimulatedNotice notice = BuildNotice(
        config, {.channel = "wechat_v3", .out_trade_no = "ORD-1", .unix_seconds = kSignedAt});
    const json envelope = json::parse(notice.body);
    const Checked<json> resource = OpenWechatV3Resource(config.wechat_v3->api_v3_key, envelope);
    ASSERT_TRUE(resource.ok());
    const Checked<NoticeEvent> v3 = WechatV3NoticeEvent(envelope, *resource, kReceivedAt);
    ASSERT_TRUE(v3.ok());
    changed = v3->event;
    changed.amount = 1998;
    EXPECT_EQ(NoticeEventProblem(keys, wechat, kReceivedAt, notice.body, changed), std::nullopt);
    json data = json::parse(changed.data);
    data["id"] = "another-notice";
    changed.data = data.dump();
    EXPECT_EQ(NoticeEventProblem(keys, wechat, kReceivedAt, notice.body, changed),
              "the signed notice says id " + envelope["id"].get<std::string>() +
                  ", the event another-notice");
    keys.wechat_v3_api_v3_key = config.wechat_v3->api_v3_key;
    EXPECT_EQ(NoticeEventProblem(keys, wechat, kReceivedAt, notice.body, v3->event), std::nullopt);
    changed = v3->event;
    changed.amount = 1998;
    EXPECT_EQ(NoticeEventProblem(keys, wechat, kReceivedAt, notice.body, changed),
              "the signed notice says amount 1999, the event 1998");
    keys.wechat_v3_api_v3_key = std::string(32, 'k');
    EXPECT_EQ(NoticeEventProblem(keys, wechat, kReceivedAt, notice.body, v3->event),
              "the signed notice's resource: resource does not decrypt with the APIv3 key");
}

}  // namespace
}  // namespace payledger::api
