// PostgreSQL tests of `payledger audit` (ledger/integrity/audit.hpp, docs/integrity.md#audit): a
// ledger written by the writer audits OK and its head is the last receipt's chain, recomputed here
// from the receipts' lines; then each kind of tampering, done as the tables' owner with the
// append-only triggers disabled, is caught: an event's field, a receipt's body or field, a row
// deleted in the middle, an event without its receipt, a receipt naming another event. A migration
// that chains an existing ledger gives the writer's values (MigrationChains...). Bodies come in two
// forms (schema/0008): inline (receipts written before it) and stored once in receipt_bodies under
// the hash the receipt keeps; rows of both, inserted here as the owner with their chain recomputed
// by the schema's own functions, audit alike, and a stored body changed or missing is caught. A
// break at a receipt that appended an event names the event on the next line. An event whose source
// is not its receipt's is caught (the chain does not cover an event's source).

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ledger/base/bytes.hpp"
#include "ledger/integrity/audit.hpp"
#include "ledger/integrity/chain.hpp"
#include "ledger/integrity/checkpoint.hpp"
#include "ledger/read/reads.hpp"
#include "ledger/write/writer.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger::audit_pgtest {
namespace {

using projections::Event;
using projections::EventType;
using projections::Outcome;
using testing::TestDatabase;

constexpr projections::TimeMicros kTime = 1'795'941'000'123'456;

Delivery Order(const std::string& out_trade_no) {
    return testing::OrderRegistration(out_trade_no,
                                      {.amount = 1999, .receipt = {.received_at = kTime}});
}

Delivery Payment(const std::string& out_trade_no) {
    return testing::VerifiedCallback(out_trade_no, EventType::kPaymentSucceeded,
                                     {.amount = 1999,
                                      .transaction_id = "TX-" + out_trade_no,
                                      .occurred_at = kTime + 1,
                                      .receipt = {.received_at = kTime}});
}

Delivery Refused(const std::string& out_trade_no) {
    return testing::Refusal(
        out_trade_no, {.source = projections::Source::kWechatV2,
                       .message = "bad signature",
                       .receipt = {.received_at = kTime, .body = std::string("\x00\xff raw", 6)}});
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
        for (const char* table : {"callback_receipts", "ledger_events", "receipt_bodies"}) {
            tx.exec(std::string("ALTER TABLE ") + table + " DISABLE TRIGGER USER");
        }
        tx.exec(sql);
        for (const char* table : {"callback_receipts", "ledger_events", "receipt_bodies"}) {
            tx.exec(std::string("ALTER TABLE ") + table + " ENABLE TRIGGER USER");
        }
        tx.commit();
    }

    // Recomputes, as the owner, the chain of every receipt from `first_id` on, in id order,
    // with the schema's own line and chain step (what a forger who owns the tables can do).
    void Rechain(std::int64_t first_id) {
        Tamper(
            "DO $$ DECLARE x record; BEGIN "
            "FOR x IN SELECT id FROM callback_receipts WHERE id >= " +
            std::to_string(first_id) +
            " ORDER BY id LOOP "
            "UPDATE callback_receipts AS c SET chain = payledger_chain_step("
            "coalesce((SELECT p.chain FROM callback_receipts AS p WHERE p.id < c.id "
            "ORDER BY p.id DESC LIMIT 1), decode(repeat('00', 32), 'hex')), "
            "(SELECT payledger_receipt_line(r, e) FROM callback_receipts AS r "
            "LEFT JOIN ledger_events AS e ON r.outcome = 'appended' AND e.receipt_id = r.id "
            "WHERE r.id = c.id)) WHERE c.id = x.id; "
            "END LOOP; END $$");
    }

