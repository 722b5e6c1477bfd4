#include "ledger/reconcile/bill_input.hpp"

#include <iconv.h>
#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "ledger/reconcile/bill.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger::reconcile {
namespace {

constexpr std::size_t kReadChunkBytes = 64 * 1024;

// zlib's gzread reads gzip and, transparently, a file that is not gzip.
class GzipStream final : public ByteStream {
public:
    GzipStream(const std::string& path, std::uint64_t bytes_max)
        : path_(path), bytes_max_(bytes_max), file_(gzopen(path.c_str(), "rb")) {
        if (file_ == nullptr) throw BillError(path + ": cannot open: " + std::strerror(errno));
        gzbuffer(file_, kReadChunkBytes);
    }
    ~GzipStream() override { gzclose(file_); }
    GzipStream(const GzipStream&) = delete;
    GzipStream& operator=(const GzipStream&) = delete;

    std::size_t Read(char* buffer, std::size_t size) override {
        const unsigned request = static_cast<unsigned>(std::min<std::size_t>(size, 1u << 30));
        const int got = gzread(file_, buffer, request);
        if (got < 0) {
            int code = 0;
            const char* message = gzerror(file_, &code);
            throw BillError(path_ + ": cannot read: " + (message ? message : "gzip error"));
        }
        if (got == 0 && !gzeof(file_)) throw BillError(path_ + ": cannot read");
        // gzread answers 0 at the end of a truncated gzip member without an error; gzerror
        // then says Z_BUF_ERROR ("unexpected end of file").
        if (got == 0) {
            int code = 0;
            const char* message = gzerror(file_, &code);
            if (code != Z_OK) {
                throw BillError(path_ + ": the gzip stream is truncated or corrupt: " +
                                (message ? message : "error"));
            }
        }
        read_ += static_cast<std::uint64_t>(got);
        if (read_ > bytes_max_) {
            throw BillError(path_ + ": the statement is larger than " + std::to_string(bytes_max_) +
                            " bytes once decompressed");
        }
        return static_cast<std::size_t>(got);
    }

private:
    std::string path_;
    std::uint64_t bytes_max_;
    std::uint64_t read_ = 0;
    gzFile file_;
};

class ZipEntryStream final : public ByteStream {
public:
    ZipEntryStream(const std::string& path, zip_t* archive, zip_file_t* file,
                   std::uint64_t bytes_max)
        : path_(path), archive_(archive), file_(file), bytes_max_(bytes_max) {}
    ~ZipEntryStream() override {
        zip_fclose(file_);
        zip_discard(archive_);
    }
    ZipEntryStream(const ZipEntryStream&) = delete;
    ZipEntryStream& operator=(const ZipEntryStream&) = delete;

