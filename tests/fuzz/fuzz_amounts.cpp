// Fuzzes the text parsers of projections/validate.hpp with the whole input as the text, and
// checks each against an independent reference: the amounts against 128-bit arithmetic over
// the grammar of the header comments, the times against std::chrono's calendar. Round trips:
// an amount re-formatted as fen or as yuan with two decimals parses back to itself, and
// ParseRfc3339(FormatRfc3339(t)) == t for every t of years 1970-9999 (also t taken from the
// input's first 8 bytes, which FormatRfc3339 must format without overflow for any value).

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "projections/validate.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace payledger::fuzz {
namespace {

using projections::TimeMicros;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool AllDigits(std::string_view text) {
    for (const char c : text) {
        if (!IsDigit(c)) return false;
    }
    return true;
}

// Decimal digits as a number, saturating far above 10^13 (any excess only has to refuse).
__int128 Digits(std::string_view text) {
    __int128 value = 0;
    for (const char c : text) {
        value = value * 10 + (c - '0');
        if (value > static_cast<__int128>(1) << 100) return value;
    }
    return value;
}

std::optional<std::int64_t> InRange(__int128 value) {
    if (value < 1 || value > projections::kAmountMax) return std::nullopt;
    return static_cast<std::int64_t>(value);
}

std::optional<std::int64_t> ReferenceMinor(std::string_view text) {
    if (text.empty() || !AllDigits(text)) return std::nullopt;
    return InRange(Digits(text));
}

// digits ["." 1-2 digits], in hundredths.
std::optional<std::int64_t> ReferenceMajor(std::string_view text) {
    const std::size_t point = text.find('.');
    const std::string_view whole = text.substr(0, point);
    const std::string_view fraction =
        point == std::string_view::npos ? std::string_view{} : text.substr(point + 1);
    if (whole.empty() || !AllDigits(whole) || !AllDigits(fraction)) return std::nullopt;
    if (point != std::string_view::npos && (fraction.empty() || fraction.size() > 2)) {
        return std::nullopt;
    }
    const __int128 cents = fraction.size() == 1 ? Digits(fraction) * 10 : Digits(fraction);
    return InRange(Digits(whole) * 100 + cents);
}

struct Fields {
    int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
};

// Two-or-four digit fields at fixed offsets.
std::optional<int> At(std::string_view text, std::size_t pos, std::size_t width) {
    if (pos + width > text.size() || !AllDigits(text.substr(pos, width))) return std::nullopt;
    return static_cast<int>(Digits(text.substr(pos, width)));
}

std::optional<TimeMicros> ReferenceMicros(const Fields& f, std::int64_t offset_seconds) {
    using namespace std::chrono;
    if (f.year < 1970 || f.year > 9999) return std::nullopt;
    const year_month_day date{year{f.year}, month{static_cast<unsigned>(f.month)},
                              day{static_cast<unsigned>(f.day)}};
    if (!date.ok() || f.hour > 23 || f.minute > 59 || f.second > 59) return std::nullopt;
    const sys_seconds at = sys_days{date} + hours{f.hour} + minutes{f.minute} + seconds{f.second} -
                           seconds{offset_seconds};
    return duration_cast<microseconds>(at.time_since_epoch()).count();
}

// "YYYY<a>MM<b>DD<c>hh<d>mm<e>ss" with the separators given ('\0': none).
std::optional<Fields> ReadFields(std::string_view text, std::string_view separators) {
    std::size_t pos = 0;
    int* targets[6] = {};
    Fields f;
    targets[0] = &f.year;
    targets[1] = &f.month;
    targets[2] = &f.day;
    targets[3] = &f.hour;
    targets[4] = &f.minute;
    targets[5] = &f.second;
    for (std::size_t i = 0; i < 6; ++i) {
        const std::size_t width = i == 0 ? 4 : 2;
        const std::optional<int> value = At(text, pos, width);
        if (!value) return std::nullopt;
        *targets[i] = *value;
        pos += width;
        if (i < 5 && separators[i] != '\0') {
            if (pos >= text.size() || text[pos] != separators[i]) return std::nullopt;
            ++pos;
        }
    }
    if (pos != text.size()) return std::nullopt;
    return f;
}

std::optional<TimeMicros> ReferenceRfc3339(std::string_view text) {
    if (text.size() < 20) return std::nullopt;
    std::string head(text.substr(0, 19));
    if (head[10] != 'T' && head[10] != 't' && head[10] != ' ') return std::nullopt;
    head[10] = 'T';
    const std::optional<Fields> fields = ReadFields(head, "--T::");
    if (!fields) return std::nullopt;
    std::size_t pos = 19;
    std::int64_t micros = 0;
    if (text[pos] == '.') {
        std::size_t end = pos + 1;
        while (end < text.size() && IsDigit(text[end])) ++end;
        const std::string_view digits = text.substr(pos + 1, end - pos - 1);
        if (digits.empty()) return std::nullopt;
        std::string six(digits.substr(0, 6));
        six.resize(6, '0');
        micros = static_cast<std::int64_t>(Digits(six));
        pos = end;
    }
    const std::string_view zone = text.substr(pos);
    std::int64_t offset = 0;
    if (zone != "Z" && zone != "z") {
        if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || zone[3] != ':') {
            return std::nullopt;
        }
        const std::optional<int> hours = At(zone, 1, 2);
        const std::optional<int> minutes = At(zone, 4, 2);
        if (!hours || !minutes || *hours > 23 || *minutes > 59) return std::nullopt;
        offset = (*hours * 3600 + *minutes * 60) * (zone[0] == '-' ? -1 : 1);
    }
    const std::optional<TimeMicros> base = ReferenceMicros(*fields, offset);
    if (!base) return std::nullopt;
    return *base + micros;
}

