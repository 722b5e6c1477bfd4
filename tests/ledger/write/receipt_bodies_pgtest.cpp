// Receipt bodies stored once (schema/0008) against the real PostgreSQL: a verified delivery's
// body is kept once under its SHA-256, a byte-identical one refers to it, and once an event has
// 100 duplicate receipts a further duplicate is a receipt without a body, so replaying one
// genuine notice, padded or not, adds rows but never bodies. Also: the boundary exactly (the
// 100th duplicate kept, the 101st not, in one batch or two); the receipt object of one kept
// without its body, through HTTP; receipt pages whose bodies are read a bounded amount at
// a time; and the writer's cache, which sends no body it knows stored, never naming bytes a
// ledger taken back no longer has.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "ledger/base/bytes.hpp"
#include "ledger/integrity/chain.hpp"
#include "ledger/read/reads.hpp"
#include "ledger/write/writer.hpp"
#include "support/deliveries.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::receipt_bodies_test {
namespace {

using ledger::Delivery;
using ledger::DeliveryResult;
using ledger::Receipt;
using projections::EventType;
using projections::Outcome;
using testing::TestDatabase;

constexpr int kDuplicatesKept = 100;  // schema/0008.
constexpr std::size_t kBodyBytesMax = 65536;

Delivery NewOrder(const std::string& out_trade_no) {
    return testing::OrderRegistration(
        out_trade_no, {.amount = 500, .receipt = {.body = "order " + out_trade_no}});
}

// The payment of `out_trade_no`, delivered with `body`: every copy names the same event, so
// all but the first are duplicates, whatever their bytes.
Delivery PaymentWithBody(const std::string& out_trade_no, std::string body) {
    return testing::VerifiedCallback(out_trade_no, EventType::kPaymentSucceeded,
                                     {.amount = 500,
                                      .transaction_id = "TX-" + out_trade_no,
                                      .receipt = {.body = std::move(body)}});
}

// The genuine notice, and a copy padded with whitespace (`n` distinct: every padding differs).
std::string Notice(const std::string& out_trade_no) {
    return "{\"event_type\":\"PAYMENT_SUCCEEDED\",\"out_trade_no\":\"" + out_trade_no + "\"}";
}
std::string Padded(const std::string& out_trade_no, int n) {
    return Notice(out_trade_no) + std::string(static_cast<std::size_t>(n) + 1, ' ');
}

Delivery Refused(const std::string& out_trade_no, std::string body) {
    return testing::Refusal(out_trade_no, {.receipt = {.body = std::move(body)}});
}

class ReceiptBodiesPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        PAYLEDGER_REQUIRE_DATABASE(db_);
        connection_ = db_.Connect();
    }

    std::vector<DeliveryResult> Write(const std::vector<Delivery>& deliveries,
                                      ledger::WriterCache* cache = nullptr) {
        return ledger::WriteBatch(*connection_, deliveries, nullptr, cache);
    }

    // Appends the order and its payment (with the genuine notice); returns the payment's seq.
    std::int64_t OrderAndPayment(const std::string& out_trade_no) {
        const std::vector<DeliveryResult> results =
            Write({NewOrder(out_trade_no), PaymentWithBody(out_trade_no, Notice(out_trade_no))});
        EXPECT_EQ(results[1].outcome, Outcome::kAppended);
        return results[1].seq;
    }

    // For each duplicate receipt of `seq`, by id: "1" kept with its body, "0" not.
    std::string KeptFlags(std::int64_t seq) {
        return db_.Scalar(
            "SELECT string_agg(CASE WHEN body_stored THEN '1' ELSE '0' END, '' ORDER BY id) "
            "FROM callback_receipts WHERE outcome = 'duplicate' AND seq = " +
            std::to_string(seq));
    }

    std::string Count(const std::string& sql) { return db_.Scalar("SELECT count(*) " + sql); }

    TestDatabase db_;
    std::unique_ptr<pqxx::connection> connection_;
};

