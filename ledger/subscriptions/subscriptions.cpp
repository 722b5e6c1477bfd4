#include "ledger/subscriptions/subscriptions.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "ledger/pg/binary_params.hpp"
#include "ledger/pg/conninfo.hpp"
#include "ledger/pg/rows.hpp"
#include "ledger/pg/storable_text.hpp"
#include "ledger/pg/transaction_block.hpp"
#include "ledger/read/reads.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger {
namespace {

constexpr const char* kStateColumns =
    "name, after, disabled, consecutive_failures, last_error, "
    "(extract(epoch FROM last_attempt_at) * 1000000)::bigint, "
    "(extract(epoch FROM next_attempt_at) * 1000000)::bigint, "
    "(extract(epoch FROM created_at) * 1000000)::bigint";
constexpr const char* kChangeColumns =
    "id, name, \"from\", \"to\", why, (extract(epoch FROM at) * 1000000)::bigint";

// A timestamptz from microseconds since the Unix epoch, exactly ($n is a bigint).
std::string TimeFromMicros(int parameter) {
    return "('epoch'::timestamptz + $" + std::to_string(parameter) +
           "::bigint * interval '1 microsecond')";
}

template <typename T>
std::optional<T> NullableField(const pqxx::field& field) {
    if (field.is_null()) return std::nullopt;
    return field.as<T>();
}

SubscriptionState StateFromRow(const pqxx::row& row) {
    return SubscriptionState{
        .name = row[0].as<std::string>(),
        .after = row[1].as<std::int64_t>(),
        .disabled = row[2].as<bool>(),
        .consecutive_failures = row[3].as<std::int32_t>(),
        .last_error = NullableField<std::string>(row[4]),
        .last_attempt_at = NullableField<std::int64_t>(row[5]),
        .next_attempt_at = NullableField<std::int64_t>(row[6]),
        .created_at = row[7].as<std::int64_t>(),
    };
}

SubscriptionChange ChangeFromRow(const pqxx::row& row) {
    const std::optional<ChangeWhy> why = ParseChangeWhy(row[4].as<std::string>());
    PAYLEDGER_ASSERT(why.has_value());  // The schema's CHECK allows no other value.
    return SubscriptionChange{
        .id = row[0].as<std::int64_t>(),
        .name = row[1].as<std::string>(),
        .from = row[2].as<std::int64_t>(),
        .to = row[3].as<std::int64_t>(),
        .why = *why,
        .at = row[5].as<std::int64_t>(),
    };
}

// A PostgreSQL text array literal of keys. Each is a valid key (no quote, backslash, comma,
// brace or space), and quoted besides, so that a key spelt NULL stays a string.
template <typename Keys>
std::string KeyArray(const Keys& keys) {
    std::string out = "{";
    for (const auto& key : keys) {
        PAYLEDGER_ASSERT(projections::IsValidKey(key));
        if (out.size() > 1) out += ',';
        out += '"';
        out += key;
        out += '"';
    }
    out += '}';
    return out;
}

// The filter's two arrays; NULL for a set that does not filter.
std::optional<std::string> TypesParameter(const projections::EventFilter& filter) {
    if (filter.event_types.empty()) return std::nullopt;
    std::vector<std::string> names;
    for (const projections::EventType type : filter.event_types) {
        names.emplace_back(projections::ToString(type));
    }
    return KeyArray(names);
}

std::optional<std::string> AccountsParameter(const projections::EventFilter& filter) {
    if (filter.accounts.empty()) return std::nullopt;
    return KeyArray(filter.accounts);
}

// Whether an event of ledger_events matches, in SQL: projections::Matches's twin (its tests hold
// them equal); $types and $accounts are the two arrays above.
std::string MatchesSql(int types, int accounts) {
    const std::string t = "$" + std::to_string(types) + "::text[]";
    const std::string a = "$" + std::to_string(accounts) + "::text[]";
    return "(" + t + " IS NULL OR event_type = ANY(" + t + ")) AND (" + a + " IS NULL OR " +
           "account_id = ANY(" + a + "))";
}

std::optional<SubscriptionState> ReadLocked(pqxx::work& tx, const std::string& name) {
    const pqxx::result rows = tx.exec_params(
        std::string("SELECT ") + kStateColumns + " FROM subscriptions WHERE name = $1 FOR UPDATE",
        name);
    if (rows.empty()) return std::nullopt;
    return StateFromRow(rows[0]);
}

// Starts a transaction that will insert into subscription_changes: the changes lock first,
// so that ids are taken in commit order; then the subscription's row.
std::optional<SubscriptionState> BeginChange(pqxx::work& tx, const std::string& name) {
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", kSubscriptionChangesLockKey);
    return ReadLocked(tx, name);
}

void InsertChange(pqxx::work& tx, const std::string& name, std::int64_t from, std::int64_t to,
                  ChangeWhy why) {
    const pqxx::result inserted = tx.exec_params(
        "INSERT INTO subscription_changes (name, \"from\", \"to\", why) VALUES ($1, $2, $3, $4)",
        name, from, to, std::string(ToString(why)));
    PAYLEDGER_ASSERT(inserted.affected_rows() == 1);
}

}  // namespace

