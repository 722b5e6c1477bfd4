#include "projections/event.hpp"

#include <array>
#include <utility>

#include "projections/assert.hpp"

namespace payledger::projections {
namespace {

constexpr std::array<std::pair<EventType, std::string_view>, 4> kEventTypeNames{{
    {EventType::kOrderCreated, "ORDER_CREATED"},
    {EventType::kPaymentSucceeded, "PAYMENT_SUCCEEDED"},
    {EventType::kPaymentClosed, "PAYMENT_CLOSED"},
    {EventType::kRefundSucceeded, "REFUND_SUCCEEDED"},
}};

constexpr std::array<std::pair<Source, std::string_view>, 13> kSourceNames{{
    {Source::kApi, "api"},
    {Source::kWechatV2, "wechat_v2"},
    {Source::kWechatV3, "wechat_v3"},
    {Source::kAlipay, "alipay"},
    {Source::kGeneric, "generic"},
    {Source::kWechatBill, "wechat_bill"},
    {Source::kAlipayBill, "alipay_bill"},
    {Source::kWechatV2Query, "wechat_v2_query"},
    {Source::kWechatV3Query, "wechat_v3_query"},
    {Source::kAlipayQuery, "alipay_query"},
    {Source::kWechatV2Close, "wechat_v2_close"},
    {Source::kWechatV3Close, "wechat_v3_close"},
    {Source::kAlipayClose, "alipay_close"},
}};

constexpr std::array<std::pair<Outcome, std::string_view>, 10> kOutcomeNames{{
    {Outcome::kAppended, "appended"},
    {Outcome::kDuplicate, "duplicate"},
    {Outcome::kIgnored, "ignored"},
    {Outcome::kMalformed, "malformed"},
    {Outcome::kBadSignature, "bad_signature"},
    {Outcome::kUnknownOrder, "unknown_order"},
    {Outcome::kConflict, "conflict"},
    {Outcome::kMismatch, "mismatch"},
    {Outcome::kRateLimited, "rate_limited"},
    {Outcome::kUnavailable, "unavailable"},
}};

template <typename Enum, std::size_t N>
std::string_view NameOf(const std::array<std::pair<Enum, std::string_view>, N>& names, Enum value) {
    for (const auto& [candidate, name] : names) {
        if (candidate == value) return name;
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

template <typename Enum, std::size_t N>
std::optional<Enum> ValueOf(const std::array<std::pair<Enum, std::string_view>, N>& names,
                            std::string_view text) {
    for (const auto& [value, name] : names) {
        if (name == text) return value;
    }
    return std::nullopt;
}

}  // namespace

std::string_view ToString(EventType type) { return NameOf(kEventTypeNames, type); }
std::string_view ToString(Source source) { return NameOf(kSourceNames, source); }
std::string_view ToString(Outcome outcome) { return NameOf(kOutcomeNames, outcome); }

std::optional<EventType> ParseEventType(std::string_view text) {
    return ValueOf(kEventTypeNames, text);
}
std::optional<Source> ParseSource(std::string_view text) { return ValueOf(kSourceNames, text); }
std::optional<Outcome> ParseOutcome(std::string_view text) { return ValueOf(kOutcomeNames, text); }

bool SameFingerprint(const Event& stored, const Event& delivered) {
    PAYLEDGER_ASSERT(stored.out_trade_no == delivered.out_trade_no);
    PAYLEDGER_ASSERT(stored.event_type == delivered.event_type);
    switch (stored.event_type) {
        case EventType::kOrderCreated:
            return stored.account_id == delivered.account_id && stored.amount == delivered.amount &&
                   stored.currency == delivered.currency;
        case EventType::kPaymentSucceeded:
        case EventType::kRefundSucceeded:
            return stored.transaction_id == delivered.transaction_id &&
                   stored.amount == delivered.amount && stored.currency == delivered.currency;
        case EventType::kPaymentClosed:
            return true;  // Every close is the same close.
    }
    PAYLEDGER_ASSERT(false);
    return false;
}

}  // namespace payledger::projections