TEST_F(ReceiptBodiesPgTest, ThousandsOfReplaysOfOneNoticeAddRowsButNotBodies) {
    const std::int64_t seq = OrderAndPayment("R-1");
    ASSERT_GT(seq, 0);
    // 3000 replays, half byte-identical to the genuine notice, half padded differently each
    // time; in batches of 60, half of them through the writer's cache (one round trip).
    constexpr int kReplays = 3000;
    constexpr int kBatch = 60;
    ledger::WriterCache cache{1000};
    std::map<std::int64_t, std::string> sent;  // receipt id -> the body it received.
    for (int first = 0; first < kReplays; first += kBatch) {
        std::vector<Delivery> batch;
        for (int i = first; i < first + kBatch; ++i) {
            batch.push_back(PaymentWithBody("R-1", i % 2 == 0 ? Notice("R-1") : Padded("R-1", i)));
        }
        const std::vector<DeliveryResult> results =
            Write(batch, (first / kBatch) % 2 == 0 ? &cache : nullptr);
        for (std::size_t i = 0; i < results.size(); ++i) {
            ASSERT_EQ(results[i].outcome, Outcome::kDuplicate) << first << "+" << i;
            ASSERT_EQ(results[i].seq, seq);
            sent[results[i].receipt_id] = batch[i].receipt.body;
        }
    }
    ASSERT_EQ(sent.size(), static_cast<std::size_t>(kReplays));

    // Every delivery has its receipt: the rows were added.
    EXPECT_EQ(Count("FROM callback_receipts WHERE seq = " + std::to_string(seq)),
              std::to_string(kReplays + 1));
    // The first 100 duplicates kept their bodies, none after.
    EXPECT_EQ(KeptFlags(seq),
              std::string(kDuplicatesKept, '1') + std::string(kReplays - kDuplicatesKept, '0'));
    // Bodies: the order's, the genuine notice once (its 50 identical replays among the first
    // 100 refer to it), and the 50 padded copies among the first 100. At most 101 + 1.
    EXPECT_EQ(Count("FROM receipt_bodies"), "52");
    EXPECT_EQ(Count("FROM receipt_bodies b WHERE EXISTS (SELECT FROM callback_receipts r "
                    "WHERE r.body_sha256 = b.body_sha256 AND r.seq = " +
                    std::to_string(seq) + ")"),
              "51");
    EXPECT_EQ(Count("FROM callback_receipts WHERE body IS NOT NULL OR body_sha256 IS NULL"), "0");
    EXPECT_EQ(db_.Scalar("SELECT convert_from(body, 'UTF8') FROM receipt_bodies "
                         "WHERE body_sha256 = sha256(convert_to('" +
                         Notice("R-1") + "', 'UTF8'))"),
              Notice("R-1"));

    // Read back: every receipt names the bytes it received; those kept have them.
    pqxx::read_transaction tx{*connection_};
    std::int64_t after = 0;
    std::size_t read = 0;
    int duplicates = 0;
    for (;;) {
        const std::vector<Receipt> page = ledger::ReadOrderReceipts(tx, "R-1", after, 1000);
        if (page.empty()) break;
        for (const Receipt& receipt : page) {
            after = receipt.id;
            if (receipt.outcome != Outcome::kDuplicate) continue;
            ++read;
            const std::string& body = sent.at(receipt.id);
            EXPECT_EQ(receipt.body_sha256, ledger::Sha256Hex(body)) << receipt.id;
            if (++duplicates <= kDuplicatesKept) {
                EXPECT_TRUE(receipt.body_stored) << receipt.id;
                EXPECT_EQ(receipt.body, body) << receipt.id;
            } else {
                EXPECT_FALSE(receipt.body_stored) << receipt.id;
                EXPECT_EQ(receipt.body, "") << receipt.id;  // Even when the bytes are kept.
            }
        }
    }
    EXPECT_EQ(read, static_cast<std::size_t>(kReplays));
}

