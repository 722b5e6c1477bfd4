// Prints the router's table (api/routes/route_table.hpp), one "METHOD path" a line, for
// tests/openapi/routes_match.py, which compares it with api/openapi.yaml.
#include <iostream>

#include "api/routes/route_table.hpp"

int main() {
    for (const payledger::api::Route& route : payledger::api::Routes()) {
        std::cout << boost::beast::http::to_string(route.method) << ' ' << route.path << '\n';
    }
    return 0;
}
