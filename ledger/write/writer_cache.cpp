#include "ledger/write/writer_cache.hpp"

#include <algorithm>
#include <cstring>

#include "ledger/pg/storable_text.hpp"

namespace payledger::ledger {
namespace {

using projections::Event;

// An event as the database stores it, in the fields the plan reads.
Event AsStored(Event event) {
    if (event.event_type != projections::EventType::kPaymentClosed) {
        event.currency = StorableText(event.currency);
    }
    if (event.transaction_id) event.transaction_id = StorableText(*event.transaction_id);
    event.recorded_at = 0;
    // An ORDER_CREATED's data is what its registration said (a channel, an expiry): the answer to
    // a repeated registration shows it. Every other event's is not read from the cache.
    if (event.event_type == projections::EventType::kOrderCreated) {
        event.data = StorableText(JsonWithoutNul(std::move(event.data)));
    } else {
        event.data.clear();
        event.data.shrink_to_fit();
    }
    return event;
}

}  // namespace

std::size_t WriterCache::DigestHash::operator()(const Sha256Digest& digest) const noexcept {
    std::size_t hash = 0;
    std::memcpy(&hash, digest.data(), sizeof hash);
    return hash;
}

WriterCache::WriterCache(std::size_t orders_max)
    : generation_max_(std::max<std::size_t>(1, orders_max / 2)) {}

void WriterCache::Clear() {
    std::lock_guard lock{mutex_};
    ClearLocked();
}

void WriterCache::ClearLocked() {
    valid_ = false;
    history_.clear();
    Drop(newer_);
    Drop(older_);
    newer_bodies_.clear();
    older_bodies_.clear();
}

bool WriterCache::valid() const {
    std::lock_guard lock{mutex_};
    return valid_;
}

std::size_t WriterCache::size() const {
    std::lock_guard lock{mutex_};
    return newer_.size() + older_.size();
}

std::vector<WriterCache::Generation> WriterCache::TakeDropped() {
    std::lock_guard lock{mutex_};
    return std::exchange(dropped_, {});
}

void WriterCache::Drop(Generation& generation) {
    if (generation.empty()) return;
    if (dropped_.size() >= kDroppedMax) dropped_.erase(dropped_.begin());  // Nobody took it.
    dropped_.push_back(std::move(generation));
    generation = Generation{};
}

std::optional<projections::LedgerState> WriterCache::StateFor(const std::set<std::string>& keys,
                                                              ChainValue& head) {
    std::lock_guard lock{mutex_};
    if (!valid_) return std::nullopt;
    projections::LedgerState state{.next_seq = next_seq_, .next_receipt_id = next_receipt_id_};
    for (const std::string& key : keys) {
        const std::vector<Event>* events = nullptr;
        if (const auto found = newer_.find(key); found != newer_.end()) {
            events = &found->second;
        } else if (const auto old = older_.find(key); old != older_.end()) {
            events = &old->second;
        } else {
            return std::nullopt;
        }
        if (!events->empty()) state.events.emplace(key, *events);
    }
    head = head_;
    return state;
}

void WriterCache::Insert(const std::string& key, std::vector<Event> events) {
    older_.erase(key);
    newer_.insert_or_assign(key, std::move(events));
    if (newer_.size() >= generation_max_) {
        Drop(older_);
        older_ = std::move(newer_);
        newer_ = Generation{};
    }
}

void WriterCache::Remember(const projections::LedgerState& before, std::int64_t next_seq_after,
                           std::int64_t next_receipt_id_after, const ChainValue& head,
                           std::map<std::string, std::vector<Event>> events,
                           const std::vector<Sha256Digest>& stored_bodies) {
    std::lock_guard lock{mutex_};
    const bool continued =
        valid_ && before.next_seq == next_seq_ && before.next_receipt_id == next_receipt_id_;
    if (valid_ && !continued) {
        ClearLocked();  // Another writer's batches came in between: what it changed is unknown.
    }
    if (continued) {
        Written written{.head_before = head_};
        written.keys.reserve(events.size());
        for (const auto& [key, stored] : events) written.keys.push_back(key);
        history_.push_back(std::move(written));
        if (history_.size() > kHistoryMax) history_.pop_front();
    } else {
        history_.clear();
    }
    valid_ = true;
    next_seq_ = next_seq_after;
    next_receipt_id_ = next_receipt_id_after;
    head_ = head;
    for (auto& [key, stored] : events) Insert(key, std::move(stored));
    for (const Sha256Digest& digest : stored_bodies) {
        if (older_bodies_.count(digest) != 0) continue;
        newer_bodies_.insert(digest);
        if (newer_bodies_.size() >= generation_max_) {
            older_bodies_ = std::move(newer_bodies_);
            newer_bodies_ = Digests{};
        }
    }
}

bool WriterCache::KnowsLocked(const projections::LedgerState& state, const ChainValue& head) const {
    return valid_ && state.next_seq == next_seq_ && state.next_receipt_id == next_receipt_id_ &&
           head == head_;
}

void WriterCache::ForgetUnlessAt(const projections::LedgerState& state, const ChainValue& head) {
    std::lock_guard lock{mutex_};
    if (valid_ && !KnowsLocked(state, head)) ClearLocked();
}

WriterCache::Digests WriterCache::StoredBodies(const std::vector<Sha256Digest>& digests,
                                               const projections::LedgerState& state,
                                               const ChainValue& head) const {
    std::lock_guard lock{mutex_};
    Digests known;
    if (!KnowsLocked(state, head)) return known;
    for (const Sha256Digest& digest : digests) {
        if (newer_bodies_.count(digest) != 0 || older_bodies_.count(digest) != 0) {
            known.insert(digest);
        }
    }
    return known;
}

std::vector<std::string> WriterCache::Unknown(const std::vector<std::string>& keys) const {
    std::lock_guard lock{mutex_};
    std::vector<std::string> unknown;
    for (const std::string& key : keys) {
        if (newer_.find(key) == newer_.end() && older_.find(key) == older_.end()) {
            unknown.push_back(key);
        }
    }
    return unknown;
}

std::size_t WriterCache::Learn(const ChainValue& snapshot_head,
                               std::map<std::string, std::vector<Event>> events) {
    std::lock_guard lock{mutex_};
    if (!valid_) return 0;
    // The orders this writer's batches named since the snapshot: they changed after it.
    std::set<std::string> changed_since;
    if (snapshot_head != head_) {
        auto since = history_.end();
        while (since != history_.begin() && (since - 1)->head_before != snapshot_head) --since;
        if (since == history_.begin()) return 0;  // Another ledger, or too long ago.
        for (auto written = since - 1; written != history_.end(); ++written) {
            changed_since.insert(written->keys.begin(), written->keys.end());
        }
    }
    std::size_t learned = 0;
    for (auto& [key, stored] : events) {
        // What the cache knows is as new as the snapshot, or newer.
        if (newer_.find(key) != newer_.end() || older_.find(key) != older_.end()) continue;
        if (changed_since.count(key) != 0) continue;
        std::vector<Event> kept;
        kept.reserve(stored.size());
        for (Event& event : stored) kept.push_back(AsStored(std::move(event)));
        Insert(key, std::move(kept));
        ++learned;
    }
    return learned;
}

void RememberCommitted(WriterCache& cache, const std::set<std::string>& keys,
                       const projections::LedgerState& state, const projections::BatchPlan& plan,
                       const ChainValue& head,
                       const std::vector<Sha256Digest>& stored_bodies) noexcept {
    try {
        std::map<std::string, std::vector<Event>> events;
        for (const std::string& key : keys) {
            std::vector<Event>& stored = events[key];
            if (const auto found = state.events.find(key); found != state.events.end()) {
                for (const Event& event : found->second) stored.push_back(AsStored(event));
            }
        }
        for (const Event& event : plan.events) {
            events.at(event.out_trade_no).push_back(AsStored(event));
        }
        cache.Remember(state, plan.last_seq > 0 ? plan.last_seq + 1 : state.next_seq,
                       plan.last_receipt_id + 1, head, std::move(events), stored_bodies);
    } catch (...) {
        cache.Clear();
    }
}

}  // namespace payledger::ledger