TEST_F(ReceiptBodiesPgTest, TheHundredthDuplicateIsKeptAndTheNextIsNotInOneBatchOrTwo) {
    const std::int64_t one_batch = OrderAndPayment("B-1");
    const std::int64_t two_batches = OrderAndPayment("B-2");
    const std::int64_t other = OrderAndPayment("B-3");
    std::vector<Delivery> first;
    for (int i = 0; i < kDuplicatesKept - 1; ++i)
        first.push_back(PaymentWithBody("B-1", Padded("B-1", i)));
    for (int i = 0; i < kDuplicatesKept; ++i)
        first.push_back(PaymentWithBody("B-2", Padded("B-2", i)));
    (void)Write(first);
    EXPECT_EQ(KeptFlags(one_batch), std::string(kDuplicatesKept - 1, '1'));
    EXPECT_EQ(KeptFlags(two_batches), std::string(kDuplicatesKept, '1'));

    // One batch: B-1's 100th and 101st duplicates, B-2's 101st, a duplicate of another event
    // (its first), and a refused delivery; each with bytes of its own.
    const std::vector<Delivery> second = {
        PaymentWithBody("B-1", "B-1 100th"), PaymentWithBody("B-2", "B-2 101st"),
        PaymentWithBody("B-3", "B-3 1st"),   PaymentWithBody("B-1", "B-1 101st"),
        Refused("B-1", "B-1 refused"),
    };
    const std::vector<DeliveryResult> results = Write(second);
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(results[i].outcome, Outcome::kDuplicate) << i;
    EXPECT_EQ(results[4].outcome, Outcome::kBadSignature);
    EXPECT_EQ(KeptFlags(one_batch), std::string(kDuplicatesKept, '1') + "0");
    EXPECT_EQ(KeptFlags(two_batches), std::string(kDuplicatesKept, '1') + "0");
    EXPECT_EQ(KeptFlags(other), "1");
    const auto stored = [&](const std::string& body) {
        return Count("FROM receipt_bodies WHERE body_sha256 = sha256(convert_to('" + body +
                     "', 'UTF8'))");
    };
    EXPECT_EQ(stored("B-1 100th"), "1");
    EXPECT_EQ(stored("B-1 101st"), "0");  // Not one of its receipts keeps it.
    EXPECT_EQ(stored("B-2 101st"), "0");
    EXPECT_EQ(stored("B-3 1st"), "1");
    EXPECT_EQ(stored("B-1 refused"), "1");
    // What was not kept is still named: each receipt's hash is that of the bytes it received.
    for (std::size_t i = 0; i < second.size(); ++i) {
        EXPECT_EQ(
            db_.Scalar("SELECT encode(body_sha256, 'hex') || ' ' || body_stored "
                       "FROM callback_receipts WHERE id = " +
                       std::to_string(results[i].receipt_id)),
            ledger::Sha256Hex(second[i].receipt.body) + (i == 1 || i == 3 ? " false" : " true"))
            << i;
    }
}

// The writer's cache vouches for the bodies its own batches stored (WriterCache::StoredBodies),
// and its batches then send no body for them; but only while the ledger is the one it knows.
// Here the batch that stored two bodies is taken back, as a failover to a standby without it
// would, except that the sequences stay where they were: the next batch reads (its order is
// unknown to the cache) a ledger with the cache's next ids but another chain's head, and it,
// and the batch after it through the cache, must store each body again, never name bytes nobody
// has.
TEST_F(ReceiptBodiesPgTest, BodiesAreStoredAgainWhenTheBatchThatStoredThemWasTakenBack) {
    ASSERT_EQ(Write({NewOrder("T-1")})[0].outcome, Outcome::kAppended);  // Not through the cache.
    ledger::WriterCache cache{1000};
    const std::string notice = Notice("T-1");
    const std::string forged = "forged T-1";
    const std::vector<DeliveryResult> refused =
        Write({Refused("T-1", notice), Refused("T-1", forged)}, &cache);
    ASSERT_EQ(refused[0].outcome, Outcome::kBadSignature);
    const auto key = [](const std::string& body) {
        return "sha256(convert_to('" + body + "', 'UTF8'))";
    };
    const auto stored = [&](const std::string& body) {
        return Count("FROM receipt_bodies WHERE body_sha256 = " + key(body));
    };
    ASSERT_EQ(stored(notice), "1");
    ASSERT_EQ(stored(forged), "1");
    ASSERT_EQ(db_.Scalar("SET LOCAL session_replication_role = replica; "
                         "DELETE FROM receipt_bodies WHERE body_sha256 IN (" +
                         key(notice) + ", " + key(forged) +
                         "); DELETE FROM callback_receipts WHERE id >= " +
                         std::to_string(refused[0].receipt_id) + "; SELECT 'taken back'"),
              "taken back");

    ASSERT_EQ(Write({PaymentWithBody("T-1", notice)}, &cache)[0].outcome, Outcome::kAppended);
    EXPECT_EQ(stored(notice), "1");
    ASSERT_EQ(Write({Refused("T-1", forged)}, &cache)[0].outcome, Outcome::kBadSignature);
    EXPECT_EQ(stored(forged), "1");
    EXPECT_EQ(Count("FROM callback_receipts r WHERE r.body IS NULL AND NOT EXISTS "
                    "(SELECT FROM receipt_bodies b WHERE b.body_sha256 = r.body_sha256)"),
              "0");

    // With the ledger the cache knows, a byte-identical duplicate refers to the stored body.
    ASSERT_EQ(Write({PaymentWithBody("T-1", notice)}, &cache)[0].outcome, Outcome::kDuplicate);
    pqxx::read_transaction tx{*connection_};
    const std::vector<Receipt> receipts = ledger::ReadOrderReceipts(tx, "T-1", 0, 10);
    ASSERT_EQ(receipts.size(), 4u);  // The order's, the payment's, the refusal's, the duplicate's.
    for (std::size_t i = 1; i < receipts.size(); ++i) {
        EXPECT_TRUE(receipts[i].body_stored) << i;
        EXPECT_EQ(receipts[i].body, i == 2 ? forged : notice) << i;
    }
}

