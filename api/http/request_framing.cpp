#include "api/http/request_framing.hpp"

namespace payledger::api {

ChunkFramingBudget::ChunkFramingBudget()
    : on_chunk_header_(
          [this](std::uint64_t size, boost::beast::string_view extensions,
                 boost::beast::error_code& ec) { OnChunkHeader(size, extensions, ec); }) {}

void ChunkFramingBudget::Apply(RequestParser& parser) {
    counted_ = 0;
    parser.header_limit(static_cast<std::uint32_t>(kHeaderBytesMax));
    parser.body_limit(kRequestBodyBytesMax);
    parser.on_chunk_header(on_chunk_header_);
}

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
    // The parser has checked `size` against what is left of body_limit, so the sum cannot
    // overflow; the extensions are at most the read buffer.
    counted_ += static_cast<std::size_t>(size) + ChunkLineBytes(size) + extensions.size();
    if (counted_ > kRequestBodyBytesMax) ec = http::error::body_limit;
}

}  // namespace payledger::api
