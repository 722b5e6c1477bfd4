#pragma once

#include <boost/asio/ip/address.hpp>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace payledger::api {

// The connection limits of the config's `limits` section (docs/security.md#peers-and-limits), of
// the same names there, with their defaults written once: Config::Limits, Server::Options and
// ConnectionSlots take them.
struct ConnectionLimits {
    std::size_t connections_max = 4096;  // Every connection, from all peers together.
    std::size_t connections_per_peer = 256;
    // Connections per address block (an IPv4 /prefix_ipv4_bits, an IPv6 /prefix_ipv6_bits), so
    // that a handful of neighbouring addresses cannot take every slot.
    std::size_t connections_per_prefix = 1024;
    unsigned prefix_ipv4_bits = 24;
    unsigned prefix_ipv6_bits = 48;
};

// Who gets one of the server's connection slots (docs/security.md#connection-slots): at most
// `connections_max` connections in all, `connections_per_peer` per peer (PeerKey) and
// `connections_per_prefix` per address block (PrefixKey: an IPv4 /24, an IPv6 /48 by default), so
// that a handful of peers cannot take every slot. At `connections_max`, a new connection takes the
// slot of an idle one (waiting for a request: a kept connection between requests, or a new one that
// has sent nothing whole yet) of the block that holds the most connections, its oldest idle one
// first; only when no connection is idle is it refused. Connections from `reserved` blocks
// (limits.reserved_for: the platforms' published ranges) always get a slot: beyond
// `connections_max` when nothing can be evicted, and nobody evicts them. Connections of a trusted
// proxy count against `connections_max` only. Bookkeeping only: the server closes what Open says to
// evict. Thread-safe.
class ConnectionSlots {
public:
    using Id = std::uint64_t;

    struct Peer {
        std::string peer{};    // PeerKey of the address.
        std::string prefix{};  // PrefixKey of the address.
        bool reserved = false;
        bool proxy = false;  // A trusted proxy: not limited per peer or per block.
    };
    struct Admission {
        bool admitted = false;
        std::optional<Id> evict{};  // Close this one: its slot is the new connection's.
    };

    explicit ConnectionSlots(ConnectionLimits limits) : limits_(limits) {}

    // A new connection `id` (unique) from `peer`: admitted or not, and what to close for it.
    // An admitted connection starts idle; it holds its slot until Close.
    [[nodiscard]] Admission Open(Id id, const Peer& peer);
    // Whether `id` waits for a request (idle, evictable) or is reading or answering one.
    void SetIdle(Id id, bool idle);
    void Close(Id id);

    [[nodiscard]] std::size_t open() const;
    [[nodiscard]] std::uint64_t evictions() const;

private:
    struct Block {
        std::size_t open = 0;
        std::list<Id> idle{};  // Oldest idle first.
    };
    struct Entry {
        Peer peer{};
        bool idle = false;
        bool evicting = false;
        std::list<Id>::iterator in_idle{};  // Valid while idle and not evicting.
    };
    void Unidle(Entry& entry);                           // Caller holds mutex_.
    void SetIdleLocked(Entry& entry, Id id, bool idle);  // Caller holds mutex_.
    [[nodiscard]] std::optional<Id> PickVictim();        // Caller holds mutex_.

    const ConnectionLimits limits_;
    mutable std::mutex mutex_;
    std::unordered_map<Id, Entry> entries_{};
    std::unordered_map<std::string, std::size_t> per_peer_{};
    std::unordered_map<std::string, Block> blocks_{};
    std::size_t evicting_ = 0;
    std::uint64_t evictions_ = 0;
};

// The address block a connection's peer counts in for limits.connections_per_prefix: the
// address's first `ipv4_bits` (an IPv4-mapped IPv6 address as IPv4) or `ipv6_bits`, as text.
[[nodiscard]] std::string PrefixKey(const boost::asio::ip::address& address, unsigned ipv4_bits,
                                    unsigned ipv6_bits);

}  // namespace payledger::api
