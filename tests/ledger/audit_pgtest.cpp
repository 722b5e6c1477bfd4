// PostgreSQL tests of `payledger audit` (ledger/audit.hpp, SPEC §11): a ledger written by the
// writer audits OK and its head is the last receipt's chain, recomputed here from the
// receipts' lines; then each kind of tampering, done as the tables' owner with the
// append-only triggers disabled, is caught: an event's field, a receipt's body or field, a
// row deleted in the middle, an event without its receipt, a receipt naming another event.
// A migration that chains an existing ledger gives the writer's values (MigrationChains...).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ledger/audit.hpp"
#include "ledger/chain.hpp"
#include "ledger/checkpoint.hpp"
#include "ledger/reads.hpp"
#include "ledger/writer.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger {
namespace {

using projections::Event;
using projections::EventType;
using projections::Outcome;
using testing::TestDatabase;

constexpr projections::TimeMicros kTime = 1'795'941'000'123'456;

Receipt ReceiptFor(const std::string& out_trade_no, projections::Source source) {
    return Receipt{.source = source,
                   .received_at = kTime,
                   .peer = "127.0.0.1:9",
                   .body = "body of " + out_trade_no,
                   .out_trade_no = out_trade_no};
}

Delivery Order(const std::string& out_trade_no) {
    return {.receipt = ReceiptFor(out_trade_no, projections::Source::kApi),
            .event = Event{.out_trade_no = out_trade_no,
                           .event_type = EventType::kOrderCreated,
                           .source = projections::Source::kApi,
                           .account_id = "acct-1",
                           .amount = 1999,
                           .currency = "CNY",
                           .occurred_at = kTime}};
}

Delivery Payment(const std::string& out_trade_no) {
    return {.receipt = ReceiptFor(out_trade_no, projections::Source::kGeneric),
            .event = Event{.out_trade_no = out_trade_no,
                           .event_type = EventType::kPaymentSucceeded,
                           .source = projections::Source::kGeneric,
                           .amount = 1999,
                           .currency = "CNY",
                           .transaction_id = "TX-" + out_trade_no,
                           .occurred_at = kTime + 1}};
}

Delivery Refused(const std::string& out_trade_no) {
    Delivery refused{.receipt = ReceiptFor(out_trade_no, projections::Source::kWechatV2),
                     .verdict = Outcome::kBadSignature,
                     .message = "bad signature"};
    refused.receipt.body = std::string("\x00\xff raw", 6);
    return refused;
}

class AuditPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        connection_ = db_.Connect();
        // Three batches: orders, their payments with a duplicate and a refusal, a payment.
        (void)WriteBatch(*connection_, std::vector{Order("ORD-1"), Order("ORD-2"), Order("ORD-3")});
        (void)WriteBatch(*connection_,
                         std::vector{Payment("ORD-1"), Payment("ORD-1"), Refused("ORD-2")});
        (void)WriteBatch(*connection_, std::vector{Payment("ORD-2")});
    }

    // Runs `sql` as the owner with the ledger's triggers off (append-only and the references,
    // schema/0004): what the triggers cannot stop.
    void Tamper(const std::string& sql) {
        pqxx::work tx{*connection_};
        tx.exec("ALTER TABLE callback_receipts DISABLE TRIGGER USER");
        tx.exec("ALTER TABLE ledger_events DISABLE TRIGGER USER");
        tx.exec(sql);
        tx.exec("ALTER TABLE callback_receipts ENABLE TRIGGER USER");
        tx.exec("ALTER TABLE ledger_events ENABLE TRIGGER USER");
        tx.commit();
    }

    void ExpectBroken(const std::string& first_break) {
        const AuditReport report = Audit(db_.url());
        EXPECT_FALSE(report.ok()) << FormatAuditReport(report);
        ASSERT_FALSE(report.breaks.empty());
        EXPECT_EQ(report.breaks.front(), first_break) << FormatAuditReport(report);
        EXPECT_NE(FormatAuditReport(report).find(" BROKEN\n  " + first_break + "\n"),
                  std::string::npos);
    }

    std::string ChainBreak(const std::string& id) {
        return "receipt " + id +
               " chain differs: a receipt, its event or the receipt before it was changed or "
               "removed";
    }

    TestDatabase db_;
    std::unique_ptr<pqxx::connection> connection_;
};

