#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ledger/reconcile/bill.hpp"

namespace payledger::ledger::reconcile {

// Reading statements piece by piece, so that memory does not grow with the statement
// (docs/reconciliation.md#limits-and-memory): a byte stream (a file, gzip through zlib, a zip entry
// through libzip), lines over it, and GBK text through iconv. Every failure throws BillError naming
// the file. Not thread-safe; one reader per statement.
class ByteStream {
public:
    virtual ~ByteStream() = default;
    // Up to `size` bytes into `buffer`; 0 at the end. Throws BillError.
    virtual std::size_t Read(char* buffer, std::size_t size) = 0;
};

// The file at `path` as it is, or, when it is gzip (zlib detects the magic bytes), its
// decompressed content. A truncated or corrupt gzip stream throws from Read, and so does one
// that yields more than `bytes_max` bytes.
[[nodiscard]] std::unique_ptr<ByteStream> OpenTextOrGzip(
    const std::string& path, std::uint64_t bytes_max = kBillDecompressedBytesMax);

// A zip archive's entry whose name (read raw, as GBK without the UTF-8 flag, or as UTF-8
// when the flag is set) ends in `name_suffix`, decompressed as it is read. Throws BillError
// when the file is not a zip archive, is truncated, or has no such entry (or several), and
// when the entry says it holds more than `bytes_max` bytes or yields more when read.
[[nodiscard]] std::unique_ptr<ByteStream> OpenZipEntry(
    const std::string& path, std::string_view name_suffix,
    std::uint64_t bytes_max = kBillDecompressedBytesMax);

// True when the file at `path` starts with a zip local-file header ("PK\3\4").
[[nodiscard]] bool LooksLikeZip(const std::string& path);

// Lines of a stream: each without its "\n" or "\r\n". A last line without a line end counts.
class LineReader {
public:
    explicit LineReader(ByteStream& stream, std::int64_t lines_max = kBillLinesMax)
        : stream_(stream), lines_max_(lines_max) {}

    // The next line into `line`; false at the end. Throws BillError for a line over
    // kBillLineBytesMax and for the line after `lines_max` (blank lines count).
    bool Next(std::string& line);
    // The 1-based number of the line Next returned last.
    [[nodiscard]] std::int64_t line_number() const { return line_number_; }

private:
    ByteStream& stream_;
    const std::int64_t lines_max_;
    std::string buffer_;
    std::size_t start_ = 0;
    bool end_ = false;
    std::int64_t line_number_ = 0;
};

// GBK to UTF-8 (glibc iconv). Decode is nullopt for bytes that are not GBK.
class GbkDecoder {
public:
    GbkDecoder();
    ~GbkDecoder();
    GbkDecoder(const GbkDecoder&) = delete;
    GbkDecoder& operator=(const GbkDecoder&) = delete;

    [[nodiscard]] std::optional<std::string> Decode(std::string_view gbk);

private:
    void* handle_ = nullptr;  // iconv_t
};

// UTF-8 to GBK, for writing simulated statements. nullopt for text GBK cannot write.
[[nodiscard]] std::optional<std::string> EncodeGbk(std::string_view utf8);

}  // namespace payledger::ledger::reconcile
