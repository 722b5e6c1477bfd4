#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "api/channels/channel.hpp"
#include "api/config.hpp"
#include "api/http/http.hpp"
#include "api/http/metrics.hpp"
#include "api/http/peer_limits.hpp"
#include "ledger/committer.hpp"
#include "ledger/connection_pool.hpp"

namespace payledger::api {

// The HTTP application: routes each request to its handler (SPEC §5). Handle runs on a
// worker thread and may block on the read pool; writes go to the committer, whose callback
// answers after the commit. Thread-safe.
class App {
public:
    App(const Config& config, ledger::ConnectionPool& pool, ledger::Committer& committer,
        Metrics& metrics);

    // Answers `incoming` exactly once, possibly from another thread: through `respond`, or
    // through incoming.respond_stream for a streamed export. Never throws: a handler's
    // exception is logged, counted and answered 500 unless an answer was already sent.
    void Handle(Incoming incoming, Respond respond);

private:
    void HandleCallback(const Channel& channel, Incoming incoming, Respond respond);
    void HandleCreateOrder(const MerchantToken& token, Incoming incoming, Respond respond);
    Response HandleRead(const Incoming& incoming, const std::vector<std::string>& segments);
    Response HandleFeed(const Incoming& incoming, bool events);
    // GET /v1/events with Accept: application/x-ndjson: every event after the cursor, up to
    // the last one committed when the export starts, streamed without a page limit.
    void HandleEventExport(Incoming incoming, Respond respond);
    Response HandleAdminVerify();
    Response Ready();
    // nullopt when the bearer token holds `role` (or admin, for auditor endpoints).
    // `merchant_token`, when given, receives the matching merchant token (or null).
    std::optional<Response> Authorize(const Request& request, Role role,
                                      const MerchantToken** merchant_token = nullptr) const;
    void Submit(projections::Source source, ledger::Delivery delivery, Incoming incoming,
                std::function<Response(const ledger::DeliveryResult&)> answer, Respond respond);

    Config config_;
    ledger::ConnectionPool& pool_;
    ledger::Committer& committer_;
    Metrics& metrics_;
    std::map<std::string, std::unique_ptr<Channel>> channels_;
    UnverifiedLimiter unverified_;
    std::atomic<bool> verify_running_{false};
    std::shared_ptr<std::atomic<int>> exports_active_ =
        std::make_shared<std::atomic<int>>(0);  // By path after callbacks/.
};

}  // namespace payledger::api
