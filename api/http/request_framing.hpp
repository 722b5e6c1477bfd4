#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>

#include "api/http/http.hpp"

namespace payledger::api {

// How much of one HTTP message payledger may hold, however it is framed (docs/security.md,
// "HTTP framing"): the requests `serve` reads, and the answers that receivers and platforms send
// back to its outbound clients. Beast's parser bounds the head (header_limit) and the body's
// data (body_limit), but not what surrounds a chunked body's data: a chunk-size line with an
// endless extension (`1;aaaa…` and no CRLF) made the read buffer grow without end, 200 MB a
// connection in a second. Two bounds close that:
// - the read buffer itself has a maximum (kReadBufferBytesMax): a line, a head or a trailer
//   that does not fit ends the read with http::error::buffer_overflow;
// - a chunked body's data, chunk-size lines and extensions count together against the body's
//   limit: past it the read ends with http::error::body_limit (413 for a request).
// A request body of exactly 64 KiB sent chunked is therefore refused; platforms send
// Content-Length. Trailer fields (after a chunked body) are told apart from the head's
// (TrailerFields), so that a request carrying them can be refused: Beast merges them into the
// message's fields, where they could stand in for a head field read after the body
// (X-Forwarded-For).

// The request head, as before: over it, 431.
inline constexpr std::size_t kHeaderBytesMax = 16 * 1024;
// The read buffer: a whole head (the parser needs it at once) and room for what follows it
// in the same reads (a pipelined request, part of a body).
inline constexpr std::size_t kReadBufferBytesMax = 2 * kHeaderBytesMax;
static_assert(kReadBufferBytesMax > kHeaderBytesMax);

using RequestParser = http::request_parser<http::string_body>;
using ResponseParser = http::response_parser<http::string_body>;

// Counts one chunked body's framing against a body limit, and remembers how many fields the
// head had. One per parser, which keeps a reference to it: it must outlive the parser's reads.
// Not thread-safe (one connection's strand or thread only).
class ChunkFramingBudget {
public:
    ChunkFramingBudget();
    ChunkFramingBudget(const ChunkFramingBudget&) = delete;
    ChunkFramingBudget& operator=(const ChunkFramingBudget&) = delete;

    // Sets the limits on a new `parser` (a RequestParser or a ResponseParser) and starts
    // counting its chunks from zero: its head at most `header_bytes_max`, its body with its
    // chunked framing at most `body_bytes_max`.
    template <typename Parser>
    void Apply(Parser& parser, std::size_t header_bytes_max = kHeaderBytesMax,
               std::size_t body_bytes_max = kRequestBodyBytesMax) {
        counted_ = 0;
        body_bytes_max_ = body_bytes_max;
        head_fields_.reset();
        head_fields_of_ = [&parser] { return FieldCount(parser.get()); };
        parser.header_limit(static_cast<std::uint32_t>(header_bytes_max));
        parser.body_limit(body_bytes_max);
        parser.on_chunk_header(on_chunk_header_);
    }

    // The body's bytes so far: chunk data announced plus chunk-size lines and extensions.
    [[nodiscard]] std::size_t counted() const { return counted_; }

    // How many fields of the complete message `parser` read came after its chunked body
    // (trailer fields); 0 for a message that was not chunked or had none.
    template <typename Parser>
    [[nodiscard]] std::size_t TrailerFields(const Parser& parser) const {
        if (!head_fields_) return 0;  // No chunk header was read: not chunked.
        const std::size_t fields = FieldCount(parser.get());
        return fields > *head_fields_ ? fields - *head_fields_ : 0;
    }

private:
    template <typename Message>
    static std::size_t FieldCount(const Message& message) {
        return static_cast<std::size_t>(std::distance(message.begin(), message.end()));
    }
    void OnChunkHeader(std::uint64_t size, boost::beast::string_view extensions,
                       boost::beast::error_code& ec);

    std::function<void(std::uint64_t, boost::beast::string_view, boost::beast::error_code&)>
        on_chunk_header_;
    std::function<std::size_t()> head_fields_of_;
    std::optional<std::size_t> head_fields_{};  // At the first chunk header: the head's fields.
    std::size_t counted_ = 0;
    std::size_t body_bytes_max_ = kRequestBodyBytesMax;
};

// The bytes a chunk-size line takes besides its extensions: the hexadecimal size and the two
// CRLFs around the chunk's data.
[[nodiscard]] std::size_t ChunkLineBytes(std::uint64_t size);

}  // namespace payledger::api