std::string_view ToString(ChangeWhy why) {
    switch (why) {
        case ChangeWhy::kRewind:
            return "rewind";
        case ChangeWhy::kDisabledGone:
            return "disabled: 410";
        case ChangeWhy::kEnabled:
            return "enabled";
    }
    PAYLEDGER_ASSERT(false);
}

std::optional<ChangeWhy> ParseChangeWhy(std::string_view text) {
    for (const ChangeWhy why :
         {ChangeWhy::kRewind, ChangeWhy::kDisabledGone, ChangeWhy::kEnabled}) {
        if (ToString(why) == text) return why;
    }
    return std::nullopt;
}

SubscriptionState EnsureSubscription(pqxx::connection& connection, const std::string& name,
                                     SubscriptionStart start) {
    PAYLEDGER_ASSERT(projections::IsValidKey(name));
    bool from_head = false;
    switch (start) {
        case SubscriptionStart::kBeginning:
            from_head = false;
            break;
        case SubscriptionStart::kNow:
            from_head = true;
            break;
    }
    pqxx::work tx{connection};
    // The head is the newest seq visible now: every event with a smaller seq has committed
    // (writers commit in seq order), so starting after it skips only events already there.
    tx.exec_params(
        "INSERT INTO subscriptions (name, after) "
        "SELECT $1, CASE WHEN $2 THEN (SELECT coalesce(max(seq), 0) FROM ledger_events) "
        "ELSE 0 END "
        "ON CONFLICT (name) DO NOTHING",
        name, from_head);
    // A concurrent creator's row is committed by now (the insert waited for it), and this
    // statement's snapshot is newer than that commit.
    std::optional<SubscriptionState> state = ReadSubscription(tx, name);
    PAYLEDGER_ASSERT(state.has_value());
    tx.commit();
    return *state;
}

std::optional<SubscriptionState> ReadSubscription(pqxx::transaction_base& tx,
                                                  const std::string& name) {
    // No other name can be stored (the table's CHECK); this also keeps a NUL off the wire.
    if (!projections::IsValidKey(name)) return std::nullopt;
    const pqxx::result rows = tx.exec_params(
        std::string("SELECT ") + kStateColumns + " FROM subscriptions WHERE name = $1", name);
    if (rows.empty()) return std::nullopt;
    return StateFromRow(rows[0]);
}

std::vector<SubscriptionState> ReadSubscriptions(pqxx::transaction_base& tx,
                                                 const std::vector<std::string>& names) {
    std::set<std::string> valid;
    for (const std::string& name : names) {
        if (projections::IsValidKey(name)) valid.insert(name);
    }
    std::vector<SubscriptionState> states;
    if (valid.empty()) return states;
    for (const pqxx::row& row :
         tx.exec_params(std::string("SELECT ") + kStateColumns +
                            " FROM subscriptions WHERE name = ANY($1::text[]) ORDER BY name",
                        KeyArray(valid))) {
        states.push_back(StateFromRow(row));
    }
    return states;
}

