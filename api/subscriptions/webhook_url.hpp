#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/channels/refusal.hpp"

namespace payledger::api {

// A subscription's receiver URL, split into what one POST needs. Parsed by Boost.URL.
struct WebhookUrl {
    bool tls = false;  // https://
    // The host to resolve, to name in SNI and to check the certificate against: an IPv6
    // address without its brackets, a name with its percent-escapes decoded.
    std::string host{};
    bool host_is_address = false;  // IPv4 or IPv6: no SNI (TLS forbids it for addresses).
    std::uint16_t port = 0;        // As given, or 80 / 443.
    std::string host_header{};     // The URL's host and port as written, for `Host`.
    std::string target{};          // Path and query as written; "/" for an empty path.
    // "user:password" decoded, when the URL has user info: sent as HTTP Basic credentials.
    std::optional<std::string> basic_credentials{};
};

// `http://` or `https://` with a host, an optional port from 1 to 65535, any path and query,
// no fragment. A malformed refusal otherwise, whose message never repeats the text (its
// user info may hold a password).
[[nodiscard]] Checked<WebhookUrl> ParseWebhookUrl(std::string_view text);

// The URL as it may be shown or logged: without its user info (and so without a password).
// "(not a URL)" when `text` does not parse as an absolute URL.
[[nodiscard]] std::string UrlWithoutUserInfo(std::string_view text);

}  // namespace payledger::api