// A receipt of `bytes` control bytes (0x01-0x1f), distinct for each `n`.
std::string ControlBytes(int n, std::size_t bytes) {
    std::string body(bytes, '\x01');
    for (std::size_t i = 0; i < bytes; ++i)
        body[i] = static_cast<char>(1 + (i + static_cast<std::size_t>(n)) % 31);
    const std::string tag = std::to_string(n);
    for (std::size_t i = 0; i < tag.size(); ++i) body[i] = static_cast<char>(tag[i] - '0' + 1);
    body[tag.size()] = '\x1f';
    return body;
}

// 1000 receipts of 64 KiB of control bytes each, half with the body inline (as receipts written
// before schema/0008 keep it), half stored once by the writer: a page of 1000 would be 64 MiB.
TEST_F(ReceiptBodiesPgTest, PagesOfLargeBodiesStayBoundedAndMissNothing) {
    constexpr int kReceipts = 1000;
    constexpr int kInline = 500;
    {
        pqxx::work tx{*connection_};
        for (int i = 0; i < kInline; ++i) {
            tx.exec_params0(
                "INSERT INTO callback_receipts (id, source, received_at, peer, body, outcome, "
                "out_trade_no, message, chain) VALUES (nextval('callback_receipts_id_seq'), "
                "'generic', now(), '127.0.0.1:9', $1, 'bad_signature', 'BIG', 'no', "
                "sha256($1))",
                pqxx::binarystring(ControlBytes(i, kBodyBytesMax)));
        }
        tx.commit();
    }
    for (int first = kInline; first < kReceipts; first += 50) {
        std::vector<Delivery> batch;
        for (int i = first; i < first + 50; ++i)
            batch.push_back(Refused("BIG", ControlBytes(i, kBodyBytesMax)));
        (void)Write(batch);
    }
    ASSERT_EQ(Count("FROM callback_receipts WHERE out_trade_no = 'BIG'"),
              std::to_string(kReceipts));
    ASSERT_EQ(Count("FROM callback_receipts WHERE body IS NULL"),
              std::to_string(kReceipts - kInline));

    const auto body_bytes = [](const std::vector<Receipt>& page) {
        std::int64_t bytes = 0;
        for (const Receipt& receipt : page) bytes += static_cast<std::int64_t>(receipt.body.size());
        return bytes;
    };
    // Each reader, forwards and backwards, of all receipts, of one outcome, of the order: every
    // page at most 8 MiB of bodies, each receipt exactly once with its own bytes, in order.
    using Reader = std::function<std::vector<Receipt>(pqxx::transaction_base&, std::int64_t)>;
    const std::map<std::string, std::pair<Reader, bool>> readers = {
        {"after",
         {[](auto& tx, std::int64_t at) {
              return ledger::ReadReceiptsAfter(tx, at, 1000, std::nullopt);
          },
          true}},
        {"after of outcome",
         {[](auto& tx, std::int64_t at) {
              return ledger::ReadReceiptsAfter(tx, at, 1000, Outcome::kBadSignature);
          },
          true}},
        {"order after",
         {[](auto& tx, std::int64_t at) { return ledger::ReadOrderReceipts(tx, "BIG", at, 1000); },
          true}},
        {"before",
         {[](auto& tx, std::int64_t at) {
              return ledger::ReadReceiptsBefore(tx, at, 1000, std::nullopt);
          },
          false}},
        {"before of outcome",
         {[](auto& tx, std::int64_t at) {
              return ledger::ReadReceiptsBefore(tx, at, 1000, Outcome::kBadSignature);
          },
          false}},
        {"order before",
         {[](auto& tx, std::int64_t at) {
              return ledger::ReadOrderReceiptsBefore(tx, "BIG", at, 1000);
          },
          false}},
    };
    pqxx::read_transaction tx{*connection_};
    for (const auto& [name, reader] : readers) {
        SCOPED_TRACE(name);
        const auto& [read, forwards] = reader;
        std::int64_t at = forwards ? 0 : std::numeric_limits<std::int64_t>::max();
        std::vector<std::int64_t> ids;
        std::vector<std::size_t> sizes;
        for (;;) {
            const std::vector<Receipt> page = read(tx, at);
            if (page.empty()) break;
            sizes.push_back(page.size());
            EXPECT_LE(body_bytes(page), ledger::kPageBodyBytesMax);
            for (std::size_t i = 1; i < page.size(); ++i) ASSERT_LT(page[i - 1].id, page[i].id);
            for (const Receipt& receipt : page) {
                ASSERT_EQ(receipt.body.size(), kBodyBytesMax);
                EXPECT_EQ(receipt.body_sha256, ledger::Sha256Hex(receipt.body));
                ids.push_back(receipt.id);
            }
            at = forwards ? page.back().id : page.front().id;
        }
        std::sort(ids.begin(), ids.end());
        EXPECT_EQ(std::set<std::int64_t>(ids.begin(), ids.end()).size(), ids.size());
        EXPECT_EQ(ids.size(), static_cast<std::size_t>(kReceipts));
        // Cut exactly: 128 bodies of 64 KiB are 8 MiB, so 7 pages of 128 and one of 104.
        ASSERT_EQ(sizes.size(), 8u);
        for (std::size_t i = 0; i + 1 < sizes.size(); ++i) EXPECT_EQ(sizes[i], 128u) << i;
        EXPECT_EQ(sizes.back(), 104u);
    }
    // The cut is exact, and a page holds at least one receipt however small the bound.
    EXPECT_EQ(ledger::ReadReceiptsAfter(tx, 0, 1000, std::nullopt, 3 * kBodyBytesMax).size(), 3u);
    EXPECT_EQ(ledger::ReadReceiptsAfter(tx, 0, 1000, std::nullopt, 3 * kBodyBytesMax - 1).size(),
              2u);
    EXPECT_EQ(ledger::ReadReceiptsBefore(tx, std::numeric_limits<std::int64_t>::max(), 1000,
                                         std::nullopt, 1)
                  .size(),
              1u);
    EXPECT_EQ(ledger::ReadOrderReceipts(tx, "BIG", 0, 10, 1).size(), 1u);
    EXPECT_EQ(ledger::ReadOrderReceipts(tx, "BIG", 0, 10).size(), 10u);
}

