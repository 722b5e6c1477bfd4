#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <pqxx/stream_from>
#include <string>
#include <string_view>
#include <vector>

#include "projections/assert.hpp"
#include "projections/event.hpp"

namespace payledger::ledger {

// The rows of a binary COPY (PostgreSQL's documentation, "COPY", "Binary Format"): an 11-byte
// signature, a 32-bit flags field and a header extension, then for each row a 16-bit field
// count and for each field a 32-bit length (-1: null) and its bytes, all in network order;
// a count of -1 ends the data. Each CopyData message holds whole rows.
class BinaryCopyRows {
public:
    explicit BinaryCopyRows(pqxx::stream_from& stream) : stream_(stream) {}

    // The next row (its fields stay valid until the next call); false after the last.
    bool Next() {
        if (done_) return false;
        if (rest_.empty()) {
            PAYLEDGER_ASSERT(stream_.get_raw_line(message_));  // The trailer comes first.
            rest_ = message_;
            if (!header_read_) ReadHeader();
        }
        const std::int16_t count = static_cast<std::int16_t>(Take(2));
        if (count == -1) {
            PAYLEDGER_ASSERT(rest_.empty());
            PAYLEDGER_ASSERT(!stream_.get_raw_line(message_));  // Then the COPY ends.
            done_ = true;
            return false;
        }
        PAYLEDGER_ASSERT(count >= 0);
        fields_.clear();
        for (std::int16_t i = 0; i < count; ++i) {
            const auto length = static_cast<std::int32_t>(Take(4));
            if (length == -1) {
                fields_.push_back(std::nullopt);
                continue;
            }
            PAYLEDGER_ASSERT(length >= 0 && static_cast<std::size_t>(length) <= rest_.size());
            fields_.emplace_back(rest_.substr(0, static_cast<std::size_t>(length)));
            rest_.remove_prefix(static_cast<std::size_t>(length));
        }
        return true;
    }

    [[nodiscard]] std::size_t size() const { return fields_.size(); }
    [[nodiscard]] bool null(std::size_t i) const { return !fields_.at(i).has_value(); }
    // REQUIRES: !null(i).
    [[nodiscard]] std::string_view bytes(std::size_t i) const {
        PAYLEDGER_ASSERT(!null(i));
        return *fields_[i];
    }
    // A bigint. REQUIRES: !null(i).
    [[nodiscard]] std::int64_t int8(std::size_t i) const {
        const std::string_view field = bytes(i);
        PAYLEDGER_ASSERT(field.size() == 8);
        return static_cast<std::int64_t>(BigEndian(field));
    }
    // A boolean. REQUIRES: !null(i).
    [[nodiscard]] bool boolean(std::size_t i) const {
        const std::string_view field = bytes(i);
        PAYLEDGER_ASSERT(field.size() == 1);
        return field[0] != 0;
    }
    [[nodiscard]] std::optional<std::int64_t> optional_int8(std::size_t i) const {
        return null(i) ? std::nullopt : std::optional(int8(i));
    }
    // A timestamptz as microseconds since the Unix epoch (binary: since 2000-01-01 UTC).
    [[nodiscard]] projections::TimeMicros time(std::size_t i) const {
        constexpr std::int64_t kUnixToPostgresMicros = 946'684'800'000'000;
        const std::int64_t since_2000 = int8(i);
        // Not ±infinity, nor a time the receipt's line could not show (years 0 to 9999).
        PAYLEDGER_ASSERT(since_2000 > -63'082'281'600'000'000 &&
                         since_2000 < 252'455'616'000'000'000);
        return since_2000 + kUnixToPostgresMicros;
    }

private:
    static std::uint64_t BigEndian(std::string_view bytes) {
        std::uint64_t value = 0;
        for (const char byte : bytes) value = value << 8 | static_cast<unsigned char>(byte);
        return value;
    }
    std::uint64_t Take(std::size_t size) {
        PAYLEDGER_ASSERT(rest_.size() >= size);  // A row never spans two messages.
        const std::uint64_t value = BigEndian(rest_.substr(0, size));
        rest_.remove_prefix(size);
        return value;
    }
    void ReadHeader() {
        constexpr std::string_view kSignature{"PGCOPY\n\377\r\n\0", 11};
        PAYLEDGER_ASSERT(rest_.substr(0, kSignature.size()) == kSignature);
        rest_.remove_prefix(kSignature.size());
        static_cast<void>(Take(4));  // Flags: none that matter to a reader of plain types.
        const std::uint64_t extension = Take(4);
        PAYLEDGER_ASSERT(extension <= rest_.size());
        rest_.remove_prefix(extension);
        header_read_ = true;
    }

    pqxx::stream_from& stream_;
    std::string message_{};
    std::string_view rest_{};
    bool header_read_ = false;
    bool done_ = false;
    std::vector<std::optional<std::string_view>> fields_{};
};

}  // namespace payledger::ledger
