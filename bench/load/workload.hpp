#pragma once

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <string>

namespace payledger::bench {

namespace http = boost::beast::http;

// What one phase of bench/load sends: GET /healthz, POST /v1/orders, or a signed generic
// PAYMENT_SUCCEEDED callback (docs/platforms.md#generic).
enum class Mode { kHealthz, kCreate, kPay };

// Everything needed to build request number `index` and to check its answer. Immutable
// while a phase runs, so every I/O thread may read it.
struct Workload {
    Mode mode = Mode::kHealthz;
    std::string host = "127.0.0.1";
    std::string prefix = "LOAD-";       // out_trade_no = prefix + 10-digit order index.
    std::int64_t account_count = 1000;  // account_id = "acct-" + (order index % count).
    std::string merchant_token{};       // kCreate.
    std::string generic_secret{};       // kPay.
    // kPay: "appended", "duplicate", or "either" (the mixed phases: each order's callback is
    // sent twice, shuffled, and exactly one of the two must be appended).
    std::string expected_outcome = "appended";
};

// The order's fields, derived from its index alone, so that the phase that creates an order
// and the phases that pay it agree without sharing state.
[[nodiscard]] std::string OutTradeNo(const Workload& workload, std::int64_t order_index);
[[nodiscard]] std::string AccountId(const Workload& workload, std::int64_t order_index);
[[nodiscard]] std::int64_t OrderAmount(std::int64_t order_index);
[[nodiscard]] std::string TransactionId(std::int64_t order_index);

// The JSON bodies of POST /v1/orders and of a generic PAYMENT_SUCCEEDED for the order.
[[nodiscard]] std::string CreateBody(const Workload& workload, std::int64_t order_index);
[[nodiscard]] std::string PaymentBody(const Workload& workload, std::int64_t order_index);

// Builds the request for `order_index` (ignored for kHealthz), signed now for kPay.
void BuildRequest(const Workload& workload, std::int64_t order_index,
                  http::request<http::string_body>& request);

// Empty when the answer is the one expected for `order_index`; else what is wrong. For kPay,
// `outcome` receives the answer's outcome when it is an expected one.
[[nodiscard]] std::string CheckAnswer(const Workload& workload, std::int64_t order_index,
                                      const http::response<http::string_body>& response,
                                      std::string* outcome = nullptr);

}  // namespace payledger::bench