    std::size_t Read(char* buffer, std::size_t size) override {
        const zip_int64_t got = zip_fread(file_, buffer, size);
        if (got < 0) {
            // A truncated entry or a CRC that does not match its data ends here.
            throw BillError(path_ + ": cannot read the zip entry: " +
                            zip_error_strerror(zip_file_get_error(file_)));
        }
        // The entry's stated size was checked at open; count what it really yields too.
        read_ += static_cast<std::uint64_t>(got);
        if (read_ > bytes_max_) {
            throw BillError(path_ + ": the zip entry is larger than " + std::to_string(bytes_max_) +
                            " bytes once decompressed");
        }
        return static_cast<std::size_t>(got);
    }

private:
    std::string path_;
    zip_t* archive_;
    zip_file_t* file_;
    std::uint64_t bytes_max_;
    std::uint64_t read_ = 0;
};

bool EndsWith(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

std::unique_ptr<ByteStream> OpenTextOrGzip(const std::string& path, std::uint64_t bytes_max) {
    return std::make_unique<GzipStream>(path, bytes_max);
}

bool LooksLikeZip(const std::string& path) {
    std::ifstream file{path, std::ios::binary};
    if (!file) throw BillError(path + ": cannot open: " + std::strerror(errno));
    char magic[4] = {};
    file.read(magic, sizeof magic);
    return file.gcount() == 4 && std::string_view(magic, 4) == std::string_view("PK\3\4", 4);
}

std::unique_ptr<ByteStream> OpenZipEntry(const std::string& path, std::string_view name_suffix,
                                         std::uint64_t bytes_max) {
    int code = 0;
    // ZIP_CHECKCONS: a truncated archive (its central directory cut off or inconsistent) is
    // refused at open rather than read half-way.
    zip_t* archive = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
    if (archive == nullptr) {
        zip_error_t error;
        zip_error_init_with_code(&error, code);
        const std::string message = zip_error_strerror(&error);
        zip_error_fini(&error);
        throw BillError(path + ": not a readable zip archive: " + message);
    }
    const zip_int64_t count = zip_get_num_entries(archive, 0);
    std::optional<zip_uint64_t> found;
    GbkDecoder gbk;
    for (zip_int64_t i = 0; i < count; ++i) {
        const auto index = static_cast<zip_uint64_t>(i);
        // Raw bytes: libzip would otherwise read a name without the UTF-8 flag as CP437.
        const char* raw = zip_get_name(archive, index, ZIP_FL_ENC_RAW);
        if (raw == nullptr) continue;
        const std::optional<std::string> name = gbk.Decode(raw);
        // An archive written with the UTF-8 flag: its raw name is UTF-8 already.
        const bool matches = (name && EndsWith(*name, name_suffix)) || EndsWith(raw, name_suffix);
        if (!matches) continue;
        if (found) {
            zip_discard(archive);
            throw BillError(path + ": more than one entry ends in " + std::string(name_suffix));
        }
        found = index;
    }
    if (!found) {
        zip_discard(archive);
        throw BillError(path + ": no entry of the zip archive ends in " + std::string(name_suffix));
    }
    zip_stat_t stat;
    zip_stat_init(&stat);
    if (zip_stat_index(archive, *found, 0, &stat) != 0 || (stat.valid & ZIP_STAT_SIZE) == 0) {
        const std::string message = zip_strerror(archive);
        zip_discard(archive);
        throw BillError(path + ": cannot read the zip entry's size: " + message);
    }
    if (stat.size > bytes_max) {
        zip_discard(archive);
        throw BillError(path + ": the zip entry is larger than " + std::to_string(bytes_max) +
                        " bytes once decompressed (" + std::to_string(stat.size) + ")");
    }
    zip_file_t* file = zip_fopen_index(archive, *found, 0);
    if (file == nullptr) {
        const std::string message = zip_strerror(archive);
        zip_discard(archive);
        throw BillError(path + ": cannot open the zip entry: " + message);
    }
    return std::make_unique<ZipEntryStream>(path, archive, file, bytes_max);
}

bool LineReader::Next(std::string& line) {
    for (;;) {
        const std::size_t newline = buffer_.find('\n', start_);
        if (newline != std::string::npos || end_) {
            if (newline == std::string::npos && start_ >= buffer_.size()) return false;
            const std::size_t stop = newline == std::string::npos ? buffer_.size() : newline;
            line.assign(buffer_, start_, stop - start_);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            start_ = newline == std::string::npos ? buffer_.size() : newline + 1;
            ++line_number_;
            if (line_number_ > lines_max_) {
                throw BillError("the statement has more than " + std::to_string(lines_max_) +
                                " lines (blank ones included)");
            }
            if (line.size() > kBillLineBytesMax) {
                throw BillError("line " + std::to_string(line_number_) + " is longer than " +
                                std::to_string(kBillLineBytesMax) + " bytes");
            }
            return true;
        }
        if (buffer_.size() - start_ > kBillLineBytesMax + 2) {
            throw BillError("line " + std::to_string(line_number_ + 1) + " is longer than " +
                            std::to_string(kBillLineBytesMax) + " bytes");
        }
        // Keep only the unread part, then read more: the buffer holds at most one line and
        // one chunk.
        buffer_.erase(0, start_);
        start_ = 0;
        const std::size_t old_size = buffer_.size();
        buffer_.resize(old_size + kReadChunkBytes);
        const std::size_t got = stream_.Read(buffer_.data() + old_size, kReadChunkBytes);
        buffer_.resize(old_size + got);
        if (got == 0) end_ = true;
    }
}

GbkDecoder::GbkDecoder() {
    iconv_t handle = iconv_open("UTF-8", "GBK");
    PAYLEDGER_ASSERT(handle != reinterpret_cast<iconv_t>(-1));  // glibc always has GBK.
    handle_ = handle;
}

GbkDecoder::~GbkDecoder() { iconv_close(static_cast<iconv_t>(handle_)); }

namespace {

std::optional<std::string> Convert(iconv_t handle, std::string_view input) {
    iconv(handle, nullptr, nullptr, nullptr, nullptr);  // Reset the shift state.
    std::string out(input.size() * 2 + 16, '\0');
    char* in_ptr = const_cast<char*>(input.data());
    std::size_t in_left = input.size();
    char* out_ptr = out.data();
    std::size_t out_left = out.size();
    while (in_left > 0) {
        const std::size_t done = iconv(handle, &in_ptr, &in_left, &out_ptr, &out_left);
        if (done != static_cast<std::size_t>(-1)) break;
        if (errno != E2BIG) return std::nullopt;  // EILSEQ, EINVAL: not the encoding.
        const std::size_t used = out.size() - out_left;
        out.resize(out.size() * 2);
        out_ptr = out.data() + used;
        out_left = out.size() - used;
    }
    out.resize(out.size() - out_left);
    return out;
}

}  // namespace

std::optional<std::string> GbkDecoder::Decode(std::string_view gbk) {
    return Convert(static_cast<iconv_t>(handle_), gbk);
}

std::optional<std::string> EncodeGbk(std::string_view utf8) {
    iconv_t handle = iconv_open("GBK", "UTF-8");
    PAYLEDGER_ASSERT(handle != reinterpret_cast<iconv_t>(-1));
    std::optional<std::string> out = Convert(handle, utf8);
    iconv_close(handle);
    return out;
}

}  // namespace payledger::ledger::reconcile
