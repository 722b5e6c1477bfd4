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

bool IsPlatformId(std::string_view text) {
    if (text.empty() || text.size() > kPlatformIdLengthMax) return false;
    return std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c <= '~'; });
}

bool IsValidUtf8(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
        const auto byte = static_cast<unsigned char>(text[i]);
        if (byte < 0x80) {
            ++i;
            continue;
        }
        std::size_t length = 0;
        std::uint32_t code = 0;
        if (byte >= 0xC2 && byte <= 0xDF) {
            length = 2;
            code = byte & 0x1F;
        } else if (byte >= 0xE0 && byte <= 0xEF) {
            length = 3;
            code = byte & 0x0F;
        } else if (byte >= 0xF0 && byte <= 0xF4) {
            length = 4;
            code = byte & 0x07;
        } else {
            return false;  // A continuation byte first, an overlong lead, or past U+10FFFF.
        }
        if (text.size() - i < length) return false;
        for (std::size_t k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xC0) != 0x80) return false;
            code = (code << 6) | (next & 0x3F);
        }
        if ((length == 3 && code < 0x800) || (length == 4 && code < 0x10000)) return false;
        if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
        i += length;
    }
    return true;
}

}  // namespace payledger::ledger::reconcile
