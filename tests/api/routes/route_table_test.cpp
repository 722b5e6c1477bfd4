#include "api/routes/route_table.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "api/openapi.hpp"

namespace payledger::api {
namespace {

using boost::beast::http::verb;

TEST(RouteTable, ALiteralPathWinsOverATemplateAndASegmentFillsAPlaceholder) {
    RouteMatch match = MatchRoute(PathSegments("/v1/orders/ORD-1/events"), verb::get);
    ASSERT_NE(match.route, nullptr);
    EXPECT_EQ(match.route->operation, Operation::kOrderEvents);
    match = MatchRoute(PathSegments("/console/"), verb::get);
    ASSERT_NE(match.route, nullptr);
    EXPECT_EQ(match.route->operation, Operation::kConsoleIndex);
    match = MatchRoute(PathSegments("/console/app.js"), verb::get);
    ASSERT_NE(match.route, nullptr);
    EXPECT_EQ(match.route->operation, Operation::kConsoleFile);
    match = MatchRoute(PathSegments("/v1/callbacks/wechat/v3"), verb::post);
    ASSERT_NE(match.route, nullptr);
    EXPECT_EQ(match.route->operation, Operation::kCallback);
}

TEST(RouteTable, AKnownPathWithAnotherMethodNamesTheMethodsItHas) {
    RouteMatch match = MatchRoute(PathSegments("/v1/orders"), verb::get);
    EXPECT_EQ(match.route, nullptr);
    EXPECT_TRUE(match.path_known);
    EXPECT_EQ(match.allow, "POST");
    // The probe of verify is an operation, but never a method to offer.
    match = MatchRoute(PathSegments("/v1/admin/verify"), verb::put);
    EXPECT_EQ(match.route, nullptr);
    EXPECT_EQ(match.allow, "POST");
    match = MatchRoute(PathSegments("/v1/admin/verify"), verb::get);
    ASSERT_NE(match.route, nullptr);
    EXPECT_EQ(match.route->operation, Operation::kProbeVerify);
}

TEST(RouteTable, UnknownPathsAreUnknown) {
    for (const char* path : {"/", "/v1", "/v1/orders/A/B", "/v1/orders/A/events/x", "/v1/callbacks",
                             "/v1/callbacks/wechat", "/v1/callbacks/wechat/v4", "/healthz/",
                             "/v1/admin/subscriptions/x", "/v1/admin/subscriptions/x/drop",
                             "/v1/openapi.json", "/console/a/b"}) {
        const RouteMatch match = MatchRoute(PathSegments(path), verb::get);
        EXPECT_FALSE(match.path_known) << path;
        EXPECT_EQ(match.route, nullptr) << path;
    }
}

TEST(RouteTable, EveryOperationIsListedOnceAndEveryPathIsInTheDescription) {
    std::set<std::pair<std::string, std::string>> seen;
    const std::string_view description = OpenApiYaml();
    for (const Route& route : Routes()) {
        const std::string method{boost::beast::http::to_string(route.method)};
        EXPECT_TRUE(seen.emplace(method, std::string(route.path)).second)
            << method << " " << route.path << " is listed twice";
        // Every path key of the description is written "  <path>:" on a line of its own;
        // tests/openapi/routes_match.py compares the two in full with a YAML parser.
        EXPECT_NE(description.find("\n  " + std::string(route.path) + ":\n"),
                  std::string_view::npos)
            << route.path << " is not in api/openapi.yaml";
        // A path of the table matches itself, placeholders and all.
        const RouteMatch match = MatchRoute(PathSegments(route.path), route.method);
        ASSERT_NE(match.route, nullptr) << route.path;
        EXPECT_EQ(match.route->path, route.path);
    }
}

}  // namespace
}  // namespace payledger::api
