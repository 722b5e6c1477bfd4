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

// The budget of unverified body bytes stored per minute from all peers together
// (limits.unverified_bytes_per_minute): a sliding window of 60 s over the admissions of this
// process, less those that ended unstored (Forget). The per-peer limit bounds how many
// deliveries one address stores; this bounds what all addresses together write, so that a
// crowd of addresses (an IPv6 /48 holds 65 536 /64s) cannot fill the disk either.
// Each delivery counts every byte its receipt stores (UnverifiedStoredBytes): its body, headers,
// message, peer and order number, and kUnverifiedReceiptOverheadBytes for the rest of its rows
// (the fixed columns, the chain, the body's key, the index entries), so that empty bodies with
// large headers cannot store more than the budget either. Thread-safe.
inline constexpr std::size_t kUnverifiedReceiptOverheadBytes = 512;
// The most one unverified delivery can store: a 64 KiB body, and its headers (each value cut
// to 256 bytes or a bounded evidence form, docs/security.md), message (512 bytes), peer and
// order number within the rest.
inline constexpr std::size_t kUnverifiedDeliveryBytesMax = 64 * 1024 + 16 * 1024;
// What a receipt of these texts stores, counted as the budget counts it.
[[nodiscard]] inline std::size_t UnverifiedStoredBytes(std::size_t body_bytes,
                                                       std::size_t headers_bytes,
                                                       std::size_t message_bytes,
                                                       std::size_t peer_bytes,
                                                       std::size_t out_trade_no_bytes) {
    // The order number is stored twice: in the row and in its index entry.
    return body_bytes + headers_bytes + message_bytes + peer_bytes + 2 * out_trade_no_bytes +
           kUnverifiedReceiptOverheadBytes;
}
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
