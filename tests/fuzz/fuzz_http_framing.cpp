// Fuzzes the server's request framing (api/http/request_framing.hpp): the bytes of one
// connection, read as the server reads them — into a read buffer of kReadBufferBytesMax, parsed
// by Beast's request parser with the server's limits and the chunk framing budget, message
// after message (pipelining). The input's first byte picks the size of each read, so the
// fuzzer also splits lines, chunk headers and trailers across reads. Checks: the buffer never
// holds more than its maximum; a message parsed whole has at most 64 KiB of body, and a
// chunked one at most 64 KiB of data and framing together; an error ends the connection, as
// it does in the server.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/http/request_framing.hpp"

namespace {

constexpr int kMessagesMax = 8;

void Check(bool condition) {
    if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace payledger::api;
    namespace beast = boost::beast;
    if (size == 0) return 0;
    const std::size_t read_size = 1 + static_cast<std::size_t>(data[0]) * 64;  // 1 ... 16 321.
    std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);

    beast::flat_buffer buffer{kReadBufferBytesMax};
    for (int message = 0; message < kMessagesMax; ++message) {
        ChunkFramingBudget budget;  // Outlives the parser, which refers to it.
        RequestParser parser;
        budget.Apply(parser);
        parser.eager(true);
        beast::error_code ec;
        while (!parser.is_done()) {
            if (buffer.size() > 0) {
                const std::size_t used = parser.put(buffer.data(), ec);
                buffer.consume(used);
                if (ec == http::error::need_more) {
                    ec = {};
                } else if (ec) {
                    return 0;  // The server answers 4xx and closes.
                } else if (used > 0) {
                    continue;
                }
            }
            Check(buffer.size() <= kReadBufferBytesMax);
            const std::size_t room = buffer.max_size() - buffer.size();
            if (room == 0) return 0;  // buffer_overflow: 413 or 431, then closed.
            if (input.empty()) {
                if (parser.got_some()) parser.put_eof(ec);
                return 0;
            }
            const std::size_t n = std::min({room, read_size, input.size()});
            auto space = buffer.prepare(n);
            std::copy_n(input.data(), n, static_cast<char*>(space.data()));
            buffer.commit(n);
            input.remove_prefix(n);
        }
        Check(parser.get().body().size() <= kRequestBodyBytesMax);
        if (parser.chunked()) Check(budget.counted() <= kRequestBodyBytesMax);
        Check(buffer.size() <= kReadBufferBytesMax);
    }
    return 0;
}