constexpr std::int64_t kShanghaiOffsetSeconds = 8 * 3600;

std::optional<TimeMicros> ReferenceShanghai(std::string_view text, std::string_view separators) {
    const std::optional<Fields> fields = ReadFields(text, separators);
    if (!fields) return std::nullopt;
    return ReferenceMicros(*fields, kShanghaiOffsetSeconds);
}

bool ReferenceKey(std::string_view text) {
    if (text.empty() || text.size() > projections::kKeyBytesMax) return false;
    for (const char c : text) {
        const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || IsDigit(c) ||
                        std::string_view("_-|*.").find(c) != std::string_view::npos;
        if (!ok) return false;
    }
    return true;
}

void CheckAmounts(std::string_view text) {
    const std::optional<std::int64_t> minor = projections::ParseMinorUnits(text);
    FUZZ_CHECK(minor == ReferenceMinor(text));
    if (minor) {
        FUZZ_CHECK(projections::IsValidAmount(*minor));
        FUZZ_CHECK(projections::ParseMinorUnits(std::to_string(*minor)) == minor);
    }
    const std::optional<std::int64_t> major = projections::ParseMajorUnits(text);
    FUZZ_CHECK(major == ReferenceMajor(text));
    if (major) {
        FUZZ_CHECK(*major >= 1 && *major <= projections::kAmountMax);
        char yuan[32];
        std::snprintf(yuan, sizeof yuan, "%lld.%02lld", static_cast<long long>(*major / 100),
                      static_cast<long long>(*major % 100));
        FUZZ_CHECK(projections::ParseMajorUnits(yuan) == major);
        FUZZ_CHECK(projections::ParseMinorUnits(std::to_string(*major)) == major);
    }
}

void CheckRoundTrip(TimeMicros time) {
    const std::string text = projections::FormatRfc3339(time);
    FUZZ_CHECK(projections::ParseRfc3339(text) == time);
}

void CheckTimes(std::string_view text) {
    const std::optional<TimeMicros> rfc = projections::ParseRfc3339(text);
    FUZZ_CHECK(rfc == ReferenceRfc3339(text));
    // Years 1970-9999 of local time; a zone offset moves the instant by at most a day.
    if (rfc && *rfc >= 0 && *rfc < 253402300800LL * 1'000'000) CheckRoundTrip(*rfc);

    const std::optional<TimeMicros> compact = projections::ParseShanghaiCompact(text);
    FUZZ_CHECK(compact == ReferenceShanghai(text, std::string_view("\0\0\0\0\0", 5)));
    const std::optional<TimeMicros> dashed = projections::ParseShanghaiDashed(text);
    FUZZ_CHECK(dashed == ReferenceShanghai(text, std::string_view("-- ::", 5)));
    if (dashed) {
        // The same wall time, written as RFC 3339 at +08:00.
        std::string rfc_text(text);
        rfc_text[10] = 'T';
        FUZZ_CHECK(projections::ParseRfc3339(rfc_text + "+08:00") == dashed);
    }
}

void CheckFormat(const std::uint8_t* data, std::size_t size) {
    if (size < sizeof(TimeMicros)) return;
    TimeMicros time = 0;
    std::memcpy(&time, data, sizeof time);
    const std::string text = projections::FormatRfc3339(time);  // Any value: no UB.
    FUZZ_CHECK(!text.empty() && text.back() == 'Z');
    constexpr TimeMicros kYear10000 = 253402300800LL * 1'000'000;
    if (time >= 0 && time < kYear10000) CheckRoundTrip(time);
}

}  // namespace
}  // namespace payledger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace payledger;
    const std::string_view text = fuzz::AsText(data, size);
    fuzz::CheckAmounts(text);
    fuzz::CheckTimes(text);
    FUZZ_CHECK(projections::IsValidKey(text) == fuzz::ReferenceKey(text));
    FUZZ_CHECK(projections::IsValidCurrency(text) ==
               (text.size() == 3 &&
                text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") == std::string_view::npos));
    fuzz::CheckFormat(data, size);
    return 0;
}
