#include "api/http/metrics.hpp"

#include <chrono>
#include <limits>

#include "api/http/prometheus.hpp"
#include "ledger/pg/connection_pool.hpp"
#include "ledger/read/read_router.hpp"
#include "ledger/write/committer.hpp"

namespace payledger::api {
namespace {

constexpr projections::Source kSources[] = {
    projections::Source::kApi, projections::Source::kWechatV2, projections::Source::kWechatV3,
    projections::Source::kAlipay, projections::Source::kGeneric};
constexpr projections::Outcome kOutcomes[] = {
    projections::Outcome::kAppended,     projections::Outcome::kDuplicate,
    projections::Outcome::kIgnored,      projections::Outcome::kMalformed,
    projections::Outcome::kBadSignature, projections::Outcome::kUnknownOrder,
    projections::Outcome::kConflict,     projections::Outcome::kMismatch,
    projections::Outcome::kRateLimited,  projections::Outcome::kUnavailable};
static_assert(std::size(kSources) == Metrics::kChannelCount);
static_assert(std::size(kOutcomes) == Metrics::kOutcomeCount);

// The replica's replay lag and where the auditor reads go (docs/availability.md#read-replicas).
void RenderReads(PrometheusText& out, const ledger::ReadStatus& reads) {
    using Type = PrometheusText::Type;
    PrometheusText::Family& served = out.Add("payledger_reads_total", Type::kCounter,
                                             "Connections handed to auditor reads, by server.");
    served.Sample({{"server", "primary"}}, reads.primary_reads);
    served.Sample({{"server", "replica"}}, reads.replica_reads);
    if (!reads.configured) return;
    // NaN while the replica is unreachable or reports no replay position: the lag is unknown.
    out.Add("payledger_replica_lag_seconds", Type::kGauge,
            "How far the replica's data is behind the primary's: now minus the time of the "
            "oldest WAL position sampled on the primary that the replica has not replayed; 0 "
            "when it has replayed the newest.")
        .Sample({}, reads.lag_seconds.value_or(std::numeric_limits<double>::quiet_NaN()));
    out.Add("payledger_reads_on_replica", Type::kGauge,
            "1 while the auditor reads go to the replica, 0 while they fall back to the primary.")
        .Sample({}, reads.on_replica ? 1 : 0);
    out.Add("payledger_read_fallbacks_total", Type::kCounter,
            "Times the auditor reads left the replica for the primary.")
        .Sample({}, reads.fallbacks);
    PrometheusText::Family& instead = out.Add(
        "payledger_reads_sent_to_primary_total", Type::kCounter,
        "Auditor reads served by the primary although a replica is configured, by reason: "
        "starting (no check yet), unreachable, not_replaying, lagging (more than "
        "read_max_lag_seconds), unconfirmed (a feed read whose newest receipt the primary did "
        "not hold, read again from the primary).");
    for (std::size_t i = 0; i < ledger::kInsteadCount; ++i) {
        instead.Sample({{"reason", ledger::kInsteadNames.at(i)}}, reads.primary_instead.at(i));
    }
}

}  // namespace

bool AnyStandbyConfirms(std::string_view standby_names) {
    // PostgreSQL's syntax: name [, ...] | [FIRST] n (name [, ...]) | ANY n (name [, ...]); a
    // name may be double-quoted. '*' is a name of its own, so a token of its own.
    std::string token;
    const auto ends = [&token] {
        const bool any = token == "*" || token == "\"*\"";
        token.clear();
        return any;
    };
    for (const char c : standby_names) {
        if (c == ',' || c == '(' || c == ')' || c == ' ' || c == '\t' || c == '\n') {
            if (ends()) {
                return true;
            }
        } else {
            token.push_back(c);
        }
    }
    return ends();
}

void Metrics::SetSyncReplication(SyncReplication sync) {
    std::lock_guard lock{sync_mutex_};
    sync_ = std::move(sync);
}

void Metrics::CountDelivery(projections::Source channel, projections::Outcome outcome) {
    ++deliveries_.at(static_cast<std::size_t>(channel)).at(static_cast<std::size_t>(outcome));
}

void Metrics::ObserveRequest(std::chrono::steady_clock::duration latency) {
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(latency).count();
    const double seconds = static_cast<double>(micros) / 1e6;
    for (std::size_t i = 0; i < kLatencyBucketsSeconds.size(); ++i) {
        if (seconds <= kLatencyBucketsSeconds[i]) ++latency_buckets_[i];
    }
    ++latency_count_;
    latency_sum_micros_ += static_cast<std::uint64_t>(micros);
}

std::string Metrics::Render(const ledger::ConnectionPool& pool, const ledger::Committer& committer,
                            const ledger::ReadRouter& reads) const {
    using Type = PrometheusText::Type;
    const auto seconds = [](std::uint64_t micros) { return static_cast<double>(micros) / 1e6; };
    PrometheusText out;
    PrometheusText::Family& deliveries =
        out.Add("payledger_deliveries_total", Type::kCounter, "Deliveries by channel and outcome.");
    for (std::size_t c = 0; c < kChannelCount; ++c) {
        for (std::size_t o = 0; o < kOutcomeCount; ++o) {
            deliveries.Sample({{"channel", projections::ToString(kSources[c])},
                               {"outcome", projections::ToString(kOutcomes[o])}},
                              deliveries_[c][o].load());
        }
    }
    PrometheusText::Family& latency =
        out.Add("payledger_request_duration_seconds", Type::kHistogram, "HTTP request latency.");
    for (std::size_t i = 0; i < kLatencyBucketsSeconds.size(); ++i) {
        latency.Sample("_bucket", {{"le", PrometheusText::Number(kLatencyBucketsSeconds[i])}},
                       latency_buckets_[i].load());
    }
    latency.Sample("_bucket", {{"le", "+Inf"}}, latency_count_.load());
    latency.Sample("_sum", {}, seconds(latency_sum_micros_.load()));
    latency.Sample("_count", {}, latency_count_.load());
    out.Add("payledger_internal_errors_total", Type::kCounter, "Requests answered 500.")
        .Sample({}, internal_errors_.load());
    PrometheusText::Family& connections =
        out.Add("payledger_db_pool_connections", Type::kGauge, "Read pool connections by state.");
    connections.Sample({{"state", "in_use"}}, pool.InUse());
    connections.Sample({{"state", "max"}}, pool.SizeMax());
    out.Add("payledger_db_pool_waiting", Type::kGauge, "Requests waiting for a read connection.")
        .Sample({}, pool.Waiting());
    const ledger::Committer::Stats& writes = committer.stats();
    out.Add("payledger_write_queue_depth", Type::kGauge, "Deliveries waiting for the committer.")
        .Sample({}, writes.queue_depth.load());
    out.Add("payledger_write_queue_bytes", Type::kGauge,
            "Bytes the waiting deliveries count against limits.write_queue_bytes_max.")
        .Sample({}, writes.queue_bytes.load());
    out.Add("payledger_write_queue_full_total", Type::kCounter,
            "Deliveries answered 503 at once: the write queue was full.")
        .Sample({}, writes.queue_full_refusals.load());
    out.Add("payledger_commit_batches_total", Type::kCounter,
            "Transactions committed by the committer.")
        .Sample({}, writes.batches.load());
    out.Add("payledger_committed_deliveries_total", Type::kCounter,
            "Deliveries in committed batches.")
        .Sample({}, writes.deliveries.load());
    out.Add("payledger_commit_state_reads_total", Type::kCounter,
            "Committed batches planned on the state read under the writer lock; the others were "
            "planned from the committer's memory of its last batch, in one round trip.")
        .Sample({}, writes.state_reads.load());
    out.Add("payledger_commit_prefetch_reads_total", Type::kCounter,
            "Reads outside the writer lock of the orders of queued deliveries the committer's "
            "memory lacks.")
        .Sample({}, writes.prefetch_reads.load());
    out.Add("payledger_commit_prefetched_orders_total", Type::kCounter,
            "Orders the committer's memory learned from those reads.")
        .Sample({}, writes.prefetched_orders.load());
    out.Add("payledger_write_in_progress_seconds", Type::kGauge,
            "How long the committer's transaction in progress has taken so far; 0 while none "
            "is. Seconds mean commits wait (for a synchronous standby, a lock).")
        .Sample({}, std::chrono::duration<double>(
                        committer.WriteInProgressFor(std::chrono::steady_clock::now()))
                        .count());
    out.Add("payledger_commit_failures_total", Type::kCounter, "Batches answered unavailable.")
        .Sample({}, writes.failures.load());
    out.Add("payledger_answer_failures_total", Type::kCounter,
            "Answers that threw after their batch was decided.")
        .Sample({}, writes.answer_failures.load());
    out.Add("payledger_writer_lock_wait_seconds_total", Type::kCounter,
            "Time spent waiting for the ledger's writer lock.")
        .Sample({}, seconds(writes.lock_wait_micros.load()));
    PrometheusText::Family& steps = out.Add(
        "payledger_commit_step_seconds_total", Type::kCounter,
        "Time of the committed batches' steps: read (lock and read, one round trip; none when "
        "planned from memory), plan (no I/O), write (write and COMMIT, one round trip; from "
        "memory, BEGIN and the lock too).");
    steps.Sample({{"step", "read"}}, seconds(writes.read_micros.load()));
    steps.Sample({{"step", "plan"}}, seconds(writes.plan_micros.load()));
    steps.Sample({{"step", "write"}}, seconds(writes.write_micros.load()));
    RenderReads(out, reads.status());
    std::optional<SyncReplication> sync;
    {
        std::lock_guard lock{sync_mutex_};
        sync = sync_;
    }
    if (sync) {
        out.Add("payledger_synchronous_replication_configured", PrometheusText::Type::kGauge,
                "1 while the primary's synchronous_standby_names is set (commits wait for a "
                "standby), 0 when it is empty; as of the last GET /readyz.")
            .Sample({}, sync->standby_names.empty() ? 0 : 1);
        out.Add("payledger_synchronous_standby_names_any", PrometheusText::Type::kGauge,
                "1 while the primary's synchronous_standby_names names '*': any standby may "
                "confirm a commit, one that is never promoted too (Patroni's strict mode with "
                "no standby to name, or restarted on the primary); as of the last GET /readyz.")
            .Sample({}, AnyStandbyConfirms(sync->standby_names) ? 1 : 0);
        out.Add("payledger_synchronous_standbys", PrometheusText::Type::kGauge,
                "Standbys synchronous now (pg_stat_replication sync or quorum), as of the last "
                "GET /readyz; NaN when the role may not see it (pg_read_all_stats).")
            .Sample({}, sync->synchronous_standbys
                            ? static_cast<double>(*sync->synchronous_standbys)
                            : std::numeric_limits<double>::quiet_NaN());
    }
    return out.Text();
}

}  // namespace payledger::api
