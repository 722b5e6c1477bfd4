#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "api/channels/platform_channel.hpp"
#include "api/channels/refusal.hpp"
#include "api/config.hpp"

namespace payledger::api {

// Parses the flat XML of WeChat Pay APIv2 (docs/platforms.md#strict-parsing), one root element
// whose child elements are the fields, each holding text or CDATA, with pugixml. DTDs and entity
// declarations are refused before parsing (no XXE, no entity expansion); so are NUL bytes, a
// root not named `root_name`, a second root, nested elements, repeated fields and text
// outside the fields or the root. A value is the field's text exactly as written (CDATA
// verbatim, "\r\n" kept, whitespace kept), since WeChat signs the values it wrote, with its
// references decoded here, not by pugixml: the five predefined entities and character
// references to XML characters (one to a control character, `&#0;`...`&#31;` but
// tab, LF and CR, is malformed; pugixml would cut the value at `&#0;`), any other `&` is
// malformed. Every refusal is `malformed`.
[[nodiscard]] Checked<PlatformFields> ParseFlatXml(std::string_view text,
                                                   std::string_view root_name);

// docs/platforms.md#apiv2-signature: every field but `sign`, empty values dropped, sorted by name,
// `k=v&...&key=<api_key>`, then upper-case hex MD5 or HMAC-SHA256 (keyed with api_key).
[[nodiscard]] std::string WechatV2Sign(const PlatformFields& fields, std::string_view api_key,
                                       WechatV2SignType sign_type);

// "MD5" or "HMAC-SHA256", as WeChat writes sign_type.
[[nodiscard]] std::string_view ToString(WechatV2SignType sign_type);

// `<root_name><k><![CDATA[v]]></k>...</root_name>`, compact, digits-only values bare (as
// WeChat writes them): for simulate and tests.
[[nodiscard]] std::string WechatV2Xml(const PlatformFields& fields, std::string_view root_name);

// The v2 answer body: return_code SUCCESS with return_msg OK, or FAIL with `reason`.
[[nodiscard]] std::string WechatV2Answer(bool success, std::string_view reason);

}  // namespace payledger::api
