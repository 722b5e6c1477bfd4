// POST /v1/admin/verify, GET /v1/audit/checkpoint (docs/integrity.md#checkpoints), and the probes
// GET /readyz and GET /metrics (docs/api.md#the-http-api).
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/http/json_output.hpp"
#include "api/http/prometheus.hpp"
#include "api/log.hpp"
#include "api/routes/handlers.hpp"
#include "api/routes/route_helpers.hpp"
#include "api/routes/subscriptions.hpp"
#include "ledger/integrity/checkpoint.hpp"
#include "ledger/integrity/verify.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/pg/migrate.hpp"

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

// One round trip for /readyz: whether the server is read-only, and which of the privileges that
// serve needs to write and read its session's role lacks ("INSERT, UPDATE on orders; ..."), or
// null; then synchronous replication as it is now
// (docs/operations.md#synchronous-replication-as-it-is-now):
// synchronous_standby_names (empty: commits wait for no standby, as after a failover manager
// dropped to asynchronous), and how many standbys are synchronous now, null when the role may
// not see it (pg_stat_replication's details need pg_read_all_stats; its rows, one per
// standby, do not). The privileges are ledger::kServicePrivileges (ledger/pg/migrate.hpp), what
// `migrate --grant` grants; a table that does not exist counts as lacking its privileges.
const std::string& ReadySql() {
    static const std::string sql = [] {
        std::string values;
        for (std::size_t i = 0; i < ledger::kServicePrivileges.size(); ++i) {
            const ledger::ServicePrivilege& needed = ledger::kServicePrivileges[i];
            if (i != 0) values += ",\n                           ";
            values +=
                "(" + std::to_string(i + 1) + ", '" +
                (needed.kind == ledger::ServicePrivilege::Kind::kTable ? "table" : "sequence") +
                "', '" + std::string(needed.object) + "', '" + std::string(needed.privileges) +
                "')";
        }
        return R"sql(
SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::bool,
       (SELECT string_agg(m.privileges || ' on ' || m.object, '; ' ORDER BY m.position)
        FROM (SELECT n.object, min(n.position) AS position,
                     string_agg(p.privilege, ', ' ORDER BY p.position) AS privileges
              FROM (VALUES )sql" +
               values + R"sql()
                       AS n (position, kind, object, privileges),
                   unnest(string_to_array(n.privileges, ',')) WITH ORDINALITY
                       AS p (privilege, position)
              WHERE NOT coalesce(CASE n.kind
                                     WHEN 'table' THEN has_table_privilege(
                                         to_regclass(n.object), p.privilege)
                                     ELSE has_sequence_privilege(
                                         to_regclass(n.object), p.privilege)
                                 END, false)
              GROUP BY n.object) AS m),
       current_setting('synchronous_standby_names'),
       (SELECT CASE WHEN bool_or(state IS NULL AND sync_state IS NULL) THEN NULL
                    ELSE count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) END
        FROM pg_stat_replication)
)sql";
    }();
    return sql;
}

}  // namespace

Response HandleAdminVerify(const std::string& database_url, std::atomic<bool>& running) {
    // One at a time: each run reads the whole ledger on two connections of its own.
    if (running.exchange(true)) {
        return ErrorResponse(http::status::too_many_requests, Outcome::kRateLimited,
                             "verify is already running; retry when it has finished");
    }
    struct Done {
        std::atomic<bool>& running;
        ~Done() { running = false; }
    } done{running};
    // A database failure (the statement timeout included) throws to App::Handle: 503.
    const ledger::VerifyReport report =
        ledger::Verify(database_url, {}, kAdminVerifyStatementTimeout);
    json projections = json::array();
    for (const ledger::ProjectionCheck& check : report.projections) {
        projections.push_back(ProjectionJson(check));
    }
    return JsonResponse(http::status::ok,
                        {{"ok", report.ok()}, {"projections", std::move(projections)}});
}

Response HandleAuditCheckpoint(const std::optional<std::string>& signing_key_pem,
                               ledger::ConnectionPool& pool) {
    if (!signing_key_pem) {
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             "no checkpoint signing key is configured (audit.signing_key)");
    }
    // Checked at start (the config refuses another key); parsed per call, which is cheap.
    const auto key = ledger::Ed25519Key::PrivateFromPem(*signing_key_pem);
    ledger::ConnectionPool::Lease connection = pool.Acquire();
    pqxx::read_transaction tx{*connection};
    const ledger::Checkpoint checkpoint = ledger::SignHead(tx, key);
    tx.commit();
    return MakeResponse(http::status::ok, "application/json", ledger::CheckpointJson(checkpoint));
}

