#include "ledger/reconcile/session.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "ledger/reconcile/bill.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger::reconcile {

// A 200 000-row bill is one statement of a few seconds; the service's 10 s would be tight.
const SessionSettings kSession{.application_name = "payledger reconcile",
                               .statement_timeout = std::chrono::minutes{10},
                               .lock_timeout = std::chrono::seconds{30},
                               .idle_in_transaction_timeout = std::chrono::minutes{10}};

const char* const kInsertDifferences = R"sql(
INSERT INTO reconcile_differences
    (line_number, category_rank, category, event_type, out_trade_no, bill, ledger, apply, reason)
SELECT * FROM json_to_recordset($1::json) AS x(line_number bigint, category_rank integer,
    category text, event_type text, out_trade_no text, bill text, ledger text, apply boolean,
    reason text)
)sql";

std::string Hex(std::string_view bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) {
        const auto byte = static_cast<unsigned char>(c);
        out += kDigits[byte >> 4];
        out += kDigits[byte & 0x0f];
    }
    return out;
}

std::string Unhex(std::string_view hex) {
    PAYLEDGER_ASSERT(hex.size() % 2 == 0);
    const auto value = [](char c) {
        if (c >= '0' && c <= '9') return c - '0';
        PAYLEDGER_ASSERT(c >= 'a' && c <= 'f');
        return c - 'a' + 10;
    };
    std::string out;
    out.reserve(hex.size() / 2);
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        out += static_cast<char>(value(hex[i]) * 16 + value(hex[i + 1]));
    }
    return out;
}

projections::TimeMicros NowMicros() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

PrivateCopy::PrivateCopy() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "payledger-reconcile-XXXXXX").string();
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) {
        throw BillError(std::string("cannot create a temporary file: ") + std::strerror(errno));
    }
    ::close(fd);
    path_ = pattern;
}

PrivateCopy::~PrivateCopy() { std::remove(path_.c_str()); }

}  // namespace payledger::ledger::reconcile
