#pragma once

#include <boost/beast/http/verb.hpp>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace payledger::api {

// Every operation of the HTTP API, as api/openapi.yaml describes it. The router
// (App::Handle, api/routes/app.cpp) finds a request's operation in this table and nowhere
// else, and tests/openapi/routes_match.py proves that the table and the description list the
// same operations, so that neither can gain a path the other does not know.
enum class Operation {
    kHealthz,
    kReadyz,
    kMetrics,
    kOpenApi,
    kCreateOrder,
    kCallback,  // One row per platform: the channel is the path after /v1/callbacks/.
    kOrder,
    kOrderEvents,
    kOrderReceipts,
    kBalances,
    kEvents,
    kReceipts,
    kReconciliations,
    kReconciliation,
    kCheckpoint,
    kVerify,
    kProbeVerify,  // GET: whether this token may verify, answered 405 or 403; never runs it.
    kSubscriptions,
    kRewindSubscription,
    kEnableSubscription,
    kSubscriptionChanges,
    kConsoleRedirect,
    kConsoleIndex,
    kConsoleFile,
};

// Who may call an operation, as api/openapi.yaml's `security` says.
enum class Access {
    kOpen,      // No token: probes, metrics, the description, the console's files.
    kPlatform,  // No token: a platform's callback, verified by its channel's signature.
    kMerchant,  // A merchant token.
    kAuditor,   // An auditor token, or an admin's.
    kAdmin,     // An admin token; checked before the method (App::Handle).
};

struct Route {
    boost::beast::http::verb method;
    std::string_view path;  // As in api/openapi.yaml: "{name}" stands for one segment.
    Operation operation;
    Access access;
    // kCallback: the channel, keyed as the config sets channels up ("wechat/v2"); else empty.
    std::string_view channel{};
};

// The table, in the order the router tries the paths (a literal path before a template that
// would also match it: /console/ before /console/{file}).
[[nodiscard]] std::span<const Route> Routes();

// The paths serve handles on a thread of its own, never behind the worker pool's requests
// (Server::Options::probe_paths): GET /readyz's, whose answer an orchestrator times.
[[nodiscard]] std::vector<std::string> ProbePaths();

// The path's segments as the router sees them: "/v1/orders/A" is {"v1", "orders", "A"}, "/" is
// {}, "/console/" is {"console", ""}.
[[nodiscard]] std::vector<std::string> PathSegments(std::string_view path);

struct RouteMatch {
    const Route* route = nullptr;  // Null: no operation for this method (or no such path).
    bool path_known = false;       // Some method of the table serves this path.
    // When the path is known: its first row (its access, and for a callback its channel, are
    // the same in every row of the path).
    const Route* path_row = nullptr;
    std::string allow{};  // When the path is known: its methods, "GET, POST".
};

// The operation for `method` on a request whose path has `segments`. A segment matches a
// "{name}" of the table whatever it holds (also empty); the handler validates it.
[[nodiscard]] RouteMatch MatchRoute(const std::vector<std::string>& segments,
                                    boost::beast::http::verb method);

}  // namespace payledger::api
