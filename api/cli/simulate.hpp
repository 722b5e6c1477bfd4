#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "api/config.hpp"

namespace payledger::api {

// `payledger simulate` (docs/api.md#the-command-line): builds a realistic platform notification
// for an order, signs it with the keys of the config (the platform's private test keys: `wechat_v3.
// simulate_private_key` and `simulate_serial`, `alipay.simulate_private_key`; WeChat v2 and
// generic sign with their shared secrets), and posts it to a running service.

struct SimulateOptions {
    std::string channel{};  // wechat_v2, wechat_v3, alipay or generic.
    std::string out_trade_no{};
    std::string kind = "payment";  // payment, refund or close (alipay, generic).
    std::int64_t amount = 1999;    // Minor units: the payment's total or the refund.
    // The order's total a refund notice names (WeChat total_fee / amount.total, Alipay
    // total_amount), which the ledger checks against the order; 0: `amount`.
    std::int64_t order_amount = 0;
    std::string currency = "CNY";  // The payment's (WeChat v2 fee_type, v3 amount.currency).
    // The platform's payment or refund number; empty: derived from out_trade_no, so that
    // simulating the same notice twice gives a duplicate.
    std::string transaction_id{};
    std::int64_t unix_seconds = 0;  // When the notice is signed and dated; 0: now.
};

// The payment number `simulate` gives `out_trade_no`'s payment notice on `channel` when it is
// given none (WeChat's 4200…, Alipay's 2024…, 28 digits), which `simulate-platform` gives the
// payments it records too: the notice of a payment a query found is then its duplicate.
[[nodiscard]] std::string SimulatedPaymentNumber(std::string_view channel,
                                                 const std::string& out_trade_no);

// One HTTP request to the service.
struct SimulatedNotice {
    std::string target{};                                        // "/v1/callbacks/wechat/v2".
    std::vector<std::pair<std::string, std::string>> headers{};  // Content-Type included.
    std::string body{};
};

// Builds and signs the notice. Throws ConfigError naming the config field that simulate
// needs and does not find, std::invalid_argument for options the channel cannot simulate.
[[nodiscard]] SimulatedNotice BuildNotice(const Config& config, const SimulateOptions& options);

// Builds the notice, posts it to `url` (http://host:port; empty: the config's listen
// address), prints the answer's status line and body to stdout. Returns 0 for a 2xx answer,
// 1 for any other answer. Throws as BuildNotice, and std::runtime_error when the request fails.
[[nodiscard]] int RunSimulate(const Config& config, const SimulateOptions& options,
                              const std::string& url);

}  // namespace payledger::api
