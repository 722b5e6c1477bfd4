#include "api/http/connection_slots.hpp"

#include <array>

#include "projections/assert.hpp"

namespace payledger::api {

ConnectionSlots::Admission ConnectionSlots::Open(Id id, const Peer& peer) {
    std::lock_guard lock{mutex_};
    PAYLEDGER_ASSERT(entries_.find(id) == entries_.end());
    if (!peer.proxy && !peer.reserved) {
        const auto by_peer = per_peer_.find(peer.peer);
        if (by_peer != per_peer_.end() && by_peer->second >= limits_.connections_per_peer)
            return {};
        const auto block = blocks_.find(peer.prefix);
        if (block != blocks_.end() && block->second.open >= limits_.connections_per_prefix)
            return {};
    }
    Admission admission{.admitted = true};
    if (entries_.size() - evicting_ >= limits_.connections_max) {
        admission.evict = PickVictim();
        // Nothing idle to give up its slot: refused, unless the platforms' ranges.
        if (!admission.evict && !peer.reserved) return {};
    }
    Entry& entry = entries_[id];
    entry.peer = peer;
    if (!peer.proxy) ++per_peer_[peer.peer];
    Block& block = blocks_[peer.prefix];
    ++block.open;
    // A new connection waits for its first request: idle, and evictable unless reserved.
    SetIdleLocked(entry, id, true);
    return admission;
}

std::optional<ConnectionSlots::Id> ConnectionSlots::PickVictim() {
    // The block that holds the most connections and has an idle one gives up its oldest.
    Block* biggest = nullptr;
    for (auto& [prefix, block] : blocks_) {
        if (block.idle.empty()) continue;
        if (biggest == nullptr || block.open > biggest->open) biggest = &block;
    }
    if (biggest == nullptr) return std::nullopt;
    const Id victim = biggest->idle.front();
    Entry& entry = entries_.at(victim);
    Unidle(entry);
    entry.evicting = true;
    ++evicting_;
    ++evictions_;
    return victim;
}

void ConnectionSlots::Unidle(Entry& entry) {
    if (!entry.idle) return;
    entry.idle = false;
    blocks_.at(entry.peer.prefix).idle.erase(entry.in_idle);
}

void ConnectionSlots::SetIdle(Id id, bool idle) {
    std::lock_guard lock{mutex_};
    const auto it = entries_.find(id);
    if (it != entries_.end()) SetIdleLocked(it->second, id, idle);
}

void ConnectionSlots::SetIdleLocked(Entry& entry, Id id, bool idle) {
    if (entry.evicting) return;
    if (!idle) return Unidle(entry);
    if (entry.idle || entry.peer.reserved) return;  // Reserved slots are never evicted.
    entry.idle = true;
    std::list<Id>& list = blocks_.at(entry.peer.prefix).idle;
    entry.in_idle = list.insert(list.end(), id);
}

void ConnectionSlots::Close(Id id) {
    std::lock_guard lock{mutex_};
    const auto it = entries_.find(id);
    if (it == entries_.end()) return;
    Entry& entry = it->second;
    Unidle(entry);
    if (entry.evicting) --evicting_;
    if (!entry.peer.proxy) {
        const auto by_peer = per_peer_.find(entry.peer.peer);
        if (--by_peer->second == 0) per_peer_.erase(by_peer);
    }
    const auto block = blocks_.find(entry.peer.prefix);
    if (--block->second.open == 0) blocks_.erase(block);
    entries_.erase(it);
}

std::size_t ConnectionSlots::open() const {
    std::lock_guard lock{mutex_};
    return entries_.size();
}

std::uint64_t ConnectionSlots::evictions() const {
    std::lock_guard lock{mutex_};
    return evictions_;
}

std::string PrefixKey(const boost::asio::ip::address& address, unsigned ipv4_bits,
                      unsigned ipv6_bits) {
    const auto masked = [](auto bytes, unsigned bits) {
        unsigned left = bits;  // Bits still to keep, from the first byte on.
        for (unsigned char& byte : bytes) {
            const unsigned keep = left >= 8 ? 8 : left;
            left -= keep;
            byte = static_cast<unsigned char>(byte & (0xFFU << (8 - keep)));
        }
        return bytes;
    };
    boost::asio::ip::address_v4 v4;
    bool is_v4 = address.is_v4();
    if (is_v4) {
        v4 = address.to_v4();
    } else if (address.to_v6().is_v4_mapped()) {
        v4 = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, address.to_v6());
        is_v4 = true;
    }
    if (is_v4) {
        return boost::asio::ip::address_v4(masked(v4.to_bytes(), ipv4_bits)).to_string() + "/" +
               std::to_string(ipv4_bits);
    }
    return boost::asio::ip::address_v6(masked(address.to_v6().to_bytes(), ipv6_bits)).to_string() +
           "/" + std::to_string(ipv6_bits);
}

}  // namespace payledger::api
