// Tests of ledger/integrity/chain.hpp against docs/integrity.md#the-receipt-chain, with lines and
// digests computed independently (Python's hashlib) for two receipts: one that appended an event,
// one refused before the ledger with an empty body.

#include "ledger/integrity/chain.hpp"

#include <gtest/gtest.h>

#include <string>

#include "ledger/base/bytes.hpp"

namespace payledger::ledger {
namespace {

using projections::EventType;
using projections::Outcome;
using projections::Source;

constexpr projections::TimeMicros kReceivedAt = 1'795'941'000'123'456;  // 08:30:00.123456Z

Receipt Appending() {
    return {.id = 7,
            .source = Source::kGeneric,
            .received_at = kReceivedAt,
            .body = R"({"event_type":"PAYMENT_SUCCEEDED"})",
            .outcome = Outcome::kAppended,
            .seq = 42,
            .out_trade_no = "ORD-1"};
}

projections::Event Appended() {
    return {.seq = 42,
            .out_trade_no = "ORD-1",
            .event_type = EventType::kPaymentSucceeded,
            .source = Source::kGeneric,
            .account_id = "acct-1",
            .amount = 1999,
            .currency = "CNY",
            .transaction_id = "TX-9",
            .occurred_at = 1'795'940'999'000'000,
            .receipt_id = 7};
}

Receipt Refused() {
    return {.id = 8,
            .source = Source::kWechatV2,
            .received_at = 1'795'941'001'000'000,
            .body = "",
            .outcome = Outcome::kBadSignature};
}

const std::string kLine1 =
    "7\tgeneric\t2026-11-29T08:30:00.123456Z\tappended\t42\tORD-1\t"
    "ffc8dca0a23cca4ef697367f12d0ef90a6a129105b6a4d63b6c75ee95a87ec82\t"
    "42,PAYMENT_SUCCEEDED,ORD-1,acct-1,1999,CNY,TX-9,2026-11-29T08:29:59.000000Z\n";
const std::string kLine2 =
    "8\twechat_v2\t2026-11-29T08:30:01.000000Z\tbad_signature\t\t\t"
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\t\n";

TEST(ChainTest, LinesAreSpecSection11Exactly) {
    const projections::Event event = Appended();
    EXPECT_EQ(ReceiptLine(Appending(), &event), kLine1);
    EXPECT_EQ(ReceiptLine(Refused(), nullptr), kLine2);
}

TEST(ChainTest, AClosedPaymentHasNoAmountOrCurrencyInItsLine) {
    projections::Event close = Appended();
    close.event_type = EventType::kPaymentClosed;
    close.amount = 0;
    close.currency = "";
    close.transaction_id.reset();
    const std::string line = ReceiptLine(Appending(), &close);
    EXPECT_NE(line.find("\t42,PAYMENT_CLOSED,ORD-1,acct-1,,,,2026-11-29T08:29:59.000000Z\n"),
              std::string::npos)
        << line;
}

TEST(ChainTest, TheChainStartsFromZeroBytesAndFollowsEachLine) {
    const ChainValue first = NextChain(kChainStart, kLine1);
    EXPECT_EQ(HexLower(first), "eef2893cde7f4a7db7dba79ce43074cf5b5e49860435e73c2a3615539a83a6f8");
    EXPECT_EQ(HexLower(NextChain(first, kLine2)),
              "52a1166e94ca9adb160273f46db974041f412277e4e31387f551e596f91bc26a");
    // Any change to a line changes every value after it.
    std::string changed = kLine1;
    changed[changed.find("1999")] = '2';
    EXPECT_NE(NextChain(NextChain(kChainStart, changed), kLine2), NextChain(first, kLine2));
}

TEST(ChainTest, HexRoundTripsAndRefusesAnythingElse) {
    const ChainValue value = NextChain(kChainStart, kLine1);
    EXPECT_EQ(ParseChainHex(HexLower(value)), value);
    EXPECT_EQ(ParseChainHex(HexLower(value).substr(1)), std::nullopt);
    EXPECT_EQ(ParseChainHex(std::string(64, 'A')), std::nullopt);  // Lower case only.
    EXPECT_EQ(ParseChainHex(std::string(64, 'g')), std::nullopt);
    EXPECT_EQ(ParseChainHex(std::string(64, '0')), kChainStart);
}

}  // namespace
}  // namespace payledger::ledger
