#include "api/http/http.hpp"

#include <nlohmann/json.hpp>

namespace payledger::api {

Response MakeResponse(http::status status, std::string content_type, std::string body) {
    Response response{status, 11};
    response.set(http::field::content_type, content_type);
    response.body() = std::move(body);
    response.prepare_payload();
    return response;
}

Response ErrorResponse(http::status status, projections::Outcome outcome,
                       const std::string& message, std::int64_t seq) {
    nlohmann::json body = {
        {"code", "FAIL"}, {"outcome", projections::ToString(outcome)}, {"message", message}};
    if (seq != 0) body["seq"] = seq;
    return MakeResponse(status, "application/json",
                        body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace payledger::api