TEST_F(AuditPgTest, AnUntouchedLedgerIsOkAndItsHeadIsRecomputedFromTheLines) {
    const AuditReport report = Audit(db_.url());
    EXPECT_TRUE(report.ok()) << FormatAuditReport(report);
    EXPECT_EQ(report.receipts, 7);
    EXPECT_EQ(report.events, 5);
    // The chain recomputed here, from the receipts and events as read back.
    pqxx::read_transaction tx{*connection_};
    ChainValue chain = kChainStart;
    std::int64_t last = 0;
    for (const Receipt& receipt : ReadReceiptsAfter(tx, 0, 100, std::nullopt)) {
        std::optional<Event> event;
        if (receipt.outcome == Outcome::kAppended) {
            const pqxx::row row =
                tx.exec1(std::string("SELECT ") + kEventColumns +
                         " FROM ledger_events WHERE receipt_id = " + std::to_string(receipt.id));
            event = EventFromRow(row);
        }
        chain = NextChain(chain, ReceiptLine(receipt, event ? &*event : nullptr));
        EXPECT_EQ(receipt.chain, ChainHex(chain)) << receipt.id;
        last = receipt.id;
    }
    EXPECT_EQ(report.head_id, last);
    EXPECT_EQ(report.head, chain);
    EXPECT_EQ(FormatAuditReport(report), "audit receipts=7 events=5 head=" + std::to_string(last) +
                                             ":" + ChainHex(chain) + " OK\n");
}

TEST_F(AuditPgTest, AChangedEventAmountIsCaught) {
    const std::string receipt = db_.Scalar(
        "SELECT receipt_id FROM ledger_events WHERE event_type = 'PAYMENT_SUCCEEDED' "
        "ORDER BY seq LIMIT 1");
    Tamper("UPDATE ledger_events SET amount = 1 WHERE receipt_id = " + receipt);
    ExpectBroken(ChainBreak(receipt));
}

TEST_F(AuditPgTest, AChangedReceiptBodyIsCaught) {
    const std::string receipt =
        db_.Scalar("SELECT id FROM callback_receipts WHERE outcome = 'bad_signature'");
    Tamper("UPDATE callback_receipts SET body = 'forged' WHERE id = " + receipt);
    ExpectBroken(ChainBreak(receipt));
}

TEST_F(AuditPgTest, AChangedReceiptOutcomeIsCaught) {
    const std::string receipt =
        db_.Scalar("SELECT id FROM callback_receipts WHERE outcome = 'duplicate'");
    Tamper("UPDATE callback_receipts SET outcome = 'conflict', seq = NULL WHERE id = " + receipt);
    ExpectBroken(ChainBreak(receipt));
}

TEST_F(AuditPgTest, ARowDeletedInTheMiddleIsCaught) {
    const std::string receipt =
        db_.Scalar("SELECT id FROM callback_receipts WHERE outcome = 'bad_signature'");
    Tamper("DELETE FROM callback_receipts WHERE id = " + receipt);
    // The receipt after it no longer follows from the one before it.
    ExpectBroken(ChainBreak(std::to_string(std::stoll(receipt) + 1)));
}

TEST_F(AuditPgTest, AnEventWithoutItsReceiptIsCaught) {
    const std::string seq = db_.Scalar("SELECT max(seq) FROM ledger_events");
    const std::string receipt =
        db_.Scalar("SELECT receipt_id FROM ledger_events WHERE seq = " + seq);
    Tamper("DELETE FROM callback_receipts WHERE id = " + receipt);
    const AuditReport report = Audit(db_.url());
    EXPECT_FALSE(report.ok());
    EXPECT_EQ(report.breaks.back(), "event " + seq + " has no receipt that appended it")
        << FormatAuditReport(report);
}