// Through HTTP: the generic channel's genuine notice replayed; the 101st duplicate's receipt
// object says its body was not stored and has neither body nor body_base64.
TEST(ReceiptBodiesHttpPgTest, AReceiptKeptWithoutItsBodySaysSo) {
    TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    testing::TestService service{testing::TestConfig(db.url())};
    testing::HttpClient client{service.port()};
    ASSERT_EQ(service.CreateOrder(client, "H-1", "acct-1", 500).status, 201);
    const std::string notice = testing::GenericPayment("H-1", "TX-H-1", 500);
    ASSERT_EQ(service.PostGeneric(client, notice).status, 200);
    for (int i = 0; i < kDuplicatesKept + 1; ++i) {
        const testing::HttpResult replay = service.PostGeneric(client, notice);
        ASSERT_EQ(replay.status, 200) << replay.body;
        ASSERT_EQ(replay.Json().value("outcome", ""), "duplicate") << replay.body;
    }
    const testing::HttpResult r =
        client.Get("/v1/orders/H-1/receipts?limit=1000", testing::kAuditorToken);
    ASSERT_EQ(r.status, 200) << r.body;
    const nlohmann::json receipts = r.Json()["receipts"];
    ASSERT_EQ(receipts.size(), 1u + 1u + kDuplicatesKept + 1u);
    const std::string sha256 = ledger::Sha256Hex(notice);
    const nlohmann::json& last_kept = receipts[receipts.size() - 2];
    EXPECT_EQ(last_kept["outcome"], "duplicate");
    EXPECT_EQ(last_kept["body"], notice);
    EXPECT_EQ(last_kept["body_sha256"], sha256);
    EXPECT_EQ(last_kept.value("body_stored", true), true);
    const nlohmann::json& unkept = receipts.back();
    EXPECT_EQ(unkept["outcome"], "duplicate");
    EXPECT_EQ(unkept["body_stored"], false);
    EXPECT_FALSE(unkept.contains("body")) << unkept.dump();
    EXPECT_FALSE(unkept.contains("body_base64")) << unkept.dump();
    EXPECT_EQ(unkept["body_sha256"], sha256);
    EXPECT_EQ(unkept["chain"].get<std::string>().size(), 64u);
    // The genuine notice and its 100 kept replays share one stored body.
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM receipt_bodies WHERE body_sha256 = decode('" +
                        sha256 + "', 'hex')"),
              "1");
}

}  // namespace
}  // namespace payledger::receipt_bodies_test
