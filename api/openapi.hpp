#pragma once

#include <string_view>

namespace payledger::api {

// The OpenAPI 3.1 description of the HTTP API (api/openapi.yaml), compiled into the binary by
// api/openapi_embed.cmake, so that the server answers it without reading a file at run time.
// Immutable: any thread may call.
[[nodiscard]] std::string_view OpenApiYaml();

// A strong ETag of the description: the quoted first 128 bits of its SHA-256.
[[nodiscard]] std::string_view OpenApiYamlEtag();

}  // namespace payledger::api
