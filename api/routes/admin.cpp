// POST /v1/admin/verify, GET /v1/audit/checkpoint (SPEC §11) and GET /readyz (SPEC §5).
#include <nlohmann/json.hpp>

#include "api/http/json_output.hpp"
#include "api/log.hpp"
#include "api/routes/app.hpp"
#include "api/routes/route_helpers.hpp"
#include "ledger/checkpoint.hpp"
#include "ledger/database.hpp"
#include "ledger/verify.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::Outcome;

// POST /v1/admin/verify gives up (503) on a statement that runs longer than this.
constexpr std::chrono::minutes kAdminVerifyStatementTimeout{5};

json ProjectionJson(const ledger::ProjectionCheck& check) {
    json differences = json::array();
    for (const ledger::Difference& difference : check.differences) {
        differences.push_back({{"key", difference.key}, {"what", difference.what}});
    }
    return {{"name", check.name},
            {"rows", check.rows},
            {"digest", check.digest},
            {"ok", check.ok()},
            {"live_rows", check.live_rows},
            {"live_digest", check.live_digest},
            {"difference_count", check.difference_count},
            {"differences", std::move(differences)}};
}

}  // namespace

Response App::HandleAdminVerify() {
    // One at a time: each run reads the whole ledger on two connections of its own.
    if (verify_running_.exchange(true)) {
        return ErrorResponse(http::status::too_many_requests, Outcome::kRateLimited,
                             "verify is already running; retry when it has finished");
    }
    struct Done {
        std::atomic<bool>& running;
        ~Done() { running = false; }
    } done{verify_running_};
    // A database failure (the statement timeout included) throws to App::Handle: 503.
    const ledger::VerifyReport report =
        ledger::Verify(config_.database_url, {}, kAdminVerifyStatementTimeout);
    json projections = json::array();
    for (const ledger::ProjectionCheck& check : report.projections) {
        projections.push_back(ProjectionJson(check));
    }
    return JsonResponse(http::status::ok,
                        {{"ok", report.ok()}, {"projections", std::move(projections)}});
}

Response App::HandleAuditCheckpoint() {
    if (!config_.audit_signing_key_pem) {
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             "no checkpoint signing key is configured (audit.signing_key)");
    }
    // Checked at start (the config refuses another key); parsed per call, which is cheap.
    const auto key = ledger::Ed25519Key::PrivateFromPem(*config_.audit_signing_key_pem);
    ledger::ConnectionPool::Lease connection = pool_.Acquire();
    pqxx::read_transaction tx{*connection};
    const ledger::Checkpoint checkpoint = ledger::SignHead(tx, key);
    tx.commit();
    return MakeResponse(http::status::ok, "application/json", ledger::CheckpointJson(checkpoint));
}

Response App::Ready() {
    try {
        ledger::ConnectionPool::Lease connection = pool_.Acquire();
        bool read_only = false;
        {
            // SPEC §13: ready means a primary answers. A session that finds itself on a
            // read-only server (a standby that a single-host URL or a proxy now points at)
            // is dropped, so that the next check connects afresh.
            pqxx::nontransaction tx{*connection};
            read_only = tx.exec(
                              "SELECT pg_is_in_recovery() OR "
                              "current_setting('transaction_read_only')::bool")[0][0]
                            .as<bool>();
        }
        if (read_only) {
            connection->disconnect();
            throw ledger::ReadOnlyServer("the database server is read-only");
        }
        return JsonResponse(http::status::ok, {{"status", "ready"}});
    } catch (const std::exception& error) {
        // Not a failure of the request but its answer: SPEC §5 says only that the database
        // is unreachable; the driver's text (host, port, user) is for the operator's log.
        LogJson("warning", Dump(json{{"msg", "readiness check failed"}, {"error", error.what()}}));
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             "the database is unreachable");
    }
}

}  // namespace payledger::api
