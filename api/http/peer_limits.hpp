#pragma once

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace payledger::api {

// `rate_limited` (docs/security.md#peers-and-limits): at most `per_minute` unverified deliveries
// (those that would be stored as `malformed` or `bad_signature`) per peer address in any 60 s, a
// sliding window over the admissions of this process, less those that ended unstored (Forget).
// Deliveries whose signature verifies never come here.
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

// `limits.connections_per_peer`: open connections per peer address. Thread-safe.
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

// The budget of unverified body bytes stored per minute from all peers together
// (limits.unverified_bytes_per_minute): a sliding window of 60 s over the admissions of this
// process, less those that ended unstored (Forget). The per-peer limit bounds how many
// deliveries one address stores; this bounds what all addresses together write, so that a
// crowd of addresses (an IPv6 /48 holds 65 536 /64s) cannot fill the disk either.
// Each delivery counts its body and kUnverifiedReceiptOverheadBytes for what its receipt stores
// besides (the row, its headers, its index entries), so that empty bodies cannot add rows
// without end either. Thread-safe.
inline constexpr std::size_t kUnverifiedReceiptOverheadBytes = 1024;
class UnverifiedBytesBudget {
public:
    using Clock = std::chrono::steady_clock;
    static constexpr Clock::duration kWindow = std::chrono::seconds{60};

    explicit UnverifiedBytesBudget(std::size_t bytes_per_minute)
        : bytes_per_minute_(bytes_per_minute) {}

    // True, and `bytes` counted, when they fit in what is left of the last 60 s at `now`.
    [[nodiscard]] bool Admit(std::size_t bytes, Clock::time_point now = Clock::now());
    // Uncounts an admission that was not stored after all (`unavailable`).
    void Forget(std::size_t bytes, Clock::time_point admitted_at);

private:
    const std::size_t bytes_per_minute_;
    std::mutex mutex_;
    std::deque<std::pair<Clock::time_point, std::size_t>> admitted_;  // In time order.
    std::size_t in_window_ = 0;  // The sum of admitted_'s bytes.
};

// Who a peer is, for every per-peer limit: an IPv4 address is one peer (an IPv4-mapped IPv6
// address counts as its IPv4 address); an IPv6 address counts by its /64, the block one
// subscriber gets, so that rotating through its addresses does not make it new peers.
[[nodiscard]] std::string PeerKey(const boost::asio::ip::address& address);

// A block of addresses, "10.0.0.0/8" or "2001:db8::/32" (a bare address: that address alone).
class Cidr {
public:
    // nullopt when `text` is not such a block (or its host bits are not zero).
    [[nodiscard]] static std::optional<Cidr> Parse(std::string_view text);
    [[nodiscard]] bool Contains(const boost::asio::ip::address& address) const;

private:
    boost::asio::ip::address network_{};
    unsigned prefix_bits_ = 0;
};

// trusted_proxies: the client a request came from. From a trusted proxy's connection, the
// address that proxy appended last to X-Forwarded-For (the last entry of the last such
// header); from anyone else, or when that entry is not an address, nullopt (the connection's
// own address stands). A proxy that appends an entry per hop appends its own client last, so
// entries to the left, which the client could have written, are never believed.
[[nodiscard]] std::optional<boost::asio::ip::address> ForwardedClient(
    std::string_view last_forwarded_for);

// Raises this process's soft limit of open files to its hard limit, so that the connection limits,
// not the file limit, bound the connections; returns the soft limit in force afterwards.
std::size_t RaiseOpenFileLimit();

}  // namespace payledger::api
