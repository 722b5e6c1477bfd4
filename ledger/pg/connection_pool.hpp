#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "ledger/pg/database.hpp"

namespace payledger::ledger {

// Thrown by ConnectionPool::Acquire when no connection frees up within the wait limit.
class PoolExhausted : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A bounded pool of connections for reads. Thread-safe. Connections are opened lazily and
// reopened after a failure, so the service recovers by itself when the database is back.
class ConnectionPool {
public:
    class Lease;

    ConnectionPool(std::string url, std::size_t size_max, std::chrono::milliseconds wait_max,
                   SessionSettings session = {});

    // Borrows a connection for the lease's lifetime. Throws PoolExhausted after `wait_max`,
    // or pqxx::broken_connection when a new connection cannot be opened.
    [[nodiscard]] Lease Acquire();

    // Closes the idle connections (the server they reach is away); leased ones are dropped
    // when they come back broken.
    void DropIdle();

    [[nodiscard]] std::size_t InUse() const { return in_use_.load(); }
    [[nodiscard]] std::size_t Waiting() const { return waiting_.load(); }
    [[nodiscard]] std::size_t SizeMax() const { return size_max_; }

    class Lease {
    public:
        Lease(ConnectionPool* pool, std::unique_ptr<pqxx::connection> connection)
            : pool_(pool), connection_(std::move(connection)) {}
        Lease(Lease&& other) noexcept = default;
        Lease& operator=(Lease&&) = delete;
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        ~Lease();

        pqxx::connection& operator*() { return *connection_; }
        pqxx::connection* operator->() { return connection_.get(); }

    private:
        ConnectionPool* pool_ = nullptr;
        std::unique_ptr<pqxx::connection> connection_;
    };

private:
    void Release(std::unique_ptr<pqxx::connection> connection);

    const std::string url_;
    const std::size_t size_max_;
    const std::chrono::milliseconds wait_max_;
    const SessionSettings session_;
    std::mutex mutex_;
    std::condition_variable freed_;
    std::vector<std::unique_ptr<pqxx::connection>> idle_;
    std::size_t leased_ = 0;  // Guarded by mutex_; includes slots being connected.
    std::atomic<std::size_t> in_use_{0};
    std::atomic<std::size_t> waiting_{0};
};

}  // namespace payledger::ledger
