#include "api/http/peer_limits.hpp"

#include <sys/resource.h>

#include <algorithm>

namespace payledger::api {
namespace {

// The least table size that triggers a sweep.
constexpr std::size_t kAddressesBeforeSweep = 4096;

}  // namespace

bool UnverifiedLimiter::Admit(const std::string& address, Clock::time_point now) {
    std::lock_guard lock{mutex_};
    if (admitted_.size() >= sweep_at_) {
        DropIdle(now);
        sweep_at_ = std::max(kAddressesBeforeSweep, 2 * admitted_.size());
    }
    std::deque<Clock::time_point>& times = admitted_[address];
    while (!times.empty() && now - times.front() >= kWindow) times.pop_front();
    if (times.size() >= per_minute_) return false;
    times.push_back(now);
    return true;
}

void UnverifiedLimiter::Forget(const std::string& address, Clock::time_point admitted_at) {
    std::lock_guard lock{mutex_};
    const auto it = admitted_.find(address);
    if (it == admitted_.end()) return;  // Swept: its window had emptied anyway.
    std::deque<Clock::time_point>& times = it->second;
    const auto at = std::find(times.begin(), times.end(), admitted_at);
    if (at != times.end()) times.erase(at);
}

void UnverifiedLimiter::DropIdle(Clock::time_point now) {
    for (auto it = admitted_.begin(); it != admitted_.end();) {
        if (it->second.empty() || now - it->second.back() >= kWindow) {
            it = admitted_.erase(it);
        } else {
            ++it;
        }
    }
}

bool ConnectionCounter::Open(const std::string& address) {
    std::lock_guard lock{mutex_};
    std::size_t& open = open_[address];
    if (open >= per_peer_) {
        if (open == 0) open_.erase(address);
        return false;
    }
    ++open;
    return true;
}

void ConnectionCounter::Close(const std::string& address) {
    std::lock_guard lock{mutex_};
    const auto it = open_.find(address);
    if (it == open_.end()) return;
    if (--it->second == 0) open_.erase(it);
}

std::size_t RaiseOpenFileLimit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
    if (limit.rlim_cur < limit.rlim_max) {
        rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    }
    return static_cast<std::size_t>(limit.rlim_cur);
}

}  // namespace payledger::api