    // Four receipts after the writer's, inserted as the owner and chained: an inline body,
    // a stored body, a duplicate kept without its body, and a receipt naming the stored body
    // again. Returns the id of the first.
    std::int64_t InsertBothForms() {
        const std::int64_t first =
            std::stoll(db_.Scalar("SELECT max(id) + 1 FROM callback_receipts"));
        const std::string duplicated =
            db_.Scalar("SELECT min(seq) FROM ledger_events WHERE event_type = 'PAYMENT_SUCCEEDED'");
        const std::string values = "'generic', '2026-11-29T08:30:00.5Z', '127.0.0.1:9', '{}', ";
        const std::string zero = "decode(repeat('00', 32), 'hex')";
        Tamper(
            "INSERT INTO receipt_bodies VALUES (sha256('stored body'), 'stored body') "
            "ON CONFLICT DO NOTHING; "
            "INSERT INTO callback_receipts (id, source, received_at, peer, headers, body, "
            "body_sha256, body_stored, outcome, seq, out_trade_no, message, chain) VALUES (" +
            std::to_string(first) + ", " + values +
            "'inline body', NULL, true, 'bad_signature', NULL, NULL, 'x', " + zero + "), (" +
            std::to_string(first + 1) + ", " + values +
            "NULL, sha256('stored body'), true, 'ignored', NULL, 'ORD-3', 'x', " + zero + "), (" +
            std::to_string(first + 2) + ", " + values +
            "NULL, sha256('not kept'), false, 'duplicate', " + duplicated + ", 'ORD-1', '', " +
            zero + "), (" + std::to_string(first + 3) + ", " + values +
            "NULL, sha256('stored body'), true, 'malformed', NULL, NULL, 'y', " + zero + ")");
        Rechain(first);
        return first;
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
        EXPECT_EQ(receipt.chain, HexLower(chain)) << receipt.id;
        last = receipt.id;
    }
    EXPECT_EQ(report.head_id, last);
    EXPECT_EQ(report.head, chain);
    EXPECT_EQ(FormatAuditReport(report), "audit receipts=7 events=5 head=" + std::to_string(last) +
                                             ":" + HexLower(chain) + " OK\n");
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
    // Whichever form the writer stored it in: inline, the line's hash changes; stored once,
    // the bytes no longer hash to the key the receipt keeps.
    if (db_.Scalar("SELECT body_sha256 IS NULL FROM callback_receipts WHERE id = " + receipt) ==
        "t") {
        Tamper("UPDATE callback_receipts SET body = 'forged' WHERE id = " + receipt);
        ExpectBroken(ChainBreak(receipt));
    } else {
        const std::string hex = db_.Scalar(
            "SELECT encode(body_sha256, 'hex') FROM callback_receipts WHERE id = " + receipt);
        Tamper("UPDATE receipt_bodies SET body = 'forged' WHERE body_sha256 = decode('" + hex +
               "', 'hex')");
        ExpectBroken("receipt " + receipt + " body " + hex +
                     ": the body stored under it was changed (it no longer hashes to it)");
    }
}

TEST_F(AuditPgTest, InlineAndStoredBodiesAuditAlike) {
    const std::int64_t first = InsertBothForms();
    const AuditReport report = Audit(db_.url());
    // The schema's line names the stored hash where the body is not inline; audit's too.
    EXPECT_TRUE(report.ok()) << FormatAuditReport(report);
    EXPECT_EQ(report.receipts, 11);
    EXPECT_EQ(report.head_id, first + 3);
    EXPECT_EQ(HexLower(report.head),
              db_.Scalar("SELECT encode(chain, 'hex') FROM callback_receipts WHERE id = " +
                         std::to_string(first + 3)));
}

TEST_F(AuditPgTest, AChangedStoredBodyIsCaughtOnceAtTheFirstReceiptThatNamesIt) {
    const std::int64_t first = InsertBothForms();
    const std::string hex = Sha256Hex("stored body");
    Tamper(
        "UPDATE receipt_bodies SET body = 'stored b0dy' WHERE body_sha256 = sha256('stored body')");
    const AuditReport report = Audit(db_.url());
    EXPECT_EQ(report.break_count, 1) << FormatAuditReport(report);
    ASSERT_EQ(report.breaks.size(), 1u) << FormatAuditReport(report);
    EXPECT_EQ(report.breaks[0], "receipt " + std::to_string(first + 1) + " body " + hex +
                                    ": the body stored under it was changed (it no longer "
                                    "hashes to it)");
}

