#include "bench/load/workload.hpp"

#include <chrono>
#include <nlohmann/json.hpp>

#include "api/channels/generic_channel.hpp"

namespace payledger::bench {
namespace {

using nlohmann::json;

constexpr std::int64_t kAmountSpread = 100'000;  // Amounts 100 ... 100'099 fen.

std::int64_t UnixSeconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string Padded(std::int64_t value) {
    std::string digits = std::to_string(value);
    return std::string(digits.size() < 10 ? 10 - digits.size() : 0, '0') + digits;
}

std::string Clipped(const std::string& body) {
    constexpr std::size_t kShownBytesMax = 200;
    return body.size() <= kShownBytesMax ? body : body.substr(0, kShownBytesMax) + "...";
}

std::string CheckJson(const http::response<http::string_body>& response, const json& body,
                      const char* field, const json& expected) {
    const auto it = body.find(field);
    if (it != body.end() && *it == expected) return {};
    return "status " + std::to_string(response.result_int()) + ", expected " + field + " " +
           expected.dump() + ": " + Clipped(response.body());
}

}  // namespace

std::string CreateBody(const Workload& workload, std::int64_t order_index) {
    const json body = {{"out_trade_no", OutTradeNo(workload, order_index)},
                       {"account_id", AccountId(workload, order_index)},
                       {"amount", OrderAmount(order_index)},
                       {"currency", "CNY"}};
    return body.dump();
}

std::string PaymentBody(const Workload& workload, std::int64_t order_index) {
    const json body = {{"event_type", "PAYMENT_SUCCEEDED"},
                       {"out_trade_no", OutTradeNo(workload, order_index)},
                       {"transaction_id", TransactionId(order_index)},
                       {"amount", OrderAmount(order_index)},
                       {"currency", "CNY"}};
    return body.dump();
}

std::string OutTradeNo(const Workload& workload, std::int64_t order_index) {
    return workload.prefix + Padded(order_index);
}

std::string AccountId(const Workload& workload, std::int64_t order_index) {
    return "acct-" + std::to_string(order_index % workload.account_count);
}

std::int64_t OrderAmount(std::int64_t order_index) { return 100 + order_index % kAmountSpread; }

std::string TransactionId(std::int64_t order_index) { return "TX" + Padded(order_index); }

void BuildRequest(const Workload& workload, std::int64_t order_index,
                  http::request<http::string_body>& request) {
    request = {};
    request.version(11);
    request.set(http::field::host, workload.host);
    request.keep_alive(true);
    switch (workload.mode) {
        case Mode::kHealthz:
            request.method(http::verb::get);
            request.target("/healthz");
            break;
        case Mode::kCreate:
            request.method(http::verb::post);
            request.target("/v1/orders");
            request.set(http::field::authorization, "Bearer " + workload.merchant_token);
            request.set(http::field::content_type, "application/json");
            request.body() = CreateBody(workload, order_index);
            break;
        case Mode::kPay:
            request.method(http::verb::post);
            request.target("/v1/callbacks/generic");
            request.set(http::field::content_type, "application/json");
            request.body() = PaymentBody(workload, order_index);
            request.set(
                "Payledger-Signature",
                api::GenericChannel::Sign(workload.generic_secret, UnixSeconds(), request.body()));
            break;
    }
    request.prepare_payload();
}

std::string CheckAnswer(const Workload& workload, std::int64_t order_index,
                        const http::response<http::string_body>& response, std::string* outcome) {
    const bool created = workload.mode == Mode::kCreate;
    const unsigned expected_status = created ? 201 : 200;
    if (response.result_int() != expected_status) {
        return "status " + std::to_string(response.result_int()) + ": " + Clipped(response.body());
    }
    if (workload.mode == Mode::kHealthz) return {};
    const json body = json::parse(response.body(), nullptr, false);
    if (!body.is_object()) return "answer is not a JSON object: " + Clipped(response.body());
    if (created) {
        std::string why =
            CheckJson(response, body, "out_trade_no", OutTradeNo(workload, order_index));
        if (why.empty()) why = CheckJson(response, body, "status", "WAIT_PAY");
        return why;
    }
    std::string why = CheckJson(response, body, "code", "SUCCESS");
    if (why.empty()) {
        if (workload.expected_outcome == "either") {
            why = CheckJson(response, body, "outcome", "appended");
            if (!why.empty()) why = CheckJson(response, body, "outcome", "duplicate");
        } else {
            why = CheckJson(response, body, "outcome", workload.expected_outcome);
        }
    }
    if (why.empty() && outcome != nullptr) *outcome = body.at("outcome").get<std::string>();
    if (why.empty()) {
        const auto seq = body.find("seq");
        if (seq == body.end() || !seq->is_number_integer() || seq->get<std::int64_t>() <= 0) {
            why = "answer has no positive seq: " + Clipped(response.body());
        }
    }
    return why;
}

}  // namespace payledger::bench
