#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/console/assets.hpp"
#include "api/http/http.hpp"

namespace payledger::api {

// The Content-Security-Policy of every console response (docs/api.md#the-auditor-console):
// scripts, styles and connections from this origin only, no inline script or style, no eval, no
// framing, and Trusted Types with no policy, so that the browser itself refuses markup from strings
// (innerHTML and its kin throw): data can only ever become text.
inline constexpr std::string_view kConsoleContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; "
    "require-trusted-types-for 'script'; trusted-types 'none'";

// The console's file named `name` (a path under /console/), or null.
[[nodiscard]] const ConsoleAsset* FindConsoleAsset(std::string_view name);

// GET /console/<file>. `segments` are the request path's, starting with "console":
// {"console"} redirects to /console/; {"console", ""} is index.html; {"console", "<file>"} is
// that file, or 404. Every answer carries the CSP above, nosniff and no-referrer; files are
// answered with `Cache-Control: no-cache` and their ETag, so a browser revalidates each load
// and gets 304 for what it already has. Methods other than GET: 405. Needs no database.
[[nodiscard]] Response ConsoleResponse(const Request& request,
                                       const std::vector<std::string>& segments);

// GET /v1/openapi.yaml: the OpenAPI description compiled into the binary (api/openapi.hpp), as
// application/yaml with its ETag and `Cache-Control: no-cache`; 304 when If-None-Match holds
// it. Needs no database and no token.
[[nodiscard]] Response OpenApiResponse(const Request& request);

}  // namespace payledger::api
