#include "ledger/reconcile/bill.hpp"

#include <algorithm>

#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger::reconcile {

const char* ToString(Platform platform) {
    switch (platform) {
        case Platform::kWechat:
            return "wechat";
        case Platform::kAlipay:
            return "alipay";
    }
    PAYLEDGER_ASSERT(false);
    return "";
}

std::string FormatShanghaiDashed(projections::TimeMicros time) {
    constexpr projections::TimeMicros kMicrosPerSecond = 1'000'000;
    constexpr projections::TimeMicros kShanghaiOffset = 8 * 3600 * kMicrosPerSecond;
    projections::TimeMicros seconds = time / kMicrosPerSecond;
    if (time % kMicrosPerSecond < 0) --seconds;  // Floor: a bill's times are whole seconds.
    // RFC 3339 of the local wall time, "2026-11-30T10:06:33Z", rewritten as the bills do.
    std::string text = projections::FormatRfc3339(seconds * kMicrosPerSecond + kShanghaiOffset);
    PAYLEDGER_ASSERT(text.size() == 20);
    text[10] = ' ';
    text.resize(19);
    return text;
}

std::string FormatYuan(std::int64_t amount) {
    PAYLEDGER_ASSERT(amount >= 0);
    const std::int64_t cents = amount % 100;
    return std::to_string(amount / 100) + (cents < 10 ? ".0" : ".") + std::to_string(cents);
}

std::optional<std::int64_t> ParseYuanOrZero(std::string_view text) {
    // Zero in any spelling the decimal rules accept: "0", "0.0", "0.00", "000.00".
    const std::size_t dot = text.find('.');
    const std::string_view whole = text.substr(0, dot);
    const std::string_view fraction =
        dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
    const auto zeros = [](std::string_view part) {
        return std::all_of(part.begin(), part.end(), [](char c) { return c == '0'; });
    };
    if (!whole.empty() && whole.size() <= 20 && zeros(whole) && zeros(fraction) &&
        fraction.size() <= 2 && (dot == std::string_view::npos || !fraction.empty())) {
        return 0;
    }
    return projections::ParseMajorUnits(text);
}

}  // namespace payledger::ledger::reconcile
