#include "api/http/metrics.hpp"

#include <sstream>

#include "ledger/committer.hpp"
#include "ledger/connection_pool.hpp"
#include "ledger/read_router.hpp"

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

// SPEC §13: the replica's replay lag and where the auditor reads go.
void RenderReads(std::ostringstream& out, const ledger::ReadStatus& reads) {
    out << "# HELP payledger_reads_total Connections handed to auditor reads, by server.\n"
           "# TYPE payledger_reads_total counter\n"
           "payledger_reads_total{server=\"primary\"} "
        << reads.primary_reads << "\n"
        << "payledger_reads_total{server=\"replica\"} " << reads.replica_reads << "\n";
    if (!reads.configured) return;
    // NaN while the replica is unreachable or reports no replay position: the lag is unknown.
    out << "# HELP payledger_replica_lag_seconds How far the replica's data is behind the "
           "primary's: now minus the time of the oldest WAL position sampled on the primary "
           "that the replica has not replayed; 0 when it has replayed the newest.\n"
           "# TYPE payledger_replica_lag_seconds gauge\n"
           "payledger_replica_lag_seconds ";
    if (reads.lag_seconds) {
        out << *reads.lag_seconds << "\n";
    } else {
        out << "NaN\n";
    }
    out << "# HELP payledger_reads_on_replica 1 while the auditor reads go to the replica, 0 "
           "while they fall back to the primary.\n"
           "# TYPE payledger_reads_on_replica gauge\n"
           "payledger_reads_on_replica "
        << (reads.on_replica ? 1 : 0) << "\n"
        << "# HELP payledger_read_fallbacks_total Times the auditor reads left the replica for "
           "the primary.\n"
           "# TYPE payledger_read_fallbacks_total counter\n"
           "payledger_read_fallbacks_total "
        << reads.fallbacks << "\n";
}

}  // namespace

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
    std::ostringstream out;
    out << "# HELP payledger_deliveries_total Deliveries by channel and outcome.\n"
           "# TYPE payledger_deliveries_total counter\n";
    for (std::size_t c = 0; c < kChannelCount; ++c) {
        for (std::size_t o = 0; o < kOutcomeCount; ++o) {
            out << "payledger_deliveries_total{channel=\"" << projections::ToString(kSources[c])
                << "\",outcome=\"" << projections::ToString(kOutcomes[o]) << "\"} "
                << deliveries_[c][o].load() << "\n";
        }
    }
    out << "# HELP payledger_request_duration_seconds HTTP request latency.\n"
           "# TYPE payledger_request_duration_seconds histogram\n";
    for (std::size_t i = 0; i < kLatencyBucketsSeconds.size(); ++i) {
        out << "payledger_request_duration_seconds_bucket{le=\"" << kLatencyBucketsSeconds[i]
            << "\"} " << latency_buckets_[i].load() << "\n";
    }
    out << "payledger_request_duration_seconds_bucket{le=\"+Inf\"} " << latency_count_.load()
        << "\n"
        << "payledger_request_duration_seconds_sum "
        << static_cast<double>(latency_sum_micros_.load()) / 1e6 << "\n"
        << "payledger_request_duration_seconds_count " << latency_count_.load() << "\n";
    const ledger::Committer::Stats& writes = committer.stats();
    out << "# HELP payledger_internal_errors_total Requests answered 500.\n"
           "# TYPE payledger_internal_errors_total counter\n"
           "payledger_internal_errors_total "
        << internal_errors_.load() << "\n"
        << "# HELP payledger_db_pool_connections Read pool connections by state.\n"
           "# TYPE payledger_db_pool_connections gauge\n"
           "payledger_db_pool_connections{state=\"in_use\"} "
        << pool.InUse() << "\n"
        << "payledger_db_pool_connections{state=\"max\"} " << pool.SizeMax() << "\n"
        << "# HELP payledger_db_pool_waiting Requests waiting for a read connection.\n"
           "# TYPE payledger_db_pool_waiting gauge\n"
           "payledger_db_pool_waiting "
        << pool.Waiting() << "\n"
        << "# HELP payledger_write_queue_depth Deliveries waiting for the committer.\n"
           "# TYPE payledger_write_queue_depth gauge\n"
           "payledger_write_queue_depth "
        << writes.queue_depth.load() << "\n"
        << "# HELP payledger_write_queue_bytes Bytes the waiting deliveries count against "
           "limits.write_queue_bytes_max.\n"
           "# TYPE payledger_write_queue_bytes gauge\n"
           "payledger_write_queue_bytes "
        << writes.queue_bytes.load() << "\n"
        << "# HELP payledger_write_queue_full_total Deliveries answered 503 at once: the write "
           "queue was full.\n"
           "# TYPE payledger_write_queue_full_total counter\n"
           "payledger_write_queue_full_total "
        << writes.queue_full_refusals.load() << "\n"
        << "# HELP payledger_commit_batches_total Transactions committed by the committer.\n"
           "# TYPE payledger_commit_batches_total counter\n"
           "payledger_commit_batches_total "
        << writes.batches.load() << "\n"
        << "# HELP payledger_committed_deliveries_total Deliveries in committed batches.\n"
           "# TYPE payledger_committed_deliveries_total counter\n"
           "payledger_committed_deliveries_total "
        << writes.deliveries.load() << "\n"
        << "# HELP payledger_commit_state_reads_total Committed batches planned on the state "
           "read under the writer lock; the others were planned from the committer's memory "
           "of its last batch, in one round trip.\n"
           "# TYPE payledger_commit_state_reads_total counter\n"
           "payledger_commit_state_reads_total "
        << writes.state_reads.load() << "\n"
        << "# HELP payledger_commit_failures_total Batches answered unavailable.\n"
           "# TYPE payledger_commit_failures_total counter\n"
           "payledger_commit_failures_total "
        << writes.failures.load() << "\n"
        << "# HELP payledger_answer_failures_total Answers that threw after their batch was "
           "decided.\n"
           "# TYPE payledger_answer_failures_total counter\n"
           "payledger_answer_failures_total "
        << writes.answer_failures.load() << "\n"
        << "# HELP payledger_writer_lock_wait_seconds_total Time spent waiting for the "
           "ledger's writer lock.\n"
           "# TYPE payledger_writer_lock_wait_seconds_total counter\n"
           "payledger_writer_lock_wait_seconds_total "
        << static_cast<double>(writes.lock_wait_micros.load()) / 1e6 << "\n"
        << "# HELP payledger_commit_step_seconds_total Time of the committed batches' steps: "
           "read (lock and read, one round trip; none when planned from memory), plan (no I/O), "
           "write (write and COMMIT, one round trip; from memory, BEGIN and the lock too).\n"
           "# TYPE payledger_commit_step_seconds_total counter\n"
           "payledger_commit_step_seconds_total{step=\"read\"} "
        << static_cast<double>(writes.read_micros.load()) / 1e6
        << "\npayledger_commit_step_seconds_total{step=\"plan\"} "
        << static_cast<double>(writes.plan_micros.load()) / 1e6
        << "\npayledger_commit_step_seconds_total{step=\"write\"} "
        << static_cast<double>(writes.write_micros.load()) / 1e6 << "\n";
    RenderReads(out, reads.status());
    return out.str();
}

}  // namespace payledger::api
