#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "api/http/http.hpp"

namespace payledger::api {

// How much of one request the server may hold, however the request is framed
// (docs/security.md, "HTTP framing"). Beast's parser bounds the head (header_limit) and the
// body's data (body_limit), but not what surrounds a chunked body's data: a chunk-size line
// with an endless extension (`1;aaaa…` and no CRLF) made the read buffer grow without end,
// 200 MB a connection in a second. Two bounds close that:
// - the read buffer itself has a maximum (kReadBufferBytesMax): a line, a head or a trailer
//   that does not fit ends the read with http::error::buffer_overflow;
// - a chunked body's data, chunk-size lines and extensions count together against the body's
//   limit (kRequestBodyBytesMax): past it the read ends with http::error::body_limit (413).
// A body of exactly 64 KiB sent chunked is therefore refused; platforms send Content-Length.

// The request head, as before: over it, 431.
inline constexpr std::size_t kHeaderBytesMax = 16 * 1024;
// The read buffer: a whole head (the parser needs it at once) and room for what follows it
// in the same reads (a pipelined request, part of a body).
inline constexpr std::size_t kReadBufferBytesMax = 2 * kHeaderBytesMax;
static_assert(kReadBufferBytesMax > kHeaderBytesMax);

using RequestParser = http::request_parser<http::string_body>;

// Counts one chunked body's framing against kRequestBodyBytesMax. One per parser, which keeps
// a reference to it: it must outlive the parser's reads. Not thread-safe (a connection's
// strand only).
class ChunkFramingBudget {
public:
    ChunkFramingBudget();
    ChunkFramingBudget(const ChunkFramingBudget&) = delete;
    ChunkFramingBudget& operator=(const ChunkFramingBudget&) = delete;

    // Sets the limits above on a new `parser` and starts counting its chunks from zero.
    void Apply(RequestParser& parser);

    // The body's bytes so far: chunk data announced plus chunk-size lines and extensions.
    [[nodiscard]] std::size_t counted() const { return counted_; }

private:
    void OnChunkHeader(std::uint64_t size, boost::beast::string_view extensions,
                       boost::beast::error_code& ec);

    std::function<void(std::uint64_t, boost::beast::string_view, boost::beast::error_code&)>
        on_chunk_header_;
    std::size_t counted_ = 0;
};

// The bytes a chunk-size line takes besides its extensions: the hexadecimal size and the two
// CRLFs around the chunk's data.
[[nodiscard]] std::size_t ChunkLineBytes(std::uint64_t size);

}  // namespace payledger::api
