#include "ledger/reconcile/session.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "ledger/reconcile/bill.hpp"

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
