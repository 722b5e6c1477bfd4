#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

namespace payledger::api {

// SPEC §5 `rate_limited`: at most `per_minute` unverified deliveries (those that would be
// stored as `malformed` or `bad_signature`) per peer address in any 60 s, a sliding window
// over the admissions of this process, less those that ended unstored (Forget). Deliveries
// whose signature verifies never come here.
// At most `per_minute` instants are kept per address; addresses whose window has emptied are
// swept out whenever the table has doubled since the last sweep (amortised: a sweep per
// doubling, not per admission). Thread-safe.
class UnverifiedLimiter {
public:
    using Clock = std::chrono::steady_clock;
    static constexpr Clock::duration kWindow = std::chrono::seconds{60};

    explicit UnverifiedLimiter(std::size_t per_minute) : per_minute_(per_minute) {}

    // True, and the delivery counted, when `address` is below its limit at `now`.
    [[nodiscard]] bool Admit(const std::string& address, Clock::time_point now = Clock::now());
    // Uncounts a delivery admitted at `admitted_at` that was not stored after all (the
    // database could not commit it: `unavailable`), so that the window counts the receipts
    // stored, and those in flight, only.
    void Forget(const std::string& address, Clock::time_point admitted_at);

private:
    void DropIdle(Clock::time_point now);  // Caller holds mutex_.

    const std::size_t per_minute_;
    std::mutex mutex_;
    std::unordered_map<std::string, std::deque<Clock::time_point>> admitted_;
    std::size_t sweep_at_ = 4096;  // The table size that triggers the next sweep.
};

// SPEC §9 `limits.connections_per_peer`: open connections per peer address. Thread-safe.
class ConnectionCounter {
public:
    explicit ConnectionCounter(std::size_t per_peer) : per_peer_(per_peer) {}

    // True, and the connection counted, when `address` has fewer than the limit open.
    [[nodiscard]] bool Open(const std::string& address);
    void Close(const std::string& address);

private:
    const std::size_t per_peer_;
    std::mutex mutex_;
    std::unordered_map<std::string, std::size_t> open_;
};

// Raises this process's soft limit of open files to its hard limit (SPEC §9); returns the
// soft limit in force afterwards.
std::size_t RaiseOpenFileLimit();

}  // namespace payledger::api
