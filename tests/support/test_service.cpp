#include "support/test_service.hpp"

#include <chrono>
#include <nlohmann/json.hpp>

#include "api/channels/generic_channel.hpp"

namespace payledger::testing {

api::Config TestConfig(const std::string& database_url) {
    api::Config config;
    config.listen_host = "127.0.0.1";
    config.listen_port = 0;
    config.database_url = database_url;
    config.merchant_tokens = {api::MerchantToken{.token = kMerchantToken}};
    config.auditor_tokens = {kAuditorToken};
    config.admin_tokens = {kAdminToken};
    config.generic = api::GenericConfig{.secret = kGenericSecret};
    return config;
}

TestService::TestService(api::Config config, std::string application_name)
    : TestService(std::move(config),
                  ledger::SessionSettings{.application_name = std::move(application_name)}) {}

TestService::TestService(api::Config config, const ledger::SessionSettings& session,
                         api::Server::Options server)
    : config_(std::move(config)) {
    pool_ = std::make_unique<ledger::ConnectionPool>(config_.database_url, 4,
                                                     std::chrono::milliseconds{2000}, session);
    committer_ = std::make_unique<ledger::Committer>(
        ledger::Committer::Options{.url = config_.database_url, .session = session});
    app_ = std::make_unique<api::App>(config_, *pool_, *committer_, metrics_);
    app_->SetReady();  // The tests create and migrate their databases themselves.
    server_ = std::make_unique<api::Server>(
        [app = app_.get()](api::Incoming incoming, api::Respond respond) {
            app->Handle(std::move(incoming), std::move(respond));
        },
        std::move(server));
    server_->Start();
}

TestService::~TestService() { Stop(); }

void TestService::Stop() {
    if (server_) server_->Shutdown(std::chrono::seconds{10});
    if (committer_) committer_->Stop();
}

HttpResult TestService::CreateOrder(HttpClient& client, const std::string& out_trade_no,
                                    const std::string& account_id, std::int64_t amount,
                                    const std::string& currency) {
    const nlohmann::json body = {{"out_trade_no", out_trade_no},
                                 {"account_id", account_id},
                                 {"amount", amount},
                                 {"currency", currency}};
    return client.Post("/v1/orders", body.dump(),
                       {{"Authorization", std::string("Bearer ") + kMerchantToken},
                        {"Content-Type", "application/json"}});
}

HttpResult TestService::PostGeneric(HttpClient& client, const std::string& body,
                                    std::optional<std::int64_t> unix_seconds,
                                    const std::string& secret) {
    const std::string signature =
        api::GenericChannel::Sign(secret, unix_seconds.value_or(UnixNow()), body);
    return client.Post("/v1/callbacks/generic", body,
                       {{"Payledger-Signature", signature}, {"Content-Type", "application/json"}});
}

std::string GenericPayment(const std::string& out_trade_no, const std::string& transaction_id,
                           std::int64_t amount, const std::string& currency) {
    return nlohmann::json{{"event_type", "PAYMENT_SUCCEEDED"},
                          {"out_trade_no", out_trade_no},
                          {"transaction_id", transaction_id},
                          {"amount", amount},
                          {"currency", currency}}
        .dump();
}

std::int64_t UnixNow() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace payledger::testing
