#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "projections/event.hpp"
#include "projections/order_fold.hpp"

namespace payledger::ledger {

// The fields of one line of PostgreSQL's COPY text format, as views into the line, which
// Parse unescapes in place (unescaping only shortens a field). Null (\N) fields are marked.
class CopyFields {
public:
    void Parse(std::string& line);
    [[nodiscard]] std::size_t size() const { return views_.size(); }
    [[nodiscard]] bool null(std::size_t index) const { return nulls_[index]; }
    // REQUIRES: !null(index). Throws InvariantError otherwise.
    [[nodiscard]] std::string_view text(std::size_t index) const;
    [[nodiscard]] std::int64_t integer(std::size_t index) const;
    [[nodiscard]] std::optional<std::string> optional_text(std::size_t index) const;

private:
    std::vector<std::string_view> views_;
    std::vector<bool> nulls_;
};

// Streams every event of the transaction's snapshot, grouped by out_trade_no in byte order
// (COPY from the covering unique index, constant memory), and folds each order with
// projections::FoldOrder.
class FoldedOrderStream {
public:
    explicit FoldedOrderStream(pqxx::transaction_base& tx);

    // The next order folded from its events, in out_trade_no byte order; nullopt at the end.
    [[nodiscard]] std::optional<projections::OrderRow> Next();

    [[nodiscard]] std::int64_t events_read() const { return events_read_; }

private:
    std::optional<projections::Event> ReadEvent();

    pqxx::stream_from stream_;
    std::string line_{};
    CopyFields fields_{};
    std::optional<projections::Event> pending_{};
    std::vector<projections::Event> order_events_{};
    std::int64_t events_read_ = 0;
    bool exhausted_ = false;
    bool done_ = false;
};

// Streams the live `orders` projection in out_trade_no byte order.
class LiveOrderStream {
public:
    explicit LiveOrderStream(pqxx::transaction_base& tx);
    [[nodiscard]] std::optional<projections::OrderRow> Next();

private:
    pqxx::stream_from stream_;
    std::string line_{};
    CopyFields fields_{};
    bool exhausted_ = false;
};

// Streams the live `balances` projection in (account_id, currency) byte order.
class LiveBalanceStream {
public:
    explicit LiveBalanceStream(pqxx::transaction_base& tx);
    [[nodiscard]] std::optional<projections::BalanceRow> Next();

private:
    pqxx::stream_from stream_;
    std::string line_{};
    CopyFields fields_{};
    bool exhausted_ = false;
};

// Runs `next` on a thread of its own, ahead of the consumer, in batches, with a bounded
// number of batches in flight (so memory stays bounded). For a stream whose connection only
// that thread uses meanwhile. Next() rethrows what the producer threw.
template <typename T>
class Prefetch {
public:
    static constexpr std::size_t kBatchRows = 1024;
    static constexpr std::size_t kBatchesMax = 8;

    explicit Prefetch(std::function<std::optional<T>()> next)
        : next_(std::move(next)), thread_([this] { Produce(); }) {}
    ~Prefetch() {
        {
            std::lock_guard lock{mutex_};
            cancelled_ = true;
        }
        changed_.notify_all();
        thread_.join();
    }
    Prefetch(const Prefetch&) = delete;
    Prefetch& operator=(const Prefetch&) = delete;

    std::optional<T> Next() {
        if (position_ == current_.size()) {
            std::unique_lock lock{mutex_};
            changed_.wait(lock, [this] { return !batches_.empty() || finished_; });
            if (batches_.empty()) {
                if (error_) std::rethrow_exception(error_);
                return std::nullopt;
            }
            current_ = std::move(batches_.front());
            batches_.pop_front();
            position_ = 0;
            changed_.notify_all();
        }
        return std::move(current_[position_++]);
    }

private:
    void Produce() {
        try {
            for (bool more = true; more;) {
                std::vector<T> batch;
                batch.reserve(kBatchRows);
                while (batch.size() < kBatchRows) {
                    std::optional<T> item = next_();
                    if (!item) {
                        more = false;
                        break;
                    }
                    batch.push_back(std::move(*item));
                }
                std::unique_lock lock{mutex_};
                changed_.wait(lock, [this] { return batches_.size() < kBatchesMax || cancelled_; });
                if (cancelled_) return;
                if (!batch.empty()) batches_.push_back(std::move(batch));
                changed_.notify_all();
            }
        } catch (...) {
            std::lock_guard lock{mutex_};
            error_ = std::current_exception();
        }
        std::lock_guard lock{mutex_};
        finished_ = true;
        changed_.notify_all();
    }

    std::function<std::optional<T>()> next_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::vector<T>> batches_;  // Guarded by mutex_.
    bool finished_ = false;               // Guarded by mutex_.
    bool cancelled_ = false;              // Guarded by mutex_.
    std::exception_ptr error_;            // Guarded by mutex_.
    std::vector<T> current_;              // The consumer's batch.
    std::size_t position_ = 0;
    std::thread thread_;  // Last: started once everything above is constructed.
};

}  // namespace payledger::ledger