TEST_F(AuditPgTest, AStoredBodyThatIsMissingIsCaughtButADuplicateKeptWithoutItsBodyIsNot) {
    const std::int64_t first = InsertBothForms();
    const std::string hex = Sha256Hex("stored body");
    Tamper("DELETE FROM receipt_bodies WHERE body_sha256 = sha256('stored body')");
    const AuditReport report = Audit(db_.url());
    EXPECT_EQ(report.break_count, 2) << FormatAuditReport(report);
    ASSERT_EQ(report.breaks.size(), 2u) << FormatAuditReport(report);
    for (const std::int64_t id : {first + 1, first + 3}) {
        EXPECT_EQ(report.breaks[id == first + 1 ? 0 : 1],
                  "receipt " + std::to_string(id) + " body " + hex +
                      " missing: receipt_bodies holds no such body");
    }
}

TEST_F(AuditPgTest, ABreakAtAReceiptThatAppendedNamesItsEventOnTheNextLine) {
    const std::string seq =
        db_.Scalar("SELECT min(seq) FROM ledger_events WHERE event_type = 'PAYMENT_SUCCEEDED'");
    const std::string receipt =
        db_.Scalar("SELECT receipt_id FROM ledger_events WHERE seq = " + seq);
    const std::string out_trade_no =
        db_.Scalar("SELECT out_trade_no FROM ledger_events WHERE seq = " + seq);
    Tamper(
        "UPDATE callback_receipts SET received_at = received_at + interval '1 second' "
        "WHERE id = " +
        receipt);
    const AuditReport report = Audit(db_.url());
    EXPECT_EQ(report.break_count, 1);
    ASSERT_EQ(report.breaks.size(), 2u) << FormatAuditReport(report);
    EXPECT_EQ(report.breaks[0], ChainBreak(receipt));
    EXPECT_EQ(report.breaks[1], "event " + seq + " appended by receipt " + receipt +
                                    ": PAYMENT_SUCCEEDED " + out_trade_no +
                                    " 1999 CNY "
                                    "transaction TX-" +
                                    out_trade_no);
    EXPECT_NE(FormatAuditReport(report).find(" BROKEN\n  " + ChainBreak(receipt) + "\n  event " +
                                             seq + " appended by receipt " + receipt + ": "),
              std::string::npos)
        << FormatAuditReport(report);
}

TEST_F(AuditPgTest, AnAppendingReceiptWhoseStoredBodyIsMissingNamesItsEvent) {
    // An appended receipt in the stored form: the writer's, or one moved to it here as the
    // owner (same bytes, same hash, so the chain holds).
    const std::string seq = db_.Scalar("SELECT max(seq) FROM ledger_events");
    const std::string receipt =
        db_.Scalar("SELECT receipt_id FROM ledger_events WHERE seq = " + seq);
    Tamper(
        "INSERT INTO receipt_bodies SELECT sha256(body), body FROM callback_receipts "
        "WHERE id = " +
        receipt +
        " AND body IS NOT NULL ON CONFLICT DO NOTHING; "
        "UPDATE callback_receipts SET body_sha256 = sha256(body), body = NULL "
        "WHERE id = " +
        receipt + " AND body IS NOT NULL");
    EXPECT_TRUE(Audit(db_.url()).ok());
    const std::string hex = db_.Scalar(
        "SELECT encode(body_sha256, 'hex') FROM callback_receipts WHERE id = " + receipt);
    Tamper("DELETE FROM receipt_bodies WHERE body_sha256 = decode('" + hex + "', 'hex')");
    const AuditReport report = Audit(db_.url());
    // Another receipt may name the same bytes (this fixture's order and payment of one order
    // have one body): each is a break, each followed by its event.
    const auto line = std::find(
        report.breaks.begin(), report.breaks.end(),
        "receipt " + receipt + " body " + hex + " missing: receipt_bodies holds no such body");
    ASSERT_NE(line, report.breaks.end()) << FormatAuditReport(report);
    ASSERT_NE(line + 1, report.breaks.end()) << FormatAuditReport(report);
    EXPECT_EQ((line + 1)->rfind("event " + seq + " appended by receipt " + receipt + ": ", 0), 0u)
        << FormatAuditReport(report);
}

