#pragma once

#include <chrono>
#include <functional>
#include <pqxx/nontransaction>
#include <pqxx/result>
#include <string>
#include <thread>

namespace payledger::testing {

// Polls `condition` every 20 ms until it holds or `deadline` has passed; true when it held. For
// states another process reaches (a server's wait event, a replica's lag), which offer nothing
// to wait on.
inline bool EventuallyBy(const std::function<bool()>& condition,
                         std::chrono::steady_clock::time_point deadline) {
    for (;;) {
        if (condition()) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds{20});  // Poll pace.
    }
}

inline bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds within) {
    return EventuallyBy(condition, std::chrono::steady_clock::now() + within);
}

// The first column of the first row of `sql`, "" when there is none or it is NULL.
inline std::string QueryScalar(pqxx::connection& connection, const std::string& sql) {
    pqxx::nontransaction tx{connection};
    const pqxx::result rows = tx.exec(sql);
    return rows.empty() || rows[0][0].is_null() ? "" : rows[0][0].as<std::string>();
}

}  // namespace payledger::testing