std::int64_t TakeLeaseToken(pqxx::connection& connection, const std::string& name) {
    PAYLEDGER_ASSERT(projections::IsValidKey(name));
    // Committed as the session commits, at least synchronous_commit on (ledger::Connect): a
    // token lost in a failover could be taken again by the next holder, and two holders would
    // share it.
    pqxx::work tx{connection};
    const pqxx::result rows = tx.exec_params(
        "UPDATE subscriptions SET lease_token = lease_token + 1 WHERE name = $1 "
        "RETURNING lease_token",
        name);
    PAYLEDGER_ASSERT(rows.size() == 1);  // REQUIRES: the subscription exists.
    const auto token = rows[0][0].as<std::int64_t>();
    tx.commit();
    return token;
}

bool AdvanceCursor(pqxx::connection& connection, const std::string& name, std::int64_t lease_token,
                   std::int64_t from, std::int64_t to, projections::TimeMicros attempt_at) {
    PAYLEDGER_ASSERT(from >= 0);
    PAYLEDGER_ASSERT(to > from);
    // The compare-and-set, committed asynchronously (docs/subscriptions.md#inside-serve): losing it
    // in a crash or a failover only moves the cursor back to a batch already delivered, which
    // is redelivered (at least once, never a skip), and the deliverers' commits do not queue
    // behind the write path's WAL flushes. One round trip.
    // Refused (the server aborted the block and skipped the COMMIT): the block rolls back.
    TransactionBlock block{connection};
    const std::vector<std::optional<std::string>> answers = block.OpenAndCommit(
        {{.sql = "BEGIN"},
         {.sql = "SET LOCAL synchronous_commit TO off"},
         {.sql = "UPDATE subscriptions SET after = $3, consecutive_failures = 0, "
                 "last_error = NULL, last_attempt_at = " +
                 TimeFromMicros(4) +
                 ", next_attempt_at = NULL "
                 "WHERE name = $1 AND after = $2 AND NOT disabled AND lease_token = $5 "
                 "RETURNING 1",
          .params = {name, BinaryInt8(from), BinaryInt8(to), BinaryInt8(attempt_at),
                     BinaryInt8(lease_token)}}});
    // The name is the key: one row or none.
    return answers.at(2).has_value();
}

bool RecordFailure(pqxx::connection& connection, const std::string& name, std::int64_t lease_token,
                   std::int64_t expected_after, const std::string& error,
                   projections::TimeMicros attempt_at, projections::TimeMicros next_attempt_at) {
    std::string kept = error.substr(0, kSubscriptionErrorBytesMax);
    pqxx::work tx{connection};
    const pqxx::result updated = tx.exec_params(
        "UPDATE subscriptions SET consecutive_failures = least(consecutive_failures, 2147483646) "
        "+ 1, last_error = $3, last_attempt_at = " +
            TimeFromMicros(4) + ", next_attempt_at = " + TimeFromMicros(5) +
            " WHERE name = $1 AND after = $2 AND NOT disabled AND lease_token = $6",
        name, expected_after, StorableText(std::move(kept)), attempt_at, next_attempt_at,
        lease_token);
    PAYLEDGER_ASSERT(updated.affected_rows() <= 1);
    tx.commit();
    return updated.affected_rows() == 1;
}

bool DisableAfterGone(pqxx::connection& connection, const std::string& name,
                      std::int64_t lease_token, std::int64_t expected_after,
                      projections::TimeMicros attempt_at) {
    pqxx::work tx{connection};
    const std::optional<SubscriptionState> state = BeginChange(tx, name);
    if (!state || state->after != expected_after || state->disabled) return false;
    const pqxx::result updated = tx.exec_params(
        "UPDATE subscriptions SET disabled = true, consecutive_failures = "
        "least(consecutive_failures, 2147483646) + 1, last_error = '410 Gone', "
        "last_attempt_at = " +
            TimeFromMicros(2) + ", next_attempt_at = NULL WHERE name = $1 AND lease_token = $3",
        name, attempt_at, lease_token);
    // The row is locked (BeginChange): none, and the transaction ends without a change, when
    // another process took the lease over.
    if (updated.affected_rows() == 0) return false;
    PAYLEDGER_ASSERT(updated.affected_rows() == 1);
    InsertChange(tx, name, state->after, state->after, ChangeWhy::kDisabledGone);
    tx.commit();
    return true;
}

