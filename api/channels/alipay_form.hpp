#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "api/channels/platform_channel.hpp"
#include "api/channels/refusal.hpp"

namespace payledger::api {

// Decodes the application/x-www-form-urlencoded body of an Alipay notification exactly once
// (docs/platforms.md#strict-parsing): split on `&`, split each pair on its first `=`, `+` is a
// space, `%XX` a byte. The values are the raw decoded bytes (a GBK notice stays GBK). A `%` without
// two hex digits, an empty name or a repeated name is refused as malformed.
[[nodiscard]] Checked<PlatformFields> DecodeForm(std::string_view body);

// The inverse, for simulate and tests: every byte but A-Z a-z 0-9 - . _ * percent-encoded,
// spaces as `+`.
[[nodiscard]] std::string EncodeForm(const PlatformFields& fields);

// docs/platforms.md#alipay-signature: the string Alipay signs: the fields but `sign` and
// `sign_type`, empty values dropped, sorted by name, `k=v` joined by `&`, values as decoded.
[[nodiscard]] std::string AlipaySignContent(const PlatformFields& fields);

}  // namespace payledger::api
