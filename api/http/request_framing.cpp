#include "api/http/request_framing.hpp"

namespace payledger::api {

ChunkFramingBudget::ChunkFramingBudget()
    : on_chunk_header_(
          [this](std::uint64_t size, boost::beast::string_view extensions,
                 boost::beast::error_code& ec) { OnChunkHeader(size, extensions, ec); }) {}

std::size_t ChunkLineBytes(std::uint64_t size) {
    std::size_t digits = 1;
    while (size >= 16) {
        size /= 16;
        ++digits;
    }
    return digits + 4;  // "<size>[ext]\r\n<data>\r\n"
}

void ChunkFramingBudget::OnChunkHeader(std::uint64_t size, boost::beast::string_view extensions,
                                       boost::beast::error_code& ec) {
    // The head is complete before the first chunk, and the trailer is parsed only after the
    // last chunk's header (size 0): what the message has now are the head's fields.
    if (!head_fields_ && head_fields_of_) head_fields_ = head_fields_of_();
    // The parser has checked `size` against what is left of body_limit, so the sum cannot
    // overflow; the extensions are at most the read buffer.
    counted_ += static_cast<std::size_t>(size) + ChunkLineBytes(size) + extensions.size();
    if (counted_ > body_bytes_max_) ec = http::error::body_limit;
}

}  // namespace payledger::api