TEST_F(AuditPgTest, AReceiptThatNamesAnotherEventIsCaught) {
    const std::string receipt = db_.Scalar(
        "SELECT receipt_id FROM ledger_events WHERE event_type = 'PAYMENT_SUCCEEDED' "
        "ORDER BY seq LIMIT 1");
    Tamper("UPDATE callback_receipts SET seq = seq - 1 WHERE id = " + receipt);
    const AuditReport report = Audit(db_.url());
    EXPECT_FALSE(report.ok());
    ASSERT_FALSE(report.breaks.empty());
    EXPECT_NE(report.breaks.front().find("receipt " + receipt + " names seq"), std::string::npos)
        << FormatAuditReport(report);
}

// RFC 8032's first test key (tests/ledger/checkpoint_test.cpp).
constexpr const char* kSigningKeyPem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
    "-----END PRIVATE KEY-----\n";

TEST_F(AuditPgTest, ACheckpointCatchesADeletedTailThatTheChainAloneCannot) {
    const Ed25519Key signer = Ed25519Key::PrivateFromPem(kSigningKeyPem);
    Checkpoint checkpoint;
    {
        pqxx::read_transaction tx{*connection_};
        checkpoint = SignHead(tx, signer);
    }
    const Ed25519Key auditor = Ed25519Key::PublicFromPem(signer.PublicPem());
    EXPECT_EQ(checkpoint.receipt_id, 7);
    EXPECT_TRUE(Audit(db_.url(), &checkpoint, &auditor).ok());

    // The last receipt and its event removed together: what is left chains perfectly.
    Tamper(
        "DELETE FROM ledger_events WHERE receipt_id = 7; "
        "DELETE FROM callback_receipts WHERE id = 7");
    const AuditReport alone = Audit(db_.url());
    EXPECT_TRUE(alone.ok()) << FormatAuditReport(alone);
    EXPECT_EQ(alone.head_id, 6);
    const AuditReport against = Audit(db_.url(), &checkpoint, &auditor);
    EXPECT_FALSE(against.ok());
    ASSERT_EQ(against.breaks.size(), 1u);
    EXPECT_EQ(against.breaks[0], "receipt 7 is missing: the checkpoint names it");
}

TEST_F(AuditPgTest, AForgedCheckpointIsBroken) {
    const Ed25519Key signer = Ed25519Key::PrivateFromPem(kSigningKeyPem);
    Checkpoint checkpoint;
    {
        pqxx::read_transaction tx{*connection_};
        checkpoint = SignHead(tx, signer);
    }
    // A checkpoint naming an earlier receipt with its real chain, but not signed for it.
    checkpoint.receipt_id = 6;
    checkpoint.chain =
        db_.Scalar("SELECT encode(chain, 'hex') FROM callback_receipts WHERE id = 6");
    const AuditReport report = Audit(db_.url(), &checkpoint, &signer);
    EXPECT_FALSE(report.ok());
    ASSERT_FALSE(report.breaks.empty());
    EXPECT_EQ(report.breaks[0],
              "checkpoint of receipt 6: the signature does not verify with key " + signer.KeyId());
}

TEST_F(AuditPgTest, TheMigrationChainsAnExistingLedgerAsTheWriterDoes) {
    // Recompute every chain with the migration's SQL and compare with the writer's values.
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM (SELECT r.id, r.chain, "
                         "payledger_chain(payledger_receipt_line(r, e)) OVER (ORDER BY r.id) AS c "
                         "FROM callback_receipts AS r LEFT JOIN ledger_events AS e "
                         "ON r.outcome = 'appended' AND e.receipt_id = r.id) AS x "
                         "WHERE x.c <> x.chain"),
              "0");
}

}  // namespace
}  // namespace payledger::ledger
