#include "ledger/integrity/verify.hpp"

#include <map>

#include "ledger/base/bytes.hpp"
#include "ledger/read/projection_streams.hpp"
#include "projections/canonical.hpp"

namespace payledger::ledger {
namespace {

using projections::BalanceKey;
using projections::BalanceRow;
using projections::OrderRow;

// Accumulates one side-by-side comparison: both digests, both row counts, the differences.
// While the two sides agree row for row, only one digest is computed; at the first row that
// differs, the live digest starts from a copy of the fold's state so far.
class Comparison {
public:
    explicit Comparison(std::string name) { check_.name = std::move(name); }

    // A row present on both sides with the same canonical line.
    void Same(std::string_view line) {
        folded_.Update(line);
        if (!agreed_) live_.Update(line);
        ++check_.rows;
        ++check_.live_rows;
    }
    void Folded(std::string_view line) {
        Diverge();
        folded_.Update(line);
        ++check_.rows;
    }
    void Live(std::string_view line) {
        Diverge();
        live_.Update(line);
        ++check_.live_rows;
    }
    void Differs(std::string key, std::string what) {
        Diverge();
        if (check_.differences.size() < kDifferencesListedMax) {
            check_.differences.push_back({std::move(key), std::move(what)});
        }
        ++check_.difference_count;
    }
    ProjectionCheck Finish() {
        check_.digest = folded_.HexDigest();
        check_.live_digest = agreed_ ? check_.digest : live_.HexDigest();
        return std::move(check_);
    }

private:
    void Diverge() {
        if (!agreed_) return;
        live_.CopyFrom(folded_);
        agreed_ = false;
    }

    ProjectionCheck check_;
    Sha256Stream folded_;
    Sha256Stream live_;
    bool agreed_ = true;
};

ProjectionCheck CompareOrders(FoldedOrderStream& folded, Prefetch<projections::OrderRow>& live,
                              projections::BalanceTotals& balances, const Progress& progress) {
    Comparison comparison{"orders"};
    std::optional<OrderRow> f = folded.Next();
    std::optional<OrderRow> l = live.Next();
    std::int64_t next_report = kProgressEveryEvents;
    std::string line;
    std::string live_line;
    while (f || l) {
        line.clear();
        if (f && (!l || f->out_trade_no < l->out_trade_no)) {
            projections::AppendCanonicalLine(*f, line);
            comparison.Differs(f->out_trade_no, "missing from the live projection");
            comparison.Folded(line);
            balances.Add(*f);
            f = folded.Next();
        } else if (l && (!f || l->out_trade_no < f->out_trade_no)) {
            projections::AppendCanonicalLine(*l, line);
            comparison.Differs(l->out_trade_no, "in the live projection but not in the events");
            comparison.Live(line);
            l = live.Next();
        } else {
            projections::AppendCanonicalLine(*f, line);
            if (*f == *l) {
                comparison.Same(line);
            } else {
                live_line.clear();
                projections::AppendCanonicalLine(*l, live_line);
                comparison.Differs(f->out_trade_no, projections::Differences(*f, *l));
                comparison.Folded(line);
                comparison.Live(live_line);
            }
            balances.Add(*f);
            f = folded.Next();
            l = live.Next();
        }
        if (progress && folded.events_read() >= next_report) {
            progress(folded.events_read());
            next_report = folded.events_read() + kProgressEveryEvents;
        }
    }
    if (progress) progress(folded.events_read());
    return comparison.Finish();
}

ProjectionCheck CompareBalances(const std::map<BalanceKey, std::int64_t>& balances,
                                LiveBalanceStream& live) {
    Comparison comparison{"balances"};
    auto f = balances.begin();
    std::optional<BalanceRow> l = live.Next();
    const auto key_of = [](const BalanceRow& row) {
        return BalanceKey{row.account_id, row.currency};
    };
    const auto name_of = [](const BalanceKey& key) { return key.first + ":" + key.second; };
    while (f != balances.end() || l) {
        if (f != balances.end() && (!l || f->first < key_of(*l))) {
            const BalanceRow row{
                .account_id = f->first.first, .currency = f->first.second, .balance = f->second};
            comparison.Differs(name_of(f->first),
                               "balance " + std::to_string(f->second) + ", live missing");
            comparison.Folded(projections::CanonicalLine(row));
            ++f;
        } else if (l && (f == balances.end() || key_of(*l) < f->first)) {
            comparison.Differs(name_of(key_of(*l)), "in the live projection but no order");
            comparison.Live(projections::CanonicalLine(*l));
            l = live.Next();
        } else {
            const BalanceRow row{
                .account_id = f->first.first, .currency = f->first.second, .balance = f->second};
            if (row.balance == l->balance) {
                comparison.Same(projections::CanonicalLine(row));
            } else {
                comparison.Differs(name_of(f->first), "balance " + std::to_string(row.balance) +
                                                          ", live " + std::to_string(l->balance));
                comparison.Folded(projections::CanonicalLine(row));
                comparison.Live(projections::CanonicalLine(*l));
            }
            ++f;
            l = live.Next();
        }
    }
    return comparison.Finish();
}

}  // namespace

bool VerifyReport::ok() const {
    for (const ProjectionCheck& check : projections) {
        if (!check.ok()) return false;
    }
    return true;
}

SessionSettings LongRunningSession() {
    return SessionSettings{.application_name = "payledger-verify",
                           .statement_timeout = std::chrono::milliseconds{0},
                           .idle_in_transaction_timeout = std::chrono::milliseconds{0}};
}

VerifyReport Verify(const std::string& url, const Progress& progress,
                    std::chrono::milliseconds statement_timeout) {
    SessionSettings session = LongRunningSession();
    session.statement_timeout = statement_timeout;
    auto events_connection = Connect(url, session);
    auto live_connection = Connect(url, session);
    using ReadOnlySnapshot = pqxx::transaction<pqxx::repeatable_read, pqxx::read_only>;
    ReadOnlySnapshot events_tx{*events_connection};
    const std::string snapshot =
        events_tx.exec("SELECT pg_export_snapshot()")[0][0].as<std::string>();
    ReadOnlySnapshot live_tx{*live_connection};
    live_tx.exec("SET TRANSACTION SNAPSHOT " + live_tx.quote(snapshot));

    VerifyReport report;
    projections::BalanceTotals balances;
    {
        // The live rows are read and parsed on a second thread, on their own connection,
        // while this one reads and folds the events: the two halves run on two cores.
        FoldedOrderStream folded{events_tx};
        LiveOrderStream live_stream{live_tx};
        Prefetch<OrderRow> live{[&live_stream] { return live_stream.Next(); }};
        report.projections.push_back(CompareOrders(folded, live, balances, progress));
        report.events = folded.events_read();
    }
    {
        LiveBalanceStream live{live_tx};
        report.projections.push_back(CompareBalances(balances.Sorted(), live));
    }
    events_tx.commit();
    live_tx.commit();
    return report;
}

std::string FormatReport(const VerifyReport& report) {
    std::string out;
    for (const ProjectionCheck& check : report.projections) {
        out += check.name + " rows=" + std::to_string(check.rows) + " digest=" + check.digest;
        if (check.ok()) {
            out += " OK\n";
            continue;
        }
        out += " DIFFERS live_rows=" + std::to_string(check.live_rows) +
               " live_digest=" + check.live_digest + "\n";
        for (const Difference& difference : check.differences) {
            out += "  " + difference.key + " " + difference.what + "\n";
        }
    }
    return out;
}

}  // namespace payledger::ledger
