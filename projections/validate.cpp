#include "projections/validate.hpp"

#include <cstdio>
#include <string>

#include "projections/assert.hpp"

namespace payledger::projections {
namespace {

constexpr std::int64_t kMicrosPerSecond = 1'000'000;
constexpr std::int64_t kShanghaiOffsetSeconds = 8 * 3600;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Accumulates decimal digits into `value`, refusing anything that would pass `limit`.
bool AccumulateDigits(std::string_view digits, std::int64_t limit, std::int64_t& value) {
    for (char c : digits) {
        if (!IsDigit(c)) return false;
        const std::int64_t digit = c - '0';
        if (value > (limit - digit) / 10) return false;
        value = value * 10 + digit;
    }
    return true;
}

// Parses exactly `width` digits at `text[pos]`.
std::optional<int> Fixed(std::string_view text, std::size_t pos, std::size_t width) {
    if (pos + width > text.size()) return std::nullopt;
    int value = 0;
    for (std::size_t i = pos; i < pos + width; ++i) {
        if (!IsDigit(text[i])) return std::nullopt;
        value = value * 10 + (text[i] - '0');
    }
    return value;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
std::int64_t DaysFromCivil(std::int64_t year, int month, int day) {
    year -= month <= 2 ? 1 : 0;
    const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
    const std::int64_t year_of_era = year - era * 400;
    const std::int64_t day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    const std::int64_t day_of_era =
        year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    return era * 146097 + day_of_era - 719468;
}

bool IsLeap(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int DaysInMonth(int year, int month) {
    constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return month == 2 && IsLeap(year) ? 29 : kDays[month - 1];
}

struct LocalTime {
    int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
};

std::optional<TimeMicros> ToMicros(const LocalTime& t, std::int64_t offset_seconds) {
    if (t.year < 1970 || t.year > 9999) return std::nullopt;
    if (t.month < 1 || t.month > 12) return std::nullopt;
    if (t.day < 1 || t.day > DaysInMonth(t.year, t.month)) return std::nullopt;
    if (t.hour > 23 || t.minute > 59 || t.second > 59) return std::nullopt;
    const std::int64_t seconds = DaysFromCivil(t.year, t.month, t.day) * 86400 + t.hour * 3600 +
                                 t.minute * 60 + t.second - offset_seconds;
    return seconds * kMicrosPerSecond;
}

// Reads the fields at the given offsets; `layout` holds the separators that must match.
std::optional<LocalTime> ReadLocal(std::string_view text, std::string_view layout) {
    if (text.size() != layout.size()) return std::nullopt;
    LocalTime t;
    int* fields[] = {&t.year, &t.month, &t.day, &t.hour, &t.minute, &t.second};
    std::size_t field = 0;
    std::size_t pos = 0;
    while (pos < layout.size()) {
        const char c = layout[pos];
        if (c != 'Y' && c != 'M' && c != 'D' && c != 'h' && c != 'm' && c != 's') {
            if (text[pos] != c) return std::nullopt;
            ++pos;
            continue;
        }
        std::size_t width = 0;
        while (pos + width < layout.size() && layout[pos + width] == c) ++width;
        const std::optional<int> value = Fixed(text, pos, width);
        if (!value || field >= 6) return std::nullopt;
        *fields[field++] = *value;
        pos += width;
    }
    return t;
}

}  // namespace

bool IsValidKey(std::string_view text) {
    if (text.empty() || text.size() > kKeyBytesMax) return false;
    for (char c : text) {
        const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || IsDigit(c) ||
                        c == '_' || c == '-' || c == '|' || c == '*' || c == '.';
        if (!ok) return false;
    }
    return true;
}

bool IsValidPlatformId(std::string_view text) {
    if (text.empty() || text.size() > kPlatformIdBytesMax) return false;
    for (const char c : text) {
        if (c < 0x21 || c > 0x7e) return false;
    }
    return true;
}

bool IsValidCurrency(std::string_view text) {
    if (text.size() != 3) return false;
    for (char c : text) {
        if (c < 'A' || c > 'Z') return false;
    }
    return true;
}

bool IsValidAmount(std::int64_t amount) { return amount >= 1 && amount <= kAmountMax; }

std::optional<std::int64_t> ParseDigits(std::string_view text, std::int64_t max) {
    if (text.empty() || max < 0) return std::nullopt;
    std::int64_t value = 0;
    if (!AccumulateDigits(text, max, value)) return std::nullopt;
    return value;
}

std::optional<std::int64_t> ParseMinorUnits(std::string_view text) {
    const std::optional<std::int64_t> value = ParseDigits(text, kAmountMax);
    if (!value || !IsValidAmount(*value)) return std::nullopt;
    return value;
}

std::optional<std::int64_t> ParseMajorUnits(std::string_view text) {
    const std::size_t point = text.find('.');
    const std::string_view whole = text.substr(0, point);
    std::string_view fraction;
    if (point != std::string_view::npos) {
        fraction = text.substr(point + 1);
        if (fraction.empty() || fraction.size() > 2) return std::nullopt;  // "88." or "88.801".
    }
    if (whole.empty()) return std::nullopt;  // ".5"
    std::int64_t value = 0;
    if (!AccumulateDigits(whole, kAmountMax / 100, value)) return std::nullopt;
    value *= 100;
    std::int64_t cents = 0;
    if (!AccumulateDigits(fraction, 99, cents)) return std::nullopt;
    if (fraction.size() == 1) cents *= 10;  // "88.8" is 88.80.
    if (value > kAmountMax - cents) return std::nullopt;
    value += cents;
    if (!IsValidAmount(value)) return std::nullopt;
    return value;
}

std::optional<TimeMicros> ParseRfc3339(std::string_view text) {
    if (text.size() < 20) return std::nullopt;
    std::string_view head = text.substr(0, 19);
    std::string normalized(head);
    if (normalized[10] != 'T' && normalized[10] != 't' && normalized[10] != ' ') {
        return std::nullopt;
    }
    normalized[10] = 'T';
    const std::optional<LocalTime> local = ReadLocal(normalized, "YYYY-MM-DDThh:mm:ss");
    if (!local) return std::nullopt;
    std::size_t pos = 19;
    std::int64_t micros = 0;
    if (text[pos] == '.') {
        ++pos;
        std::size_t digits = 0;
        while (pos < text.size() && IsDigit(text[pos])) {
            if (digits < 6) micros = micros * 10 + (text[pos] - '0');
            ++digits;
            ++pos;
        }
        if (digits == 0) return std::nullopt;
        for (std::size_t i = digits; i < 6; ++i) micros *= 10;
    }
    std::int64_t offset_seconds = 0;
    const std::string_view zone = text.substr(pos);
    if (zone == "Z" || zone == "z") {
        offset_seconds = 0;
    } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
        const std::optional<int> hours = Fixed(zone, 1, 2);
        const std::optional<int> minutes = Fixed(zone, 4, 2);
        if (!hours || !minutes || *hours > 23 || *minutes > 59) return std::nullopt;
        offset_seconds = (*hours * 3600 + *minutes * 60) * (zone[0] == '-' ? -1 : 1);
    } else {
        return std::nullopt;
    }
    const std::optional<TimeMicros> base = ToMicros(*local, offset_seconds);
    if (!base) return std::nullopt;
    return *base + micros;
}

std::optional<TimeMicros> ParseShanghaiCompact(std::string_view text) {
    const std::optional<LocalTime> local = ReadLocal(text, "YYYYMMDDhhmmss");
    if (!local) return std::nullopt;
    return ToMicros(*local, kShanghaiOffsetSeconds);
}

std::optional<TimeMicros> ParseShanghaiDashed(std::string_view text) {
    const std::optional<LocalTime> local = ReadLocal(text, "YYYY-MM-DD hh:mm:ss");
    if (!local) return std::nullopt;
    return ToMicros(*local, kShanghaiOffsetSeconds);
}

namespace {

// `width` decimal digits of `value` (0 <= value < 10^width), zero-padded.
void AppendDigits(std::int64_t value, int width, std::string& out) {
    char digits[20];
    for (int i = width - 1; i >= 0; --i) {
        digits[i] = static_cast<char>('0' + value % 10);
        value /= 10;
    }
    out.append(digits, static_cast<std::size_t>(width));
}

void AppendUtc(TimeMicros time, bool always_six_digits, std::string& out) {
    std::int64_t seconds = time / kMicrosPerSecond;
    std::int64_t micros = time % kMicrosPerSecond;
    if (micros < 0) {
        micros += kMicrosPerSecond;
        seconds -= 1;
    }
    std::int64_t days = seconds / 86400;
    std::int64_t rest = seconds % 86400;
    if (rest < 0) {
        rest += 86400;
        days -= 1;
    }
    // Civil from days (Howard Hinnant's algorithm).
    days += 719468;
    const std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    const std::int64_t day_of_era = days - era * 146097;
    const std::int64_t year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
    const std::int64_t day_of_year =
        day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    const std::int64_t mp = (5 * day_of_year + 2) / 153;
    const std::int64_t day = day_of_year - (153 * mp + 2) / 5 + 1;
    const std::int64_t month = mp < 10 ? mp + 3 : mp - 9;
    const std::int64_t year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);