std::optional<SubscriptionState> Rewind(pqxx::connection& connection, const std::string& name,
                                        std::int64_t to) {
    PAYLEDGER_ASSERT(to >= 0);
    if (!projections::IsValidKey(name)) return std::nullopt;
    pqxx::work tx{connection};
    const std::optional<SubscriptionState> before = BeginChange(tx, name);
    if (!before) return std::nullopt;
    const pqxx::result updated = tx.exec_params(
        "UPDATE subscriptions SET after = $2, consecutive_failures = 0, last_error = NULL, "
        "next_attempt_at = NULL WHERE name = $1",
        name, to);
    PAYLEDGER_ASSERT(updated.affected_rows() == 1);
    InsertChange(tx, name, before->after, to, ChangeWhy::kRewind);
    std::optional<SubscriptionState> after = ReadSubscription(tx, name);
    PAYLEDGER_ASSERT(after.has_value());
    tx.commit();
    return after;
}

std::optional<SubscriptionState> Enable(pqxx::connection& connection, const std::string& name) {
    if (!projections::IsValidKey(name)) return std::nullopt;
    pqxx::work tx{connection};
    const std::optional<SubscriptionState> before = BeginChange(tx, name);
    if (!before) return std::nullopt;
    if (!before->disabled) {
        tx.commit();
        return before;
    }
    const pqxx::result updated = tx.exec_params(
        "UPDATE subscriptions SET disabled = false, consecutive_failures = 0, last_error = NULL, "
        "next_attempt_at = NULL WHERE name = $1",
        name);
    PAYLEDGER_ASSERT(updated.affected_rows() == 1);
    InsertChange(tx, name, before->after, before->after, ChangeWhy::kEnabled);
    std::optional<SubscriptionState> after = ReadSubscription(tx, name);
    PAYLEDGER_ASSERT(after.has_value());
    tx.commit();
    return after;
}

std::vector<SubscriptionChange> ReadChanges(pqxx::transaction_base& tx, std::int64_t after,
                                            std::int64_t limit) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    std::vector<SubscriptionChange> changes;
    for (const pqxx::row& row :
         tx.exec_params(std::string("SELECT ") + kChangeColumns +
                            " FROM subscription_changes WHERE id > $1 ORDER BY id LIMIT $2",
                        after, limit)) {
        changes.push_back(ChangeFromRow(row));
    }
    return changes;
}

std::vector<SubscriptionChange> ReadChangesBefore(pqxx::transaction_base& tx, std::int64_t before,
                                                  std::int64_t limit) {
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    std::vector<SubscriptionChange> changes;
    for (const pqxx::row& row :
         tx.exec_params(std::string("SELECT ") + kChangeColumns +
                            " FROM subscription_changes WHERE id < $1 ORDER BY id DESC LIMIT $2",
                        before, limit)) {
        changes.push_back(ChangeFromRow(row));
    }
    std::reverse(changes.begin(), changes.end());
    return changes;
}

MatchingBatch ReadMatchingBatch(pqxx::transaction_base& tx, std::int64_t after,
                                const projections::EventFilter& filter, std::int64_t limit,
                                std::int64_t scan_seqs_max) {
    PAYLEDGER_ASSERT(after >= 0);
    PAYLEDGER_ASSERT(limit > 0);
    PAYLEDGER_ASSERT(limit <= kPageSizeMax);
    PAYLEDGER_ASSERT(scan_seqs_max > 0);
    const std::int64_t span_end = after > std::numeric_limits<std::int64_t>::max() - scan_seqs_max
                                      ? std::numeric_limits<std::int64_t>::max()
                                      : after + scan_seqs_max;
    // One statement, so one snapshot: the head and the events are read together. The events
    // come from a range scan of the primary key bounded on both sides (the lateral join
    // hands the head to the scan as an index bound), stopping at `limit` matches. EXPLAIN
    // ANALYZE with 300 000 events of which 6 match (one account): the head is an Index Only
    // Scan Backward on ledger_events_pkey (4 buffers); the events an Index Scan on
    // ledger_events_pkey, Index Cond (seq > $1 AND seq <= least(head, $2)), the filter applied
    // to the rows: 100 000 positions examined in 28 ms.
    const pqxx::result rows = tx.exec_params(
        std::string("WITH bound AS (SELECT coalesce(max(seq), 0) AS head FROM ledger_events) "
                    "SELECT b.head, e.* FROM bound AS b LEFT JOIN LATERAL (SELECT ") +
            kEventColumns +
            " FROM ledger_events WHERE seq > $1 AND seq <= least(b.head, $2::bigint) AND " +
            MatchesSql(3, 4) + " ORDER BY seq LIMIT $5) AS e ON true ORDER BY e.seq",
        after, span_end, TypesParameter(filter), AccountsParameter(filter), limit);
    PAYLEDGER_ASSERT(!rows.empty());  // The bound's one row, joined to nothing at worst.
    MatchingBatch batch;
    batch.head = rows[0][0].as<std::int64_t>();
    for (const pqxx::row& row : rows) {
        if (row[1].is_null()) break;  // No event: the one row of the left join.
        batch.events.push_back(EventFromRow(row, 1));
    }
    const auto count = static_cast<std::int64_t>(batch.events.size());
    PAYLEDGER_ASSERT(count <= limit);
    // A full batch examined exactly up to its last event; a shorter one examined everything
    // up to the head or the scan's bound.
    batch.scanned_to =
        count == limit ? batch.events.back().seq : std::max(after, std::min(batch.head, span_end));
    return batch;
}

