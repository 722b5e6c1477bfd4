// The console's static files (docs/api.md#the-auditor-console), without a server: every file
// compiled in is answered with its content type, the Content-Security-Policy, nosniff and its
// ETag; 304 for a matching If-None-Match; /console redirects to /console/; unknown files and
// folders are 404 and other methods 405, with the same headers. And what the CSP relies on,
// checked in the files themselves: no inline script or style, no HTML sink (innerHTML and
// kin), no other origin, and every file the page or a module names is compiled in.
#include "api/routes/console.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

namespace payledger::api {
namespace {

Request Get(const std::string& target) {
    Request request{http::verb::get, target, 11};
    return request;
}

void ExpectSecurityHeaders(const Response& response) {
    EXPECT_EQ(response["Content-Security-Policy"], kConsoleContentSecurityPolicy);
    EXPECT_EQ(response["X-Content-Type-Options"], "nosniff");
    EXPECT_EQ(response["Referrer-Policy"], "no-referrer");
}

TEST(ConsoleTest, EveryFileIsServedWithItsTypeThePolicyAndItsEtag) {
    ASSERT_FALSE(ConsoleAssets().empty());
    std::set<std::string> etags;
    for (const ConsoleAsset& asset : ConsoleAssets()) {
        const Response response = ConsoleResponse(Get("/console/" + std::string(asset.name)),
                                                  {"console", std::string(asset.name)});
        EXPECT_EQ(response.result(), http::status::ok) << asset.name;
        EXPECT_EQ(response.body(), asset.body) << asset.name;
        EXPECT_EQ(response[http::field::content_type], asset.content_type) << asset.name;
        EXPECT_EQ(response[http::field::etag], asset.etag) << asset.name;
        EXPECT_EQ(response[http::field::cache_control], "no-cache") << asset.name;
        ExpectSecurityHeaders(response);
        EXPECT_TRUE(etags.insert(std::string(asset.etag)).second) << "two files, one ETag";
        EXPECT_TRUE(std::regex_match(std::string(asset.etag), std::regex("\"[0-9a-f]{32}\"")));
    }
    const ConsoleAsset* script = FindConsoleAsset("app.js");
    ASSERT_NE(script, nullptr);
    EXPECT_EQ(script->content_type, "text/javascript; charset=utf-8");
    EXPECT_EQ(FindConsoleAsset("console.css")->content_type, "text/css; charset=utf-8");
}

TEST(ConsoleTest, TheFolderIsIndexAndTheBareNameRedirects) {
    const Response index = ConsoleResponse(Get("/console/"), {"console", ""});
    EXPECT_EQ(index.result(), http::status::ok);
    EXPECT_EQ(index[http::field::content_type], "text/html; charset=utf-8");
    EXPECT_EQ(index.body(), FindConsoleAsset("index.html")->body);
    ExpectSecurityHeaders(index);

    const Response bare = ConsoleResponse(Get("/console"), {"console"});
    EXPECT_EQ(bare.result(), http::status::moved_permanently);
    EXPECT_EQ(bare[http::field::location], "/console/");
    ExpectSecurityHeaders(bare);
}

TEST(ConsoleTest, UnknownFilesFoldersAndMethodsAreRefusedWithTheSameHeaders) {
    for (const std::vector<std::string>& segments :
         std::vector<std::vector<std::string>>{{"console", "nope.js"},
                                               {"console", "../CMakeLists.txt"},
                                               {"console", "embed.cmake"},
                                               {"console", "assets.hpp"},
                                               {"console", "INDEX.HTML"},
                                               {"console", "views", "app.js"},
                                               {"console", "app.js", ""}}) {
        const Response response = ConsoleResponse(Get("/console/x"), segments);
        EXPECT_EQ(response.result(), http::status::not_found) << segments.back();
        ExpectSecurityHeaders(response);
    }
    Request post{http::verb::post, "/console/", 11};
    const Response refused = ConsoleResponse(post, {"console", ""});
    EXPECT_EQ(refused.result(), http::status::method_not_allowed);
    EXPECT_EQ(refused[http::field::allow], "GET");
    ExpectSecurityHeaders(refused);
}

TEST(ConsoleTest, AMatchingIfNoneMatchIs304WithoutABody) {
    const ConsoleAsset& asset = *FindConsoleAsset("app.js");
    const std::string etag(asset.etag);
    for (const std::string& header :
         {etag, "W/" + etag, "\"other\", " + etag, "\"other\",W/" + etag + " ", std::string("*")}) {
        Request request = Get("/console/app.js");
        request.set(http::field::if_none_match, header);
        const Response response = ConsoleResponse(request, {"console", "app.js"});
        EXPECT_EQ(response.result(), http::status::not_modified) << header;
        EXPECT_TRUE(response.body().empty());
        EXPECT_EQ(response[http::field::etag], etag);
        ExpectSecurityHeaders(response);
    }
    Request stale = Get("/console/app.js");
    stale.set(http::field::if_none_match, "\"0123\"");
    EXPECT_EQ(ConsoleResponse(stale, {"console", "app.js"}).result(), http::status::ok);
}

TEST(ConsoleTest, TheFilesHoldNoInlineScriptNoHtmlSinkAndNoOtherOrigin) {
    const std::regex inline_handler{R"(<[^>]*\son[a-z]+\s*=)", std::regex::icase};
    const std::regex script_tag{R"(<script\b[^>]*>)", std::regex::icase};
    for (const ConsoleAsset& asset : ConsoleAssets()) {
        const std::string body(asset.body);
        for (const char* forbidden :
             {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
              "new Function", "DOMParser", "createContextualFragment", "setHTMLUnsafe",
              "http:", "https:", "//cdn", "@import", "url("}) {
            EXPECT_EQ(body.find(forbidden), std::string::npos) << asset.name << ": " << forbidden;
        }
        EXPECT_EQ(body.find(" style="), std::string::npos) << asset.name;
        EXPECT_EQ(body.find("<style"), std::string::npos) << asset.name;
        if (asset.name != "index.html") continue;
        // The one markup file: no onclick= and the like, and its one script from a file.
        EXPECT_FALSE(std::regex_search(body, inline_handler));
        int scripts = 0;
        for (auto it = std::sregex_iterator(body.begin(), body.end(), script_tag);
             it != std::sregex_iterator(); ++it, ++scripts) {
            EXPECT_NE(it->str().find(" src="), std::string::npos) << it->str();
        }
        EXPECT_EQ(scripts, 1);
    }
}

TEST(ConsoleTest, EveryFileThePageOrAModuleNamesIsCompiledIn) {
    const std::regex reference{
        R"((?:from |import\(|src=|href=)['"]\.?/?([a-z0-9_-]+\.(?:js|css)))"};
    std::set<std::string> named;
    for (const ConsoleAsset& asset : ConsoleAssets()) {
        const std::string body(asset.body);
        for (auto it = std::sregex_iterator(body.begin(), body.end(), reference);
             it != std::sregex_iterator(); ++it) {
            named.insert((*it)[1].str());
            EXPECT_NE(FindConsoleAsset((*it)[1].str()), nullptr)
                << asset.name << " names " << (*it)[1] << ", which is not in api/CMakeLists.txt";
        }
    }
    EXPECT_TRUE(named.contains("app.js"));
    EXPECT_TRUE(named.contains("console.css"));
    for (const ConsoleAsset& asset : ConsoleAssets()) {  // And nothing is compiled in unused.
        if (asset.name != "index.html") {
            EXPECT_TRUE(named.contains(std::string(asset.name))) << asset.name;
        }
    }
}

}  // namespace
}  // namespace payledger::api