TEST_F(AuditPgTest, ListedLinesStopAtTwentyAndNeverLeaveAReceiptWithoutItsEvent) {
    // 13 receipts, all but the refusal (6) and the duplicate (5) appended. Every time but the
    // refusal's moved: 12 breaks; receipts 1-4 take 2 lines each, 5 one, 7-11 two each: 19.
    // Receipt 12's line would be the 20th, without room for its event's: it is not listed.
    for (int i = 0; i < 6; ++i) {
        (void)WriteBatch(*connection_, std::vector{Order("MORE-" + std::to_string(i))});
    }
    ASSERT_EQ(db_.Scalar("SELECT string_agg(id::text, ',' ORDER BY id) FROM callback_receipts "
                         "WHERE outcome <> 'appended'"),
              "5,6");
    Tamper(
        "UPDATE callback_receipts SET received_at = received_at + interval '1 second' "
        "WHERE outcome <> 'bad_signature'");
    const AuditReport report = Audit(db_.url());
    EXPECT_EQ(report.break_count, 12);
    ASSERT_EQ(report.breaks.size(), 19u) << FormatAuditReport(report);
    for (std::size_t i = 0; i < report.breaks.size(); ++i) {
        const std::string& line = report.breaks[i];
        ASSERT_EQ(line.rfind("receipt ", 0), 0u) << FormatAuditReport(report);
        const std::string id = line.substr(8, line.find(' ', 8) - 8);
        if (id == "5") continue;  // The duplicate appended nothing.
        ASSERT_LT(i + 1, report.breaks.size());
        EXPECT_EQ(report.breaks[i + 1].find(" appended by receipt " + id + ": "),
                  report.breaks[i + 1].find(' ', 6))
            << FormatAuditReport(report);
        ++i;
    }
    EXPECT_NE(report.breaks.back().find(" appended by receipt 11: ORDER_CREATED MORE-3"),
              std::string::npos)
        << FormatAuditReport(report);
}

TEST_F(AuditPgTest, AnEventWhoseSourceWasChangedIsCaughtThoughTheChainHolds) {
    // A receipt's line names the receipt's source, not its event's: the chain cannot see an
    // event's source changed. The writer gives an event its receipt's source (the channel's;
    // reconcile --apply gives both wechat_bill or alipay_bill), so any difference is a break.
    const std::string seq =
        db_.Scalar("SELECT min(seq) FROM ledger_events WHERE event_type = 'PAYMENT_SUCCEEDED'");
    const std::string receipt =
        db_.Scalar("SELECT receipt_id FROM ledger_events WHERE seq = " + seq);
    Tamper("UPDATE ledger_events SET source = 'wechat_v3' WHERE seq = " + seq);
    const AuditReport report = Audit(db_.url());
    EXPECT_EQ(report.break_count, 1) << FormatAuditReport(report);
    ASSERT_EQ(report.breaks.size(), 1u) << FormatAuditReport(report);
    EXPECT_EQ(report.breaks[0], "event " + seq + " source wechat_v3 differs from its receipt " +
                                    receipt + "'s generic");
}

TEST_F(AuditPgTest, EventsOfABillKeepTheirReceiptsSource) {
    // What reconcile --apply writes (ledger/reconcile/apply.cpp): the receipt and the event
    // of one bill line, both of wechat_bill. The ledger audits OK.
    Delivery applied = Payment("ORD-3");
    applied.receipt.source = projections::Source::kWechatBill;
    applied.event->source = projections::Source::kWechatBill;
    ASSERT_EQ(WriteBatch(*connection_, std::vector{applied}).at(0).outcome, Outcome::kAppended);
    const AuditReport report = Audit(db_.url());
    EXPECT_TRUE(report.ok()) << FormatAuditReport(report);
    EXPECT_EQ(report.events, 6);
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

// RFC 8032's first test key (tests/ledger/integrity/checkpoint_test.cpp).
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
}  // namespace payledger::ledger::audit_pgtest
