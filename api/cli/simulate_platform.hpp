#pragma once

#include <optional>
#include <string>

#include "api/config.hpp"
#include "api/http/http.hpp"
#include "ledger/pg/connection_pool.hpp"
#include "ledger/write/committer.hpp"

namespace CLI {
class App;
}

namespace payledger::api {

// `payledger simulate-platform --listen ADDR` (docs/query.md#by-hand-and-for-development): the
// three platforms' order query and close APIs, for development and tests, answering from a
// payledger database that stands for the platform's own record (the config's database_url,
// PAYLEDGER_DATABASE_URL, as `simulate-bill` reads it): an order there paid is SUCCESS
// (TRADE_SUCCESS), closed is CLOSED, a registered one NOTPAY (WAIT_BUYER_PAY), none ORDER_NOT_EXIST
// (ACQ.TRADE_NOT_EXIST); a close of an unpaid order appends its PAYMENT_CLOSED there. Each
// request's signature is checked with the public half of the merchant's key
// (wechat_v3.query.merchant_private_key, wechat_v2.api_key, alipay.query.app_private_key); each
// answer is signed as the platform signs it, with the config's simulate_* platform keys.
// `POST /simulate/pay` {"channel","out_trade_no","amount"[,"currency","transaction_id"]} records
// a payment the platform took and never notified: the order registered there if it is not, then
// paid, by default with the number `simulate` gives that payment's notice (SimulatedPaymentNumber)
// (200 {"out_trade_no","transaction_id","outcome"}; 400 naming the field; 409 when the
// record refuses it, e.g. another amount).
struct SimulatePlatformCommand {
    std::string listen = "127.0.0.1:9090";
};

CLI::App* AddSimulatePlatformCommand(CLI::App& cli, SimulatePlatformCommand& command);

// Serves until SIGTERM or SIGINT; 0 then, 2 on an error (the address taken, a config without the
// keys a platform needs is served only for the platforms it has).
[[nodiscard]] int RunSimulatePlatformCommand(const Config& config,
                                             const SimulatePlatformCommand& command);

// The simulated platforms' answer to one request (the server's handler, and tests'). Thread-safe.
class PlatformSimulator {
public:
    PlatformSimulator(const Config& config, ledger::ConnectionPool& reads,
                      ledger::Committer& committer);

    [[nodiscard]] Response Answer(const Request& request);

private:
    Response WechatV3(const Request& request);
    Response WechatV2(const Request& request);
    Response Alipay(const Request& request);
    Response Pay(const Request& request);

    const Config& config_;
    ledger::ConnectionPool& reads_;
    ledger::Committer& committer_;
};

}  // namespace payledger::api