    // Years 0 to 9999 as four digits; others (outside every validated input) as %04lld did.
    if (year >= 0 && year <= 9999) {
        AppendDigits(year, 4, out);
    } else {
        char buffer[24];
        const int length =
            std::snprintf(buffer, sizeof buffer, "%04lld", static_cast<long long>(year));
        out.append(buffer, static_cast<std::size_t>(length));
    }
    out += '-';
    AppendDigits(month, 2, out);
    out += '-';
    AppendDigits(day, 2, out);
    out += 'T';
    AppendDigits(rest / 3600, 2, out);
    out += ':';
    AppendDigits(rest / 60 % 60, 2, out);
    out += ':';
    AppendDigits(rest % 60, 2, out);
    if (micros != 0 || always_six_digits) {
        out += '.';
        AppendDigits(micros, 6, out);
    }
    out += 'Z';
}

}  // namespace

std::string FormatRfc3339(TimeMicros time) {
    std::string out;
    AppendUtc(time, false, out);
    return out;
}

std::string FormatRfc3339Micros(TimeMicros time) {
    std::string out;
    AppendRfc3339Micros(time, out);
    return out;
}

void AppendRfc3339Micros(TimeMicros time, std::string& out) { AppendUtc(time, true, out); }

namespace {

// "yyyy-MM-ddTHH:mm:ss" of `time`'s whole seconds in Asia/Shanghai.
std::string ShanghaiLocal(TimeMicros time) {
    TimeMicros seconds = time / kMicrosPerSecond;
    if (time < 0 && time % kMicrosPerSecond != 0) --seconds;  // Whole seconds, downwards.
    std::string text = FormatRfc3339((seconds + kShanghaiOffsetSeconds) * kMicrosPerSecond);
    text.pop_back();  // The "Z": the fields are local time.
    return text;
}

}  // namespace

std::string FormatShanghaiCompact(TimeMicros time) {
    std::string text;
    for (const char c : ShanghaiLocal(time)) {
        if (c >= '0' && c <= '9') text += c;
    }
    return text;
}

std::string FormatShanghaiDashed(TimeMicros time) {
    std::string text = ShanghaiLocal(time);
    text[10] = ' ';
    return text;
}

std::string FormatShanghaiRfc3339(TimeMicros time) { return ShanghaiLocal(time) + "+08:00"; }

std::string FormatMajorUnits(std::int64_t minor) {
    PAYLEDGER_ASSERT(minor >= 0);
    const std::int64_t cents = minor % 100;
    return std::to_string(minor / 100) + (cents < 10 ? ".0" : ".") + std::to_string(cents);
}

}  // namespace payledger::projections
