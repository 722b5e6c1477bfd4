#include "ledger/reconcile/apply.hpp"

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ledger/base/bytes.hpp"
#include "ledger/base/clock.hpp"
#include "ledger/reconcile/session.hpp"
#include "ledger/write/committer.hpp"
#include "projections/assert.hpp"
#include "projections/reconcile.hpp"

namespace payledger::ledger::reconcile {
namespace {

using nlohmann::json;
using projections::Category;
using projections::EventType;
using projections::Side;

constexpr std::size_t kAppliesPerRound = 500;  // Below the committer's queue_max.

// Waits for the committer's answers to one round of deliveries.
class Answers {
public:
    explicit Answers(std::size_t count) : results_(count), left_(count) {}

    Committer::Done For(std::size_t index) {
        return [this, index](DeliveryResult result) {
            std::lock_guard lock{mutex_};
            results_.at(index) = std::move(result);
            if (--left_ == 0) done_.notify_all();
        };
    }

    std::vector<DeliveryResult> Wait() {
        std::unique_lock lock{mutex_};
        done_.wait(lock, [this] { return left_ == 0; });
        return std::move(results_);
    }

private:
    std::mutex mutex_;
    std::condition_variable done_;
    std::vector<DeliveryResult> results_;
    std::size_t left_;
};

// What one answered apply changes in reconcile_differences and the counts.
struct ApplyOutcome {
    std::int64_t line_number = 0;
    std::optional<Category> category{};  // nullopt: matched after all (the row goes).
    std::optional<std::string> ledger{};
    std::optional<std::string> reason{};
};

// A conflict: the key was taken meanwhile by another event. Classifies the entry against it.
ApplyOutcome Reclassify(pqxx::transaction_base& tx, const pqxx::row& row, std::int64_t line_number,
                        const std::string& message) {
    const pqxx::result stored = tx.exec_params(
        "SELECT transaction_id, amount, currency FROM ledger_events "
        "WHERE out_trade_no = $1 AND event_type = $2",
        row[2].as<std::string>(), row[1].as<std::string>());
    PAYLEDGER_ASSERT(stored.size() == 1);  // A conflict names the event that holds the key.
    const Side event{.id = stored[0][0].as<std::string>(),
                     .amount = stored[0][1].as<std::int64_t>(),
                     .currency = stored[0][2].as<std::string>()};
    const Side bill{.id = row[3].as<std::string>(),
                    .amount = row[4].as<std::int64_t>(),
                    .currency = row[5].as<std::string>()};
    const Category category =
        projections::ClassifyEntry(bill, false, {.order = Side{}, .event = event});
    // The same id, amount and currency is matched (docs/reconciliation.md#matching), whatever else
    // differed.
    if (category == Category::kMatched) return {.line_number = line_number};
    return {.line_number = line_number,
            .category = category,
            .ledger = projections::SideText(event),
            .reason = "conflict: " + message};
}

// Writes a round's outcomes into reconcile_differences, then into the counts.
void RecordRound(pqxx::connection& connection, const std::vector<ApplyOutcome>& outcomes,
                 ReconcileReport& report) {
    if (outcomes.empty()) return;
    json updates = json::array();
    json removed = json::array();
    for (const ApplyOutcome& outcome : outcomes) {
        if (!outcome.category) {
            removed.push_back({{"line_number", outcome.line_number}});
            continue;
        }
        updates.push_back({{"line_number", outcome.line_number},
                           {"category_rank", static_cast<int>(*outcome.category)},
                           {"category", projections::ToString(*outcome.category)},
                           {"ledger", outcome.ledger ? json(*outcome.ledger) : json(nullptr)},
                           {"reason", outcome.reason ? json(*outcome.reason) : json(nullptr)}});
    }
    pqxx::work tx{connection};
    const pqxx::result updated = tx.exec_params(
        "UPDATE reconcile_differences d SET category = x.category, "
        "category_rank = x.category_rank, ledger = coalesce(x.ledger, d.ledger), "
        "reason = x.reason, apply = false FROM json_to_recordset($1::json) AS x(line_number "
        "bigint, category_rank integer, category text, ledger text, reason text) "
        "WHERE d.line_number = x.line_number",
        updates.dump());
    PAYLEDGER_ASSERT(updated.affected_rows() == updates.size());
    const pqxx::result deleted = tx.exec_params(
        "DELETE FROM reconcile_differences d USING json_to_recordset($1::json) AS "
        "x(line_number bigint) WHERE d.line_number = x.line_number",
        removed.dump());
    PAYLEDGER_ASSERT(deleted.affected_rows() == removed.size());
    tx.commit();
    for (const ApplyOutcome& outcome : outcomes) {
        const Category now = outcome.category.value_or(Category::kMatched);
        if (now == Category::kMissingInLedger) continue;
        --report.counts.at(static_cast<std::size_t>(Category::kMissingInLedger));
        ++report.counts.at(static_cast<std::size_t>(now));
    }
}

// What the committer's answer to one entry's delivery makes of it.
ApplyOutcome Answered(pqxx::connection& connection, const pqxx::row& row,
                      const DeliveryResult& result) {
    const std::int64_t line_number = row[0].as<std::int64_t>();
    switch (result.outcome) {
        case projections::Outcome::kAppended:
            return {.line_number = line_number,
                    .category = Category::kApplied,
                    .ledger = row[3].as<std::string>() + ":" + row[4].as<std::string>()};
        case projections::Outcome::kDuplicate:
            // The platform's callback committed meanwhile, with this very fingerprint.
            return {.line_number = line_number};
        case projections::Outcome::kConflict: {
            pqxx::read_transaction tx{connection};
            ApplyOutcome outcome = Reclassify(tx, row, line_number, result.message);
            tx.commit();
            return outcome;
        }
        case projections::Outcome::kMalformed:
        case projections::Outcome::kBadSignature:
        case projections::Outcome::kUnknownOrder:
        case projections::Outcome::kMismatch:
        case projections::Outcome::kIgnored:
        case projections::Outcome::kRateLimited:
        case projections::Outcome::kUnavailable:
            // Stays missing_in_ledger, with the write path's reason (a mismatch: the refund names
            // another payment than the stored one).
            return {.line_number = line_number,
                    .category = Category::kMissingInLedger,
                    .reason =
                        std::string(projections::ToString(result.outcome)) + ": " + result.message};
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

}  // namespace

// --apply: every entry marked `apply`, through the callbacks' write path
// (docs/reconciliation.md#applying). Returns why applying stopped part-way (the committer answered
// unavailable), or nullopt; what was applied until then is in the counts and reconcile_differences
// either way.
std::optional<std::string> ApplyMissing(pqxx::connection& connection,
                                        const std::string& database_url,
                                        const ReconcileOptions& options,
                                        const std::string& bill_sha256, ReconcileReport& report) {
    const projections::Source source = options.platform == Platform::kWechat
                                           ? projections::Source::kWechatBill
                                           : projections::Source::kAlipayBill;
    Committer committer{{.url = database_url, .session = kSession}};
    std::int64_t after = 0;
    std::int64_t submitted = 0;
    std::int64_t to_apply = 0;
    if (options.progress) {
        pqxx::read_transaction tx{connection};
        to_apply = tx.exec1("SELECT count(*) FROM reconcile_differences WHERE apply")[0]
                       .as<std::int64_t>();
    }
    std::optional<std::string> failure;
    while (!failure) {
        pqxx::result rows;
        {
            pqxx::read_transaction tx{connection};
            rows = tx.exec_params(
                "SELECT b.line_number, b.event_type, b.out_trade_no, b.platform_id, b.amount, "
                "b.currency, b.occurred_at, b.raw, b.payment_id FROM reconcile_differences d "
                "JOIN reconcile_bill b USING (line_number) "
                "WHERE d.apply AND d.line_number > $1 ORDER BY d.line_number LIMIT $2",
                after, static_cast<std::int64_t>(kAppliesPerRound));
        }
        if (rows.empty()) break;
        Answers answers{rows.size()};
        const projections::TimeMicros now = NowMicros();
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const pqxx::row row = rows[static_cast<pqxx::result::size_type>(i)];
            const std::int64_t line_number = row[0].as<std::int64_t>();
            const json evidence = {{"bill", ToString(options.platform)},
                                   {"bill_date", options.date},
                                   {"bill_line", line_number},
                                   {"bill_sha256", bill_sha256}};
            const std::optional<EventType> type = projections::ParseEventType(row[1].c_str());
            PAYLEDGER_ASSERT(type.has_value());
            // The raw line as LoadEntries stored it, in lower-case hex.
            std::optional<std::string> raw_line = ParseHexLower(row[7].as<std::string>());
            PAYLEDGER_ASSERT(raw_line.has_value());
            Delivery delivery{
                .receipt = {.source = source,
                            .received_at = now,
                            .peer = "payledger reconcile",
                            .headers = evidence.dump(),
                            .body = std::move(*raw_line),
                            .out_trade_no = row[2].as<std::string>()},
                .outcome = projections::Outcome::kAppended,
                .event = projections::Event{.out_trade_no = row[2].as<std::string>(),
                                            .event_type = *type,
                                            .source = source,
                                            .amount = row[4].as<std::int64_t>(),
                                            .currency = row[5].as<std::string>(),
                                            .transaction_id = row[3].as<std::string>(),
                                            .occurred_at = row[6].as<std::int64_t>(),
                                            .data = evidence.dump()}};
            // docs/reconciliation.md#applying: a refund row names its payment (WeChat 微信订单号,
            // Alipay 支付宝交易号), which must be the stored payment's, as for a refund notice.
            if (*type == EventType::kRefundSucceeded) {
                delivery.claims.payment_transaction_id = row[8].as<std::string>();
            }
            committer.Submit(std::move(delivery), answers.For(i));
            after = line_number;
        }
        const std::vector<DeliveryResult> results = answers.Wait();
        submitted += static_cast<std::int64_t>(rows.size());
        if (options.progress) options.progress("applying", submitted, to_apply);
        std::vector<ApplyOutcome> outcomes;
        for (std::size_t i = 0; i < results.size(); ++i) {
            const pqxx::row row = rows[static_cast<pqxx::result::size_type>(i)];
            if (results[i].outcome == projections::Outcome::kUnavailable && !failure) {
                failure = "--apply could not write line " + row[0].as<std::string>() + ": " +
                          results[i].message;
            }
            outcomes.push_back(Answered(connection, row, results[i]));
        }
        RecordRound(connection, outcomes, report);
    }
    committer.Stop();
    return failure;
}

}  // namespace payledger::ledger::reconcile
