#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace payledger::testing {

// A platform's callback storm against a `payledger serve`: orders R-0 ...
// R-<count-1> created directly in the ledger, their generic payments sent from kStormClients
// connections until each is acknowledged, and the checks that follow a crash or a failover.

inline constexpr int kStormClients = 16;

// Appends ORDER_CREATED for R-0 ... R-<count-1> (accounts acct-0 ... acct-6) at `url`.
void CreateOrders(const std::string& url, int count, std::int64_t amount);

// Sends every order's payment from kStormClients connections until each is acknowledged (200,
// appended or duplicate), re-sending whatever failed, as a platform would. Bounded in time.
class PaymentStorm {
public:
    PaymentStorm(unsigned short port, int orders, std::int64_t amount)
        : port_(port), amount_(amount), acked_(static_cast<std::size_t>(orders)) {
        for (int c = 0; c < kStormClients; ++c) threads_.emplace_back([this, c] { Run(c); });
    }
    ~PaymentStorm() { Join(); }

    void Join() {
        for (std::thread& thread : threads_) {
            if (thread.joinable()) thread.join();
        }
    }
    int acknowledged() const { return acknowledged_.load(); }
    int appended() const { return appended_.load(); }
    std::vector<bool> Snapshot() const {
        std::vector<bool> out;
        for (const auto& flag : acked_) out.push_back(flag.load());
        return out;
    }
    bool AllAcknowledged() const { return acknowledged() == static_cast<int>(acked_.size()); }

private:
    void Run(int client);

    unsigned short port_;
    std::int64_t amount_;
    std::vector<std::atomic<bool>> acked_;
    std::atomic<int> acknowledged_{0};
    std::atomic<int> appended_{0};
    std::vector<std::thread> threads_;
};

// Waits (bounded: 60 s) until `storm` has `count` acknowledgements; fails the test if not.
void AwaitCount(const PaymentStorm& storm, int count);

// Every order acknowledged in `acked` has its payment in the ledger at `url`.
void ExpectAcknowledgedArePersisted(const std::string& url, const std::vector<bool>& acked);

// The ledger at `url` holds each of the `orders` orders and its payment exactly once, the
// balances sum to orders * amount, and verify finds the projections equal to the fold.
void ExpectLedgerComplete(const std::string& url, int orders, std::int64_t amount);

}  // namespace payledger::testing
