#include "api/http/peer_limits.hpp"

#include <sys/resource.h>

#include <algorithm>

namespace payledger::api {
namespace {

// The least table size that triggers a sweep.
constexpr std::size_t kAddressesBeforeSweep = 4096;

}  // namespace

bool UnverifiedLimiter::Admit(const std::string& address, Clock::time_point now) {
    std::lock_guard lock{mutex_};
    if (admitted_.size() >= sweep_at_) {
        DropIdle(now);
        sweep_at_ = std::max(kAddressesBeforeSweep, 2 * admitted_.size());
    }
    std::deque<Clock::time_point>& times = admitted_[address];
    while (!times.empty() && now - times.front() >= kWindow) times.pop_front();
    if (times.size() >= per_minute_) return false;
    times.push_back(now);
    return true;
}

void UnverifiedLimiter::Forget(const std::string& address, Clock::time_point admitted_at) {
    std::lock_guard lock{mutex_};
    const auto it = admitted_.find(address);
    if (it == admitted_.end()) return;  // Swept: its window had emptied anyway.
    std::deque<Clock::time_point>& times = it->second;
    const auto at = std::find(times.begin(), times.end(), admitted_at);
    if (at != times.end()) times.erase(at);
}

void UnverifiedLimiter::DropIdle(Clock::time_point now) {
    for (auto it = admitted_.begin(); it != admitted_.end();) {
        if (it->second.empty() || now - it->second.back() >= kWindow) {
            it = admitted_.erase(it);
        } else {
            ++it;
        }
    }
}

bool UnverifiedBytesBudget::Admit(std::size_t bytes, Clock::time_point now) {
    std::lock_guard lock{mutex_};
    while (!admitted_.empty() && now - admitted_.front().first >= kWindow) {
        in_window_ -= admitted_.front().second;
        admitted_.pop_front();
    }
    if (bytes > bytes_per_minute_ || in_window_ > bytes_per_minute_ - bytes) return false;
    admitted_.emplace_back(now, bytes);
    in_window_ += bytes;
    return true;
}

void UnverifiedBytesBudget::Forget(std::size_t bytes, Clock::time_point admitted_at) {
    std::lock_guard lock{mutex_};
    const auto at = std::find(admitted_.begin(), admitted_.end(), std::pair{admitted_at, bytes});
    if (at == admitted_.end()) return;  // Out of the window already.
    in_window_ -= at->second;
    admitted_.erase(at);
}

std::string PeerKey(const boost::asio::ip::address& address) {
    if (address.is_v4()) return address.to_string();
    const boost::asio::ip::address_v6 v6 = address.to_v6();
    if (v6.is_v4_mapped()) {
        return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_string();
    }
    boost::asio::ip::address_v6::bytes_type bytes = v6.to_bytes();
    std::fill(bytes.begin() + 8, bytes.end(), 0);
    return boost::asio::ip::address_v6(bytes).to_string() + "/64";
}

std::optional<Cidr> Cidr::Parse(std::string_view text) {
    const std::size_t slash = text.find('/');
    boost::system::error_code ec;
    const boost::asio::ip::address network =
        boost::asio::ip::make_address(std::string(text.substr(0, slash)), ec);
    if (ec) return std::nullopt;
    const unsigned width = network.is_v4() ? 32 : 128;
    unsigned bits = width;
    if (slash != std::string_view::npos) {
        const std::string_view digits = text.substr(slash + 1);
        if (digits.empty() || digits.size() > 3) return std::nullopt;
        bits = 0;
        for (const char c : digits) {
            if (c < '0' || c > '9') return std::nullopt;
            bits = bits * 10 + static_cast<unsigned>(c - '0');
        }
        if (bits > width) return std::nullopt;
    }
    Cidr cidr;
    cidr.network_ = network;
    cidr.prefix_bits_ = bits;
    // Host bits set ("10.0.0.1/8") are a typo more often than not: refused.
    const auto host_bits_zero = [bits](const auto& bytes) {
        for (std::size_t i = 0; i < bytes.size(); ++i) {
            const unsigned from = static_cast<unsigned>(i) * 8;
            if (from + 8 <= bits) continue;
            const unsigned keep = bits > from ? bits - from : 0;
            const unsigned host_mask = 0xFFu >> keep;
            if ((bytes[i] & host_mask) != 0) return false;
        }
        return true;
    };
    if (network.is_v4() ? !host_bits_zero(network.to_v4().to_bytes())
                        : !host_bits_zero(network.to_v6().to_bytes())) {
        return std::nullopt;
    }
    return cidr;
}

bool Cidr::Contains(const boost::asio::ip::address& address) const {
    boost::asio::ip::address candidate = address;
    if (candidate.is_v6() && candidate.to_v6().is_v4_mapped() && network_.is_v4()) {
        candidate = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, candidate.to_v6());
    }
    if (candidate.is_v4() != network_.is_v4()) return false;
    const auto prefix_equal = [this](const auto& a, const auto& b) {
        for (std::size_t i = 0; i < a.size(); ++i) {
            const unsigned from = static_cast<unsigned>(i) * 8;
            if (from >= prefix_bits_) return true;
            const unsigned keep = std::min(8u, prefix_bits_ - from);
            const unsigned mask = (0xFFu << (8 - keep)) & 0xFFu;
            if ((a[i] & mask) != (b[i] & mask)) return false;
        }
        return true;
    };
    return candidate.is_v4()
               ? prefix_equal(candidate.to_v4().to_bytes(), network_.to_v4().to_bytes())
               : prefix_equal(candidate.to_v6().to_bytes(), network_.to_v6().to_bytes());
}

std::optional<boost::asio::ip::address> ForwardedClient(std::string_view last_forwarded_for) {
    const std::size_t comma = last_forwarded_for.rfind(',');
    std::string_view entry =
        comma == std::string_view::npos ? last_forwarded_for : last_forwarded_for.substr(comma + 1);
    while (!entry.empty() && (entry.front() == ' ' || entry.front() == '\t'))
        entry.remove_prefix(1);
    while (!entry.empty() && (entry.back() == ' ' || entry.back() == '\t')) entry.remove_suffix(1);
    if (entry.size() > 2 && entry.front() == '[' && entry.back() == ']') {
        entry = entry.substr(1, entry.size() - 2);
    }
    boost::system::error_code ec;
    const boost::asio::ip::address address = boost::asio::ip::make_address(std::string(entry), ec);
    if (ec) return std::nullopt;
    return address;
}

std::size_t RaiseOpenFileLimit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
    if (limit.rlim_cur < limit.rlim_max) {
        rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    }
    return static_cast<std::size_t>(limit.rlim_cur);
}

}  // namespace payledger::api
