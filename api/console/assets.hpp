#pragma once

#include <string_view>
#include <vector>

namespace payledger::api {

// One static file of the auditor console (docs/api.md#the-auditor-console), compiled into the
// binary from api/console/ by api/console/embed.cmake, so that nothing is read from outside at run
// time.
struct ConsoleAsset {
    std::string_view name{};          // Its path under /console/: "index.html", "app.js".
    std::string_view content_type{};  // From its extension: "text/javascript; charset=utf-8".
    std::string_view body{};          // The file's bytes.
    std::string_view etag{};          // A strong ETag: the quoted first 128 bits of its SHA-256.
};

// Every file, in the order api/CMakeLists.txt lists them. Immutable: any thread may call.
[[nodiscard]] const std::vector<ConsoleAsset>& ConsoleAssets();

}  // namespace payledger::api
