// The auditor console's static files (docs/api.md#the-auditor-console): served from the table
// that api/console/embed.cmake compiles into the binary, never from the file system.
#include "api/routes/console.hpp"

#include "api/openapi.hpp"
#include "api/routes/route_helpers.hpp"

namespace payledger::api {
namespace {

void SetSecurityHeaders(Response& response) {
    response.set("Content-Security-Policy", kConsoleContentSecurityPolicy);
    response.set("X-Content-Type-Options", "nosniff");
    response.set("Referrer-Policy", "no-referrer");
    response.set("Cross-Origin-Opener-Policy", "same-origin");
    response.set("Cross-Origin-Resource-Policy", "same-origin");
}

std::string_view Trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    return text;
}

// RFC 9110 §13.1.2: If-None-Match is "*" or a list of entity tags, compared weakly.
bool NoneMatchHolds(const Request& request, std::string_view etag) {
    const auto header = request.find(http::field::if_none_match);
    if (header == request.end()) return false;
    std::string_view list = header->value();
    while (!list.empty()) {
        const std::size_t comma = list.find(',');
        std::string_view tag = Trim(list.substr(0, comma));
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
        if (tag == "*") return true;
        if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
        if (tag == etag) return true;
    }
    return false;
}

Response Redirect(unsigned version) {
    Response response{http::status::moved_permanently, version};
    response.set(http::field::location, "/console/");
    response.set(http::field::content_type, "text/plain; charset=utf-8");
    response.body() = "The console is at /console/\n";
    response.prepare_payload();
    return response;
}

Response NoSuchFile() {
    return MakeResponse(http::status::not_found, "text/plain; charset=utf-8",
                        "No such file in the console.\n");
}

Response File(const Request& request, const ConsoleAsset& asset) {
    Response response{http::status::ok, request.version()};
    if (NoneMatchHolds(request, asset.etag)) {
        response.result(http::status::not_modified);  // No body, no Content-Type.
    } else {
        response.set(http::field::content_type, asset.content_type);
        response.body() = std::string(asset.body);
    }
    response.set(http::field::etag, asset.etag);
    response.set(http::field::cache_control, "no-cache");
    response.prepare_payload();
    return response;
}

}  // namespace

const ConsoleAsset* FindConsoleAsset(std::string_view name) {
    for (const ConsoleAsset& asset : ConsoleAssets()) {
        if (asset.name == name) return &asset;
    }
    return nullptr;
}

Response ConsoleResponse(const Request& request, const std::vector<std::string>& segments) {
    Response response;
    if (request.method() != http::verb::get) {
        response = MethodNotAllowed("GET");
    } else if (segments.size() == 1) {
        response = Redirect(request.version());
    } else if (segments.size() != 2) {
        response = NoSuchFile();  // The console has no folders.
    } else {
        const ConsoleAsset* asset =
            FindConsoleAsset(segments[1].empty() ? "index.html" : segments[1]);
        response = asset == nullptr ? NoSuchFile() : File(request, *asset);
    }
    SetSecurityHeaders(response);
    return response;
}

Response OpenApiResponse(const Request& request) {
    Response response{http::status::ok, request.version()};
    response.set(http::field::etag, OpenApiYamlEtag());
    response.set(http::field::cache_control, "no-cache");
    if (NoneMatchHolds(request, OpenApiYamlEtag())) {
        response.result(http::status::not_modified);  // No body, no Content-Type.
    } else {
        response.set(http::field::content_type, "application/yaml");
        response.body() = std::string(OpenApiYaml());
    }
    response.prepare_payload();
    return response;
}

}  // namespace payledger::api