SubscriptionLag ReadLag(pqxx::transaction_base& tx, std::int64_t after,
                        const projections::EventFilter& filter, projections::TimeMicros now,
                        std::int64_t scan_events_max) {
    PAYLEDGER_ASSERT(after >= 0);
    PAYLEDGER_ASSERT(scan_events_max > 0);
    // One statement (one snapshot). window_after follows the cursor, window_below_head ends
    // at the head; the latter is read only when the former does not reach the head (a scalar
    // subquery is evaluated when first needed).
    const std::string matches = MatchesSql(2, 3);
    const pqxx::result rows = tx.exec_params(
        "WITH window_after AS MATERIALIZED (SELECT seq, recorded_at, " + matches +
            " AS matches FROM ledger_events WHERE seq > $1 ORDER BY seq LIMIT $4), "
            "window_below_head AS MATERIALIZED (SELECT seq, " +
            matches +
            " AS matches FROM ledger_events WHERE seq > $1 ORDER BY seq DESC LIMIT $4), "
            "summary AS (SELECT count(*) AS examined, count(*) FILTER (WHERE matches) AS "
            "matching, max(seq) FILTER (WHERE matches) AS newest_match, "
            "(extract(epoch FROM min(recorded_at) FILTER (WHERE matches)) * 1000000)::bigint "
            "AS oldest_match_at, max(seq) AS last_examined FROM window_after) "
            "SELECT s.matching, s.newest_match, s.oldest_match_at, "
            "s.examined < $4 OR s.last_examined = (SELECT max(seq) FROM ledger_events) AS exact, "
            "CASE WHEN s.examined = $4 THEN (SELECT max(seq) FROM window_below_head WHERE matches) "
            "END, "
            "CASE WHEN s.examined = $4 THEN (SELECT (extract(epoch FROM recorded_at) * "
            "1000000)::bigint FROM window_after ORDER BY seq DESC LIMIT 1) END "
            "FROM summary AS s",
        after, TypesParameter(filter), AccountsParameter(filter), scan_events_max);
    PAYLEDGER_ASSERT(rows.size() == 1);
    const pqxx::row row = rows[0];
    const auto matching = row[0].as<std::int64_t>();
    const std::optional<std::int64_t> newest_match = NullableField<std::int64_t>(row[1]);
    const std::optional<std::int64_t> oldest_match_at = NullableField<std::int64_t>(row[2]);
    const bool exact = row[3].as<bool>();
    const std::optional<std::int64_t> newest_match_below_head = NullableField<std::int64_t>(row[4]);
    const std::optional<std::int64_t> last_examined_at = NullableField<std::int64_t>(row[5]);
    SubscriptionLag lag{.head = after, .lag_events = matching, .lag_seconds = 0, .exact = exact};
    if (newest_match) lag.head = *newest_match;
    if (!exact && newest_match_below_head) lag.head = *newest_match_below_head;
    std::optional<std::int64_t> oldest_at = oldest_match_at;
    if (!oldest_at && !exact) oldest_at = last_examined_at;
    if (oldest_at) {
        lag.lag_seconds = std::max(0.0, static_cast<double>(now - *oldest_at) / 1e6);
    }
    return lag;
}

}  // namespace payledger::ledger
