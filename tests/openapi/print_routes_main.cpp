// Prints the router's table (api/routes/route_table.hpp), one "METHOD path access" a line, for
// tests/openapi/routes_match.py, which compares it with api/openapi.yaml (paths and security).
#include <iostream>
#include <string_view>

#include "api/routes/route_table.hpp"

namespace {

std::string_view AccessName(payledger::api::Access access) {
    switch (access) {
        case payledger::api::Access::kOpen:
            return "open";
        case payledger::api::Access::kPlatform:
            return "platform";
        case payledger::api::Access::kMerchant:
            return "merchant";
        case payledger::api::Access::kAuditor:
            return "auditor";
        case payledger::api::Access::kAdmin:
            return "admin";
    }
    return "?";
}

}  // namespace

int main() {
    for (const payledger::api::Route& route : payledger::api::Routes()) {
        std::cout << boost::beast::http::to_string(route.method) << ' ' << route.path << ' '
                  << AccessName(route.access) << '\n';
    }
    return 0;
}
