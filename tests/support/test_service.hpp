#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "api/config.hpp"
#include "api/http/metrics.hpp"
#include "api/http/server.hpp"
#include "api/routes/app.hpp"
#include "api/routes/route_table.hpp"
#include "ledger/pg/connection_pool.hpp"
#include "ledger/write/committer.hpp"
#include "support/http_client.hpp"

namespace payledger::testing {

inline constexpr const char* kMerchantToken = "merchant-token-for-tests-0001";
inline constexpr const char* kAuditorToken = "auditor-token-for-tests-00001";
inline constexpr const char* kAdminToken = "admin-token-for-tests-0000001";
inline constexpr const char* kGenericSecret = "generic-secret-for-tests-0001";

// The default test config on `database_url`: every token above and the generic channel.
[[nodiscard]] api::Config TestConfig(const std::string& database_url);

// The whole service in-process (pool, committer, app, server on a free port), on a database
// the test owns. Stops cleanly at destruction.
class TestService {
public:
    // `application_name` names the service's database sessions (tests find them by it).
    explicit TestService(api::Config config, std::string application_name = "payledger_test");
    // With the given session settings (limits, name) for the pool and the committer.
    TestService(api::Config config, const ledger::SessionSettings& session,
                api::Server::Options server = DefaultServerOptions());

    [[nodiscard]] static api::Server::Options DefaultServerOptions() {
        return {.host = "127.0.0.1",
                .port = 0,
                .io_threads = 2,
                .worker_threads = 8,
                .probe_paths = api::ProbePaths()};
    }
    ~TestService();

    [[nodiscard]] unsigned short port() const { return server_->port(); }
    [[nodiscard]] const api::Config& config() const { return config_; }

    // POST /v1/orders with the merchant token.
    HttpResult CreateOrder(HttpClient& client, const std::string& out_trade_no,
                           const std::string& account_id, std::int64_t amount,
                           const std::string& currency = "CNY");

    // POST /v1/callbacks/generic with `body` signed now (or at `unix_seconds`).
    HttpResult PostGeneric(HttpClient& client, const std::string& body,
                           std::optional<std::int64_t> unix_seconds = std::nullopt,
                           const std::string& secret = kGenericSecret);

    // Stops the server and the committer (the destructor does it too).
    void Stop();

private:
    api::Config config_;
    std::unique_ptr<ledger::ConnectionPool> pool_;
    std::unique_ptr<ledger::Committer> committer_;
    api::Metrics metrics_;
    std::unique_ptr<api::App> app_;
    std::unique_ptr<api::Server> server_;
};

// A generic PAYMENT_SUCCEEDED body.
[[nodiscard]] std::string GenericPayment(const std::string& out_trade_no,
                                         const std::string& transaction_id, std::int64_t amount,
                                         const std::string& currency = "CNY");

[[nodiscard]] std::int64_t UnixNow();

}  // namespace payledger::testing
