// SubscriptionLease and its connection's keepalives (ledger/subscriptions/subscriptions.hpp): who
// delivers a subscription, by a session-level advisory lock (docs/subscriptions.md#inside-serve).
#include <map>
#include <pqxx/pqxx>

#include "ledger/pg/conninfo.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/subscriptions/subscriptions.hpp"
#include "projections/assert.hpp"
#include "projections/validate.hpp"

namespace payledger::ledger {

std::string WithLeaseKeepalives(const std::string& url) {
    std::map<std::string, std::string> options = ParseConninfo(url);
    // The client's end notices a server that vanished; the server's end is set by the
    // session (SubscriptionLease's constructor).
    options.try_emplace("keepalives", "1");
    options.try_emplace("keepalives_idle", "5");
    options.try_emplace("keepalives_interval", "5");
    options.try_emplace("keepalives_count", "3");
    options.try_emplace("tcp_user_timeout", "20000");
    std::string text;
    for (const auto& [keyword, value] : options) {
        if (!text.empty()) text += ' ';
        text += keyword + "='";
        for (const char c : value) {
            if (c == '\'' || c == '\\') text += '\\';
            text += c;
        }
        text += '\'';
    }
    if (ParseConninfo(text) != options) {
        throw ConninfoError("cannot add the keepalive options to the connection string");
    }
    return text;
}

SubscriptionLease::SubscriptionLease(const std::string& url, const SessionSettings& settings) {
    // A standby's locks would exclude nobody on the primary.
    PAYLEDGER_ASSERT(settings.writable);
    connection_ = Connect(WithLeaseKeepalives(ForWrites(url)), settings);
    // The server's end of this session: a client host that vanished without closing its
    // socket is found by these (idle 5 s, 3 probes 5 s apart; 20 s for unacknowledged data),
    // and the session ends, freeing the locks. Ignored on a Unix socket.
    pqxx::nontransaction tx{*connection_};
    tx.exec(
        "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 5; "
        "SET tcp_keepalives_count = 3; SET tcp_user_timeout = 20000");
}

SubscriptionLease::~SubscriptionLease() = default;

bool SubscriptionLease::TryAcquire(const std::string& name) {
    PAYLEDGER_ASSERT(projections::IsValidKey(name));
    const std::lock_guard lock{mutex_};
    if (!connection_) return false;
    if (held_.count(name) != 0) return true;
    try {
        pqxx::nontransaction tx{*connection_};
        const bool taken = tx.exec_params("SELECT pg_try_advisory_lock($1::int4, hashtext($2))",
                                          kSubscriptionLeaseLockClass, name)[0][0]
                               .as<bool>();
        if (taken) held_.insert(name);
        return taken;
    } catch (const std::exception&) {
        DropLocked();
        return false;
    }
}

bool SubscriptionLease::Holds(const std::string& name) const {
    const std::lock_guard lock{mutex_};
    return connection_ && held_.count(name) != 0;
}

std::vector<std::string> SubscriptionLease::Held() const {
    const std::lock_guard lock{mutex_};
    if (!connection_) return {};
    return {held_.begin(), held_.end()};
}

std::optional<std::int64_t> SubscriptionLease::TakeToken(const std::string& name) {
    const std::lock_guard lock{mutex_};
    if (!connection_ || held_.count(name) == 0) return std::nullopt;
    try {
        return TakeLeaseToken(*connection_, name);
    } catch (const std::exception&) {
        DropLocked();
        return std::nullopt;
    }
}

void SubscriptionLease::Release(const std::string& name) {
    const std::lock_guard lock{mutex_};
    if (!connection_ || held_.count(name) == 0) return;
    try {
        pqxx::nontransaction tx{*connection_};
        // Session locks stack per key: a name whose hash collides with another held name
        // releases its own acquisition only.
        const bool released = tx.exec_params("SELECT pg_advisory_unlock($1::int4, hashtext($2))",
                                             kSubscriptionLeaseLockClass, name)[0][0]
                                  .as<bool>();
        held_.erase(name);
        // Not held by this session after all: the bookkeeping is wrong, so trust nothing.
        if (!released) DropLocked();
    } catch (const std::exception&) {
        DropLocked();
    }
}

bool SubscriptionLease::Alive() {
    const std::lock_guard lock{mutex_};
    if (!connection_) return false;
    if (IdleSessionEnded(*connection_)) {
        DropLocked();
        return false;
    }
    try {
        pqxx::nontransaction tx{*connection_};
        tx.exec("SELECT 1");
        return true;
    } catch (const std::exception&) {
        DropLocked();
        return false;
    }
}

bool SubscriptionLease::Usable() const {
    const std::lock_guard lock{mutex_};
    return connection_ && !IdleSessionEnded(*connection_);
}

void SubscriptionLease::DropLocked() {
    held_.clear();
    connection_.reset();
}

}  // namespace payledger::ledger