Response HandleReadiness(const ReadinessSources& sources, bool ready,
                         std::chrono::steady_clock::time_point started) {
    if (!ready) {  // Still waiting or migrating.
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             "the database is unreachable");
    }
    // Serve handles the checks one at a time on a thread of their own (main.cpp, the server's
    // probe_paths): one that waited behind slow ones as long as the connection's own wait
    // answers at once, so that checks piling up on a database that hangs drain as fast as they
    // come instead of each waiting its turn.
    if (std::chrono::steady_clock::now() - started > kReadinessWaitMax) {
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             "the database is answering too slowly");
    }
    try {
        // A connection of its own: readiness never waits behind the reads' pool.
        ledger::ConnectionPool::Lease connection = sources.connection.Acquire();
        bool read_only = false;
        std::optional<std::string> lacking;
        SyncReplication sync;
        {
            // Ready means a primary answers (docs/availability.md#failover). A session that finds
            // itself on a read-only server (a standby that a single-host URL or a proxy now points
            // at) is dropped, so that the next check connects afresh. Ready also means that writes
            // can succeed: a role without the rights serve needs (a table replaced without its
            // grants, a privilege revoked) would answer every write 500 while the database answers.
            pqxx::nontransaction tx{*connection};
            const pqxx::row row = tx.exec(ReadySql())[0];
            read_only = row[0].as<bool>();
            if (!row[1].is_null()) lacking = row[1].as<std::string>();
            sync.standby_names = row[2].as<std::string>();
            if (!row[3].is_null()) sync.synchronous_standbys = row[3].as<std::int64_t>();
        }
        if (read_only) {
            connection->disconnect();
            throw ledger::ReadOnlyServer("the database server is read-only");
        }
        if (lacking) {
            // Says what is missing, not who: the role's name is the driver's business.
            const std::string message = "the service's database role lacks " + *lacking +
                                        ", so writes would fail (`payledger migrate --grant "
                                        "ROLE` grants what serve needs)";
            LogJson("warning", Dump(json{{"msg", "readiness check failed"}, {"error", message}}));
            return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable, message);
        }
        sources.metrics.SetSyncReplication(sync);
        json synchronous = {{"standby_names", sync.standby_names},
                            {"synchronous_standbys", nullptr}};
        if (sync.synchronous_standbys) {
            synchronous["synchronous_standbys"] = *sync.synchronous_standbys;
        }
        // The database answers, yet writes may not end: a commit waiting for a synchronous
        // standby that is gone waits for as long as it is, and every callback behind it.
        const auto writing = std::chrono::duration_cast<std::chrono::seconds>(
            sources.committer.WriteInProgressFor(std::chrono::steady_clock::now()));
        if (writing >= kWriteStalledAfter) {
            const std::string message =
                "a write has waited " + std::to_string(writing.count()) +
                " s for the database (a commit waits for a synchronous standby, or a lock)";
            LogJson("warning", Dump(json{{"msg", "readiness check failed"}, {"error", message}}));
            return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable, message);
        }
        return JsonResponse(http::status::ok,
                            {{"status", "ready"}, {"synchronous_replication", synchronous}});
    } catch (const std::exception& error) {
        // Not a failure of the request but its answer: it says only that the database is
        // unreachable; the driver's text (host, port, user) is for the operator's log.
        LogJson("warning", Dump(json{{"msg", "readiness check failed"}, {"error", error.what()}}));
        return ErrorResponse(http::status::service_unavailable, Outcome::kUnavailable,
                             "the database is unreachable");
    }
}

Response HandleMetrics(const MetricsSources& sources) {
    std::string text = sources.metrics.Render(sources.pool, sources.committer, sources.reads);
    if (sources.notifier != nullptr) {
        PrometheusText feed;
        feed.Add("payledger_feed_waiters", PrometheusText::Type::kGauge,
                 "Reads of the feed waiting for an event (wait=).")
            .Sample({}, sources.notifier->WaiterCount());
        text += feed.Text();
    }
    if (sources.subscriptions != nullptr) text += SubscriptionMetrics(*sources.subscriptions);
    if (sources.queries != nullptr) text += sources.queries->MetricsText();
    return MakeResponse(http::status::ok, "text/plain; version=0.0.4", std::move(text));
}

}  // namespace payledger::api
