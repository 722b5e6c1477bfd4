#include "api/routes/route_table.hpp"

#include <array>

namespace payledger::api {
namespace {

using boost::beast::http::verb;

constexpr std::array kRoutes{
    Route{verb::get, "/healthz", Operation::kHealthz, Access::kOpen},
    Route{verb::get, "/readyz", Operation::kReadyz, Access::kOpen},
    Route{verb::get, "/metrics", Operation::kMetrics, Access::kOpen},
    Route{verb::get, "/v1/openapi.yaml", Operation::kOpenApi, Access::kOpen},
    Route{verb::post, "/v1/orders", Operation::kCreateOrder, Access::kMerchant},
    Route{verb::post, "/v1/callbacks/generic", Operation::kCallback, Access::kPlatform, "generic"},
    Route{verb::post, "/v1/callbacks/wechat/v2", Operation::kCallback, Access::kPlatform,
          "wechat/v2"},
    Route{verb::post, "/v1/callbacks/wechat/v3", Operation::kCallback, Access::kPlatform,
          "wechat/v3"},
    Route{verb::post, "/v1/callbacks/alipay", Operation::kCallback, Access::kPlatform, "alipay"},
    Route{verb::get, "/v1/orders/{out_trade_no}", Operation::kOrder, Access::kAuditor},
    Route{verb::get, "/v1/orders/{out_trade_no}/events", Operation::kOrderEvents, Access::kAuditor},
    Route{verb::get, "/v1/orders/{out_trade_no}/receipts", Operation::kOrderReceipts,
          Access::kAuditor},
    Route{verb::get, "/v1/accounts/{account_id}/balances", Operation::kBalances, Access::kAuditor},
    Route{verb::get, "/v1/events", Operation::kEvents, Access::kAuditor},
    Route{verb::get, "/v1/receipts", Operation::kReceipts, Access::kAuditor},
    Route{verb::get, "/v1/reconciliations", Operation::kReconciliations, Access::kAuditor},
    Route{verb::get, "/v1/reconciliations/{id}", Operation::kReconciliation, Access::kAuditor},
    Route{verb::get, "/v1/audit/checkpoint", Operation::kCheckpoint, Access::kAuditor},
    Route{verb::post, "/v1/admin/verify", Operation::kVerify, Access::kAdmin},
    Route{verb::get, "/v1/admin/verify", Operation::kProbeVerify, Access::kAdmin},
    Route{verb::get, "/v1/admin/subscriptions", Operation::kSubscriptions, Access::kAdmin},
    Route{verb::post, "/v1/admin/subscriptions/{name}/rewind", Operation::kRewindSubscription,
          Access::kAdmin},
    Route{verb::post, "/v1/admin/subscriptions/{name}/enable", Operation::kEnableSubscription,
          Access::kAdmin},
    Route{verb::get, "/v1/subscriptions/changes", Operation::kSubscriptionChanges,
          Access::kAuditor},
    Route{verb::get, "/console", Operation::kConsoleRedirect, Access::kOpen},
    Route{verb::get, "/console/", Operation::kConsoleIndex, Access::kOpen},
    Route{verb::get, "/console/{file}", Operation::kConsoleFile, Access::kOpen},
};

bool Matches(std::string_view path, const std::vector<std::string>& segments) {
    std::size_t i = 0;
    path.remove_prefix(1);  // Every path of the table starts with '/'.
    while (true) {
        const std::size_t slash = path.find('/');
        const std::string_view part = path.substr(0, slash);
        if (i == segments.size()) return false;
        const bool wildcard = part.size() >= 2 && part.front() == '{' && part.back() == '}';
        if (!wildcard && segments[i] != part) return false;
        ++i;
        if (slash == std::string_view::npos) return i == segments.size();
        path.remove_prefix(slash + 1);
    }
}

}  // namespace

std::span<const Route> Routes() { return kRoutes; }

std::vector<std::string> PathSegments(std::string_view path) {
    std::vector<std::string> segments;
    if (path.empty() || path == "/") return segments;
    if (path.front() == '/') path.remove_prefix(1);
    while (true) {
        const std::size_t slash = path.find('/');
        segments.emplace_back(path.substr(0, slash));
        if (slash == std::string_view::npos) return segments;
        path.remove_prefix(slash + 1);
    }
}

std::vector<std::string> ProbePaths() {
    std::vector<std::string> paths;
    for (const Route& route : kRoutes) {
        if (route.operation == Operation::kReadyz) paths.emplace_back(route.path);
    }
    return paths;
}

RouteMatch MatchRoute(const std::vector<std::string>& segments, verb method) {
    RouteMatch match;
    std::string_view matched_path;
    for (const Route& route : kRoutes) {
        // The first path that matches is the request's; a later template matching the same
        // segments (/console/{file} for /console/) is another path, not another method.
        if (!matched_path.empty() && route.path != matched_path) continue;
        if (matched_path.empty() && !Matches(route.path, segments)) continue;
        matched_path = route.path;
        if (!match.path_known) match.path_row = &route;
        match.path_known = true;
        // The probe of verify is an operation that always answers 405 or 403: not a method
        // that Allow should offer.
        if (route.operation != Operation::kProbeVerify) {
            if (!match.allow.empty()) match.allow += ", ";
            match.allow += std::string(boost::beast::http::to_string(route.method));
        }
        if (route.method == method) match.route = &route;
    }
    return match;
}

}  // namespace payledger::api
