#include "ledger/pg/connection_pool.hpp"

#include <utility>

namespace payledger::ledger {

ConnectionPool::ConnectionPool(std::string url, std::size_t size_max,
                               std::chrono::milliseconds wait_max, SessionSettings session)
    : url_(std::move(url)),
      size_max_(size_max),
      wait_max_(wait_max),
      session_(std::move(session)) {}

ConnectionPool::Lease ConnectionPool::Acquire() {
    std::unique_ptr<pqxx::connection> connection;
    {
        std::unique_lock lock{mutex_};
        ++waiting_;
        const bool got = freed_.wait_for(lock, wait_max_, [&] { return leased_ < size_max_; });
        --waiting_;
        if (!got) {
            throw PoolExhausted("no database connection became free in time");
        }
        ++leased_;
        ++in_use_;
        if (!idle_.empty()) {
            connection = std::move(idle_.back());
            idle_.pop_back();
        }
    }
    // One the server ended while it was idle (a restart, a failover) is replaced before
    // use rather than failing the read.
    if (connection == nullptr || IdleSessionEnded(*connection)) {
        try {
            connection = Connect(url_, session_);
        } catch (...) {
            Release(nullptr);
            throw;
        }
    }
    return Lease{this, std::move(connection)};
}

void ConnectionPool::Release(std::unique_ptr<pqxx::connection> connection) {
    {
        std::lock_guard lock{mutex_};
        --leased_;
        --in_use_;
        // A connection that failed is dropped; the next Acquire opens a fresh one.
        if (connection != nullptr && connection->is_open()) {
            idle_.push_back(std::move(connection));
        }
    }
    freed_.notify_one();
}

void ConnectionPool::DropIdle() {
    std::vector<std::unique_ptr<pqxx::connection>> dropped;
    {
        std::lock_guard lock{mutex_};
        dropped.swap(idle_);
    }
    // Closed outside the lock: closing may wait on the network.
}

ConnectionPool::Lease::~Lease() {
    if (pool_ != nullptr && connection_ != nullptr) {
        pool_->Release(std::move(connection_));
    }
}

}  // namespace payledger::ledger
