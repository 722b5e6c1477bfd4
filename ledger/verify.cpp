#include "ledger/verify.hpp"

#include <map>

#include "ledger/digest.hpp"
#include "ledger/projection_streams.hpp"
#include "projections/canonical.hpp"

namespace payledger::ledger {
namespace {

using projections::BalanceKey;
using projections::BalanceRow;
using projections::OrderRow;

constexpr std::int64_t kProgressEveryEvents = 50'000;

// Accumulates one side-by-side comparison: both digests, both row counts, the differences.
class Comparison {
public:
    explicit Comparison(std::string name) { check_.name = std::move(name); }

    void Folded(const std::string& line) {
        folded_.Update(line);
        ++check_.rows;
    }
    void Live(const std::string& line) {
        live_.Update(line);
        ++check_.live_rows;
    }
    void Differs(std::string key, std::string what) {
        if (check_.differences.size() < kDifferencesListedMax) {
            check_.differences.push_back({std::move(key), std::move(what)});
        }
        ++check_.difference_count;
    }
    ProjectionCheck Finish() {
        check_.digest = folded_.HexDigest();
        check_.live_digest = live_.HexDigest();
        return std::move(check_);
    }

private:
    ProjectionCheck check_;
    Sha256 folded_;
    Sha256 live_;
};

ProjectionCheck CompareOrders(FoldedOrderStream& folded, LiveOrderStream& live,
                              std::map<BalanceKey, std::int64_t>& balances,
                              const Progress& progress) {
    Comparison comparison{"orders"};
    std::optional<OrderRow> f = folded.Next();
    std::optional<OrderRow> l = live.Next();
    std::int64_t next_report = kProgressEveryEvents;
    while (f || l) {
        if (f && (!l || f->out_trade_no < l->out_trade_no)) {
            comparison.Folded(projections::CanonicalLine(*f));
            comparison.Differs(f->out_trade_no, "missing from the live projection");
            projections::AddToBalances(*f, balances);
            f = folded.Next();
        } else if (l && (!f || l->out_trade_no < f->out_trade_no)) {
            comparison.Live(projections::CanonicalLine(*l));
            comparison.Differs(l->out_trade_no, "in the live projection but not in the events");
            l = live.Next();
        } else {
            comparison.Folded(projections::CanonicalLine(*f));
            comparison.Live(projections::CanonicalLine(*l));
            if (std::string what = projections::Differences(*f, *l); !what.empty()) {
                comparison.Differs(f->out_trade_no, std::move(what));
            }
            projections::AddToBalances(*f, balances);
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
            comparison.Folded(projections::CanonicalLine(row));
            comparison.Differs(name_of(f->first),
                               "balance " + std::to_string(f->second) + ", live missing");
            ++f;
        } else if (l && (f == balances.end() || key_of(*l) < f->first)) {
            comparison.Live(projections::CanonicalLine(*l));
            comparison.Differs(name_of(key_of(*l)), "in the live projection but no order");
            l = live.Next();
        } else {
            const BalanceRow row{
                .account_id = f->first.first, .currency = f->first.second, .balance = f->second};
            comparison.Folded(projections::CanonicalLine(row));
            comparison.Live(projections::CanonicalLine(*l));
            if (row.balance != l->balance) {
                comparison.Differs(name_of(f->first), "balance " + std::to_string(row.balance) +
                                                          ", live " + std::to_string(l->balance));
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

VerifyReport Verify(const std::string& url, const Progress& progress) {
    auto events_connection = Connect(url, LongRunningSession());
    auto live_connection = Connect(url, LongRunningSession());
    using ReadOnlySnapshot = pqxx::transaction<pqxx::repeatable_read, pqxx::read_only>;
    ReadOnlySnapshot events_tx{*events_connection};
    const std::string snapshot =
        events_tx.exec("SELECT pg_export_snapshot()")[0][0].as<std::string>();
    ReadOnlySnapshot live_tx{*live_connection};
    live_tx.exec("SET TRANSACTION SNAPSHOT " + live_tx.quote(snapshot));

    VerifyReport report;
    std::map<BalanceKey, std::int64_t> balances;
    {
        FoldedOrderStream folded{events_tx};
        LiveOrderStream live{live_tx};
        report.projections.push_back(CompareOrders(folded, live, balances, progress));
        report.events = folded.events_read();
    }
    {
        LiveBalanceStream live{live_tx};
        report.projections.push_back(CompareBalances(balances, live));
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
