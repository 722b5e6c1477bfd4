#include "api/subscriptions/webhook_url.hpp"

#include <boost/url/parse.hpp>
#include <boost/url/url.hpp>

#include "projections/validate.hpp"

namespace payledger::api {

Checked<WebhookUrl> ParseWebhookUrl(std::string_view text) {
    // parse_uri, not parse_absolute_uri: a fragment gets its own message below.
    const boost::system::result<boost::urls::url_view> parsed = boost::urls::parse_uri(text);
    if (!parsed) return Malformed("must be an absolute http:// or https:// URL");
    const boost::urls::url_view& url = *parsed;
    WebhookUrl out;
    if (url.scheme_id() == boost::urls::scheme::https) {
        out.tls = true;
    } else if (url.scheme_id() != boost::urls::scheme::http) {
        return Malformed("must be an http:// or https:// URL");
    }
    switch (url.host_type()) {
        case boost::urls::host_type::name:
            out.host = url.host_address();
            break;
        case boost::urls::host_type::ipv4:
        case boost::urls::host_type::ipv6:
            out.host = url.host_address();
            out.host_is_address = true;
            break;
        case boost::urls::host_type::none:
        case boost::urls::host_type::ipvfuture:
            break;
    }
    if (out.host.empty()) return Malformed("must name a host name or an IP address");
    if (url.has_fragment()) return Malformed("must not have a fragment (#...)");
    if (url.has_port()) {
        // From the text: port_number() wraps a port beyond 16 bits (99999 becomes 34463).
        const std::optional<std::int64_t> port = projections::ParseDigits(url.port(), 65535);
        if (!port || *port == 0) return Malformed("must have a port from 1 to 65535");
        out.port = static_cast<std::uint16_t>(*port);
    } else {
        out.port = out.tls ? 443 : 80;
    }
    out.host_header = std::string(url.encoded_host_and_port());
    out.target = std::string(url.encoded_target());
    if (out.target.empty() || out.target.front() != '/') out.target.insert(0, "/");
    if (url.has_userinfo()) out.basic_credentials = std::string(url.userinfo());
    return out;
}

std::string UrlWithoutUserInfo(std::string_view text) {
    const boost::system::result<boost::urls::url_view> parsed = boost::urls::parse_uri(text);
    if (!parsed) return "(not a URL)";
    boost::urls::url url{*parsed};
    url.remove_userinfo();
    return std::string(url.buffer());
}

}  // namespace payledger::api
